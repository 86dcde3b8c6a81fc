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


def _ufunc(*arrays, ufunc: str, args: tuple):
    """`getattr(np, ufunc)` on the arrays ("@" in `args`, in order) and the
    Python scalars the call had (("scalar", v), ("complex", re, im)): a ufunc
    on complex values, which generated kernels do not compute."""
    it = iter(arrays)
    vals = [next(it) if a == "@" else (complex(a[1], a[2]) if a[0] == "complex" else a[1])
            for a in args]
    return getattr(np, ufunc)(*vals)


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


def results_of(value: Any) -> list[Any]:
    """numpy's result as the list of the op's results."""
    return list(value) if isinstance(value, tuple) else [value]


def call(name: str, arrays: list, config: dict[str, Any]) -> list[Any]:
    return results_of(ROUTINES[name](*arrays, **config))
