"""The numpy routines behind `array.routine`: one row per routine, its numpy
callable. numpy is both the implementation (the reference backend and the CPU
backend's extern call the very function) and, at capture, the oracle for the
results' shapes and dtypes (`capture/rules/tier2.py` runs it on small dummies).

A row's callable takes the op's operands positionally and its `config` (the
routine's static keyword arguments) as keywords, and returns numpy's result: an
array, a scalar, or a tuple (numpy 2's namedtuples: `SVDResult`, ...) whose
fields become the op's results in order."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np


def _searchsorted(a, v, sorter=None, **kw):
    return np.searchsorted(a, v, sorter=sorter, **kw)


def _ufunc(*arrays, ufunc: str, args: tuple, out=None):
    """`getattr(np, ufunc)` on the arrays ("@" in `args`, in order) and the
    Python scalars the call had (("scalar", v), ("complex", re, im)): a ufunc
    on complex values, which generated kernels do not compute."""
    it = iter(arrays)
    vals = [next(it) if a == "@" else (complex(a[1], a[2]) if a[0] == "complex" else a[1])
            for a in args]
    return getattr(np, ufunc)(*vals, out=out)


def _getitem(z, key: tuple):
    """z[key] for a basic index in `indexing._static_key`'s form, as a copy."""
    def one(k):
        if k[0] == "int":
            return k[1]
        if k[0] == "slice":
            return slice(*k[1:])
        return None if k[0] == "none" else Ellipsis
    return np.array(z[tuple(one(k) for k in key)])


def _part(which: str):
    def part(z):
        return np.ascontiguousarray(getattr(z, which))  # (a view of z's memory in numpy)

    part.__name__ = which
    return part


ROUTINES: dict[str, Callable[..., Any]] = {
    "np.sort": np.sort,
    "np.argsort": np.argsort,
    "np.partition": np.partition,
    "np.argpartition": np.argpartition,
    "np.searchsorted": _searchsorted,
    "np.linalg.norm": np.linalg.norm,
    "np.linalg.solve": np.linalg.solve,
    "np.linalg.inv": np.linalg.inv,
    "np.linalg.det": np.linalg.det,
    "np.linalg.slogdet": np.linalg.slogdet,
    "np.linalg.cholesky": np.linalg.cholesky,
    "np.linalg.qr": np.linalg.qr,
    "np.linalg.svd": np.linalg.svd,
    "np.linalg.eigh": np.linalg.eigh,
    "np.linalg.eigvalsh": np.linalg.eigvalsh,
    "np.linalg.lstsq": np.linalg.lstsq,
    "np.linalg.pinv": np.linalg.pinv,
    "np.linalg.matrix_rank": np.linalg.matrix_rank,
    "np.fft.irfft": np.fft.irfft,
    "np.fft.irfft2": np.fft.irfft2,
    "np.fft.irfftn": np.fft.irfftn,
    "np.fft.hfft": np.fft.hfft,
    "np.fft.fft": np.fft.fft,
    "np.fft.ifft": np.fft.ifft,
    "np.fft.rfft": np.fft.rfft,
    "np.fft.ihfft": np.fft.ihfft,
    "np.fft.fft2": np.fft.fft2,
    "np.fft.ifft2": np.fft.ifft2,
    "np.fft.rfft2": np.fft.rfft2,
    "np.fft.fftn": np.fft.fftn,
    "np.fft.ifftn": np.fft.ifftn,
    "np.fft.rfftn": np.fft.rfftn,
    "np.ufunc": _ufunc,
    "np.real": _part("real"),
    "np.getitem": _getitem,
    "np.imag": _part("imag"),
}


# ---- into a given array ------------------------------------------------------
# Routines that write their one result into an array the caller gives
# (`out=`), as numpy itself does into the one it allocates: where numpy's own
# result dtype is the output's, the call computes the same values (the same
# loop) and spares an allocation and a copy. A row: (input dtypes, config,
# output dtype) -> `call(*inputs, out)`, or None where it cannot.

Into = Callable[..., None]


# a batch of 1-D transforms of this many elements (input or output) or more is
# split by rows over the CPU threads (a Python worker's hand-off costs 40-75 us)
FFT_SPLIT_ELEMENTS = 1 << 18


