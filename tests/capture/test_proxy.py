"""The proxy array against numpy's ndarray as the user's code sees it:
`isinstance`, in-place shape changes, layout attributes (strides, flags, base,
flat, the buffer protocols), every public ndarray method and attribute, ufunc
keywords and multi-output `out=`, hashing of scalars, copying and pickling,
and views returned by eager pieces. Each answers as numpy does, or runs the
piece eagerly (a graph break, or the whole call eagerly): never a wrong
answer, a silent no-op or an AttributeError."""

from __future__ import annotations

import copy
import os
import pickle
import tempfile
import warnings

import numpy as np
import pytest

import lowering
from lowering.testing import assert_matches_numpy, copy_array


def layouts(dtype=np.float64):
    """One 3x4 array of distinct values in the layouts programs see."""
    base = np.array([[3.0, 1.0, 2.0, 0.5], [7.0, 5.0, 6.0, 4.0], [-1.0, 9.0, 8.0, 10.0]])
    base = base.astype(dtype)
    wide = np.zeros((6, 8), dtype)
    wide[::2, ::-2] = base[:, ::-1]
    return {
        "C": base.copy(),
        "F": np.asfortranarray(base),
        "strided": wide[::2, ::-2][:, ::-1][:, ::-1],
        "transposed": np.ascontiguousarray(base.T).T,
    }


LAYOUTS = ["C", "F", "strided", "transposed"]


def check(fn, *args, fullgraph=False, calls=2):
    """fn compiled matches numpy, and tracing it did not fail (a failure of
    the compiler, such as an AttributeError of the proxy, would run the
    function eagerly with a warning and hide the wrong answer)."""
    cf = lowering.compile(fn, fullgraph=fullgraph)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        try:
            cf(*[copy_array(a) if isinstance(a, np.ndarray) else a for a in args])
        except Exception:  # numpy's own error: assert_matches_numpy compares it
            pass
    failed = [str(w.message) for w in seen if "failed" in str(w.message)
              and str(w.message).startswith("lowering: compiling")]
    assert not failed, failed
    return assert_matches_numpy(fn, *args, compiled=cf, calls=calls)


# ---- isinstance ---------------------------------------------------------------------------

def branch_on_isinstance(x):
    y = x[1:] + 1
    v = x.T
    s = x.sum()
    flags = (isinstance(x, np.ndarray), isinstance(y, np.ndarray), isinstance(v, np.ndarray),
             isinstance(s, np.ndarray), isinstance(s, np.generic) or not isinstance(s, np.ndarray))
    return (x * 2 if isinstance(x, np.ndarray) else x - 1), flags


@pytest.mark.parametrize("layout", LAYOUTS)
def test_isinstance_ndarray_is_true_inside_the_trace(layout):
    x = layouts()[layout]
    got = check(branch_on_isinstance, x, fullgraph=True)
    assert got[1][:4] == (True, True, True, False)


def test_isinstance_keeps_the_proxy_type_for_capture():
    from lowering.capture.traced import TracedArray

    seen = []

    def f(x):
        seen.append((isinstance(x, TracedArray), x.__class__, x.sum().__class__))
        return x + 1

    lowering.compile(f, fullgraph=True)(np.ones(3))
    assert seen == [(True, np.ndarray, TracedArray)]


def test_isinstance_with_advanced_indices_stays_captured():
    def f(x, i):
        return x[i] * 2, x[i, ::-1]

    check(f, np.arange(12.0).reshape(3, 4), np.array([2, 0, 2]), fullgraph=True)


# ---- in-place shape ------------------------------------------------------------------------

def set_shape(x):
    x.shape = (4, 3)
    x[0, 0] = -7.0
    return x.sum(axis=0), x.shape


def set_shape_int(x):
    y = x + 1
    y.shape = -1
    y[2] = 100.0
    return y, y.shape, y.ndim, len(y)


def set_shape_of_a_view(x):
    v = x[1:]
    v.shape = (8,)
    v[0] = 42.0
    return x, v


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("fn", [set_shape, set_shape_int, set_shape_of_a_view],
                         ids=lambda f: f.__name__)
