"""Indexing against numpy: basic indexing as views (writes reach the base),
integer-array indexing as gathers and scatters, take/take_along_axis/
put_along_axis, np.add.at, and boolean masks (constant: captured; traced: a
graph break, except `x[mask] = scalar`)."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lowering
from lowering.capture.tracer import GraphBreakError
from lowering.config import patch
from lowering.testing import array_shapes, arrays, assert_matches_numpy, dtypes

SETTINGS = settings(max_examples=40, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def check(fn, *args, calls=2):
    """numpy's result and effects, captured as one graph (no graph break)."""
    cf = lowering.compile(fn, fullgraph=True)
    with patch(verify_each_pass=True):
        return assert_matches_numpy(fn, *args, compiled=cf, calls=calls)


def check_breaks(fn, *args):
    """numpy's result and effects through a graph break; returns the reasons."""
    cf = lowering.compile(fn)
    assert_matches_numpy(fn, *args, compiled=cf)
    trace = cf.last_trace
    return [b.reason for b in trace.breaks] if trace is not None else ["eager"]


# ---- key strategies ------------------------------------------------------------------------

def bounds(n):
    return st.one_of(st.none(), st.integers(-n - 2, n + 2))


@st.composite
def basic_keys(draw, shape):
    items = []
    for n in shape:
        kind = draw(st.sampled_from(["slice", "int", "full"] if n else ["slice", "full"]))
        if kind == "int":
            items.append(draw(st.integers(-n, n - 1)))
        elif kind == "slice":
            step = draw(st.sampled_from([None, 1, 2, 3, -1, -2, -3]))
            items.append(slice(draw(bounds(n)), draw(bounds(n)), step))
        else:
            items.append(slice(None))
    items = items[:draw(st.integers(0, len(items)))]  # trailing dims implicitly full
    for _ in range(draw(st.integers(0, 2))):
        items.insert(draw(st.integers(0, len(items))), None)
    if draw(st.booleans()):
        items.insert(draw(st.integers(0, len(items))), Ellipsis)
    if len(items) == 1 and draw(st.booleans()):
        return items[0]
    return tuple(items)


@st.composite
def advanced_keys(draw, shape, allow_bad=False):
    """A key with at least one integer array: ("arr", data, dtype) parts hold
    nested lists, made into arrays inside the function or passed as arguments;
    list parts stay Python lists in the key."""
    bshape = draw(array_shapes(min_dims=0, max_dims=2, max_side=3))

    def index(n, kind):
        drop = draw(st.integers(0, len(bshape)))
        sub = tuple(1 if draw(st.booleans()) else s for s in bshape[drop:])
        if kind == "list":
            sub = sub[-1:] or (1,)
        if n == 0 and not allow_bad:
            sub = sub[:-1] + (0,)
        lo, hi = (-n - 2, n + 1) if allow_bad else (-n, n - 1)
        vals = draw(st.lists(st.integers(lo, max(lo, hi)), min_size=int(np.prod(sub)),
                             max_size=int(np.prod(sub))))
        arr = np.array(vals, dtype=np.int64).reshape(sub)
        if kind == "list":
            return arr.tolist()
        return ("arr", arr.tolist(), draw(st.sampled_from(["int64", "int32"])))

    parts = []
    for n in shape[:len(shape) - draw(st.integers(0, 1))]:
        kind = draw(st.sampled_from(["arr", "arr", "int", "slice", "full", "list"]
                                    if n else ["arr", "slice", "full"]))
        if kind in ("arr", "list"):
            parts.append(index(n, kind))
        elif kind == "int":
            parts.append(draw(st.integers(-n, n - 1)))
        elif kind == "slice":
            parts.append(slice(draw(bounds(n)), draw(bounds(n)),
                               draw(st.sampled_from([None, 2, -1]))))
        else:
            parts.append(slice(None))
    if not any(isinstance(p, (tuple, list)) for p in parts):
        d = draw(st.integers(0, max(len(parts) - 1, 0)))
        parts[d:d + 1] = [index(shape[d], "arr")]
    for _ in range(draw(st.integers(0, 1))):
        parts.insert(draw(st.integers(0, len(parts))), None)
    return parts


