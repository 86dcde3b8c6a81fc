"""The Triton emitter's kernels on a real CUDA device (torch tensors), against
numpy: the programs of tests/codegen/test_triton_emit.py on hypothesis inputs
(NaN, ±Inf, -0.0, empty and size-1 dims) and at the benchmark's sizes, and
every ufunc rule on every pair of edge values of each dtype — here through
libdevice and the GPU's own division, square root and conversions, where
the CPU-side tests run numpy's functions in Triton's interpreter.

Marked `gpu`: without torch or a CUDA device the module is skipped (the one
skip of the suite, `-m "not gpu"` leaves it out); run it with
`python -m pytest -m gpu tests/gpu`."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given


from tests.gpu.marks import GPU  # noqa: E402

pytestmark = GPU

from tests.codegen.test_triton_emit import (  # noqa: E402
    PROGRAMS,
    UFUNC_CASES,
    U,
    _check,
    _edge_pairs,
    _ufunc_fn,
    assert_same_value,
    eager,
    inputs,
    kernel_level,
    min_row,
    _spec_of,
)
from lowering.backends import triton_launch as TL  # noqa: E402


def on_gpu(fn, args: list[np.ndarray]) -> list[np.ndarray]:
    return TL.run_module(kernel_level(fn, _spec_of(args)), args, device="cuda")


def _program_test(name: str):
    fn, spec, kind = PROGRAMS[name]

    @given(inputs(spec, kind, min_row(name)))
    def test(args):
        _check(name, on_gpu(fn, args), eager(fn, args), args)
    return test


for _name in PROGRAMS:
    globals()[f"test_gpu_{_name.replace('-', '_')}_matches_numpy"] = _program_test(_name)
del _name


# the benchmark's shapes (BENCH.md), random normal data
BIG = {
    "layernorm": "f32[4096,4096] f32[4096] f32[4096]",
    "softmax": "f32[4096,4096]",
    "rmsnorm": "f32[4096,4096] f32[4096]",
    "gelu": "f32[4096,4096] f32[4096]",
    "black-scholes": "f32[1048576] f32[1048576] f32[1048576]",
    "softmax-long-rows": "f32[64,16384]",
    "colsum-ordered": "f32[64,300]",  # ordered kernels: columns per program, rows in order
    "cumsum-ordered": "f64[64,300]",
}


@pytest.mark.parametrize("name", BIG)
def test_gpu_benchmark_shapes_match_numpy(name):
    from lowering import dump

    fn = PROGRAMS[name][0]
    args, _ = dump.make_inputs(BIG[name], seed=1)
    if name == "black-scholes":  # S, K, T of the benchmark's ranges
        rng = np.random.default_rng(1)
        n = args[0].shape[0]
        args = [rng.uniform(5, 30, n).astype(np.float32), rng.uniform(1, 100, n).astype(np.float32),
                rng.uniform(0.25, 10, n).astype(np.float32)]
    _check(name, on_gpu(fn, args), eager(fn, args), args)


@pytest.mark.parametrize("name,dt", UFUNC_CASES, ids=[f"{n}-{d}" for n, d in UFUNC_CASES])
def test_gpu_every_ufunc_rule_matches_numpy_on_edge_values(name, dt):
    u = U.UFUNCS[name]
    args = _edge_pairs(dt, u.nin)
    fn = _ufunc_fn(name, u.nin)
    (want,) = eager(fn, args)
    (got,) = on_gpu(fn, args)
    rtol = 0.0 if u.exactness == "exact" else None
    try:
        assert_same_value(got, want, rtol=rtol, what=f"np.{name} on {dt} (GPU)")
    except AssertionError as e:
        raise AssertionError(f"{e}\n{_mismatches(args, got, want, rtol)}") from None


def _mismatches(args, got, want, rtol, n: int = 12) -> str:
    """The inputs, result and numpy's at the first n positions that differ
    (NaN positions, infinities, signed zeros or values beyond rtol)."""
    from lowering.testing import TOLERANCES

    g, w = np.asarray(got), np.asarray(want)
    tol = TOLERANCES.get(w.dtype, 0.0) if rtol is None else rtol
    with np.errstate(all="ignore"):
        bad = (np.isnan(g) != np.isnan(w)) | (np.signbit(g) != np.signbit(w)) & (g == 0) & (w == 0)
        fin = np.isfinite(w) & np.isfinite(g)
        diff = np.abs(g.astype(np.float64) - w) > tol * np.abs(w.astype(np.float64)) + \
            float(np.finfo(w.dtype).tiny)
        bad |= (np.isinf(w) | np.isinf(g)) & (g != w) | fin & diff
    idx = np.flatnonzero(bad)[:n]
    rows = [", ".join(repr(a.ravel()[i].item()) for a in args) + f" -> {g.ravel()[i].item()!r}, "
            f"numpy {w.ravel()[i].item()!r}" for i in idx]
    return f"{int(bad.sum())} positions differ; first ones (inputs -> got, numpy):\n  " + \
        "\n  ".join(rows)
