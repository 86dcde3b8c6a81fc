"""Matmuls with a short contraction (K <= passes.lower_to_loop.SHORT_K) and a
long output row are generated, not BLAS: each output is K fused multiply-adds
in order, computed inside the consumer's kernel (the MLP backward's
`(dlogits @ W2.T) * (h > 0)` is one kernel).

With integer-valued inputs every order of the sum is exact, so results must
equal numpy's bit for bit, NaN and ±Inf placement included; with arbitrary
floats each element must be within the reduction tolerance of the standard
bound |A| @ |B| (the error any K-term dot product may have)."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

import lowering
from lowering.testing import TOLERANCES, assert_matches_numpy, examples
from passes import cost_model
from passes.lower_to_loop import SHORT_K

LAYOUTS = ["C", "F", "T", "strided"]


def _layout(x: np.ndarray, how: str) -> np.ndarray:
    """x's values in another memory layout ("T": the transpose of a
    C-contiguous array, as `W.T` is)."""
    if how == "F":
        return np.asfortranarray(x)
    if how == "T":
        return np.ascontiguousarray(x.T).T
    if how == "strided":
        base = np.zeros((x.shape[0] * 2, x.shape[1] * 3), x.dtype)
        out = base[::2, ::3]
        out[...] = x
        return out
    return x


@st.composite
def cases(draw):
    dt = np.dtype(draw(st.sampled_from([np.float32, np.float64])))
    m = draw(st.sampled_from([1, 3, 64, 257]))
    k = draw(st.integers(1, SHORT_K))
    n = draw(st.sampled_from([16, 17, 100, 1024]))
    la, lb = draw(st.sampled_from(LAYOUTS)), draw(st.sampled_from(LAYOUTS))
    consumer = draw(st.sampled_from(["none", "mask", "bias"]))
    specials = draw(st.booleans())
    return dt, m, k, n, la, lb, consumer, specials, draw(st.integers(0, 2**32 - 1))


CONSUMERS = {
    "none": lambda a, b, h: a @ b,
    "mask": lambda a, b, h: (a @ b) * (h > 0),
    "bias": lambda a, b, h: np.maximum(a @ b + h[0], 0),
}


def exact_operands(rng, dt, m: int, k: int, n: int, specials: bool):
    """Integer-valued a (m, k) and b (k, n), so that every order of a dot
    product's sum is exact; with `specials`, a NaN in a and ±Inf in b."""
    a = rng.integers(-8, 9, (m, k)).astype(dt)
    b = rng.integers(-8, 9, (k, n)).astype(dt)
    if specials and a.size:  # NaN and infinities reach whole rows / columns of the result
        a.flat[rng.integers(0, a.size)] = np.nan
        b.flat[rng.integers(0, b.size)] = np.inf
        b.flat[rng.integers(0, b.size)] = -np.inf
    return a, b


def check_within_dot_bound(dt, m: int, k: int, n: int, la: str, lb: str, seed: int) -> None:
    """`a @ b` compiled, on arbitrary floats in the given layouts: each element
    within the reduction tolerance of the standard bound |A| @ |B|."""
    rng = np.random.default_rng(seed)
    a = (rng.standard_normal((m, k)) * 10.0 ** rng.integers(-3, 4, (m, k))).astype(dt)
    b = (rng.standard_normal((k, n)) * 10.0 ** rng.integers(-3, 4, (k, n))).astype(dt)
    want = a.astype(np.float64) @ b.astype(np.float64)
    bound = np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64)
    for path in cost_model.PATHS:  # generated or BLAS, whichever the shape's class is
        with cost_model.forced({"matmul-short": path, "matmul-narrow": path}):
            got = lowering.compile(lambda a, b: a @ b, backend="cpu")(_layout(a, la), _layout(b, lb))
        assert got.dtype == dt and got.shape == (m, n) and got.flags.c_contiguous
        assert np.all(np.abs(got - want) <= TOLERANCES.rtol(dt, "reduction", k) * bound), path


@examples(1.0)
@given(cases())
def test_short_matmuls_match_numpy_exactly_on_exact_sums(case):
    dt, m, k, n, la, lb, consumer, specials, seed = case
    rng = np.random.default_rng(seed)
    a, b = exact_operands(rng, dt, m, k, n, specials)
    h = rng.integers(-2, 3, (m, n)).astype(dt)
    fn = CONSUMERS[consumer]
    for path in cost_model.PATHS:  # (the cost model picks one per shape: each is checked)
        with cost_model.forced({"matmul-short": path}):
            ks = lowering.explain(lowering.compile(fn, backend="cpu"))(a, b, h).kernels
            blas = any("matmul" in name or name.startswith("blas") for g in ks for name, _ in g)
            assert blas == (path == "library"), path
            assert_matches_numpy(fn, _layout(a, la), _layout(b, lb), h, rtol=0.0, calls=2,
                                 compiled=lowering.compile(fn, backend="cpu"))


@examples(0.5)
@given(cases())
def test_short_matmuls_are_within_the_dot_product_bound(case):
    dt, m, k, n, la, lb, _, _, seed = case
    check_within_dot_bound(dt, m, k, n, la, lb, seed)


def test_the_mlp_backward_product_is_fused_with_the_relu_mask():
    rng = np.random.default_rng(0)
    dl = rng.standard_normal((256, 10)).astype(np.float32)
    W2 = rng.standard_normal((1024, 10)).astype(np.float32)
    h = rng.standard_normal((256, 1024)).astype(np.float32)

    def dh_pre(dl, W2, h):
        return (dl @ W2.T) * (h > 0)

    with cost_model.forced({"matmul-short": "generated"}):  # (what the shipped table picks)
        cf = lowering.compile(dh_pre, backend="cpu")
        ex = lowering.explain(cf)(dl, W2, h)
    # W2.T copied once into rows (so they load as vectors), then one kernel
    assert ex.kernel_count == 2
    names = [ops for _, ops in ex.kernels[0]]
    assert any(any("array.dot" in o for o in ops) and any("compare" in o for o in ops)
               for ops in names)
    assert not any("matmul" in name or name.startswith("blas") for name, _ in ex.kernels[0])
    want = dh_pre(dl, W2, h)
    np.testing.assert_allclose(cf(dl, W2, h), want, rtol=TOLERANCES.rtol(np.float32, "reduction", 10),
                               atol=1e-6 * np.abs(want).max())