def key_of(parts, traced=()):
    """The key: constant arrays are made inside the function (not sources)."""
    it = iter(traced)
    out = []
    for p in parts:
        if isinstance(p, tuple):
            out.append(next(it) if traced else np.array(p[1], dtype=p[2]))
        else:
            out.append(p)
    return tuple(out)


def index_args(parts):
    return [np.array(p[1], dtype=p[2]) for p in parts if isinstance(p, tuple)]


shapes_nd = array_shapes(min_dims=1, max_dims=3, max_side=4)


# ---- basic indexing ------------------------------------------------------------------------

@SETTINGS
@given(st.data())
def test_basic_getitem(data):
    x = data.draw(arrays(dtypes(), shapes_nd))
    key = data.draw(basic_keys(x.shape))
    check(lambda x: x[key], x)


@SETTINGS
@given(st.data())
def test_basic_setitem(data):
    x = data.draw(arrays(dtypes(), shapes_nd))
    key = data.draw(basic_keys(x.shape))
    target = np.zeros(x.shape)[key]
    vshape = data.draw(st.sampled_from([(), np.shape(target), np.shape(target)[1:],
                                        (1,) + np.shape(target)]))
    v = data.draw(arrays(x.dtype, vshape))

    def f(x, v):
        x[key] = v
        return x

    check(f, x, v)


@SETTINGS
@given(st.data())
def test_writes_through_views_reach_the_base(data):
    x = data.draw(arrays(dtypes("fi"), shapes_nd, layout=data.draw(st.sampled_from(
        ["C", "F", "strided", "transposed"]))))
    k1 = data.draw(basic_keys(x.shape))
    try:
        view = np.zeros(x.shape)[k1]
    except IndexError:  # an Ellipsis moved an int onto an empty axis: numpy refuses
        check(lambda x: x[k1], x)  # and so must we
        return
    is_view = isinstance(view, np.ndarray)  # else numpy hands back a scalar copy
    k2 = data.draw(basic_keys(view.shape)) if view.shape else ()

    def f(x):
        v = x[k1]
        if is_view:
            v[k2] = 7
            v += 1
        return x, v

    check(f, x)


def test_view_write_example():
    def f(x):
        v = x[::2]
        v[1:] = 0
        w = x[::-1, None][2]
        w[...] = -1
        return x

    check(f, np.arange(12.0).reshape(6, 2))


def test_element_reads_are_copies():
    def f(x):
        a = x[1, 2]  # a numpy scalar: later writes do not change it
        x[1, 2] = 100
        return a, x[1, 2], x[1, 2, ...]

    check(f, np.arange(12.0).reshape(3, 4))


@pytest.mark.parametrize("key", [(0, 0, 0), 1.0, (Ellipsis, Ellipsis), 10, (slice(None), -4)])
def test_basic_errors(key):
    check(lambda x: x[key], np.zeros((2, 3)))


def test_element_assignment_errors():
    def seq(x):
        x[0, 0] = np.ones(2)

    def overflow(x):
        x[0, 0] = 2**40

    def nan_to_int(x):
        x[0] = np.nan

    def bad_broadcast(x):
        x[:, :2] = np.ones(3)

    for fn in (seq, overflow, nan_to_int, bad_broadcast):
        check(fn, np.zeros((2, 3), np.int32))


def test_readonly_destination():
    x = np.zeros(3)
    x.flags.writeable = False
    check(lambda x: x.__setitem__(0, 1.0), x)


# ---- integer-array indexing ----------------------------------------------------------------

@SETTINGS
@given(st.data())
def test_gather_constant_indices(data):
    x = data.draw(arrays(dtypes(), shapes_nd))
    parts = data.draw(advanced_keys(x.shape))
    check(lambda x: x[key_of(parts)], x)


@SETTINGS
@given(st.data())
def test_gather_traced_indices(data):
    x = data.draw(arrays(dtypes(), shapes_nd))
    parts = data.draw(advanced_keys(x.shape))
    check(lambda x, *idx: x[key_of(parts, idx)], x, *index_args(parts))


