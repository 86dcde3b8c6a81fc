"""The sign of a zero that a sum of products gives is the summing loop's
choice: a loop that adds the products into a zeroed output gives +0.0 where
every product is -0.0 (or underflows to -0.0), one that starts from the first
product gives -0.0. numpy's matmul hands such sums to its BLAS, whose kernels
differ by machine and by shape (OpenBLAS's Zen kernels give +0.0; its
SkylakeX small-matrix kernels give -0.0 for a 64x256 @ 256x10 product and
+0.0 at 512^3, and a mix within one 100^3 result), so numpy has no one
answer here. The generated paths — the narrow kernel's reductions, the short
product's fused multiply-adds, the shared pass over a matrix's rows — keep
one rule on every machine: the zeroed output's, +0.0 (each ends its sum with
+ 0.0; a fused multiply-add from +0.0 would leave -0.0 where a product
underflows, 0.5 * -1e-45). So these tests check every value bitwise against
numpy's and every zero for +0.0."""

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


def assert_plus_zeros(got, want):
    """got is numpy's want bitwise but for the sign of its zeros, which are
    all +0.0 (the module's text: numpy's sign there is its BLAS kernel's)."""
    assert not np.signbit(got[got == 0]).any(), "a sum of products gave -0.0"
    assert_same_value(got, want + 0.0, rtol=0.0)  # (+ 0.0: numpy's -0.0 as +0.0)


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
    assert_plus_zeros(got, fn(a, w))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_shared_pass_sums_to_plus_zero(dtype):
    a = np.full((64, 32), 0.5, dtype)
    a[::2] = -0.0
    x = np.full((32, 1), TINY[dtype], dtype)
    with cost_model.forced({"matmul-shared-rows": "generated"}):
        cf = lowering.compile(shared)
        got = cf(a, x)
    assert_plus_zeros(got, shared(a, x))