def test_shape_assignment_reshapes_in_place(fn, layout):
    check(fn, layouts()[layout])


def test_shape_assignment_refuses_a_layout_numpy_cannot_view():
    def f(x):
        t = x.T
        t.shape = (12,)
        return t

    with pytest.raises(AttributeError, match="Incompatible shape for in-place modification"):
        np.asarray(f(np.zeros((3, 4))))
    cf = lowering.compile(f)
    with pytest.raises(AttributeError, match="Incompatible shape for in-place modification"):
        cf(np.zeros((3, 4)))
    check(f, np.zeros((3, 4)))
    check(f, np.zeros((3, 4)).T)  # the transpose of a transpose is C-contiguous: a view


def test_shape_assignment_of_a_wrong_size_raises_numpy_error():
    def f(x):
        x.shape = (5,)
        return x

    check(f, np.zeros(4))


def test_dtype_assignment_is_not_ignored():
    def f(x):
        x.dtype = np.int64
        return x

    check(f, np.arange(4.0))


# ---- layout attributes ---------------------------------------------------------------------

def layout_attributes(x):
    v = x[::2, 1:]
    t = x.T
    r = x.reshape(-1) if x.flags.c_contiguous else x[:, :2]
    out = []
    for a in (x, v, t, r):
        fl = a.flags
        out.append((a.strides, fl.c_contiguous, fl.f_contiguous, fl.writeable, fl.owndata,
                    fl["C_CONTIGUOUS"], fl["WRITEABLE"], fl.aligned, a.base is None,
                    a.__array_interface__["strides"], a.__array_interface__["shape"],
                    a.__array_interface__["typestr"], tuple(a.ctypes.shape),
                    tuple(a.ctypes.strides), a.data.shape, a.data.strides, a.data.readonly,
                    a.data.format))
    return out, v.base is x, t.base is x, r.base is x or r.base is None


@pytest.mark.parametrize("layout", LAYOUTS)
def test_layout_attributes_match_numpy(layout):
    check(layout_attributes, layouts()[layout])


def test_layout_attributes_of_read_only_and_broadcast_arrays():
    def f(x, y):
        b = np.broadcast_to(y, (3, 4))
        return (x.flags.writeable, x[1:].flags.writeable, b.flags.writeable, b.strides,
                x.strides, x[:, ::-1].strides)

    ro = np.arange(12.0).reshape(3, 4)
    ro.flags.writeable = False
    check(f, ro, np.arange(4.0))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_layout_of_intermediates_is_numpys(layout):
    """numpy's layout of an op's result follows its operands (order="K"):
    answered where every contiguous layout agrees, else the call runs
    eagerly, never the compiled program's layout."""
    def f(x):
        y = x * 2
        return (y.strides, y.flags.c_contiguous, y.flags.f_contiguous, y.T.flags.c_contiguous,
                y[:, 1:].base is y, y.flags.owndata, y)

    check(f, layouts()[layout])


def test_layout_of_one_dimensional_intermediates_is_captured():
    def f(x):
        y = x[0] + 1
        z = x.sum(axis=0)
        return (y.strides, y.flags.c_contiguous, y.flags.f_contiguous, z[::2].strides,
                z.flags["FORC"], y.flags.writeable, y, z)

    for layout in LAYOUTS:
        check(f, layouts()[layout], fullgraph=True)


def flat_reads(x):
    it = x.flat
    return (x.flat[5], x.flat[1:7:2], x.flat[[0, 3, 11]], list(x.flat)[:5], len(it),
            np.asarray(x.flat), x.flat[-1])


def flat_writes(x):
    x.flat[3] = -1.0
    x.flat[7:9] = 55.0
    x.flat[[0, 1, 2]] = [9.0, 8.0]  # numpy repeats a shorter value
    return x


def flat_assign(x):
    y = x.copy()
    y.flat = [1.0, 2.0, 3.0]
    x.flat = 0.25
    return y


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("fn", [flat_reads, flat_writes, flat_assign], ids=lambda f: f.__name__)
def test_flat_matches_numpy(fn, layout):
    check(fn, layouts()[layout])


