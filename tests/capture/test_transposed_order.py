"""A ufunc (and np.where, np.clip, astype) whose full-size operands are all
laid out in reverse (the caller's Fortran-ordered arrays and slices of them,
`x.T` of a C-ordered one, results of such ufuncs) is computed in their own
order — contiguous reads and writes — and
its result is the transpose of that: numpy's order-K result, F-ordered,
with numpy's strides. (Walked in C order it read a 512x1024 F-ordered array
column by column: `a + 1.0` 1.6 ms against numpy's 0.29.) Smaller operands
broadcast along (a row, a column, a scalar); mixed layouts keep C order.
Values are numpy's either way."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lowering
from lowering.testing import TOLERANCES, assert_matches_numpy, assert_same_value

rng = np.random.default_rng(0)


def _f(shape):
    return np.asfortranarray(rng.standard_normal(shape))


CASES = [
    ("F + 1", lambda a, b: a + 1.0, lambda: (_f((6, 9)), None)),
    ("F * F", lambda a, b: a * b, lambda: (_f((6, 9)), _f((6, 9)))),
    # (b below 0: no cancellation, which would turn exp's last-bit
    # difference from numpy's into a large relative one, at random draws)
    ("exp(F) * 2 - F", lambda a, b: np.exp(a) * 2.0 - b,
     lambda: (_f((5, 7)), np.asfortranarray(-np.abs(_f((5, 7)))))),
    ("C.T + row", lambda a, b: a.T + b, lambda: (rng.standard_normal((9, 6)), rng.standard_normal(9))),
    ("C.T * col", lambda a, b: a.T * b, lambda: (rng.standard_normal((9, 6)),
                                                 rng.standard_normal((6, 1)))),
    ("3-D F", lambda a, b: np.maximum(a, 0.0) + b, lambda: (_f((3, 4, 5)), _f((3, 4, 5)))),
    ("F with C: C order", lambda a, b: a + b, lambda: (_f((6, 9)), rng.standard_normal((6, 9)))),
    ("where F", lambda a, b: np.where(a > 0, a, b), lambda: (_f((5, 7)), _f((5, 7)))),
    ("clip F", lambda a, b: np.clip(a, -0.5, b), lambda: (_f((5, 7)), _f((5, 7)))),
    ("astype F", lambda a, b: a.astype(np.float32), lambda: (_f((5, 7)), None)),
    ("slices of F", lambda a, b: a[1:, :] - a[:-1, :], lambda: (_f((6, 9)), None)),
    ("F int", lambda a, b: a * 3 + b, lambda: (np.asfortranarray(rng.integers(-9, 9, (4, 6))),
                                               np.asfortranarray(rng.integers(-9, 9, (4, 6))))),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_values_and_layout_are_numpys(case):
    _, fn, make = case
    a, b = make()
    cf = lowering.compile(fn)
    for _ in range(3):
        got, want = cf(a, b), fn(a, b)
        assert_same_value(got, want)
        assert got.strides == want.strides, (got.strides, want.strides)
    assert cf.stats["graph_breaks"] == 0 and cf.stats["eager_fallbacks"] == 0


def test_a_chain_on_an_f_array_keeps_its_order_to_the_end():
    """Each op of the chain sees its operand laid out in reverse (the
    previous op's transposed result) and computes in that order: one
    F-ordered result, numpy's, from reads and writes in memory order."""
    def chain(a):
        y = np.exp(a) * 0.5 + 2.0
        return y * y + 1.0, y.sum()

    a = _f((64, 48))
    cf = lowering.compile(chain)
    got, want = cf(a), chain(a)
    assert_same_value(got, want)
    assert got[0].strides == want[0].strides == (8, 64 * 8)


@settings(max_examples=60, deadline=None)
@given(shape=st.sampled_from([(1, 5), (4, 1), (3, 4), (2, 3, 4), (5, 1, 3)]),
       op=st.sampled_from(["add", "multiply", "maximum", "divide", "hypot"]),
       other=st.sampled_from(["F", "scalar", "row", "C"]),
       special=st.booleans(), seed=st.integers(0, 999))
def test_transposed_operands_against_numpy(shape, op, other, special, seed):
    g = np.random.default_rng(seed)
    a = np.asfortranarray(g.standard_normal(shape))
    if special:
        a.flat[::3] = [np.nan, -0.0, np.inf, -np.inf, 1e-310, 1e308][: len(a.flat[::3])]
    b = {"F": np.asfortranarray(g.standard_normal(shape)), "scalar": np.float64(-0.0),
         "row": g.standard_normal(shape[-1:]), "C": g.standard_normal(shape)}[other]
    uf = getattr(np, op)
    assert_matches_numpy(lambda x, y: uf(x, y), a, b, calls=2)
    assert_matches_numpy(lambda x, y: uf(x.T, y.T if np.ndim(y) == len(shape) else y) + 1.0,
                         np.ascontiguousarray(a), b if np.ndim(b) < len(shape)
                         else np.ascontiguousarray(b), calls=2)


REDUCTIONS = [
    ("sum axis 0", lambda a: a.sum(axis=0)), ("sum axis 1", lambda a: a.sum(axis=1)),
    ("max axis 0", lambda a: a.max(axis=0)), ("min axis -1", lambda a: a.min(axis=-1)),
    ("sum", lambda a: a.sum()), ("mean axis 0 keepdims", lambda a: a.mean(axis=0, keepdims=True)),
    ("prod axis 0", lambda a: np.prod(a * 0.1 + 1.0, axis=0)), ("any axis 1", lambda a: (a > 1).any(axis=1)),
    ("3-D sum axes (0, 1)", lambda a: a.reshape(a.shape[0], -1, 2).sum(axis=(0, 1))),
]


@pytest.mark.parametrize("case", REDUCTIONS, ids=[c[0] for c in REDUCTIONS])
@pytest.mark.parametrize("make", [lambda: _f((24, 16)), lambda: rng.standard_normal((16, 24)).T,
                                  lambda: _f((1, 16)), lambda: _f((24, 1))],
                         ids=["F", "C.T", "F 1xN", "F Nx1"])
def test_reductions_of_transposed_arrays_walk_their_memory_in_order(case, make):
    """A reduction of an F-ordered (or transposed) array reduces its
    transpose — rows where the reduced axes are innermost in memory,
    columns of the C-ordered transpose otherwise —: numpy's values, within
    the reductions' tolerance, every kind and axis."""
    _, fn = case
    a = make()
    assert_matches_numpy(fn, a, calls=2, rtol=TOLERANCES.rtol(a.dtype, "reduction", a.size))


@pytest.mark.parametrize("step", [1, 2, 3])
def test_a_run_time_stride_of_one_reads_vectors_and_others_read_lanes(step):
    """An F-ordered argument read along its first axis has an element stride
    known only at run time: the CPU kernel loads a vector where it is 1 and
    lane by lane otherwise (the same compiled program serves arrays of the
    "strided" layout class with other strides): numpy's values either way."""
    # (its own generator: the same values whatever ran before; positive, so
    # that no sum cancels and the reductions' relative tolerance bounds it)
    g = np.random.default_rng(11)
    base = np.asfortranarray(np.abs(g.standard_normal((37 * 3, 29))) + 0.25)
    a = base[::step]  # (the test's copies keep these strides)
    assert a.strides[0] == 8 * step
    for fn in (lambda a: a.sum(axis=0), lambda a: a.max(axis=0), lambda a: np.exp(a) + a):
        assert_matches_numpy(fn, a, calls=2,
                             rtol=TOLERANCES.rtol(a.dtype, "reduction", a.shape[0]))


KINDS = {"sum": lambda a, ax: a.sum(axis=ax), "max": lambda a, ax: a.max(axis=ax),
         "min": lambda a, ax: np.min(a, axis=ax), "prod": lambda a, ax: np.prod(a * 0.1 + 1.0, axis=ax),
         "mean": lambda a, ax: a.mean(axis=ax), "any": lambda a, ax: (a > 1).any(axis=ax),
         "sum keepdims": lambda a, ax: a.sum(axis=ax, keepdims=True)}


def _valid(shape, axes) -> bool:
    flat = (axes,) if isinstance(axes, int) else axes
    return all(-len(shape) <= a < len(shape) for a in flat)


SHAPE_AXES = [(shape, axes) for shape in [(6, 5, 7), (4, 3, 5, 2), (1, 6, 4), (5, 1, 3)]
              for axes in [0, 1, 2, (0, 1), (1, 2), (0, 2), -1, (0, 3), (2, 3), (1,)]
              if _valid(shape, axes)]


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("shape, axes", SHAPE_AXES)
def test_reductions_keeping_several_axes_of_an_f_ordered_array(kind, shape, axes):
    """An F-ordered array reduced over its outermost (in memory) axes with
    two or more kept: its C-ordered transpose reduced, the kept axes then
    put back in their order: numpy's values and shape. (Positive values: no
    cancellation, so the reductions' relative tolerance bounds every sum.)"""
    a = np.abs(_f(shape)) + 0.25
    fn = lambda a: KINDS[kind](a, axes)
    assert_matches_numpy(fn, a, calls=2, rtol=TOLERANCES.rtol(a.dtype, "reduction", a.size))
    t = np.ascontiguousarray(a.T)
    assert_matches_numpy(lambda t: KINDS[kind](t.T, axes), t, calls=2,
                         rtol=TOLERANCES.rtol(a.dtype, "reduction", a.size))


def test_a_reduction_keeping_several_axes_returns_numpys_layout_without_a_copy():
    """The kept axes come back as a transposed view of the reduction's
    buffer: numpy's strides (its result follows the input's order), one
    kernel (the reduction's), no copy putting them back in order."""
    a = np.abs(_f((32, 16, 8))) + 0.25
    for fn in (lambda a: a.sum(axis=2), lambda a: a.max(axis=1), lambda a: a.min(axis=2)):
        cf = lowering.compile(fn, backend="cpu")
        got, want = cf(a), fn(a)
        assert got.strides == want.strides, (got.strides, want.strides)
        np.testing.assert_allclose(got, want, rtol=TOLERANCES.rtol(a.dtype, "reduction", a.size))
        ex = lowering.explain(cf)(a)
        assert ex.kernel_count == 1, ex.kernels


# joins, rolls and pads of arrays laid out in reverse: walked in their
# memory's order, their results numpy's layout (F-ordered; np.stack's blocks
# at axis 0 each F-ordered). Walked in C order, a 16x32x64 F-ordered
# concatenation read its inputs with 4 KiB steps: 169 us against numpy's 17.
def _c_t(shape):
    return rng.standard_normal(shape[::-1]).T


JOINS = [
    ("concatenate axis 0", lambda a, b: np.concatenate([a, b]), (_f, (4, 6))),
    ("concatenate axis 1 3-D", lambda a, b: np.concatenate([a, b, a], axis=1), (_f, (3, 4, 5))),
    ("concatenate promoted", lambda a, b: np.concatenate([a.astype(np.float32), b], axis=-1),
     (_f, (5, 3))),
    ("concatenate of C.T", lambda a, b: np.concatenate([a, b], axis=1), (_c_t, (6, 4))),
    ("stack axis 0", lambda a, b: np.stack([a, b]), (_f, (3, 4, 5))),
    # (numpy's own layout at another axis is neither C nor F: not compared)
    ("stack axis -1", lambda a, b: np.stack([a, b], axis=-1), (_f, (4, 6)), False),
    ("stack axis 1", lambda a, b: np.stack([a, b, b], axis=1), (_f, (3, 4, 5)), False),
    ("roll", lambda a, b: np.roll(a, 2, axis=1) + b, (_f, (5, 7))),
    ("roll two axes", lambda a, b: np.roll(a, (1, -2), axis=(0, 2)), (_f, (3, 4, 5))),
    ("pad constant", lambda a, b: np.pad(a, ((1, 2), (0, 3))), (_f, (4, 6))),
    # (values per axis padded in numpy's axis order, which owns the corners: C order)
    ("pad per-axis values", lambda a, b: np.pad(a, 1, constant_values=((1.0, 2.0), (3.0, 4.0))),
     (_f, (4, 6)), False),
    ("pad edge 3-D", lambda a, b: np.pad(a, ((0, 1), (2, 0), (1, 1)), mode="edge"), (_f, (3, 4, 5))),
    ("pad reflect", lambda a, b: np.pad(a, 2, mode="reflect"), (_c_t, (5, 6))),
    ("pad wrap", lambda a, b: np.pad(a, (1, 3), mode="wrap"), (_f, (4, 6))),
]


@pytest.mark.parametrize("case", JOINS, ids=[c[0] for c in JOINS])
def test_joins_rolls_and_pads_in_memory_order(case):
    _, fn, (make, shape), *layout = case
    a, b = make(shape), make(shape)
    cf = lowering.compile(fn, fullgraph=True)
    for _ in range(2):
        got, want = cf(a, b), fn(a, b)
        assert_same_value(got, want)
        assert got.strides == want.strides or layout == [False], (got.strides, want.strides)
    # and a mix of layouts: C order, numpy's values
    assert_matches_numpy(fn, a, np.ascontiguousarray(b), calls=2)


# slice assignments into F-ordered arguments (written in place): the kernel
# walks the window in the argument's memory order (the new part's transpose,
# stored at the reversed index). Walked in C order, `x[..., 1:] = y[..., :-1]`
# of 16x32x64 F-ordered arrays took 150 us against numpy's 11.
def _shift_last(x, y):
    x[..., 1:] = y[..., :-1]
    return x


def _strided_window(x, y):
    x[1:-1, ::2] = y[2:, ::2]


def _window_update(x, y):  # (flags may re-run it: the window goes into a copy of x)
    x[1:-1, ::2] = 0.5 * (y[2:, ::2] + y[:-2, ::2])


def _row_of_3d(x, y):  # (a row of unit dims: walked in C order)
    x[1] = y[0] * 2.0
    return x.max()


def _cumulative(x, y):  # (the new part reads the window shifted: walked in order, C)
    x[1:] = x[1:] + x[:-1]
    return x


WINDOWS = [("shift last axis", _shift_last, (6, 9)), ("shift last axis 3-D", _shift_last, (3, 4, 5)),
           ("strided window", _strided_window, (6, 9)), ("window update", _window_update, (6, 9)),
           ("a row of 3-D", _row_of_3d, (3, 4, 5)), ("reads its own shift", _cumulative, (6, 9))]
IN_MEMORY_ORDER = (_shift_last, _strided_window)


@pytest.mark.parametrize("case", WINDOWS, ids=[c[0] for c in WINDOWS])
@pytest.mark.parametrize("layouts", ["FF", "FC", "CF", "CC"])
def test_slice_assignments_into_f_ordered_arguments(case, layouts):
    _, fn, shape = case
    make = {"F": _f, "C": lambda s: rng.standard_normal(s)}
    x, y = make[layouts[0]](shape), make[layouts[1]](shape)
    cf = lowering.compile(fn)
    for _ in range(3):
        mine, theirs = x.copy(order="K"), x.copy(order="K")
        got, want = cf(mine, y), fn(theirs, y)
        np.testing.assert_array_equal(mine, theirs)
        assert mine.strides == theirs.strides
        if want is not None and not isinstance(want, np.ndarray):
            assert_same_value(got, want)
    cpu = lowering.compile(fn, backend="cpu")  # (the kernels' walk: the CPU backend's)
    walked = [name for ks in lowering.explain(cpu)(x.copy(order="K"), y).kernels
              for _, fused in ks for name in fused]
    transposed = layouts[0] == "F" and fn in IN_MEMORY_ORDER
    assert any("array.transpose" in n for n in walked) == transposed, walked
