"""Public testing helpers: compare a compiled function against numpy itself.

`assert_matches_numpy(fn, *args)` runs `fn` eagerly and compiled on separate
copies of the arguments and checks results and in-place effects: same type
(numpy scalar vs array), dtype, shape, NaN positions, signed zeros, values
within the tolerance for the dtype (TOLERANCES), and the same exception type
when numpy raises."""

from __future__ import annotations

import copy
import warnings
from typing import Any

import numpy as np

from . import pytree
from .api import compile as _compile

# Relative tolerance per dtype; ufunc results may differ from numpy's libm by a
# few ULPs, reductions by an error that grows with n (scaled in `close`).
TOLERANCES: dict[np.dtype, float] = {
    np.dtype(np.float16): 1e-3,
    np.dtype(np.float32): 4 * float(np.finfo(np.float32).eps),
    np.dtype(np.float64): 4 * float(np.finfo(np.float64).eps),
}


def _copy(x: Any) -> Any:
    return copy.deepcopy(x)


def assert_same_value(got: Any, want: Any, rtol: float | None = None, what: str = "result") -> None:
    if isinstance(want, (np.ndarray, np.generic)):
        assert type(got) is type(want), f"{what}: type {type(got).__name__} != numpy's {type(want).__name__}"
        assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != numpy's {want.dtype}"
        assert np.shape(got) == np.shape(want), f"{what}: shape {np.shape(got)} != numpy's {np.shape(want)}"
        g, w = np.asarray(got), np.asarray(want)
        if w.dtype.kind in "fc":
            tol = TOLERANCES.get(w.dtype, 0.0) if rtol is None else rtol
            assert np.array_equal(np.isnan(g), np.isnan(w)), f"{what}: NaN positions differ\n got={g}\nwant={w}"
            fin = np.isfinite(w)
            assert np.array_equal(g[~fin & ~np.isnan(w)], w[~fin & ~np.isnan(w)]), f"{what}: infinities differ"
            if tol == 0.0:
                ok = g[fin] == w[fin]
            else:
                ok = np.abs(g[fin].astype(np.float64) - w[fin]) <= tol * np.abs(w[fin].astype(np.float64)) + np.finfo(w.dtype).tiny
            assert np.all(ok), f"{what}: values differ beyond rtol={tol}\n got={g}\nwant={w}"
            zero = (w == 0) & (g == 0)
            if tol == 0.0:
                assert np.array_equal(np.signbit(g[zero]), np.signbit(w[zero])), f"{what}: signed zeros differ"
        else:
            assert np.array_equal(g, w), f"{what}: values differ\n got={g}\nwant={w}"
        return
    if isinstance(want, (tuple, list, dict)):
        gl, gt = pytree.flatten(got)
        wl, wt = pytree.flatten(want)
        assert gt == wt, f"{what}: structure {gt} != numpy's {wt}"
        for i, (a, b) in enumerate(zip(gl, wl)):
            assert_same_value(a, b, rtol, f"{what}[{i}]")
        return
    assert type(got) is type(want), f"{what}: type {type(got).__name__} != {type(want).__name__}"
    if isinstance(want, float) and np.isnan(want):
        assert np.isnan(got)
    else:
        assert got == want, f"{what}: {got!r} != {want!r}"


def assert_matches_numpy(fn, *args, rtol: float | None = None, compiled=None, **kwargs) -> Any:
    """Run fn eagerly and compiled on copies of args; assert equal results and
    equal effects on the arguments. Returns the compiled result."""
    cf = compiled if compiled is not None else _compile(fn)
    eager_args, eager_kwargs = _copy(args), _copy(kwargs)
    comp_args, comp_kwargs = _copy(args), _copy(kwargs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            want = fn(*eager_args, **eager_kwargs)
        except Exception as e:  # numpy rejects the input: so must we
            try:
                cf(*comp_args, **comp_kwargs)
            except type(e):
                return None
            except Exception as e2:
                raise AssertionError(f"numpy raised {type(e).__name__}({e}); compiled raised "
                                     f"{type(e2).__name__}({e2})") from e2
            raise AssertionError(f"numpy raised {type(e).__name__}({e}); compiled did not")
        got = cf(*comp_args, **comp_kwargs)
    assert_same_value(got, want, rtol)
    assert_same_value(comp_args, eager_args, rtol, "arguments after the call")
    assert_same_value(comp_kwargs, eager_kwargs, rtol, "keyword arguments after the call")
    return got