def test_flags_writeable_assignment():
    def make_read_only(x):
        v = x[1:]
        v.flags.writeable = False
        try:
            v[0] = 1.0
        except ValueError:
            x[0] = -5.0
        return x, v.flags.writeable, x.flags.writeable

    def set_flags(x):
        y = x * 2
        y.setflags(write=False)
        caught = False
        try:
            y += 1
        except ValueError:
            caught = True
        return y, caught

    check(make_read_only, np.arange(12.0).reshape(3, 4))
    check(set_flags, np.arange(4.0))


def test_setflags_on_the_callers_array_reaches_the_caller():
    def f(x):
        x.setflags(write=False)
        return x.sum()

    a = np.arange(4.0)
    lowering.compile(f)(a)
    assert not a.flags.writeable


# ---- every public ndarray name -------------------------------------------------------------

def _tmp(name):
    return os.path.join(tempfile.gettempdir(), f"lowering-test-proxy-{os.getpid()}-{name}")


def inplace_sort(x):
    r = x.sort()
    y = x[:, ::-1] * 1
    y.sort(axis=0)
    return r, x, y


def inplace_sort_view(x):
    v = x[1:]
    v.sort(axis=-1)
    x[0].sort(kind="stable")
    return x


def inplace_partition(x):
    x.partition(2)
    y = x.T * 1
    y.partition(1, axis=0)
    return x, y


def fill_input(x):
    r = x[1].fill(3.5)
    return r, x


def fill_intermediate(x):
    y = x + 1
    y.fill(-2)
    return y


def put_values(x):
    x.put([0, 5, -1], [9.0, 8.0])
    y = x * 1
    y.put(3, 77.0)
    return x, y


def put_modes(x):
    x.put([20, -20], [1.0, 2.0], mode="clip")
    x.put([13], [3.0], mode="wrap")
    return x


def resize_copy(x):
    y = x.copy()
    y.resize((2, 3), refcheck=False)
    return y


def resize_input(x):
    x.resize((6,))  # numpy refuses: the array is referenced
    return x


def byteswap_copy(x):
    b = x.byteswap()
    return b, x


def byteswap_inplace(x):
    r = x.byteswap(inplace=True)
    r2 = x[1:].byteswap(True)
    return x, r, r2


def setflags_noop(x):
    x.setflags(write=True)
    x[0] = 2.0
    return x


def setfield_value(x):
    x.setfield(5.0, np.float64)
    return x


def getfield_value(x):
    return x.getfield(np.float64) + 1


def dump_and_load(x):
    path = _tmp("dump")
    x.dump(path)
    with open(path, "rb") as f:
        back = pickle.load(f)
    return back + 1, pickle.loads(x.dumps()) * 1


def tofile_and_read(x):
    path = _tmp("tofile")
    x.tofile(path)
    with open(path, "rb") as f:
        return f.read()


def to_device_alias(x):
    y = x.to_device("cpu")
    y[0] = -3.0
    return x, x.device, y.device


def view_same_dtype(x):
    v = x.view()
    v[0] = 11.0
    w = x.view(np.float64)
    w[-1] = 12.0
    return x, v


def view_other_dtype(x):
    v = x.view(np.int64)
    return v + 1


def real_imag(x):
    r = x.real
    r[0] = 4.0
    i = x.imag
    return x, i, i.flags.writeable, r.base is None


def real_assign(x):
    x.real = 2.0
    return x


def imag_assign(x):
    x.imag = 2.0
    return x


def choose_from(x):
    idx = (x > 4).astype(np.int64)
    return idx.choose([x, -x]), idx.choose([10, 20])


def items(x):
    return x.item(3), x.item(1, 2), x[1:2, 2:3].item(), x.tolist()


def attribute_table(x):
    return (x.ndim, x.size, x.itemsize, x.nbytes, x.shape, x.dtype, x.T.shape, x.device)


