"""Arrays a traced function makes itself (np.zeros, np.empty, np.full, np.eye,
np.arange, np.array of a list, ...) are traced values from birth: writing
traced values into them (row by row, chained, through views) compiles without
a graph break, equals numpy, and is differentiable. Values made from
constants alone stay usable where Python needs them concrete (int(), masks,
shapes) without a break; outside a trace, and in other threads, numpy's
constructors are numpy's own."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import lowering
from lowering.autodiff import NotDifferentiable
from lowering.testing import TOLERANCES, array_shapes, arrays, assert_matches_numpy, \
    assert_same_value, examples

from numpy import zeros as zeros_bound_before_tracing  # noqa: E402  (numpy's own function)

CONSTRUCTORS = ("zeros", "empty", "ones", "full", "eye", "identity", "zeros_like", "ones_like",
                "empty_like", "full_like", "arange", "linspace", "array", "asarray")
ORIGINAL = {n: getattr(np, n) for n in CONSTRUCTORS}
RTOL64 = TOLERANCES.rtol(np.float64, "reduction", 16)


def no_break(fn, *args, calls=2, rtol=None, backend=None):
    """fn compiles with fullgraph=True (no graph break) and equals numpy, on
    the traced call and on cached calls."""
    cf = lowering.compile(fn, fullgraph=True, backend=backend)
    with np.errstate(all="ignore"):  # edge values: numpy's warnings are not the subject here
        out = assert_matches_numpy(fn, *args, compiled=cf, calls=calls, rtol=rtol)
    assert cf.stats["graph_breaks"] == 0 and cf.stats["eager_fallbacks"] == 0
    return out


def fill(x):
    out = np.zeros((4, 3))
    for i in range(4):
        out[i] = x[i] * 2
    return out


def symmetric(x):
    """The upper triangle of x mirrored, by chained assignment."""
    n = x.shape[0]
    a = np.zeros((n, n))
    for i in range(n):
        a[i, i] = x[i, i]
        a[i + 1:, i] = a[i, i + 1:] = x[i, i + 1:]
    return a


def symmetric_expr(x):
    u = np.triu(x, 1)
    return u + u.T + np.diag(np.diag(x))


X43 = np.arange(12.0).reshape(4, 3) - 5.5
X44 = np.array([[1.0, -2.0, 3.0, 0.5], [4.0, 5.0, -6.0, 7.0], [8.0, 9.0, 10.0, -11.0],
                [12.0, -13.0, 14.0, 15.0]])


# ---- the examples -------------------------------------------------------------------------

def test_row_fill_has_no_graph_break():
    report = lowering.explain(fill)(X43)
    assert report.graph_break_count == 0, report.breaks
    assert report.graph_count == 1
    no_break(fill, X43)


@pytest.mark.parametrize("backend", ["numpy", "cpu"])
def test_grad_through_a_preallocated_array(backend):
    g = lowering.compile(lowering.grad(lambda x: np.sum(fill(x) ** 2)), backend=backend)(X43)
    assert_same_value(g, 8 * X43, RTOL64, "gradient")
    v, g2 = lowering.value_and_grad(lambda x: np.sum(fill(x) * X43))(X43)
    assert_same_value(v, np.sum(2 * X43 * X43), RTOL64, "value")
    assert_same_value(g2, 2 * X43, RTOL64, "gradient")


def test_grad_of_the_compiled_function_through_fn():
    compiled_fill = lowering.compile(fill)
    g = lowering.grad(lambda x: compiled_fill.fn(x).sum())(X43)
    assert np.array_equal(g, np.full((4, 3), 2.0))


def test_chained_assignment_equals_numpy_and_the_expression():
    no_break(symmetric, X44)
    assert_same_value(lowering.compile(symmetric)(X44), symmetric_expr(X44), 0.0)


@pytest.mark.parametrize("backend", ["numpy", "cpu"])
def test_grad_of_chained_assignment_equals_the_expressions(backend):
    w = np.arange(16.0).reshape(4, 4) / 7 - 1

    def loss(f):
        return lambda x: np.sum(np.sin(f(x)) * w)

    got = lowering.compile(lowering.grad(loss(symmetric)), backend=backend)(X44)
    want = lowering.compile(lowering.grad(loss(symmetric_expr)), backend=backend)(X44)
    assert_same_value(got, want, RTOL64, "gradient")
    # and against central differences
    eps, fd = 1e-6, np.zeros_like(X44)
    f = loss(symmetric)
    for idx in np.ndindex(*X44.shape):
        e = np.zeros_like(X44)
        e[idx] = eps
        fd[idx] = (f(X44 + e) - f(X44 - e)) / (2 * eps)
    assert np.allclose(got, fd, rtol=1e-6, atol=1e-8)


def test_a_200_row_loop_compiles_without_a_break():
    def rows(x):
        out = np.empty((200, 3))
        for i in range(200):
            out[i] = x[i] * 2 + 1
        return out

    x = np.linspace(-3, 3, 600).reshape(200, 3)
    report = lowering.explain(rows)(x)
    assert report.graph_break_count == 0 and report.graph_count == 1, report.breaks
    cf = lowering.compile(rows, fullgraph=True)
    t0 = time.perf_counter()
    assert_matches_numpy(rows, x, compiled=cf, calls=3)
    assert time.perf_counter() - t0 < 120
    assert cf.stats["compiles"] == 1 and cf.stats["cache_hits"] == 2


# ---- every constructor, every argument form -----------------------------------------------

def filled(a):
    a[...] = 0.25  # numpy's np.empty holds anything
    return a


MAKERS = {
    "zeros": lambda x: np.zeros((3, 2)),
    "zeros_dtype": lambda x: np.zeros(6, dtype=np.float32).reshape(3, 2),
    "zeros_F": lambda x: np.zeros((3, 2), order="F"),
    "empty": lambda x: filled(np.empty((3, 2))),
    "ones": lambda x: np.ones((3, 2), np.float32),
    "full": lambda x: np.full((3, 2), np.nan),
    "full_int_fill": lambda x: np.full((3, 2), 7, dtype=np.float64),
    "full_row_fill": lambda x: np.full((3, 2), [-0.0, np.inf]),
    "eye": lambda x: np.eye(3, 2, k=-1),
    "identity": lambda x: np.identity(3)[:, :2],
    "zeros_like": lambda x: np.zeros_like(x),
    "ones_like_list": lambda x: np.ones_like([[1.0, 2.0]] * 3),
    "empty_like": lambda x: filled(np.empty_like(x, dtype=np.float32)),
    "full_like": lambda x: np.full_like(x, -0.0),
    "arange": lambda x: np.arange(6.0).reshape(3, 2),
    "linspace": lambda x: np.linspace(0, 1, 6).reshape(3, 2),
    "array": lambda x: np.array([[1.5, np.nan], [np.inf, -0.0], [2, 3]]),
    "asarray": lambda x: np.asarray([[1, 2], [3, 4], [5, 6]], dtype=np.float64),
    "zeros_like_real": lambda x: np.zeros_like(np.ones((3, 2), dtype=np.float32), dtype=float),
    "like_ndarray": lambda x: np.zeros((3, 2), like=np.empty(1)),
}


@pytest.mark.parametrize("name", sorted(MAKERS))
def test_writes_into_made_arrays_do_not_break(name):
    make = MAKERS[name]

    def f(x):
        out = make(x)
        out[0] = x[0] * 3
        out[1:, 1] += np.exp(x[1:, 0])
        out.T[0, 2] = x[2, 1]
        return out, out[::-1]

    x = np.array([[0.5, -1.0], [np.nan, np.inf], [-0.0, 2.0]])
    no_break(f, x, rtol=TOLERANCES.rtol(np.float64, "pointwise"))


@pytest.mark.parametrize("name", sorted(MAKERS))
def test_a_made_array_written_in_place_is_made_again_each_call(name):
    """A constant array the program writes into (an array literal, `np.eye`,
    `np.arange` captured as data) and does not return: each call starts
    from the constant again, not from what the last call wrote there (a
    constant made once and kept was written over in place: calls 2 and 3
    returned 12 and 14 where numpy returns 10)."""
    make = MAKERS[name]

    def f(x):
        out = make(x)
        out[1:, 1] = out[1:, 1] + x[1:, 0]
        return out * 2

    x = np.array([[0.5, -1.0], [1.0, 2.0], [-0.0, 2.0]])
    no_break(f, x, calls=3)


@pytest.mark.parametrize("backend", ["numpy", "cpu"])
def test_out_argument_into_a_made_array(backend):
    def f(x):
        out = np.empty_like(x)
        np.multiply(x, 2, out=out)
        np.add(out[:3], x[1:], out=out[1:])  # overlapping: numpy buffers
        return out

    no_break(f, np.array([1.0, -2.0, np.nan, 0.25]), backend=backend)


def test_integer_and_bool_made_arrays():
    def f(x):
        k = np.zeros(4, dtype=np.int64)
        k[1:] = (x[1:] * 10).astype(np.int64)
        m = np.zeros(4, dtype=bool)
        m[::2] = x[::2] > 0
        return k, m

    no_break(f, np.array([0.15, -0.3, 0.7, -1.25]))


def test_copy_and_astype_of_traced_arrays_are_traced():
    def f(x):
        a, b = x.copy(), x.astype(np.float32)
        a[0], b[1] = x[1] * 2, x[0]
        return a, b

    no_break(f, np.array([1.0, 2.0, 3.0]))


def test_array_of_a_global_is_a_copy_read_at_call_time():
    def f(x):
        a = np.array(GLOBAL)
        a[0] = x[0]
        return a

    cf = lowering.compile(f, fullgraph=True)
    GLOBAL[:] = [1.0, 2.0, 3.0]
    assert np.array_equal(cf(np.array([9.0])), [9.0, 2.0, 3.0])
    GLOBAL[:] = [4.0, 5.0, 6.0]
    assert np.array_equal(cf(np.array([8.0])), [8.0, 5.0, 6.0])
    assert np.array_equal(GLOBAL, [4.0, 5.0, 6.0])


GLOBAL = np.zeros(3)


def test_a_made_array_returned_is_fresh_each_call():
    def f(x):
        out = np.zeros(3)
        out[1] = x[0]
        return out

    cf = lowering.compile(f, fullgraph=True)
    a = cf(np.array([1.0]))
    a[0] = 7
    b = cf(np.array([2.0]))
    assert np.array_equal(b, [0.0, 2.0, 0.0]) and not np.shares_memory(a, b)


# ---- constants stay usable where Python needs them concrete --------------------------------

def test_constants_used_statically_do_not_break():
    def f(x):
        idx = np.arange(4)
        n = int(idx[-1]) + len(np.zeros(2))  # 5
        shape = np.array([2, 3])
        mask = np.array([True, False, True, False, True, True])
        y = x.reshape(tuple(shape))  # a shape from an array
        out = np.zeros(n)
        for i in range(int(idx.sum()) - 1):  # 5 iterations
            out[i] = x[i]
        return out, x[mask], y, np.median(idx), idx[idx % 2 == 0]

    no_break(f, np.arange(6.0) - 2.5)


def test_iterating_a_made_array():
    def f(x):
        out = np.zeros_like(x)
        for i in np.arange(3):
            out[i] = x[i] * i
        return out

    no_break(f, np.array([1.0, 2.0, 3.0]))


def test_numpy_function_without_a_rule_on_a_made_array_runs_on_its_value():
    def f(x):
        a = np.zeros(4)
        np.fill_diagonal(a.reshape(2, 2), 3.0)  # eager on constants: no break
        a[1] = x[0]
        return a

    no_break(f, np.array([5.0]))


# ---- differentiation -------------------------------------------------------------------------

def test_write_into_an_array_numpy_made_inside_grad_raises():
    def f(x):
        buf = zeros_bound_before_tracing(3)  # numpy's own: a real ndarray
        buf[0] = x[0]
        return buf.sum() + x.sum()

    def g(x):
        buf = zeros_bound_before_tracing(3)
        buf[:2] = x[1:]
        return buf.sum() + x.sum()

    for fn in (f, g):
        with pytest.raises(NotDifferentiable, match="gradients cannot flow"):
            lowering.grad(fn)(np.array([1.0, 2.0, 3.0]))
    # float() itself stays a documented gradient stop
    assert np.array_equal(lowering.grad(lambda x: float(x[0]) * x[1] + x[2])(
        np.array([2.0, 3.0, 4.0])), [0.0, 2.0, 1.0])


def test_grad_through_made_arrays_of_every_kind():
    def f(x):
        a = np.full((2, 3), 0.5)
        a[0] = x * x
        e = np.eye(3)
        e[1] = np.sin(x)
        b = np.array([[1.0, 2.0, 3.0]])
        b[0, ::2] *= x[:2]
        return np.sum(a @ e) + np.sum(b * x)

    def expr(x):
        a = np.stack([x * x, np.full(3, 0.5)])
        e = np.stack([np.eye(3)[0], np.sin(x), np.eye(3)[2]])
        b = np.array([x[0], 2.0 + 0 * x[0], 3.0 * x[1]])
        return np.sum(a @ e) + np.sum(b * x)

    x = np.array([0.3, -1.2, 2.0])
    got = lowering.grad(f)(x)
    want = lowering.grad(expr)(x)
    assert_same_value(got, want, RTOL64, "gradient")
    assert np.any(got != 0)


# ---- outside traces, other threads ----------------------------------------------------------

def test_outside_a_trace_numpy_is_untouched():
    lowering.compile(fill)(X43)
    for n, f in ORIGINAL.items():
        assert getattr(np, n) is f, n
    z = np.zeros(3)
    assert type(z) is np.ndarray and np.array_equal(z, [0, 0, 0])


def test_other_threads_get_real_arrays_during_a_trace():
    inside, release = threading.Event(), threading.Event()
    seen: dict = {}

    def f(x):
        out = np.zeros(3)
        inside.set()
        release.wait(30)
        out[0] = x[0]
        return out

    def other():
        inside.wait(30)
        seen["zeros"] = np.zeros(2)
        seen["array"] = np.array([1.0, 2.0])
        seen["arange"] = np.arange(3)
        release.set()

    t = threading.Thread(target=other)
    t.start()
    r = lowering.compile(f, fullgraph=True)(np.array([4.0]))
    t.join()
    assert np.array_equal(r, [4.0, 0.0, 0.0])
    for v in seen.values():
        assert type(v) is np.ndarray
    assert len(seen) == 3


def test_concurrent_traces_each_see_their_own_tracer():
    barrier = threading.Barrier(2, timeout=60)
    results: dict = {}
    errors: list = []

    def make(k):
        def f(x):
            out = np.zeros(4)
            barrier.wait()  # both traces are open now
            for i in range(4):
                out[i] = x[i] * k
            barrier.wait()
            return out
        return f

    def run(k):
        try:
            x = np.arange(4.0) + k
            results[k] = (lowering.compile(make(k), fullgraph=True)(x), (np.arange(4.0) + k) * k)
        except Exception as e:  # reported below
            errors.append(e)

    ts = [threading.Thread(target=run, args=(k,)) for k in (2, 3)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors
    for got, want in results.values():
        assert np.array_equal(got, want)
    assert len(results) == 2


# ---- random preallocate-and-fill programs ----------------------------------------------------

_SPECIAL = {float("inf"): "np.inf", float("-inf"): "-np.inf"}


def _lit(v: float) -> str:
    if v != v:
        return "np.nan"
    return _SPECIAL.get(v, repr(v))


@st.composite
def _key(draw, shape):
    parts = []
    for n in shape[:draw(st.integers(0, len(shape)))]:
        kind = draw(st.sampled_from(["int", "slice", "all"]))
        if kind == "int":
            parts.append(str(draw(st.integers(-n, n - 1))))
        elif kind == "slice":
            a = draw(st.one_of(st.none(), st.integers(-n - 1, n)))
            b = draw(st.one_of(st.none(), st.integers(-n - 1, n)))
            s = draw(st.sampled_from([None, 1, 2, -1, -2]))
            parts.append(":".join("" if v is None else str(v) for v in (a, b, s)))
        else:
            parts.append(":")
    if not parts or draw(st.booleans()):
        parts.append("...")
    return "[" + ", ".join(parts) + "]"


@st.composite
def prealloc_programs(draw):
    dt = np.dtype(draw(st.sampled_from([np.float64, np.float32])))
    shape = draw(array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4))
    x = draw(arrays(dt, shape))
    name = dt.name
    special = st.sampled_from([np.nan, np.inf, -np.inf, -0.0, 0.0, 2.5, -1.0])
    makers = [f"np.zeros({shape}, dtype=np.{name})", f"np.ones({shape}, np.{name})",
              f"np.full({shape}, {_lit(draw(special))}, dtype=np.{name})", "np.zeros_like(x)",
              f"np.full_like(x, {_lit(draw(special))})",
              f"np.array({np.full(shape, draw(special)).tolist()}, dtype=np.{name})"
              .replace("nan", "np.nan").replace("inf", "np.inf"),
              f"np.empty({shape}, np.{name})"]
    lines = [f"out = {draw(st.sampled_from(makers))}"]
    if lines[0].startswith("out = np.empty"):
        lines.append(f"out[...] = {_lit(draw(special))}")
    pointwise = False
    dummy = np.empty(shape)
    for _ in range(draw(st.integers(1, 6))):
        k = draw(_key(shape))
        tshape = eval(f"dummy{k}").shape
        form = draw(st.sampled_from(["x*2", "-x", "exp", "x-out", "max", "scalar", "iadd",
                                     "chain", "loop"]))
        if form == "scalar":
            lines.append(f"out{k} = {_lit(draw(special))}")
        elif form == "iadd":
            lines.append(f"out{k} += x{k}")
        elif form == "chain":
            k2 = draw(_key(shape))
            try:
                np.broadcast_to(eval(f"dummy{k2}"), tshape)
                lines.append(f"out{k} = out{k2} = x{k2} * 0.5")
            except ValueError:
                lines.append(f"out{k} = out{k2} = {_lit(draw(special))}")
        elif form == "loop":
            lines.append(f"for i in range({shape[0]}):")
            lines.append(f"    out[i] = x[i] * {_lit(draw(special))} + out[i - 1]")
        else:
            expr = {"x*2": f"x{k} * 2", "-x": f"-x{k}", "exp": f"np.exp(x{k})",
                    "x-out": f"x{k} - out{k}", "max": f"np.maximum(x{k}, out{k})"}[form]
            pointwise |= form == "exp"
            lines.append(f"out{k} = {expr}")
    ret = draw(st.sampled_from(["out", f"out, out{draw(_key(shape))}", "out.sum(axis=0)"]))
    lines.append(f"return {ret}")
    source = "def program(x):\n" + "".join(f"    {ln}\n" for ln in lines)
    env = {"np": np}
    exec(source, env)
    fn = env["program"]
    rtol = None if pointwise or ret.endswith("axis=0)") else 0.0
    if ret.endswith("axis=0)"):
        rtol = TOLERANCES.rtol(dt, "reduction", shape[0] * 2)
    return source, fn, x, rtol


@examples(2.0)
@given(prog=prealloc_programs())
def test_random_preallocate_and_fill_programs(prog):
    source, fn, x, rtol = prog
    cf = lowering.compile(fn, fullgraph=True)
    with np.errstate(all="ignore"):  # NaN, ±Inf and overflow are in the data
        assert_matches_numpy(fn, x, compiled=cf, calls=2, rtol=rtol)
    assert cf.stats["graph_breaks"] == 0 and cf.stats["eager_fallbacks"] == 0, source
