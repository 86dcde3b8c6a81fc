"""What every example prints: the function, the IR lowering captured for it,
the `lowering.explain` report, and a check against numpy run eagerly on a copy
of the same arguments (results and in-place effects on the arguments)."""

from __future__ import annotations

import copy
import inspect

import numpy as np

import lowering


def _max_abs_err(got, want) -> float:
    if want is None or got is None:
        return 0.0 if got is want else float("inf")
    g, w = np.asarray(got, np.float64), np.asarray(want, np.float64)
    return float(np.max(np.abs(g - w), initial=0.0))


def _close(got, want, rtol: float, atol: float) -> bool:
    if want is None or got is None:
        return got is want
    return (np.shape(got) == np.shape(want) and np.asarray(got).dtype == np.asarray(want).dtype
            and np.allclose(got, want, rtol=rtol, atol=atol, equal_nan=True))


def show(fn, *args, rtol: float = 1e-4, atol: float = 1e-5) -> bool:
    """Compile fn, run it on a copy of args, print what happened; True when the
    result and the arguments afterwards match numpy's."""
    print(f"=== {fn.__name__} " + "=" * max(0, 66 - len(fn.__name__)))
    print(inspect.getsource(fn))

    eager_args, compiled_args = copy.deepcopy(args), copy.deepcopy(args)
    want = fn(*eager_args)
    cf = lowering.compile(fn)
    got = cf(*compiled_args)

    print("--- captured tensor-level IR (python -m lowering.dump prints the same)")
    for i, seg in enumerate(cf.last_trace.segments):
        if len(cf.last_trace.segments) > 1:
            print(f"// graph {i}")
        print(seg.module)
    print("--- lowering.explain")
    print(lowering.explain(fn)(*copy.deepcopy(args)))

    print("--- check against numpy")
    ok = _close(got, want, rtol, atol)
    print(f"result: max abs error {_max_abs_err(got, want):.3g}, "
          f"allclose(rtol={rtol:g}, atol={atol:g}): {ok}")
    for i, (a0, ae, ac) in enumerate(zip(args, eager_args, compiled_args)):
        if isinstance(a0, np.ndarray):
            changed = not np.array_equal(a0, ae, equal_nan=True)
            same = _close(ac, ae, rtol, atol)
            print(f"argument {i}: numpy {'mutates' if changed else 'leaves'} it; compiled "
                  f"call {'leaves the same values' if same else 'DIFFERS'}"
                  + (f" (max abs error {_max_abs_err(ac, ae):.3g})" if changed else ""))
            ok = ok and same
    again = cf(*copy.deepcopy(args))
    ok = ok and _close(again, want, rtol, atol)
    print(f"second call: {dict(cf.stats)}")
    print("OK" if ok else "MISMATCH")
    return ok
