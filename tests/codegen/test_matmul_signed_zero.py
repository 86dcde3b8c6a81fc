"""numpy's matmul never returns -0.0: BLAS (and numpy's own loop) add the
products into a zeroed output, so a sum of products that are -0.0, or that
underflow to -0.0, is +0.0. The generated paths — the narrow kernel's
reductions, the short product's fused multiply-adds, the shared pass over a
matrix's rows — fuse multiply-adds from +0.0, where a product that
underflows (0.5 * -1e-45) leaves -0.0: each ends its sum with + 0.0."""

from __future__ import annotations

import numpy as np
import pytest

import lowering
from lowering.testing import assert_same_value
from passes import cost_model


def narrow(a, w):
    return a @ w


def short(a, w):
    return (a @ w) * 2.0


def shared(a, x):
    return a.T @ (a @ x)


TINY = {np.float32: np.float32(-1e-45), np.float64: -5e-324}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("fn,shape_class,a_shape,w_shape", [
    (narrow, "matmul-narrow", (64, 256), (256, 10)),
    (short, "matmul-short", (64, 4), (4, 512)),
])
def test_products_underflowing_to_minus_zero_sum_to_plus_zero(dtype, fn, shape_class, a_shape,
                                                               w_shape):
    a = np.full(a_shape, 0.5, dtype)
    w = np.full(w_shape, TINY[dtype], dtype)
    w[:, ::3] = -0.0  # (exact -0.0 products too)
    with cost_model.forced({shape_class: "generated"}):
        cf = lowering.compile(fn)
        got = cf(a, w)
        paths = [p for ps in lowering.explain(cf)(a, w).paths for p in ps]
    assert any(f"{shape_class}" in p and "(forced)" in p for p in paths), paths
    assert_same_value(got, fn(a, w), rtol=0.0)  # (bitwise: +0.0 everywhere)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_shared_pass_sums_to_plus_zero(dtype):
    a = np.full((64, 32), 0.5, dtype)
    a[::2] = -0.0
    x = np.full((32, 1), TINY[dtype], dtype)
    with cost_model.forced({"matmul-shared-rows": "generated"}):
        cf = lowering.compile(shared)
        got = cf(a, x)
    assert_same_value(got, shared(a, x), rtol=0.0)