@settings(max_examples=25, deadline=None)
@given(st.data())
def test_out_of_range_indices_raise(data):
    x = data.draw(arrays(dtypes("f"), shapes_nd, layout="C"))
    parts = data.draw(advanced_keys(x.shape, allow_bad=True))
    check(lambda x: x[key_of(parts)], x)  # at trace time
    check(lambda x, *idx: x[key_of(parts, idx)], x, *index_args(parts))  # at run time


@SETTINGS
@given(st.data())
def test_scatter_last_write_wins(data):
    x = data.draw(arrays(dtypes(), shapes_nd))
    parts = data.draw(advanced_keys(x.shape))
    rshape = np.zeros(x.shape)[key_of(parts)].shape
    vshape = data.draw(st.sampled_from([(), rshape, rshape[1:]]))
    v = np.arange(int(np.prod(vshape)), dtype=np.int64).reshape(vshape).astype(x.dtype) + 1
    traced = data.draw(st.booleans())

    def f(x, v, *idx):
        x[key_of(parts, idx)] = v
        return x

    check(f, x, v, *(index_args(parts) if traced else ()))


def test_gather_placement_rules():
    x = np.arange(3 * 4 * 5 * 2, dtype=np.int64).reshape(3, 4, 5, 2)
    i, j = np.array([[0, 2]]), np.array([[1], [3]])
    for fn in (lambda x: x[0, :, [1, 2]],            # separated by a slice: front
               lambda x: x[:, [0, 1], [1, 2]],       # adjacent: in place
               lambda x: x[[0], None, [1, 2]],       # separated by None: front
               lambda x: x[None, [0], [1, 2]],
               lambda x: x[..., [1, 0], :],
               lambda x: x[i, :, j],
               lambda x: x[:, i, j, 1],
               lambda x: x[1, i, :, 0],
               lambda x: x[True], lambda x: x[1, False], lambda x: x[[0, 1], :, True],
               lambda x: x[np.array(1)], lambda x: x[np.array(1), 2, 3, np.int64(0)],
               lambda x: x[[]], lambda x: x[[], 1]):
        check(fn, x)


def test_gather_errors():
    x = np.zeros((3, 4, 5))
    for key in [([[0, 1]], [[0], [1], [2]], [0, 1, 2, 3]), ([0, 5],), (0, [1, 7]),
                ([1, 2], None, [7]), ([1.0],), (np.array([0.5]),), (0, [0], 0, [0]),
                (np.ones(4, bool),), (slice(None), np.ones((4, 4), bool))]:
        check(lambda x, key=key: x[key], x)


def test_traced_index_errors_at_run_time():
    x = np.zeros((3, 4))
    check(lambda x, i: x[i], x, np.array([0, 3]))
    check(lambda x, i: x[i, i], x, np.array([0, 2]))
    check(lambda x, i, j: x[i, j], x, np.array([0, 1]), np.array([1, 2, 3]))


def test_setitem_mixed_and_broadcast_errors():
    def f(x, i):
        x[i, 1:] = np.arange(3.0)
        x[[0, 0, 2], ::-1] = np.arange(12.0).reshape(3, 4)
        return x

    check(f, np.zeros((3, 4)), np.array([2, -1, 1]))

    def bad(x):
        x[[0, 1]] = np.ones((3, 4))

    check(bad, np.zeros((3, 4)))


# ---- boolean masks -------------------------------------------------------------------------

@SETTINGS
@given(st.data())
def test_constant_masks_are_captured(data):
    x = data.draw(arrays(dtypes(), array_shapes(min_dims=1, max_dims=3, max_side=4)))
    k = data.draw(st.integers(1, x.ndim))
    lead = data.draw(st.integers(0, x.ndim - k))
    mask = data.draw(arrays(np.bool_, x.shape[lead:lead + k], layout="C")).tolist()

    def f(x):
        m = np.array(mask, dtype=bool)
        y = x[(slice(None),) * lead + (m,)]
        x[(slice(None),) * lead + (m,)] = 1
        return y, x

    check(f, x)


