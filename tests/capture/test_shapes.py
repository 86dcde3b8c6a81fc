"""Shape and view functions against numpy: results, dtypes, errors, and which
results are views (writes through them reach the base, later writes to the
base show through them) exactly where numpy's are."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lowering
from lowering.config import patch
from lowering.testing import array_shapes, arrays, assert_matches_numpy, dtypes

SETTINGS = settings(max_examples=30, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
WRITABLE = st.sampled_from(["C", "F", "strided", "transposed"])


def check(fn, *args, calls=2):
    cf = lowering.compile(fn, fullgraph=True)
    with patch(verify_each_pass=True):
        return assert_matches_numpy(fn, *args, compiled=cf, calls=calls)


def mutate(v):
    """Write through a result if numpy made it writeable (so a view shows it)."""
    if isinstance(v, (list, tuple)):
        for e in v:
            mutate(e)
    elif hasattr(v, "shape") and v.ndim and v.size and not getattr(v, "_readonly", False) \
            and getattr(getattr(v, "flags", None), "writeable", True):
        v[(0,) * v.ndim] = 1


# ---- reshaping views ---------------------------------------------------------------------

@SETTINGS
@given(st.data())
def test_reshape_ravel_and_views(data):
    x = data.draw(arrays(dtypes(), array_shapes(max_dims=3), layout=data.draw(WRITABLE)))
    n = x.size
    shape = data.draw(st.sampled_from([(n,), (-1,), (1, n), (n, 1, -1), (-1, 1)] +
                                      ([(2, n // 2), (n // 2, -1)] if n % 2 == 0 and n else [])))
    order = data.draw(st.sampled_from(["C", "F", "A"]))

    def f(x):
        r = np.reshape(x, shape, order=order)
        v = np.ravel(x, order=data_order)
        out = (r, v, x.flatten(), x.T, np.ravel(x.T))
        r += 1  # a view (numpy decides) carries this into x
        return out, x

    data_order = data.draw(st.sampled_from(["C", "F", "A", "K"]))
    check(f, x)


@SETTINGS
@given(st.data())
def test_axes_views(data):
    x = data.draw(arrays(dtypes(), array_shapes(min_dims=1, max_dims=4, max_side=3),
                         layout=data.draw(WRITABLE)))
    nd = x.ndim
    a = data.draw(st.integers(-nd, nd - 1))
    b = data.draw(st.integers(-nd, nd - 1))
    perm = data.draw(st.permutations(range(nd)))

    def f(x):
        views = (np.transpose(x, perm), np.swapaxes(x, a, b), np.moveaxis(x, a, b),
                 np.expand_dims(x, (a, -1)), np.squeeze(x), x.T, x.reshape(x.shape + (1,)))
        for v in views:
            v[(0,) * v.ndim if v.size else ...] += 1
        return views, x

    check(f, x)


def test_squeeze_expand_errors():
    x = np.zeros((1, 3, 1))
    for fn in (lambda x: np.squeeze(x, 1), lambda x: np.expand_dims(x, (0, 0)),
               lambda x: np.expand_dims(x, 5), lambda x: np.transpose(x, (0, 1)),
               lambda x: np.reshape(x, (2, -1)),
               lambda x: np.reshape(np.ones((2, 3)) * x[0, :2], 6, copy=False),
               lambda x: np.reshape((np.ones((2, 3)) * x[0, :2]).T, 6, copy=False),
               lambda x: np.broadcast_to(x, (2, 4, 1)), lambda x: np.squeeze(x, (0, 2))):
        check(fn, x)


def test_reshape_of_transposed_is_a_copy():
    def f(x):
        r = x.T.reshape(-1)
        r[0] = 100  # not a view: x keeps its value
        s = x.reshape(3, 2, order="F")  # not a view either
        s[0, 0] = 50
        return x, r, s

    check(f, np.arange(6.0).reshape(2, 3))


# ---- joining ----------------------------------------------------------------------------

@st.composite
def joinable(draw, min_dims=1):
    """arrays that agree on all dims but `axis`, of (maybe) different dtypes."""
    base = list(draw(array_shapes(min_dims=min_dims, max_dims=3, max_side=3)))
    axis = draw(st.integers(-len(base), len(base) - 1))
    k = draw(st.integers(1, 3))
    xs = []
    for _ in range(k):
        shp = list(base)
        shp[axis] = draw(st.integers(0, 3))
        xs.append(draw(arrays(dtypes(), tuple(shp))))
    return xs, axis


@SETTINGS
@given(joinable())
def test_concatenate(xs_axis):
    xs, axis = xs_axis
    check(lambda *xs: np.concatenate(xs, axis=axis), *xs)
    check(lambda *xs: np.concatenate(xs, axis=None), *xs)
    check(lambda *xs: np.concatenate(xs, axis=axis, dtype=np.float64, casting="unsafe"), *xs)


@SETTINGS
@given(st.data())
def test_stack_family(data):
    shape = data.draw(array_shapes(min_dims=0, max_dims=3, max_side=3))
    xs = [data.draw(arrays(dtypes(), shape)) for _ in range(data.draw(st.integers(1, 3)))]
    axis = data.draw(st.integers(-len(shape) - 1, len(shape)))
    check(lambda *xs: (np.stack(xs, axis=axis), np.vstack(xs), np.dstack(xs)), *xs)
    check(lambda *xs: np.hstack(xs), *xs)
    check(lambda *xs: np.column_stack(xs), *xs)
    check(lambda *xs: (np.atleast_1d(*xs), np.atleast_2d(xs[0]), np.atleast_3d(*xs)), *xs)


def test_joining_errors_and_out():
    a, b = np.zeros((2, 3)), np.ones((2, 2), np.int32)
    for fn in (lambda a, b: np.concatenate([a, b]), lambda a, b: np.concatenate([a, b[0]]),
               lambda a, b: np.concatenate([a[0, 0], a[0, 0]]), lambda a, b: np.concatenate([]),
               lambda a, b: np.stack([a, b]), lambda a, b: np.concatenate([a, b], 1, dtype=int),
               lambda a, b: np.hstack([a, b, [[1.5], [2.5]]]),
               lambda a, b: np.concatenate([a, b], axis=3)):
        check(fn, a, b)

    def out(a, b, o):
        r = np.concatenate([a, b], axis=1, out=o)
        return r is o, o

    check(out, a, b, np.zeros((2, 5), np.float32))
    check(lambda a, b, o: np.concatenate([a, b], out=o), a, b, np.zeros((2, 5)))


def test_atleast_views_and_scalars():
    def f(x, s):
        a, b = np.atleast_2d(x), np.atleast_3d(x)
        a[0, 0] = 10
        b[0, 1, 0] = 20
        return x, np.atleast_1d(s), np.atleast_2d(s), np.atleast_3d(3.0), s

    check(f, np.arange(4.0), 2.5)


# ---- splitting (views) -------------------------------------------------------------------

@SETTINGS
@given(st.data())
def test_split(data):
    x = data.draw(arrays(dtypes(), array_shapes(min_dims=1, max_dims=3, max_side=5),
                         layout=data.draw(WRITABLE)))
    axis = data.draw(st.integers(-x.ndim, x.ndim - 1))
    n = x.shape[axis]
    sections = data.draw(st.one_of(
        st.integers(1, 4),
        st.lists(st.integers(-n - 1, n + 1), max_size=3)))

    def f(x):
        parts = np.array_split(x, sections, axis=axis)
        mutate(parts)  # views: each write lands in x
        return parts, x

    check(f, x)

    def g(x):
        return np.split(x, sections, axis=axis)

    check(g, x)


def test_split_family_errors():
    x = np.zeros((4, 6, 2))
    for fn in (lambda x: np.split(x, 5), lambda x: np.split(x, 0),
               lambda x: np.array_split(x, 0), lambda x: np.array_split(x, 2, axis=3),
               lambda x: np.hsplit(x, 3), lambda x: np.vsplit(x, [1]), lambda x: np.dsplit(x, 2),
               lambda x: np.hsplit(x[0, 0, 0], 1), lambda x: np.vsplit(x[0, 0], 2),
               lambda x: np.dsplit(x[0], 2)):
        check(fn, x)


# ---- flips, rolls, tiles, repeats --------------------------------------------------------

@SETTINGS
@given(st.data())
def test_flips_are_views(data):
    x = data.draw(arrays(dtypes(), array_shapes(min_dims=0, max_dims=3), layout=data.draw(WRITABLE)))
    axis = data.draw(st.one_of(st.none(), st.integers(-max(x.ndim, 1), max(x.ndim, 1) - 1)))

    def f(x):
        r = [np.flip(x)] + ([np.flip(x, axis), np.flipud(x)] if x.ndim else []) + \
            ([np.fliplr(x)] if x.ndim >= 2 else [])
        mutate(r)
        return r, x

    check(f, x)


@SETTINGS
@given(st.data())
def test_roll(data):
    x = data.draw(arrays(dtypes(), array_shapes(min_dims=1, max_dims=3)))
    shift = data.draw(st.integers(-7, 7))
    axes = data.draw(st.lists(st.integers(-x.ndim, x.ndim - 1), min_size=1, max_size=3))
    shifts = data.draw(st.lists(st.integers(-7, 7), min_size=len(axes), max_size=len(axes)))
    check(lambda x: (np.roll(x, shift), np.roll(x, shift, axis=axes[0]),
                     np.roll(x, tuple(shifts), axis=tuple(axes)), np.roll(x, shift, tuple(axes))), x)


@SETTINGS
@given(st.data())
def test_tile_and_repeat(data):
    x = data.draw(arrays(dtypes(), array_shapes(min_dims=0, max_dims=3, max_side=3)))
    reps = data.draw(st.one_of(st.integers(0, 3), st.lists(st.integers(0, 3), max_size=4)))
    check(lambda x: np.tile(x, reps), x)
    axis = data.draw(st.one_of(st.none(), st.integers(-max(x.ndim, 1), max(x.ndim, 1) - 1)))
    n = x.size if axis is None else x.shape[axis] if x.ndim else 1
    r = data.draw(st.one_of(st.integers(0, 3), st.lists(st.integers(0, 3), min_size=n, max_size=n),
                            st.just([2])))
    check(lambda x: (np.repeat(x, r, axis=axis), x.repeat(r, axis)), x)


def test_repeat_and_tile_errors():
    x = np.arange(6.0).reshape(2, 3)
    for fn in (lambda x: np.repeat(x, -1), lambda x: np.repeat(x, [1, 2], axis=1),
               lambda x: np.repeat(x, 1.5), lambda x: np.tile(x, -1), lambda x: np.tile(x[:0], -1),
               lambda x: np.repeat(x, 2, axis=2)):
        check(fn, x)


def test_traced_repeats_and_shifts_break():
    cf = lowering.compile(lambda x, r: np.repeat(x, r))
    assert_matches_numpy(cf.fn, np.arange(3.0), np.array([1, 0, 2]), compiled=cf)
    assert "repeats must be static" in cf.last_trace.breaks[0].reason


# ---- padding ------------------------------------------------------------------------------

@SETTINGS
@given(st.data())
def test_pad(data):
    x = data.draw(arrays(dtypes(), array_shapes(min_dims=0, max_dims=3, max_side=3),
                         layout=data.draw(st.sampled_from(["C", "F", "strided", "transposed"]))))
    nd = x.ndim
    width = data.draw(st.one_of(
        st.integers(0, 4), st.tuples(st.integers(0, 4), st.integers(0, 4)),
        st.lists(st.tuples(st.integers(0, 7), st.integers(0, 7)), min_size=nd, max_size=nd)))
    mode = data.draw(st.sampled_from(["constant", "edge", "reflect", "symmetric", "wrap"]))
    kw = {}
    if mode == "constant" and data.draw(st.booleans()):
        kw["constant_values"] = data.draw(st.one_of(
            st.integers(-3, 3), st.tuples(st.integers(-3, 3), st.integers(-3, 3)),
            st.lists(st.tuples(st.integers(-3, 3), st.integers(-3, 3)), min_size=nd, max_size=nd)))
    check(lambda x: np.pad(x, width, mode=mode, **kw), x)


def test_pad_specials():
    x = np.arange(6.0).reshape(2, 3)
    check(lambda x: np.pad(x, {1: (1, 2)}, constant_values=np.nan), x)
    check(lambda x: np.pad(x, 1, mode="empty").shape, x)
    check(lambda x: np.pad(x, 2, constant_values=x[0, 1]), x)
    check(lambda x: np.pad(x.astype(np.int32), 1, constant_values=2.7), x)
    for fn in (lambda x: np.pad(x, -1), lambda x: np.pad(x, 1.5), lambda x: np.pad(x, 1, "nope"),
               lambda x: np.pad(x, 1, "edge", constant_values=1),
               lambda x: np.pad(x[:0], 1, "reflect"), lambda x: np.pad(x, ((1, 2, 3),)),
               lambda x: np.pad(x.astype(int), 1, constant_values=np.nan)):
        check(fn, x)
    cf = lowering.compile(lambda x: np.pad(x, 2, mode="reflect", reflect_type="odd"))
    assert_matches_numpy(cf.fn, x, compiled=cf)
    assert cf.last_trace.breaks


# ---- triangles and diagonals ---------------------------------------------------------------

@SETTINGS
@given(st.data())
def test_tril_triu(data):
    x = data.draw(arrays(dtypes(), array_shapes(min_dims=1, max_dims=3)))
    k = data.draw(st.integers(-5, 5))
    check(lambda x: (np.tril(x, k), np.triu(x, k), np.tril(x), np.triu(x)), x)


@SETTINGS
@given(st.data())
def test_diag_and_diagonal(data):
    x = data.draw(arrays(dtypes(), array_shapes(min_dims=1, max_dims=2, max_side=5),
                         layout=data.draw(WRITABLE)))
    k = data.draw(st.integers(-6, 6))
    check(lambda x: (np.diag(x, k), np.diag(x)), x)
    if x.ndim == 2:
        def later_writes_show(x):
            d = np.diagonal(x, k)
            x[...] = -x
            return d, x.diagonal(), np.trace(x) if x.dtype != np.bool_ else 0

        check(later_writes_show, x)


@SETTINGS
@given(st.data())
def test_diagonal_nd(data):
    x = data.draw(arrays(dtypes(), array_shapes(min_dims=2, max_dims=4, max_side=4),
                         layout=data.draw(WRITABLE)))
    a1, a2 = data.draw(st.lists(st.integers(-x.ndim, x.ndim - 1), min_size=2, max_size=2,
                                unique_by=lambda a: a % x.ndim))
    off = data.draw(st.integers(-5, 5))
    check(lambda x: np.diagonal(x, off, a1, a2), x)


def test_diagonal_is_read_only_and_errors():
    x = np.arange(9.0).reshape(3, 3)
    for fn in (lambda x: np.diagonal(x).__setitem__(0, 1), lambda x: np.diagonal(x[0]),
               lambda x: np.diagonal(x, 0, 1, -1), lambda x: np.diag(x[None]),
               lambda x: np.tril(x[0, 0]), lambda x: np.diagonal(x, 0, 0, 2)):
        check(fn, x)


# ---- broadcasting --------------------------------------------------------------------------

@SETTINGS
@given(st.data())
def test_broadcast_arrays(data):
    from lowering.testing import broadcastable_shapes

    shapes = data.draw(broadcastable_shapes(data.draw(st.integers(1, 3))))
    xs = [data.draw(arrays(dtypes(), s)) for s in shapes]

    def f(*xs):
        out = np.broadcast_arrays(*xs)
        return out, np.broadcast_to(xs[0], (2,) + np.shape(out[0]))

    check(f, *xs)


def test_broadcast_views_see_later_writes():
    def f(x, y):
        a, b = np.broadcast_arrays(x, y)
        x[0] = 100.0
        return a, b, b is y

    check(f, np.arange(3.0), np.zeros((2, 1)))
    check(lambda x, y: np.broadcast_arrays(x, y), np.zeros(3), np.zeros(2))


@pytest.mark.parametrize("fn", [np.fliplr, np.flipud, np.atleast_2d, np.ravel, np.diag, np.flip,
                                np.roll])
def test_zero_d_inputs(fn):
    check(lambda s: fn(s, 1) if fn is np.roll else fn(s), np.array(1.5))
