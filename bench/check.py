"""The correctness check of every peer's output against the float64
reference: |out - ref| <= rtol·|ref| + atol, atol = 1e-6·max|ref| (per
output), and the output's dtype and shape equal to numpy eager's."""

from __future__ import annotations

import numpy as np

RTOL = 1e-4
ATOL_FRACTION = 1e-6


def check(outs: tuple, refs: tuple, expected: tuple) -> dict:
    """`expected`: numpy eager's outputs, for dtype and shape. Returns ok,
    worst (largest err/bound over all elements; <= 1 passes) and problems."""
    problems: list[str] = []
    worst = 0.0
    if len(outs) != len(refs):
        return {
            "ok": False,
            "worst": None,
            "problems": [f"{len(outs)} outputs, expected {len(refs)}"],
        }
    for i, (o, r, e) in enumerate(zip(outs, refs, expected)):
        o = np.asarray(o)
        if o.shape != e.shape:
            problems.append(f"output {i}: shape {o.shape}, expected {e.shape}")
            continue
        if o.dtype != e.dtype:
            problems.append(f"output {i}: dtype {o.dtype}, expected {e.dtype}")
        atol = ATOL_FRACTION * float(np.max(np.abs(r))) if r.size else 0.0
        err = np.abs(o.astype(np.float64) - r)
        bound = RTOL * np.abs(r) + atol
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(bound > 0, err / bound, np.where(err > 0, np.inf, 0.0))
        w = float(np.max(ratio)) if ratio.size else 0.0
        if not np.all(np.isfinite(o)):
            problems.append(f"output {i}: {int(np.sum(~np.isfinite(o)))} non-finite values")
            w = float("inf")
        elif w > 1.0:
            at = np.unravel_index(int(np.argmax(ratio)), ratio.shape)
            problems.append(
                f"output {i}: {int(np.sum(ratio > 1))} elements out of tolerance, "
                f"worst at {tuple(int(a) for a in at)}: {o[at]!r} vs {r[at]!r} "
                f"({w:.3g}x the bound)"
            )
        worst = max(worst, w)
    return {"ok": not problems, "worst": worst, "problems": problems}
