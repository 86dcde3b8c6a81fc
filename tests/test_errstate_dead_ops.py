"""An op whose value nobody uses still raises numpy's floating-point errors:
`z = x / y` left unused says "divide by zero" in numpy (a warning by
default, FloatingPointError under `np.errstate(divide="raise")`). Dead-code
elimination dropped such ops, and their flags with them, so the compiled
call returned quietly. Now `keep-flags` (passes/keep_flags.py) keeps every
unused op that can raise a category the caller's errstate acts on (the op
table's `fpe` column), computed for its flags only (no store); an entry
compiled under an errstate that ignored them is guarded to serve only calls
that ignore them too. CPU backend and the numpy reference backend; an
unused op in a traced loop, a value written over before it is read, a
forward op of `value_and_grad` nobody uses."""

from __future__ import annotations

import io
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lowering
from dialects import ufuncs as U
from lowering.dump import capture, parse_spec, print_lower_stages

BACKENDS = ["cpu", "numpy"]
MODES = ["raise", "warn", "ignore", "call"]
SPECIAL = [0.0, -0.0, 1.0, -1.0, 0.5, 2.0, np.nan, np.inf, -np.inf, 1e308, -1e308, 1e-308,
           5e-324, 710.0, -750.0]


def record(fn, *args, mode="warn", **errstate):
    """fn(*args) under np.errstate(all=mode, **errstate): ("ok", result) or
    ("raise", message), the warnings, and what the errstate's callback got."""
    calls = []
    with warnings.catch_warnings(record=True) as w, np.errstate(
            all=mode, call=lambda *a: calls.append(a[0]), **errstate):
        warnings.simplefilter("always")
        try:
            out = ("ok", fn(*args))
        except FloatingPointError as e:
            out = ("raise", str(e))
    return out, sorted((type(m.message).__name__, str(m.message)) for m in w), sorted(calls)


def same_as_eager(f, fn, *args, mode="warn", **errstate):
    want, want_w, want_c = record(fn, *args, mode=mode, **errstate)
    got, got_w, got_c = record(f, *args, mode=mode, **errstate)
    assert got[0] == want[0], (got, want)
    assert got_w == want_w
    assert got_c == want_c
    if want[0] == "ok":
        np.testing.assert_array_equal(got[1], want[1])
    else:
        assert got[1] == want[1]
    return want


def dead_division(x, y):
    z = x / y  # noqa: F841  (unused: numpy divides all the same)
    return x + 1


def dead_chain(x, y):
    z = np.log(x / y)  # noqa: F841
    return x * 2


def dead_cast(x):
    i = x.astype(np.int64)  # noqa: F841
    return x - 1


def dead_sum(x):
    s = x.sum()  # noqa: F841
    return x + 1


def dead_in_loop(x, y):
    acc = x
    for _ in range(3):
        z = acc / y  # noqa: F841
        acc = acc + 1
    return acc


def written_over(x, y):
    out = x / y
    out = x + 1
    return out


def written_over_in_place(x, y):
    out = np.empty_like(x)
    np.divide(x, y, out=out)
    out[...] = x + 1
    return out


XY = (np.array([1.0, 2.0, 0.0, -3.0]), np.array([0.0, 1.0, 0.0, 2.0]))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mode", MODES)
def test_unused_division_raises_warns_or_calls_like_numpy(backend, mode):
    f = lowering.compile(dead_division, backend=backend)
    for _ in range(2):  # traced, then cached
        want = same_as_eager(f, dead_division, *XY, mode=mode)
    assert want[0] == ("raise" if mode == "raise" else "ok")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn,args", [
    (dead_chain, XY),
    (dead_cast, (np.array([1.0, np.nan, 3.0]),)),
    (dead_sum, (np.array([1e308, 1e308]),)),
    (dead_in_loop, XY),
    (written_over, XY),
    (written_over_in_place, XY),
], ids=lambda v: getattr(v, "__name__", ""))
def test_unused_values_of_every_kind(backend, fn, args):
    f = lowering.compile(fn, backend=backend)
    for mode in ("raise", "warn", "ignore", "warn", "raise"):
        want = same_as_eager(f, fn, *args, mode=mode)
        if mode != "ignore":  # (each of these raises in numpy)
            assert want[0] == "raise" or mode == "warn"


@pytest.mark.parametrize("backend", BACKENDS)
def test_compiled_under_ignore_is_not_reused_where_errstate_acts(backend):
    f = lowering.compile(dead_division, backend=backend)
    with np.errstate(all="ignore"):
        f(*XY)
    with np.errstate(all="raise"), pytest.raises(FloatingPointError, match="divide by zero"):
        f(*XY)
    assert f.stats["compiles"] == 2
    # an entry that kept the op serves calls that ignore it too: no third compile
    for mode in ("ignore", "warn", "raise", "ignore"):
        same_as_eager(f, dead_division, *XY, mode=mode)
    assert f.stats["compiles"] == 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_one_category_ignored_another_acted_on(backend):
    f = lowering.compile(dead_division, backend=backend)
    x, y = np.array([1.0, 0.0]), np.array([0.0, 0.0])  # divide and invalid
    for kw in ({"divide": "ignore", "invalid": "raise"}, {"divide": "raise", "invalid": "ignore"},
               {"divide": "ignore", "invalid": "ignore"}, {"divide": "warn", "invalid": "warn"}):
        for _ in range(2):
            same_as_eager(f, dead_division, x, y, **kw)