def _transform(name: str, dtype: np.dtype, config: dict) -> Callable[..., Any]:
    """`fn(x, out=target)` computing numpy's `name` (a 1-D transform) with
    the config's n, axis and norm: the gufunc numpy's `_raw_fft` calls, with
    the arguments it gives it (the same loop: the same values), without the
    wrapper's dispatch and checks (3-4 us a call: a shape it would refuse
    never reaches a program, capture ran numpy on it); the wrapper itself
    where numpy has no such gufunc or the config holds more."""
    fn = ROUTINES[name]
    kind = name.rsplit(".", 1)[1]
    norm = config.get("norm")
    if _pocketfft is None or set(config) - {"n", "axis", "norm"} or norm not in _FFT_NORMS:
        return lambda x, out: fn(x, **config, out=out)
    forward, real = kind in ("fft", "rfft"), kind in ("rfft", "irfft")
    scale = norm if forward else _FFT_NORMS[norm]  # (numpy's `_swap_direction`)
    real_dtype = np.result_type(np.empty(0, dtype).real.dtype, 1.0)
    axis, given = config.get("axis", -1), config.get("n")
    fcts: dict[int, Any] = {}

    def call(x: np.ndarray, out: np.ndarray) -> Any:
        ax = axis % x.ndim  # (numpy's `normalize_axis_index`: capture checked it)
        n = given if given is not None else (x.shape[ax] - 1) * 2 if kind == "irfft" \
            else x.shape[ax]
        if n < 1:  # (numpy's ValueError)
            return fn(x, **config, out=out)
        fct = fcts.get(n)
        if fct is None:
            fct = fcts[n] = (1 if scale in (None, "backward")
                             else np.reciprocal(np.sqrt(n, dtype=real_dtype)) if scale == "ortho"
                             else np.reciprocal(n, dtype=real_dtype))
        uf = (_pocketfft.irfft if not forward else
              (_pocketfft.rfft_n_even if n % 2 == 0 else _pocketfft.rfft_n_odd)) if real \
            else _pocketfft.fft if forward else _pocketfft.ifft
        return uf(x, fct, axes=[(ax,), (), (ax,)], out=out)
    return call


try:  # numpy 2's transforms are gufuncs the wrappers call
    from numpy.fft import _pocketfft_umath as _pocketfft
except ImportError:  # pragma: no cover (numpy's layout changed: the wrappers)
    _pocketfft = None
_FFT_NORMS = {None: "forward", "backward": "forward", "ortho": "ortho", "forward": "backward"}


def _fft_into(name: str, real_out: bool) -> Callable[..., Into | None]:
    """numpy's `_raw_fft` makes a complex result of `result_type(a, 1j)`, a
    real one (irfft) of `result_type(a.real, 1.0)`, and hands it as `out`.
    A big batch of transforms along a later axis runs in row chunks of the
    first, one per thread (`_rows_split`)."""
    def plan(ins: list[np.dtype], config: dict, out: np.dtype) -> Into | None:
        a = np.empty(0, ins[0])
        dtype = np.result_type(a.real.dtype, 1.0) if real_out else np.result_type(a.dtype, 1j)
        if dtype != out:
            return None
        if len(ins) != 1:
            return lambda *xs: ROUTINES[name](*xs[:-1], **config, out=xs[-1])
        fn = _transform(name, ins[0], config)
        axis = config.get("axis", -1)

        def call(x: np.ndarray, target: np.ndarray) -> None:
            if (x.ndim >= 2 and axis % x.ndim != 0
                    and max(x.size, target.size) >= FFT_SPLIT_ELEMENTS
                    and _rows_split(lambda lo, hi: fn(x[lo:hi], target[lo:hi]), x.shape[0])):
                return
            fn(x, target)
        return call
    return plan