METHODS: dict[str, tuple] = {
    "T": (lambda x: x.T * 1, lambda x: (x.T.__setitem__((0, 1), 99.0), x)[1]),
    "all": (lambda x: (x.all(), x.all(axis=0), (x > 2).all(axis=1, keepdims=True)),),
    "any": (lambda x: (x.any(), (x > 8).any(axis=0)),),
    "argmax": (lambda x: (x.argmax(), x.argmax(axis=1)),),
    "argmin": (lambda x: (x.argmin(), x.argmin(axis=0, keepdims=True)),),
    "argpartition": (lambda x: x.argpartition(1), lambda x: x.argpartition(1, axis=0)),
    "argsort": (lambda x: x.argsort(), lambda x: x.argsort(axis=0, kind="stable")),
    "astype": (lambda x: x.astype(np.int32), lambda x: x.astype(np.float32, copy=False)),
    "base": (lambda x: (x.base is None, x[1:].base is x, x.T[1:].base is x),),
    "byteswap": (byteswap_copy, byteswap_inplace),
    "choose": (choose_from,),
    "clip": (lambda x: (x.clip(1, 5), x.clip(min=2), x.clip(max=3)),
             lambda x: (x.clip(0, 4, out=x), x)[1]),
    "compress": (lambda x: (x.compress([True, False, True], axis=0), x.compress([0, 1])),),
    "conj": (lambda x: x.conj(),),
    "conjugate": (lambda x: x.conjugate(),),
    "copy": (lambda x: (x.copy(), x.copy(order="F")), lambda x: (x.copy().__setitem__(0, 5), x)),
    "ctypes": (lambda x: (tuple(x.ctypes.shape), tuple(x.ctypes.strides),
                          x.ctypes.data == x.__array_interface__["data"][0]),),
    "cumprod": (lambda x: (x.cumprod(), x.cumprod(axis=0)),),
    "cumsum": (lambda x: (x.cumsum(), x.cumsum(axis=1, dtype=np.float32)),),
    "data": (lambda x: (x.data.shape, x.data.strides, x.data.nbytes, x.data.readonly,
                        x.data.tobytes()),),
    "device": (lambda x: x.device,),
    "diagonal": (lambda x: (x.diagonal(), x.diagonal(1)),
                 lambda x: (x.diagonal() * 1, x.diagonal().flags.writeable)),
    "dot": (lambda x: x.dot(x.T), lambda x: x[0].dot(x[1])),
    "dtype": (lambda x: (x.dtype, x.astype(np.int32).dtype),),
    "dump": (dump_and_load,),
    "dumps": (lambda x: pickle.loads(x.dumps()) * 2,),
    "fill": (fill_input, fill_intermediate),
    "flags": (lambda x: (x.flags.c_contiguous, x.flags.f_contiguous, x.flags.writeable,
                         x.flags.owndata, x.flags.aligned, x.flags.writebackifcopy),),
    "flat": (flat_reads, flat_writes),
    "flatten": (lambda x: x.flatten(), lambda x: x.flatten(order="F"),
                lambda x: (x.flatten().__setitem__(0, 3.0), x)[1]),
    "getfield": (getfield_value,),
    "imag": (real_imag, imag_assign),
    "item": (items,),
    "itemsize": (attribute_table,),
    "mT": (lambda x: x.mT * 1, lambda x: x[0].mT),
    "max": (lambda x: (x.max(), x.max(axis=0), x.max(axis=1, keepdims=True)),),
    "mean": (lambda x: (x.mean(), x.mean(axis=0)),),
    "min": (lambda x: (x.min(), x.min(axis=1, initial=-3.0)),),
    "nbytes": (attribute_table,),
    "ndim": (attribute_table,),
    "nonzero": (lambda x: (x > 4).nonzero(),),
    "partition": (inplace_partition,),
    "prod": (lambda x: (x.prod(), x.prod(axis=1)),),
    "put": (put_values, put_modes),
    "ravel": (lambda x: x.ravel(), lambda x: x.ravel(order="F")),
    "real": (real_imag, real_assign),
    "repeat": (lambda x: (x.repeat(2), x.repeat(2, axis=0)),),
    "reshape": (lambda x: x.reshape(4, 3), lambda x: x.reshape((2, -1), order="F")),
    "resize": (resize_copy, resize_input),
    "round": (lambda x: ((x / 3).round(), (x / 3).round(2)),),
    "searchsorted": (lambda x: np.sort(x.ravel()).searchsorted([0.0, 4.5, 20.0]),),
    "setfield": (setfield_value,),
    "setflags": (setflags_noop,),
    "shape": (attribute_table, set_shape),
    "size": (attribute_table,),
    "sort": (inplace_sort, inplace_sort_view),
    "squeeze": (lambda x: x[:1].squeeze(), lambda x: x[:, 1:2].squeeze(axis=1)),
    "std": (lambda x: (x.std(), x.std(axis=0, ddof=1)),),
    "strides": (lambda x: (x.strides, x.T.strides, x[::2].strides),),
    "sum": (lambda x: (x.sum(), x.sum(axis=0), x.sum(axis=1, keepdims=True)),),
    "swapaxes": (lambda x: x.swapaxes(0, 1) * 1,),
    "take": (lambda x: (x.take([0, 5]), x.take([2, 0], axis=1)),),
    "to_device": (to_device_alias,),
    "tobytes": (lambda x: (x.tobytes(), x.tobytes(order="F")),),
    "tofile": (tofile_and_read,),
    "tolist": (lambda x: x.tolist(),),
    "trace": (lambda x: (x.trace(), x.trace(1)),),
    "transpose": (lambda x: x.transpose() * 1, lambda x: x.transpose(1, 0)[0]),
    "var": (lambda x: (x.var(), x.var(axis=1)),),
    "view": (view_same_dtype, view_other_dtype),
}