@SETTINGS
@given(st.data())
def test_traced_mask_assignment_of_one_value_is_a_select(data):
    x = data.draw(arrays(dtypes(), array_shapes(min_dims=1, max_dims=3, max_side=4),
                         layout=data.draw(st.sampled_from(["C", "strided", "transposed"]))))
    k = data.draw(st.integers(1, x.ndim))
    mask = data.draw(arrays(np.bool_, x.shape[:k]))
    v = data.draw(arrays(x.dtype, data.draw(st.sampled_from([(), (1,), x.shape[k:]]))))

    def f(x, mask, v):
        x[mask] = v
        y = x * 2
        y[mask, ...] = 1
        return x, y

    check(f, x, mask, v)


def test_traced_masks_break_the_graph():
    x = np.arange(12.0).reshape(3, 4)
    assert check_breaks(lambda x: x[x > 4] * 2, x) == [
        "boolean-mask indexing has a data-dependent shape"]
    assert check_breaks(lambda x: x[:, x[0] > 1], x)

    def assign(x):
        x[x > 4] = np.arange(7.0)
        return x + 1

    assert check_breaks(assign, x)
    check(lambda x: x.__setitem__(x > 4, 0.5), x)
    with pytest.raises(GraphBreakError):
        lowering.compile(lambda x: x[x > 4], fullgraph=True)(x)


# ---- take, take_along_axis, put_along_axis ------------------------------------------------

@SETTINGS
@given(st.data())
def test_take(data):
    x = data.draw(arrays(dtypes(), shapes_nd))
    axis = data.draw(st.one_of(st.none(), st.integers(-x.ndim, x.ndim - 1)))
    n = x.size if axis is None else x.shape[axis]
    mode = data.draw(st.sampled_from(["raise", "wrap", "clip"]))
    bad = mode != "raise" or data.draw(st.integers(0, 9)) == 0
    ishape = data.draw(array_shapes(min_dims=0, max_dims=2, max_side=3))
    if n == 0 and not bad:
        ishape = (0,)
    lo, hi = (-2 * n - 2, 2 * n + 2) if bad else (-n, n - 1)
    idx = data.draw(arrays(np.int64, ishape, elements=st.integers(lo, max(lo, hi))))
    lst = idx.tolist()
    check(lambda x, i: np.take(x, i, axis=axis, mode=mode), x, idx)
    check(lambda x: np.take(x, np.array(lst, dtype=np.int64), axis=axis, mode=mode), x)


def test_take_scalars_and_out():
    x = np.arange(12.0).reshape(3, 4)

    def f(x, o):
        np.take(x, [[0, 1]], axis=1, out=o)
        return x.take(5), np.take(x, np.int64(-1)), o

    check(f, x, np.zeros((3, 1, 2)))


@SETTINGS
@given(st.data())
def test_take_and_put_along_axis(data):
    x = data.draw(arrays(dtypes(), array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4)))
    axis = data.draw(st.integers(-x.ndim, x.ndim - 1))
    ishape = list(x.shape)
    ishape[axis] = data.draw(st.integers(0, 4))
    ishape = [1 if data.draw(st.integers(0, 3)) == 0 else s for s in ishape]
    n = x.shape[axis]
    idx = data.draw(arrays(np.int64, tuple(ishape), elements=st.integers(-n, n - 1)))
    v = data.draw(arrays(x.dtype, tuple(ishape)))

    def f(x, i, v):
        a = np.take_along_axis(x, i, axis=axis)
        np.put_along_axis(x, i, v, axis=axis)
        return a, x

    check(f, x, idx, v)
    check(lambda x, i: np.take_along_axis(x, i.ravel(), axis=None), x, idx)


def test_put_along_axis_flat():
    def f(x, i):
        np.put_along_axis(x, i, 5.0, axis=None)
        return x

    check(f, np.zeros((2, 3)), np.array([1, 4]))  # C-contiguous: written through
    check(f, np.zeros((3, 2)).T, np.array([1, 4]))  # otherwise numpy refuses


# ---- np.add.at -----------------------------------------------------------------------------