def text_of(fn, spec: str, stage: str) -> str:
    out = io.StringIO()
    print_lower_stages(capture(fn, parse_spec(spec)), out, (stage,))
    return out.getvalue()


def test_kept_op_stores_nothing():
    """The unused division is computed in the kernel that computes x + 1,
    for its flags: one buffer (the result), one store, no second kernel."""
    with np.errstate(all="warn"):
        text = text_of(dead_division, "f64[64] f64[64]", "kernel")
    assert text.count("arith.divf") == 1
    assert text.count("loop.flags") == 1
    assert text.count("loop.store") == 1
    assert text.count("memref.alloc") == 1
    assert text.count("kernel.kernel") == 1


def test_dropped_where_errstate_ignores_everything():
    with np.errstate(all="ignore"):
        text = text_of(dead_division, "f64[64] f64[64]", "kernel")
    assert "arith.divf" not in text and "loop.flags" not in text


def test_ops_that_raise_nothing_are_still_dropped():
    def dead_abs(x):
        z = np.abs(x) + np.floor(x)  # noqa: F841  (add of floats: over, invalid)
        w = np.maximum(x, 0.0)  # noqa: F841
        return x * 2

    with np.errstate(all="raise"):
        text = text_of(dead_abs, "f64[64]", "kernel")
    assert "arith.addf" in text  # kept: the add can overflow
    assert "math.floor" in text  # ... and computes what it reads
    assert "maximum" not in text  # no category: dropped


def test_value_and_grad_with_an_unused_forward_division():
    def loss(w, y):
        z = w / y  # noqa: F841
        return (w * w).sum()

    vg = lowering.value_and_grad(loss)
    w, y = np.array([1.0, 2.0]), np.array([0.0, 1.0])
    with np.errstate(all="raise"), pytest.raises(FloatingPointError, match="divide by zero"):
        vg(w, y)
    with warnings.catch_warnings(record=True) as rec, np.errstate(all="warn"):
        warnings.simplefilter("always")
        v, g = vg(w, y)
    assert any("divide by zero" in str(m.message) for m in rec)
    assert v == 5.0
    np.testing.assert_array_equal(g, 2 * w)
    with warnings.catch_warnings(record=True) as rec, np.errstate(all="ignore"):
        warnings.simplefilter("always")
        v, g = vg(w, y)
    assert not rec and v == 5.0


# ---- every ufunc the table says can raise, on special values ----------------

def _raising_ufuncs(nin):
    return [u.name for u in U.TABLE if u.nin == nin and u.fpe_float and u.generated
            and u.name in ("divide", "log", "sqrt", "power", "arctanh", "exp", "reciprocal",
                           "multiply", "add", "subtract", "arccos", "log1p", "square", "cosh",
                           "floor_divide", "remainder", "fmod", "expm1", "exp2", "sinh")]


UNARY, BINARY = _raising_ufuncs(1), _raising_ufuncs(2)
_programs: dict = {}


def _program(name: str, nin: int, backend: str):
    key = (name, backend)
    if key not in _programs:
        uf = getattr(np, name)
        if nin == 1:
            def fn(x, y):
                z = uf(x)  # noqa: F841
                return y * 2
        else:
            def fn(x, y):
                z = uf(x, y)  # noqa: F841
                return y * 2
        fn.__name__ = f"dead_{name}"
        _programs[key] = (fn, lowering.compile(fn, backend=backend))
    return _programs[key]


@settings(max_examples=60, deadline=None)
@given(name=st.sampled_from(UNARY + BINARY), backend=st.sampled_from(BACKENDS),
       mode=st.sampled_from(MODES), dtype=st.sampled_from([np.float64, np.float32]),
       xs=st.lists(st.sampled_from(SPECIAL), min_size=1, max_size=5),
       ys=st.lists(st.sampled_from(SPECIAL), min_size=5, max_size=5))
def test_unused_ufunc_on_special_values(name, backend, mode, dtype, xs, ys):
    nin = 1 if name in UNARY else 2
    fn, f = _program(name, nin, backend)
    with np.errstate(all="ignore"):
        x = np.array(xs + ys[len(xs):], dtype=dtype)
        y = np.array(ys, dtype=dtype)
    same_as_eager(f, fn, x, y, mode=mode)


def test_op_on_constants_raises_on_the_reference_backend_too():
    """The numpy backend folded ops whose operands are all constants at
    compile time, under errstate "ignore": `np.log` of a constant zero then
    said nothing. An op that can raise runs with the program now."""
    def log_of_zeros(x):
        return x + np.log(np.zeros(2))

    for backend in BACKENDS:
        f = lowering.compile(log_of_zeros, backend=backend)
        for mode in ("raise", "warn", "ignore"):
            same_as_eager(f, log_of_zeros, np.ones(2), mode=mode)