# protocol attributes numpy programs reach for beside the public names
PROTOCOLS: dict[str, tuple] = {
    "__array_interface__": (lambda x: {k: v for k, v in x.__array_interface__.items()
                                       if k != "data"},),
    "__array_namespace__": (lambda x: x.__array_namespace__() is np,),
    "__dlpack_device__": (lambda x: x.__dlpack_device__(),),
    "__dlpack__": (lambda x: np.from_dlpack(x) * 2,),
    "__array_struct__": (lambda x: type(x.__array_struct__).__name__,),
    "__contains__": (lambda x: (5.0 in x, 123.0 in x),),
    "__delitem__": (lambda x: x.__delitem__(0),),
    "__copy__": (lambda x: (copy.copy(x), copy.copy(x).__setitem__(0, 1.0), x),),
    "__deepcopy__": (lambda x: (copy.deepcopy(x), copy.deepcopy(x).__setitem__(0, 1.0), x),),
    "__reduce_ex__": (lambda x: pickle.loads(pickle.dumps(x)) + 1,),
    "__setstate__": (lambda x: (x.__setstate__(np.full(3, 7.0).__reduce__()[2]), x)[1],),
    "__array_wrap__": (lambda x: x.__array_wrap__(np.ones(2)) * 1,),
    "__array_finalize__": (lambda x: x.__array_finalize__(None),),
    "__sizeof__": (lambda x: x.__sizeof__() >= x.nbytes,),
    "__iter__": (lambda x: [r.sum() for r in x],),
    "__len__": (lambda x: len(x),),
    "__array__": (lambda x: np.asarray(x) + 0,),
}


def test_every_public_ndarray_name_has_a_case():
    public = {n for n in dir(np.ndarray) if not n.startswith("_")}
    assert public - set(METHODS) == set()


@pytest.mark.parametrize("name", sorted(METHODS) + sorted(PROTOCOLS))
def test_ndarray_name_matches_numpy(name):
    cases = METHODS.get(name) or PROTOCOLS[name]
    for fn in cases:
        for layout in ("C", "F", "strided"):
            check(fn, layouts()[layout])


def clip_out(x):
    x.clip(0, 4, out=x)


WRITERS = [inplace_sort, inplace_sort_view, inplace_partition, fill_input, put_values, put_modes,
           byteswap_inplace, setfield_value, clip_out, flat_writes, flat_assign, view_same_dtype,
           real_assign, to_device_alias, lambda x: x.T.__setitem__((0, 1), 99.0)]


@pytest.mark.parametrize("fn", WRITERS, ids=lambda f: f.__name__)
def test_in_place_methods_mutate_the_caller(fn):
    """Not a silent no-op: the caller's array changes as numpy changes it."""
    x = layouts()["C"]
    a, b = x.copy(), x.copy()
    fn(a)
    assert not np.array_equal(a, x, equal_nan=True), "the case must change its argument"
    lowering.compile(fn)(b)
    np.testing.assert_array_equal(b, a)


