"""Tier 2 routines inside the graph: sort, partition, searchsorted, `np.linalg`
and the real-valued `np.fft` transforms, each one `array.routine` op that runs
numpy's (LAPACK's, pocketfft's) own routine in the compiled program.

numpy is the oracle for what a call returns: the routine runs at capture on
small dummies (`_oracle`) whose dims keep the real ones' order and equalities
(0 and 1 stay 0 and 1, the other sizes become 2, 3, ... by rank), so numpy
checks the arguments, raises its own errors, picks the result dtypes and
result types (namedtuples included), and each result dim, mapped back, is the
real one. A result dim that is no operand's dim (so not read off the dummies)
is a graph break, as is a result dtype the compiler lacks (`eig`'s complex
results are supported only as far as numpy routines go: see dialects/dtypes.py)
and `lstsq` with more rows than columns (the residuals' shape depends on the
rank: data).

The FFTs with complex results (`fft`, `rfft`, `fftn`, ...) are routines too:
complex values are extern-only (dialects/dtypes.py), made and read by numpy
routines alone — the FFTs, ufuncs on complex values (`ufuncs._complex_call`),
`.real`/`.imag` — so `irfft(rfft(x) * H)` and `abs(rfft(x))**2` are one graph
whose real parts fuse as usual. Their result shapes are worked out here
(`rfft`'s n//2 + 1 is no operand's dim)."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from ... import routines
from dialects.dtypes import representable
from ..registry import rule
from ..traced import TracedArray
from ..tracer import Unsupported
from .common import normalize_axis
from .reductions import strong

_I64 = np.dtype(np.int64)


def _static(name: str, key: str, value: Any) -> Any:
    if isinstance(value, TracedArray):
        raise Unsupported(f"{name}: {key}= must be static, got a traced value")
    if isinstance(value, np.ndarray):
        if value.ndim:
            raise Unsupported(f"{name}: {key}= as an array")
        value = value[()]
    if isinstance(value, list):
        value = tuple(value)
    if isinstance(value, tuple):
        return tuple(_static(name, key, v) for v in value)
    if isinstance(value, np.generic):
        value = value.item()
    if value is not None and not isinstance(value, (bool, int, float, str)):
        raise Unsupported(f"{name}: {key}= of type {type(value).__name__}")
    return value


def _dummy(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """Well-posed stand-in values: 2·I in the matrix dims (invertible,
    symmetric positive definite), 0..n-1 for vectors (sorted)."""
    if len(shape) >= 2:
        base = 2 * np.eye(shape[-2], shape[-1])
    elif len(shape) == 1:
        base = np.arange(shape[0])
    else:
        base = np.ones(())
    return np.array(np.broadcast_to(base, shape), dtype=dtype)  # (ascontiguousarray makes 0-d 1-d)


def _oracle(name: str, arrays: list[TracedArray], config: dict[str, Any], size_keys=()):
    """numpy's result on the dummies, and each result's real (shape, dtype,
    is-a-numpy-scalar). `size_keys` name config entries that are sizes (`n`,
    `s` of the FFTs): mapped like dims."""
    sizes = {d for a in arrays for d in a.shape}
    for k in size_keys:
        v = config.get(k)
        sizes.update(v if isinstance(v, tuple) else () if v is None else (v,))
    big = sorted(s for s in sizes if s > 1)
    fwd = {0: 0, 1: 1} | {s: i + 2 for i, s in enumerate(big)}
    back = {m: s for s, m in fwd.items()}

    def mini(v):
        if isinstance(v, tuple):
            return tuple(mini(x) for x in v)
        return fwd.get(v, v) if isinstance(v, int) and v >= 0 else v

    dummies = [_dummy(tuple(fwd[d] for d in a.shape), a.dtype) for a in arrays]
    dummies = [d[()] if a._scalar else d for d, a in zip(dummies, arrays)]  # numpy scalars
    cfg = {k: (mini(v) if k in size_keys else v) for k, v in config.items()}
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        value = routines.ROUTINES[name](*dummies, **cfg)
    out = []
    for r in routines.results_of(value):
        arr = np.asarray(r)
        if not representable(arr.dtype):
            raise Unsupported(f"{name} returns {arr.dtype}, which the compiler does not support")
        if any(d not in back for d in arr.shape):
            raise Unsupported(f"{name}: a result shape {arr.shape} on the dummies is not made "
                              "of the operands' dims")
        out.append((tuple(back[d] for d in arr.shape), arr.dtype, isinstance(r, np.generic)))
    return value, out


def call_routine(tr, name: str, arrays: list[TracedArray], config: dict[str, Any],
                 size_keys=(), known=None) -> Any:
    """Emit `array.routine name` and return what numpy would: an array, a
    numpy scalar, or the routine's namedtuple of those. `known`: the one
    result's (shape, dtype), where the dummies cannot stand in (`kth`
    indexes the real axis)."""
    config = {k: _static(name, k, v) for k, v in config.items()}
    if known is None:
        value, results = _oracle(name, arrays, config, size_keys)
    else:
        value, results = None, [(known[0], np.dtype(known[1]), False)]
    vs = tr.prims.routine(name, [a._v() for a in arrays], config,
                          [(s, d) for s, d, _ in results])
    outs = [tr.wrap(v, scalar=sc) for v, (_, _, sc) in zip(vs, results)]
    if isinstance(value, tuple):
        return type(value)(*outs) if hasattr(type(value), "_fields") else tuple(outs)
    return outs[0]


def _given(**kw) -> dict[str, Any]:
    """The keyword arguments the caller gave (numpy's `_NoValue` defaults are
    left to numpy)."""
    return {k: v for k, v in kw.items() if v is not np._NoValue}


# ---- sorting and searching ---------------------------------------------------------
def _sort_input(tr, a, axis):
    x = strong(tr, a)
    if axis is None:
        return tr.wrap(tr.prims.reshape(x._v(), (x.size,))), 0
    if x.ndim == 0:
        raise np.exceptions.AxisError(axis, 0)
    return x, normalize_axis(axis, x.ndim)


def _sort_like(name: str):
    def impl(tr, a, axis=-1, kind=None, order=None, *, stable=None):
        if order is not None:
            raise Unsupported(f"{name} with order= (structured dtypes)")
        x, ax = _sort_input(tr, a, axis)
        return call_routine(tr, name, [x], {"axis": ax, "kind": kind, "stable": stable})
    return impl


rule(np.sort)(_sort_like("np.sort"))
rule(np.argsort)(_sort_like("np.argsort"))


def _partition_like(name: str):
    def impl(tr, a, kth, axis=-1, kind="introselect", order=None):
        if order is not None:
            raise Unsupported(f"{name} with order= (structured dtypes)")
        x, ax = _sort_input(tr, a, axis)
        k = _static(name, "kth", kth)
        if isinstance(k, float) or (isinstance(k, tuple) and any(isinstance(i, float) for i in k)):
            raise TypeError("Partition index must be integer")
        # numpy checks kth against the real axis length: on a vector of it
        n = x.shape[ax]
        np.partition(np.zeros(n, x.dtype), k, kind=kind)
        dt = x.dtype if name == "np.partition" else _I64
        return call_routine(tr, name, [x], {"kth": k, "axis": ax, "kind": kind},
                            known=(x.shape, dt))
    return impl


rule(np.partition)(_partition_like("np.partition"))
rule(np.argpartition)(_partition_like("np.argpartition"))


@rule(np.searchsorted)
def searchsorted(tr, a, v, side="left", sorter=None):
    arrays = [strong(tr, a), strong(tr, v)]
    if sorter is not None:
        arrays.append(strong(tr, sorter))
    return call_routine(tr, "np.searchsorted", arrays, {"side": side})


# ---- np.linalg ---------------------------------------------------------------------
def _linalg(name: str, n_arrays: int, *keys: str):
    """A rule for `np.linalg.<name>(arrays..., **static keywords)`."""
    full = f"np.linalg.{name}"

    def impl(tr, *args, **kw):
        if len(args) < n_arrays:
            raise TypeError(f"{name}() missing required positional arguments")
        arrays = [strong(tr, a) for a in args[:n_arrays]]
        extra = dict(zip(keys, args[n_arrays:]))
        if len(args) - n_arrays > len(keys):
            raise TypeError(f"{name}() takes at most {n_arrays + len(keys)} positional arguments")
        for k in kw:
            if k not in keys:
                raise TypeError(f"{name}() got an unexpected keyword argument '{k}'")
        config = _given(**extra, **kw)
        for k, v in config.items():
            if isinstance(v, (TracedArray, np.ndarray)) and np.ndim(v):
                raise Unsupported(f"{full}: {k}= as an array")
        return call_routine(tr, full, arrays, config)

    impl.__name__ = name
    return impl


_norm_routine = _linalg("norm", 1, "ord", "axis", "keepdims")

# from this many elements the whole array's 2-norm stays numpy's: its BLAS
# dot (OpenBLAS's ddot, on two threads) beat our sum of squares on the
# 2-vCPU Zen 3 VM (300x500 float64 12-15 us against 19-21, 1000^2 77-84
# against 98-148), below it the call out costs more (16x32x64: 3.6 us, the
# fused kernel 4.8, the routine 9.0)
NORM_BLAS_SIZE = 1 << 17

# the norms numpy computes as ufuncs and reductions (its own steps: _norm_steps)
_VECTOR_ORDS = (None, 2, 1, 0, np.inf, -np.inf)
_MATRIX_ORDS = (None, "fro", "f", 1, -1, np.inf, -np.inf)


@rule(np.linalg.norm)
def norm(tr, x, ord=None, axis=None, keepdims=False):
    """numpy's own steps where they are ufuncs and reductions (the 2-norm
    as the sum of squares, the 1-, max- and p-norms, the Frobenius and
    induced 1/inf matrix norms, `_norm_steps`): one fused kernel instead of
    a call out. The routine (LAPACK's SVD norms; complex, float16 and long
    double inputs; whatever numpy rejects, which the routine's oracle
    raises as numpy does) and any norm differentiated (its derivative rule
    is the routine's: 0 at 0) stay `np.linalg.norm`."""
    if axis is not None and not isinstance(axis, (tuple, TracedArray, np.ndarray)):
        try:  # (numpy's own conversion: a list is its TypeError)
            axis = int(axis)
        except Exception as e:
            raise TypeError("'axis' must be None, an integer or a tuple of integers") from e
    a = strong(tr, x)
    o = _static("np.linalg.norm", "ord", ord)
    ax = _static("np.linalg.norm", "axis", axis)
    if (tr.grad_regions or a.dtype.kind not in "biuf"
            or a.dtype in (np.dtype(np.float16), np.dtype(np.longdouble))
            or isinstance(keepdims, (TracedArray, np.ndarray))):
        return _norm_routine(tr, x, ord, axis, keepdims)
    steps = _norm_steps(a.ndim, o, ax)
    if steps is None or (_whole_2_norm(a.ndim, o, ax) and a.dtype.kind == "f"
                         and type(a.size) is int and a.size >= NORM_BLAS_SIZE):
        return _norm_routine(tr, x, ord, axis, keepdims)
    if a.dtype.kind != "f":
        a = a.astype(np.float64)
    return steps(a, bool(keepdims))


def _whole_2_norm(nd: int, ord, axis) -> bool:
    """numpy's fast path: the 2-norm (Frobenius) of the whole array, its
    dot product with itself."""
    return axis is None and (ord is None or (ord in ("f", "fro") and nd == 2)
                             or (ord == 2 and nd == 1))


def _norm_steps(nd: int, ord, axis):
    """numpy.linalg.norm's computation for these static arguments, as a
    function of (x, keepdims) over traced values, or None where numpy takes
    another path (an SVD) or raises."""
    if _whole_2_norm(nd, ord, axis):
        def whole(x, keepdims):  # numpy: sqrt(x.ravel("K").dot(x)), a sum of squares
            r = np.sqrt(np.add.reduce(x * x, axis=None))
            return np.reshape(r, (1,) * nd) if keepdims and nd else r
        return whole
    if axis is None:
        axis = tuple(range(nd))
    elif isinstance(axis, int) and not isinstance(axis, bool):
        axis = (axis,)
    if not (isinstance(axis, tuple) and all(type(a) is int for a in axis)
            and all(-nd <= a < nd for a in axis)):
        return None
    if isinstance(ord, str) and len(axis) == 1:
        return None
    if len(axis) == 1:
        if ord == np.inf:
            return lambda x, k: np.abs(x).max(axis=axis, keepdims=k, initial=0)
        if ord == -np.inf:
            return lambda x, k: np.abs(x).min(axis=axis, keepdims=k)
        if ord == 0:
            return lambda x, k: (x != 0).astype(x.dtype).sum(axis=axis, keepdims=k)
        if ord == 1:
            return lambda x, k: np.add.reduce(np.abs(x), axis=axis, keepdims=k)
        if ord is None or ord == 2:
            return lambda x, k: np.sqrt(np.add.reduce(x * x, axis=axis, keepdims=k))
        if not isinstance(ord, (int, float)):
            return None

        def p_norm(x, keepdims):
            r = np.add.reduce(np.abs(x) ** ord, axis=axis, keepdims=keepdims)
            return r ** np.reciprocal(ord, dtype=r.dtype)
        return p_norm
    if len(axis) != 2 or ord not in _MATRIX_ORDS:
        return None
    row, col = (a % nd for a in axis)
    if row == col:
        return None

    def matrix(x, keepdims):
        if ord in (None, "fro", "f"):
            r = np.sqrt(np.add.reduce(x * x, axis=(row, col)))
        elif ord in (1, -1):  # the largest / smallest column sum
            s = np.add.reduce(np.abs(x), axis=row)
            c = col - 1 if col > row else col
            r = s.max(axis=c, initial=0) if ord == 1 else s.min(axis=c)
        else:  # the largest / smallest row sum
            s = np.add.reduce(np.abs(x), axis=col)
            w = row - 1 if row > col else row
            r = s.max(axis=w, initial=0) if ord == np.inf else s.min(axis=w)
        if keepdims:
            shape = list(x.shape)
            shape[row] = shape[col] = 1
            r = np.reshape(r, shape)
        return r
    return matrix
rule(np.linalg.solve)(_linalg("solve", 2))
rule(np.linalg.inv)(_linalg("inv", 1))
rule(np.linalg.det)(_linalg("det", 1))
rule(np.linalg.slogdet)(_linalg("slogdet", 1))
rule(np.linalg.cholesky)(_linalg("cholesky", 1, "upper"))
rule(np.linalg.qr)(_linalg("qr", 1, "mode"))
rule(np.linalg.svd)(_linalg("svd", 1, "full_matrices", "compute_uv", "hermitian"))
rule(np.linalg.eigh)(_linalg("eigh", 1, "UPLO"))
rule(np.linalg.eigvalsh)(_linalg("eigvalsh", 1, "UPLO"))
rule(np.linalg.pinv)(_linalg("pinv", 1, "rcond", "hermitian", "rtol"))
rule(np.linalg.matrix_rank)(_linalg("matrix_rank", 1, "tol", "hermitian", "rtol"))

_lstsq = _linalg("lstsq", 2, "rcond")


@rule(np.linalg.lstsq)
def lstsq(tr, a, b, rcond=None):
    x = strong(tr, a)
    if x.ndim == 2 and x.shape[0] > x.shape[1]:
        raise Unsupported("np.linalg.lstsq with more rows than columns: the residuals' shape "
                          "depends on the rank (data)")
    return _lstsq(tr, x, b, rcond=rcond)


# ---- np.fft: the transforms with real results of real input ----------------------
def _fft_1d_args(tr, full: str, a, n, axis, out):
    """A 1-d transform's (input, normalized axis, static n), checked as numpy checks them."""
    if out is not None:
        raise Unsupported(f"{full} with out=")
    x = strong(tr, a)
    if x.ndim == 0:
        raise np.exceptions.AxisError(axis, 0)
    return x, normalize_axis(_static(full, "axis", axis), x.ndim), _static(full, "n", n)


def _fft_1d(name: str):
    full = f"np.fft.{name}"

    def impl(tr, a, n=None, axis=-1, norm=None, out=None):
        x, ax, n = _fft_1d_args(tr, full, a, n, axis, out)
        if n is None:
            n = 2 * (x.shape[ax] - 1)
        return call_routine(tr, full, [x], {"n": n, "axis": ax, "norm": norm}, size_keys=("n",))

    impl.__name__ = name
    return impl


def _fft_nd(name: str, default_axes):
    full = f"np.fft.{name}"

    def impl(tr, a, s=None, axes=default_axes, norm=None, out=None):
        if out is not None:
            raise Unsupported(f"{full} with out=")
        x = strong(tr, a)
        s, axes = _static(full, "s", s), _static(full, "axes", axes)
        if s is None:
            axes = tuple(range(x.ndim)) if axes is None else axes
            if not axes:
                raise ValueError("at least one axis must be transformed")
            axs = [normalize_axis(ax, x.ndim) for ax in axes]
            s = tuple(x.shape[ax] for ax in axs[:-1]) + (2 * (x.shape[axs[-1]] - 1),)
        return call_routine(tr, full, [x], {"s": s, "axes": axes, "norm": norm},
                            size_keys=("s",))

    impl.__name__ = name
    return impl


def _fft_dtype(full: str, dtype: np.dtype) -> np.dtype:
    """The result dtype numpy gives for an input dtype (complex64 for float32
    in numpy 2), from a transform of two zeros."""
    base = full.rstrip("n2") if full.endswith(("fft2", "fftn")) else full  # the 1-d transform
    return np.asarray(routines.ROUTINES[base](np.zeros(2, dtype))).dtype


def _fft_c1d(name: str, half: bool):
    """fft, ifft (`half`: rfft, ihfft, whose axis gets n//2 + 1)."""
    full = f"np.fft.{name}"

    def impl(tr, a, n=None, axis=-1, norm=None, out=None):
        x, ax, n = _fft_1d_args(tr, full, a, n, axis, out)
        size = x.shape[ax] if n is None else n
        if type(size) is not int:
            raise Unsupported(f"{full} along a dim of symbolic size")
        if size < 1:
            raise ValueError(f"Invalid number of FFT data points ({size}) specified.")
        if half and x.dtype.kind == "c":
            np.fft.rfft(np.zeros(2, x.dtype))  # numpy's own TypeError for complex input
        shape = x.shape[:ax] + (size // 2 + 1 if half else size,) + x.shape[ax + 1:]
        return call_routine(tr, full, [x], {"n": n, "axis": ax, "norm": norm},
                            known=(shape, _fft_dtype(full, x.dtype)))

    impl.__name__ = name
    return impl


def _fft_cnd(name: str, default_axes, half: bool):
    """fft2, ifft2, fftn, ifftn (`half`: rfft2, rfftn)."""
    full = f"np.fft.{name}"

    def impl(tr, a, s=None, axes=default_axes, norm=None, out=None):
        if out is not None:
            raise Unsupported(f"{full} with out=")
        x = strong(tr, a)
        s, axes = _static(full, "s", s), _static(full, "axes", axes)
        if s is None:
            axs = list(range(x.ndim)) if axes is None else list(axes)
            sizes = [x.shape[normalize_axis(ax, x.ndim)] for ax in axs]
        else:
            sizes = list(s)
            axs = list(range(-len(sizes), 0)) if axes is None else list(axes)
            if len(sizes) != len(axs):
                raise ValueError("Shape and axes have different lengths.")
        if not axs:
            raise Unsupported(f"{full} over no axes")
        axs = [normalize_axis(ax, x.ndim) for ax in axs]
        if any(type(n) is not int for n in sizes):
            raise Unsupported(f"{full} along a dim of symbolic size")
        if half and x.dtype.kind == "c":
            np.fft.rfft(np.zeros(2, x.dtype))  # numpy's own TypeError for complex input
        shape = list(x.shape)
        for ax, n in zip(axs, sizes):
            shape[ax] = n
        if half:
            shape[axs[-1]] = sizes[-1] // 2 + 1
        return call_routine(tr, full, [x], {"s": s, "axes": axes, "norm": norm},
                            known=(tuple(shape), _fft_dtype(full, x.dtype)))

    impl.__name__ = name
    return impl


@rule(np.real)
def real(tr, val):
    return strong(tr, val).real if isinstance(val, TracedArray) else np.real(val)


@rule(np.imag)
def imag(tr, val):
    return strong(tr, val).imag if isinstance(val, TracedArray) else np.imag(val)


rule(np.fft.fft)(_fft_c1d("fft", False))
rule(np.fft.ifft)(_fft_c1d("ifft", False))
rule(np.fft.rfft)(_fft_c1d("rfft", True))
rule(np.fft.ihfft)(_fft_c1d("ihfft", True))
rule(np.fft.fft2)(_fft_cnd("fft2", (-2, -1), False))
rule(np.fft.ifft2)(_fft_cnd("ifft2", (-2, -1), False))
rule(np.fft.rfft2)(_fft_cnd("rfft2", (-2, -1), True))
rule(np.fft.fftn)(_fft_cnd("fftn", None, False))
rule(np.fft.ifftn)(_fft_cnd("ifftn", None, False))
rule(np.fft.rfftn)(_fft_cnd("rfftn", None, True))
rule(np.fft.irfft)(_fft_1d("irfft"))
rule(np.fft.hfft)(_fft_1d("hfft"))
rule(np.fft.irfft2)(_fft_nd("irfft2", (-2, -1)))
rule(np.fft.irfftn)(_fft_nd("irfftn", None))
