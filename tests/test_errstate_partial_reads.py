"""A value read only in part still raises numpy's floating-point errors on
every element: numpy computes all of `x / y` before `(x / y)[1]` picks one,
and warns or raises on element 0's division by zero. Compiled, the slice was
an index map and the division fused into its reader: only the element read
was computed, and the call returned quietly. Now `keep-flags`
(passes/keep_flags.py) finds the values not every element of which is read
(a slice, an index, a gather, a reduction of a part, a window written over,
...) and keeps their flags over the whole value, computed in a kernel that
stores nothing; values whose slices together read all of them (`z[1:] -
z[:-1]`) cost nothing more. CPU backend and the numpy reference backend,
every errstate mode."""

from __future__ import annotations

import io
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lowering
from lowering.dump import capture, parse_spec, print_lower_stages
from lowering.testing import stage_text
from tests.test_errstate_dead_ops import BACKENDS, MODES, SPECIAL, same_as_eager


def index(x, y):
    return (x / y)[1]


def basic_slice(x, y):
    return (x / y)[1:] + 1.0


def returned_slice(x, y):
    return (x / y)[1:]


def strided(x, y):
    return (x / y)[1::2] * 2.0


def reversed_part(x, y):
    return (x / y)[:0:-1]


def gathered(x, y):
    return (x / y)[np.array([3, 1])]


def part_summed(x, y):
    return (x / y)[1:].sum()


def column_summed(x, y):
    return (x / y).reshape(2, 2)[:, 1].sum()


def chain(x, y):
    return np.log(x / y)[1:] * 2.0


def through_add(x, y):
    return ((x / y) + 1.0)[3]


def window_written(x, y):
    z = x / y
    z[0] = 5.0
    return z


def written_over_by_slices(x, y):
    z = x / y
    z[:2] = 0.0
    z[2:] = 1.0
    return z + 1.0


def inner_stencil(x, y):
    z = x / y
    return z[2:] - z[1:-1]


def covering_stencil(x, y):
    z = x / y
    return z[1:] - z[:-1]


def broadcast_part(x, y):
    return np.broadcast_to((x / y)[:, None], (4, 3))[1:, 0]


def two_d(a, b):
    return (a / b)[1:, ::2]


PARTIAL = [index, basic_slice, returned_slice, strided, reversed_part, gathered, part_summed,
           column_summed, chain, through_add, window_written, written_over_by_slices,
           inner_stencil, covering_stencil, broadcast_part]
# element 0: 1 / 0 (divide), element 2: 0 / 0 (invalid); no reader above reads both
XY = (np.array([1.0, 2.0, 0.0, -3.0]), np.array([0.0, 1.0, 0.0, 2.0]))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", PARTIAL, ids=lambda f: f.__name__)
def test_part_read_raises_warns_or_calls_like_numpy(backend, fn):
    f = lowering.compile(fn, backend=backend)
    for mode in ("raise", "warn", "call", "ignore", "raise", "warn"):  # traced, then cached
        want = same_as_eager(f, fn, *XY, mode=mode)
        if mode == "raise":
            assert want[0] == "raise"


@pytest.mark.parametrize("backend", BACKENDS)
def test_part_read_of_a_two_d_value(backend):
    a = np.array([[1.0, 1.0, 1.0], [1.0, 0.0, 1.0], [2.0, 2.0, 2.0]])
    b = np.array([[1.0, 1.0, 1.0], [1.0, 0.0, 1.0], [1.0, 0.0, 1.0]])  # 0/0 at (1, 1), 2/0 at (2, 1)
    f = lowering.compile(two_d, backend=backend)
    for mode in MODES:
        want = same_as_eager(f, two_d, a, b, mode=mode)
        assert want[0] == ("raise" if mode == "raise" else "ok")


@pytest.mark.parametrize("backend", BACKENDS)
def test_compiled_under_ignore_is_not_reused_where_errstate_acts(backend):
    f = lowering.compile(index, backend=backend)
    with np.errstate(all="ignore"):
        assert f(*XY) == 2.0
    with np.errstate(all="raise"), pytest.raises(FloatingPointError, match="divide by zero"):
        f(*XY)
    assert f.stats["compiles"] == 2
    for mode in ("ignore", "warn", "raise"):
        same_as_eager(f, index, *XY, mode=mode)
    assert f.stats["compiles"] == 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_values_read_whole_raise_nothing_more(backend):
    """Elements nobody reads that raise nothing: no error, the same values."""
    x, y = np.array([1.0, 2.0, 3.0, 4.0]), np.array([1.0, 2.0, 4.0, 8.0])
    for fn in PARTIAL:
        f = lowering.compile(fn, backend=backend)
        same_as_eager(f, fn, x, y, mode="raise")



def test_slices_that_read_all_of_a_value_cost_nothing_more():
    """`z[1:] - z[:-1]` reads every element of z: no flags pass, no buffer
    for z; each division computed where the difference needs it."""
    with np.errstate(all="warn"):
        text = stage_text(covering_stencil, "f64[64] f64[64]")
    assert "loop.flags" not in text
    assert text.count("memref.alloc") == 1
    assert text.count("loop.store") == 1


