"""Matmuls into few columns (N <= passes.lower_to_loop.NARROW_N) over a
contraction longer than SHORT_K can be generated: one kernel over the rows,
the N dot products of a row in one pass (fused multiply-adds into vector
accumulators), joined to the kernel that computes the rows (the MLP's
`relu(X @ W1 + b1) @ W2`). The cost model picks that kernel or BLAS per
shape (tests/passes/test_cost_model.py); here each path is forced, so both
are checked on every shape.

With integer-valued inputs every order of the sum is exact, so results must
equal numpy's bit for bit, NaN and ±Inf placement included; with arbitrary
floats each element must be within the reduction tolerance of the standard
bound |A| @ |B|."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

import lowering
from lowering.testing import TOLERANCES, assert_matches_numpy, examples
from passes import cost_model
from passes.lower_to_loop import NARROW_N, SHORT_K
from tests.codegen.test_short_matmul import _layout, check_within_dot_bound, exact_operands

LAYOUTS = ["C", "F", "T", "strided"]


@st.composite
def cases(draw):
    dt = np.dtype(draw(st.sampled_from([np.float32, np.float64])))
    m = draw(st.sampled_from([0, 1, 3, 64, 257]))
    k = draw(st.sampled_from([SHORT_K + 1, 64, 100, 1024]))
    n = draw(st.integers(1, NARROW_N))
    la, lb = draw(st.sampled_from(LAYOUTS)), draw(st.sampled_from(LAYOUTS))
    consumer = draw(st.sampled_from(["none", "relu-in", "bias-out"]))
    specials = draw(st.booleans())
    return dt, m, k, n, la, lb, consumer, specials, draw(st.integers(0, 2**32 - 1))


CONSUMERS = {
    "none": lambda a, b, c: a @ b,
    "relu-in": lambda a, b, c: np.maximum(a + c[0, 0], 0) @ b,
    "bias-out": lambda a, b, c: a @ b + c[0, : b.shape[1]],
}


def _generated(fn, *args) -> bool:
    ks = lowering.explain(lowering.compile(fn, backend="cpu"))(*args).kernels
    return not any("matmul" in name or name.startswith("blas") for graph in ks for name, _ in graph)


@examples(1.0)
@given(cases())
def test_narrow_matmuls_match_numpy_exactly_on_exact_sums(case):
    dt, m, k, n, la, lb, consumer, specials, seed = case
    rng = np.random.default_rng(seed)
    a, b = exact_operands(rng, dt, m, k, n, specials)
    c = rng.integers(-2, 3, (1, NARROW_N)).astype(dt)
    fn = CONSUMERS[consumer]
    args = (_layout(a, la), _layout(b, lb), c)
    for path in cost_model.PATHS:
        with cost_model.forced({"matmul-narrow": path}):
            # (an F-ordered A, "F" or "T" but for one row, is BLAS's whatever
            # is forced: its rows are not rows in memory, BLAS reads it as it lies)
            f_ordered = args[0].flags.f_contiguous and not args[0].flags.c_contiguous
            assert _generated(fn, *args) == (path == "generated" and not f_ordered), path
            assert_matches_numpy(fn, *args, rtol=0.0, calls=2,
                                 compiled=lowering.compile(fn, backend="cpu"))


@examples(0.5)
@given(cases())
def test_narrow_matmuls_are_within_the_dot_product_bound(case):
    dt, m, k, n, la, lb, _, _, seed = case
    check_within_dot_bound(dt, m, k, n, la, lb, seed)


def test_the_mlp_forward_product_joins_the_hidden_layer_kernel():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((256, 784)).astype(np.float32)
    W1 = (rng.standard_normal((784, 1024)) * 0.05).astype(np.float32)
    b1 = rng.standard_normal(1024).astype(np.float32)
    W2 = rng.standard_normal((1024, 10)).astype(np.float32)

    def fwd(X, W1, b1, W2):
        h = np.maximum(X @ W1 + b1, 0)
        return h @ W2, h

    with cost_model.forced({"matmul-narrow": "generated"}):  # (what the shipped table picks)
        cf = lowering.compile(fwd, backend="cpu")
        ex = lowering.explain(cf)(X, W1, b1, W2)
    names = [name for name, _ in ex.kernels[0]]
    # W2's columns copied into rows once; BLAS for X @ W1; then one kernel
    # writes h and the ten dot products of each of its rows
    assert ex.kernel_count == 3, names
    assert sum("matmul" in n or n.startswith("blas") for n in names) == 1
    logits, h = cf(X, W1, b1, W2)
    want_h = fwd(X, W1, b1, W2)[1]
    np.testing.assert_array_equal(h, want_h)
    want = want_h.astype(np.float64) @ W2.astype(np.float64)
    bound = np.abs(want_h).astype(np.float64) @ np.abs(W2).astype(np.float64)
    assert np.all(np.abs(logits - want) <= TOLERANCES.rtol(np.float32, "reduction", 1024) * bound)