@SETTINGS
@given(st.data())
def test_add_at_accumulates_duplicates(data):
    x = data.draw(arrays(dtypes("fi"), shapes_nd, layout=data.draw(st.sampled_from(
        ["C", "strided", "transposed"])), elements=st.integers(-50, 50)))
    parts = data.draw(advanced_keys(x.shape))
    rshape = np.zeros(x.shape)[key_of(parts)].shape
    vshape = data.draw(st.sampled_from([(), rshape, rshape[1:]]))
    v = data.draw(arrays(x.dtype, vshape, elements=st.integers(-50, 50)))
    traced = data.draw(st.booleans())

    def f(x, v, *idx):
        np.add.at(x, key_of(parts, idx), v)
        return x

    check(f, x, v, *(index_args(parts) if traced else ()))


def test_add_at_mixed_dtypes_and_basic_keys():
    def f(x, y, v, i):
        np.add.at(x, [0, 0, 2], 1.5)   # float loop into int, repeated: numpy rounds each add
        np.add.at(y, i, v)             # float64 values into float32
        np.add.at(y, slice(1, 3), 2.0)
        return x, y

    cf = lowering.compile(f)
    x, y = np.zeros(4, np.int64), np.zeros(4, np.float32)
    assert_matches_numpy(f, x, y, np.arange(3.0), np.array([1, 1, 3]), compiled=cf)

    def unique(x):
        np.add.at(x, [3, 0, 2], 1.7)  # float into int, no repeats: captured exactly
        return x

    check(unique, np.arange(4, dtype=np.int32))


def test_other_ufunc_at_breaks_the_graph():
    def f(x):
        np.multiply.at(x, [0, 0], 3.0)
        return x + 1

    assert check_breaks(f, np.arange(4.0)) == [
        "np.multiply: multiply.at is not captured (only add.at)"]

    def errors(x):
        np.add.at(x, [0, 1], np.ones(3))

    check(errors, np.zeros(3))


# ---- globals are read at call time, never baked in -------------------------------------------

IDX = np.array([2, 0])
MASK = np.array([True, False, True])


def test_global_index_arrays_are_graph_inputs():
    def f(x):
        return x[IDX], x[:, IDX], np.take(x, IDX)

    cf = lowering.compile(f, fullgraph=True)
    x = np.arange(9.0).reshape(3, 3)
    assert_matches_numpy(f, x, compiled=cf)
    IDX[:] = [1, -1]  # same array, new values: the cached graph must read them
    try:
        assert_matches_numpy(f, x, compiled=cf)
        assert cf.stats["cache_hits"] >= 1
    finally:
        IDX[:] = [2, 0]


def test_global_masks_are_traced():
    def assign(x):
        x[MASK] = -1.0
        return x

    check(assign, np.arange(6.0).reshape(3, 2))
    assert check_breaks(lambda x: x[MASK], np.arange(3.0)) == [
        "boolean-mask indexing has a data-dependent shape"]


def test_gathers_and_scatters_in_the_graph():
    def ops(fn, *args):
        return lowering.explain(fn)(*args).ops_per_graph[0]

    x, i = np.arange(12.0).reshape(3, 4), np.array([0, 2])
    assert ops(lambda x, i: x[i], x, i)["array.gather"] == 1
    assert ops(lambda x, i: x[1:, i], x, i)["array.gather"] == 1
    # two traced indices: each checked and wrapped by a gather from an iota,
    # then one gather over the flattened pair of dims
    assert ops(lambda x, i: x[i, i], x, i)["array.gather"] == 3
    got = ops(lambda x, i: x.__setitem__(i, 0.0), x, i)
    assert got["array.scatter"] == 1 and "array.gather" not in got


def test_add_at_into_read_only_runs_eagerly():
    # numpy's ufunc.at ignores the writeable flag; capture leaves that to numpy
    x = np.zeros(3)
    x.flags.writeable = False
    assert check_breaks(lambda x: np.add.at(x, [0, 0], 1.0), x) == [
        "np.add: add.at into a read-only array"]


def test_fancy_writes_through_views_and_augmented_assignment():
    def f(x, i):
        x.T[[0, 2], 1:] = np.arange(6.0).reshape(2, 3)
        x[::-1][[1]] += 1
        x[[0, 0, 1]] *= 2  # numpy: read, multiply, write; repeats count once
        x[:, i] -= 10
        return x

    check(f, np.arange(12.0).reshape(4, 3), np.array([2, 2, 0]))
