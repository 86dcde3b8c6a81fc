"""The check of a peer's result against numpy's own: per output the same
shape and dtype, and |out - ref| <= rtol·|ref| + rtol·1e-2·max|ref| (rtol
1e-6 for float64 programs, 1e-3 for float32 ones; integers and booleans
must be equal). Equal values (infinities, NaN in the same places) count as
no error."""

from __future__ import annotations

import numpy as np

RTOL_F64, RTOL_F32 = 1e-6, 1e-3
ATOL_FRACTION = 1e-2  # of rtol·max|ref|: the floor for values that cancel to ~0


def as_tuple(out) -> tuple:
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def rtol_of(ref: tuple) -> float:
    """The tolerance of a program: float32's when any output is float32."""
    return RTOL_F32 if any(np.asarray(r).dtype == np.float32 for r in ref) else RTOL_F64


def compare(out, ref) -> dict:
    """ok, max_abs_err, max_rel_err (the error over max|ref| of its output),
    worst (largest err/bound; <= 1 passes), problems."""
    outs, refs = as_tuple(out), as_tuple(ref)
    rtol = rtol_of(refs)
    if len(outs) != len(refs):
        return {"ok": False, "rtol": rtol, "max_abs_err": None, "max_rel_err": None,
                "worst": None, "problems": [f"{len(outs)} outputs, numpy gives {len(refs)}"]}
    problems: list[str] = []
    max_abs = max_rel = worst = 0.0
    for i, (o, r) in enumerate(zip(outs, refs)):
        o, r = np.asarray(o), np.asarray(r)
        if o.shape != r.shape:
            problems.append(f"output {i}: shape {o.shape}, numpy {r.shape}")
            continue
        if o.dtype != r.dtype:
            problems.append(f"output {i}: dtype {o.dtype}, numpy {r.dtype}")
        if r.dtype.kind not in "fc":
            bad = int(np.sum(o != r))
            if bad:
                problems.append(f"output {i}: {bad} of {r.size} values differ")
                worst = np.inf
            continue
        o = o.astype(r.dtype)
        with np.errstate(invalid="ignore"):
            same = (o == r) | (np.isnan(o) & np.isnan(r))
            err = np.where(same, 0.0, np.abs(o - r))
        err = np.where(np.isnan(err), np.inf, err)
        finite = np.abs(r[np.isfinite(r)])
        scale = float(finite.max()) if finite.size else 0.0
        bound = rtol * np.abs(np.where(np.isfinite(r), r, 0)) + rtol * ATOL_FRACTION * scale
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(err == 0, 0.0, err / bound)
        e_abs = float(err.max()) if err.size else 0.0
        w = float(ratio.max()) if ratio.size else 0.0
        max_abs = max(max_abs, e_abs)
        max_rel = max(max_rel, e_abs / scale if scale else (0.0 if e_abs == 0 else np.inf))
        worst = max(worst, w)
        if w > 1.0:
            at = np.unravel_index(int(np.argmax(ratio)), ratio.shape)
            problems.append(
                f"output {i}: {int(np.sum(ratio > 1))} of {r.size} values out of tolerance, "
                f"worst at {tuple(int(a) for a in at)}: {o[at]!r} vs numpy {r[at]!r}")
    return {"ok": not problems, "rtol": rtol, "max_abs_err": max_abs, "max_rel_err": max_rel,
            "worst": worst, "problems": problems}