@pytest.mark.parametrize("fn", [inner_stencil, index, gathered, part_summed, strided],
                         ids=lambda f: f.__name__)
def test_part_read_value_has_flags_and_no_buffer(fn):
    """The value read in part is computed over all of it for its flags only:
    a `loop.flags`, no store and no buffer of its own (the one buffer is the
    result's; a gather's index constant aside)."""
    with np.errstate(all="warn"):
        text = stage_text(fn, "f64[64] f64[64]")
    assert text.count("loop.flags") == 1
    assert text.count("loop.store") == 1
    assert len(re.findall(r"memref.alloc\(\) : memref<[0-9x]*f64>", text)) == 1


def test_nothing_kept_where_errstate_ignores_everything():
    with np.errstate(all="ignore"):
        text = stage_text(inner_stencil, "f64[64] f64[64]")
    assert "loop.flags" not in text
    assert text.count("arith.divf") == 2  # (z[2:] and z[1:-1], each where it is read)


def test_chain_read_in_part_keeps_only_its_last_op():
    """`np.log(x / y)[1:]`: the log's flags pass computes the division too,
    over all of it; one flags pass, not two."""
    with np.errstate(all="warn"):
        text = stage_text(chain, "f64[64] f64[64]")
    assert text.count("loop.flags") == 1


# ---- ufuncs read in part, on special values ---------------------------------

UFUNCS = ["divide", "log", "sqrt", "power", "arccos", "exp", "multiply", "floor_divide",
          "subtract", "arctanh", "reciprocal"]
READS = {
    "index": lambda z: z[2],
    "tail": lambda z: z[1:] * 1.0,
    "strided": lambda z: z[::2],
    "gather": lambda z: z[np.array([4, 1])],
    "sum_of_part": lambda z: z[:-2].sum(),
    "window": lambda z: np.concatenate([z[:1], z[3:]]),
}
_programs: dict = {}


def _program(name: str, read: str, backend: str):
    key = (name, read, backend)
    if key not in _programs:
        uf, r = getattr(np, name), READS[read]
        if uf.nin == 1:
            def fn(x, y):
                return r(uf(x))
        else:
            def fn(x, y):
                return r(uf(x, y))
        fn.__name__ = f"{name}_{read}"
        _programs[key] = (fn, lowering.compile(fn, backend=backend))
    return _programs[key]


@settings(max_examples=80, deadline=None)
@given(name=st.sampled_from(UFUNCS), read=st.sampled_from(sorted(READS)),
       backend=st.sampled_from(BACKENDS), mode=st.sampled_from(MODES),
       dtype=st.sampled_from([np.float64, np.float32]),
       xs=st.lists(st.sampled_from(SPECIAL), min_size=5, max_size=5),
       ys=st.lists(st.sampled_from(SPECIAL), min_size=5, max_size=5))
def test_ufunc_read_in_part_on_special_values(name, read, backend, mode, dtype, xs, ys):
    fn, f = _program(name, read, backend)
    with np.errstate(all="ignore"):
        x, y = np.array(xs, dtype=dtype), np.array(ys, dtype=dtype)
    same_as_eager(f, fn, x, y, mode=mode)


def reciprocal_inner(x):
    z = 1.0 / x
    return z[2:] * 2.0


def test_sizes_stay_symbolic():
    """The walk that finds values read in part compares no size symbol (a
    comparison would record a relation: a program for these sizes only).
    (Programs for many sizes are the CPU backend's.)"""
    f = lowering.compile(reciprocal_inner, backend="cpu", dynamic=True)
    for n in (4, 6, 9):
        x = np.arange(0.0, n)  # 1 / 0 at element 0, which nobody reads
        want = same_as_eager(f, reciprocal_inner, x, mode="raise")
        assert want[0] == "raise"
        same_as_eager(f, reciprocal_inner, x, mode="warn")
    assert f.stats["compiles"] == 1
    assert f.entries[0].guards.describe()[0] == "x: ndarray float64[s0] C-contiguous writeable"


def softmax_rows(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@pytest.mark.parametrize("dynamic", [False, True])
def test_values_read_in_full_are_not_kept_at_symbolic_sizes(dynamic):
    """A value of symbolic size read in full by point-wise ops and
    reductions is computed in full: nothing is kept for its flags (a size
    symbol is at least 2, never empty), so the program for many sizes has
    the kernels of the program for one."""
    with np.errstate(all="raise"):
        text = print_kernel(capture(softmax_rows, parse_spec("f32[40,37]"),
                                    dynamic=True if dynamic else None))
    assert "loop.flags" not in text and "array.flags" not in text
    assert text.count("kernel.kernel") == 1


def print_kernel(dump) -> str:
    out = io.StringIO()
    print_lower_stages(dump, out, ("kernel",))
    return out.getvalue()