def _rows_split(run: Callable[[int, int], Any], rows: int) -> bool:
    """run(lo, hi) over chunks of [0, rows), one per CPU thread, the first on
    the calling thread: numpy's transforms release the GIL. Only under the
    errstate of a compiled program's externs (every category sent to a
    handler, `runtime.errors.Collector`): each chunk collects the
    floating-point errors numpy reports in it, and the caller's handler gets
    them all after. False (nothing run) where there is one thread, fewer
    rows than threads, or another errstate."""
    from runtime import cpu

    n = min(cpu.THREADS, rows)
    if n <= 1 or set(np.geterr().values()) != {"call"}:
        return False
    handler = np.geterrcall()
    bounds = [rows * i // n for i in range(n + 1)]
    seen: list[list] = [[] for _ in range(n)]

    def chunk(i: int) -> None:
        with np.errstate(all="call", call=lambda kind, flag: seen[i].append((kind, flag))):
            run(bounds[i], bounds[i + 1])

    cpu.run_chunks([lambda i=i: chunk(i) for i in range(n)])
    for found in seen:
        for kind, flag in found:
            handler(kind, flag)
    return True


# an operand this many times smaller than the result (a broadcast gain) is
# cast to the loop's dtype once, not chunk by chunk in numpy's buffered loop
PRECAST_RATIO = 4


def _ufunc_into(ins: list[np.dtype], config: dict, out: np.dtype) -> Into | None:
    """The ufunc's result dtype comes from numpy's type resolution (on
    one-element dummies: values and shapes play no part). An operand whose
    dtype is not its loop's (a float gain times a complex spectrum) numpy
    casts as it goes; a small one is cast first (the same cast, the same
    loop: the same values), so the loop reads it as it is."""
    with np.errstate(all="ignore"):
        if np.asarray(_ufunc(*[np.zeros(1, d) for d in ins], **config)).dtype != out:
            return None
    uf = getattr(np, config["ufunc"])
    casts: list[np.dtype | None] = [None] * len(ins)
    if uf.nout == 1:
        try:
            loop = uf.resolve_dtypes(tuple(ins) + (None,) if len(ins) == uf.nin else ())
        except Exception:  # (scalars in the call, or a resolver that cannot say)
            loop = ()
        if len(loop) == len(ins) + 1 and loop[-1] == out:
            casts = [d if d != i else None for i, d in zip(ins, loop)]
    ufunc, args = config["ufunc"], config["args"]
    direct = all(a == "@" for a in args)  # (no Python scalars: numpy's call itself)
    uf = getattr(np, ufunc)
    if direct and all(c is None for c in casts):
        if len(ins) == 2:
            return lambda a, b, target: uf(a, b, out=target)
        return lambda *xs: uf(*xs[:-1], out=xs[-1])

    def call(*arrays) -> None:
        target = arrays[-1]
        xs = [a.astype(c) if c is not None and a.size * PRECAST_RATIO <= target.size else a
              for a, c in zip(arrays, casts)]
        if direct:
            uf(*xs, out=target)
        else:
            _ufunc(*xs, ufunc=ufunc, args=args, out=target)
    return call


def _sort_into(ins: list[np.dtype], config: dict, out: np.dtype) -> Into | None:
    """numpy's `np.sort` copies its input and sorts the copy in place
    (`ndarray.sort`): the same into the given array, whose dtype is the
    input's (the same sequence per lane, the same algorithm: the same
    result, the order of equal keys such as -0.0 and 0.0 included)."""
    if len(ins) != 1 or np.dtype(ins[0]) != out or set(config) - {"axis", "kind", "stable"}:
        return None
    axis, kind, stable = config.get("axis", -1), config.get("kind"), config.get("stable")

    def call(x: np.ndarray, target: np.ndarray) -> None:
        np.copyto(target, x)
        target.sort(axis=axis, kind=kind, stable=stable)
    # numpy consults no errstate in a sort, nor in a copy of one dtype: no
    # flag to collect (`QUIET`)
    setattr(call, QUIET, True)
    return call


# the attribute of a routine's call that numpy reports no IEEE flag from
# (it consults no errstate): it runs without the flags' collector
QUIET = "reports_no_flags"


INTO: dict[str, Callable[[list[np.dtype], dict, np.dtype], Into | None]] = {
    "np.sort": _sort_into,
    "np.fft.fft": _fft_into("np.fft.fft", False),
    "np.fft.ifft": _fft_into("np.fft.ifft", False),
    "np.fft.rfft": _fft_into("np.fft.rfft", False),
    "np.fft.irfft": _fft_into("np.fft.irfft", True),
    "np.ufunc": _ufunc_into,
}


def into(name: str, ins: list[np.dtype], config: dict[str, Any], out: np.dtype) -> Into | None:
    """A call of routine `name` writing its one result into a given array of
    dtype `out` — `call(*inputs, out)` —, or None where it cannot."""
    plan = INTO.get(name)
    return plan(ins, config, out) if plan is not None else None


def results_of(value: Any) -> list[Any]:
    """numpy's result as the list of the op's results."""
    return list(value) if isinstance(value, tuple) else [value]


def call(name: str, arrays: list, config: dict[str, Any]) -> list[Any]:
    return results_of(ROUTINES[name](*arrays, **config))