def test_no_public_ndarray_attribute_raises_attribute_error():
    seen = {}

    def f(x):
        for n in dir(np.ndarray):
            if not n.startswith("_"):
                try:
                    getattr(x, n)
                except AttributeError as e:
                    seen[n] = str(e)
        return x

    lowering.compile(f)(np.arange(6.0).reshape(2, 3))
    assert seen == {}


# ---- ufunc keywords ------------------------------------------------------------------------

def ufunc_out(x):
    o = np.empty_like(x)
    r = np.add(x, 1, out=o)
    np.multiply(x, 2, o)
    return r is o, o, np.negative(x, out=(x,)) is x, x


def ufunc_where_out(x):
    o = np.full_like(x, -1.0)
    np.sqrt(x, out=o, where=x > 3)
    np.add(x, 100, out=x, where=[True, False, True, False])
    return o, x


def ufunc_where_without_out(x):
    return np.add(x, 1, where=x > 3).shape


def ufunc_casting(x):
    i = np.zeros(x.shape, np.int64)
    np.add(x, 0.7, out=i, casting="unsafe")
    return i, np.add(x, 1, casting="no")


def ufunc_casting_error(x):
    i = np.zeros(x.shape, np.int64)
    return np.add(x, 0.7, out=i)


def ufunc_dtype(x):
    return np.add(x, 1, dtype=np.float32), np.multiply(x, x, dtype=np.int64, casting="unsafe")


def ufunc_signature(x):
    return np.add(x, 2, signature=(np.float32, np.float32, np.float32)), \
        np.add(x, 2, signature="ff->f")


def ufunc_order_subok(x):
    f = np.add(x, 1, order="F")
    c = np.multiply(x, 2, order="C", subok=False)
    return f, c, f.flags.f_contiguous, c.flags.c_contiguous


def ufunc_gufunc_axes(x):
    m = x[:, :3]
    return (np.matmul(m, m.T, axes=[(-2, -1), (-2, -1), (-2, -1)]),
            np.matmul(x[0], x[1], axes=[0, 0, ()]),
            np.matmul(x[0], x[1], axis=0, keepdims=True))


def ufunc_reduce_keywords(x):
    o = np.zeros(4)
    np.add.reduce(x, axis=0, out=o)
    return (o, np.add.reduce(x, axis=1, keepdims=True, dtype=np.float32),
            np.add.reduce(x, axis=None, where=x > 2, initial=1.0),
            np.maximum.reduce(x, axis=0, where=x < 9, initial=-50.0),
            np.add.accumulate(x, axis=1, dtype=np.float32))


def ufunc_invalid_order(x):
    return np.add(x, 1, order="Q")


def multi_output(x):
    q = np.empty_like(x)
    r = np.empty_like(x)
    got = np.divmod(x, 3, out=(q, r))
    f = np.empty_like(x)
    i = np.empty_like(x)
    got2 = np.modf(x / 4, out=(f, i))
    m = np.empty_like(x)
    e = np.empty(x.shape, np.int32)
    got3 = np.frexp(x, m, e)
    return q, r, f, i, m, e, got[0] is q and got[1] is r, got2[1] is i, got3[0] is m


def multi_output_into_input(x):
    h = x[1:]
    np.divmod(x[:2], 2.5, out=(h, None))
    np.modf(x[2] / 3, out=(None, x[0]))
    np.divmod(x[2], 4, x[2], None)
    return x


def multi_output_dtype(x):
    q, r = np.divmod(x, 3, dtype=np.float32)
    a, b = np.divmod(x.astype(np.int64), 3)
    return q, r, a, b, np.divmod(x, 2.0, casting="same_kind")


UFUNC_CASES = [ufunc_out, ufunc_where_out, ufunc_where_without_out, ufunc_casting,
               ufunc_casting_error, ufunc_dtype, ufunc_signature, ufunc_order_subok,
               ufunc_gufunc_axes, ufunc_reduce_keywords, ufunc_invalid_order, multi_output,
               multi_output_into_input, multi_output_dtype]


@pytest.mark.parametrize("layout", ["C", "F", "strided"])
@pytest.mark.parametrize("fn", UFUNC_CASES, ids=lambda f: f.__name__)
def test_ufunc_keywords_are_honoured(fn, layout):
    check(fn, layouts()[layout])


def test_divmod_out_is_captured():
    def f(x):
        q, r = np.empty_like(x), np.empty_like(x)
        np.divmod(x, 3, out=(q, r))
        return q, r

    check(f, np.arange(-5.0, 7.0), fullgraph=True)


# ---- hashing, copying, pickling ------------------------------------------------------------

def scalar_dict_keys(x):
    table = {np.float64(3.0): "three", 5.0: "five", 2: "two"}
    counts = {}
    for e in x.ravel():
        counts[e] = counts.get(e, 0) + 1
    return (table.get(x[0, 0]), table.get(x.max() - 5), table.get(x[1, 1]),
            sorted(counts.items()), len(set(x.ravel().tolist())), hash(x[0, 0]) == hash(3.0),
            x.sum() in {x.sum()})


def test_scalars_hash_by_value():
    check(scalar_dict_keys, np.array([[3.0, 1.0, 3.0], [7.0, 5.0, 3.0]]))


def test_integer_scalars_hash_by_value():
    def f(x):
        d = {int(k): i for i, k in enumerate(x)}
        return d.get(x[1]), {x[0]: 1}.get(np.int64(4)), hash(x[2]) == hash(2)

    check(f, np.array([4, 6, 2]))


def test_arrays_are_unhashable_like_ndarray():
    def f(x):
        hash(x)

    def g(x):
        return {x[:2]: 1}

    def zero_d(x):
        return {np.asarray(x.sum()).reshape(()): 1}

    for fn in (f, g, zero_d):
        with pytest.raises(TypeError) as want:
            fn(np.ones(3))
        with pytest.raises(TypeError) as got:
            lowering.compile(fn)(np.ones(3))
        assert str(got.value) == str(want.value)


def copies(x):
    a = copy.copy(x)
    b = copy.deepcopy(x)
    c = copy.deepcopy([x, {"k": x[1:]}])
    a[0, 0] = 100.0
    b[0, 1] = 200.0
    c[1]["k"][0, 0] = 300.0
    return x, a, b, c, a is not x, c[0] is not x


@pytest.mark.parametrize("layout", LAYOUTS)
def test_copy_and_deepcopy_are_np_copy(layout):
    check(copies, layouts()[layout])


def test_pickle_round_trip():
    def f(x):
        y = pickle.loads(pickle.dumps(x * 2))
        return y + 1, type(y) is np.ndarray

    check(f, np.arange(6.0).reshape(2, 3))


# ---- views returned by eager pieces --------------------------------------------------------

def eager_view_written(x):
    v = np.rot90(x)  # no capture rule: runs eagerly and returns a view of x
    v[0, 0] = -100.0
    return x, v


def eager_identity_written(x):
    r = np.real(x)  # an eager piece that returns its argument itself
    r[1] = 55.0
    return x


def base_written_after_eager_view(x):
    v = np.rot90(x)
    x[0, -1] = 77.0
    return v * 1


def eager_view_of_a_view(x):
    v = np.rot90(x[1:, ::-1])
    v += 1
    return x


def folded_view_written(x):
    y = np.zeros((3, 4))  # made from constants: np.rot90 of it runs on its value
    v = np.rot90(y)
    v[0, 0] = 1.0
    w = np.real(y)
    w[2, 0] = 2.0
    return y + x


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("fn", [eager_view_written, eager_identity_written,
                                base_written_after_eager_view, eager_view_of_a_view,
                                folded_view_written],
                         ids=lambda f: f.__name__)
def test_views_from_eager_pieces_alias_their_base(fn, layout):
    check(fn, layouts()[layout])


def test_read_only_results_of_eager_pieces_stay_read_only():
    def f(x):
        b = np.lib.stride_tricks.sliding_window_view(x, 2)  # no rule: eager, read-only
        try:
            b[0, 0] = 5.0
        except ValueError:
            return x * 2
        return x

    check(f, np.arange(5.0))
