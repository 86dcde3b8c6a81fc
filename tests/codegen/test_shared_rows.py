"""A matrix-vector product that contracts over a matrix's rows (`A.T @ v`,
`v @ A`) whose vector's elements come from products by the same rows (`A @ W`):
logistic regression's `X.T @ (sigmoid(X @ w) - y)`, atax's `A.T @ (A @ x)`,
`(A @ x) @ A`. BLAS reads A once per product; generated, one ordered kernel
over A's rows computes each row's products, the values between, and adds
the row into the result (`SharedRowsEmitter`), reading A once. The cost
model picks that kernel or BLAS (`matmul-shared-rows`); here each path is
forced, so both are checked on every shape.

With integer-valued inputs every order of the sums is exact, so results
must equal numpy's bit for bit, NaN and ±Inf placement included; with
arbitrary floats the results must be within the reduction tolerance of the
bound the two products' errors make."""

from __future__ import annotations

import io

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import lowering
from lowering.testing import TOLERANCES, assert_matches_numpy, examples
from passes import cost_model

FORCED = "matmul-shared-rows"


def atax(a, w, c):
    return a.T @ (a @ w[:, 0])


def relu_gradient(a, w, c):
    return a.T @ np.maximum(a @ w[:, :1] - c[:, :1], 0.0)


def masked(a, w, c):
    h = a @ w[:, 0] - c[:, 0]  # (read twice in the row: computed once there)
    return a.T @ (h * (h > 0))


def two_columns(a, w, c):
    z = a @ w  # (its columns 0 and 2 read in the row: two dot products there)
    return a.T @ (z[:, 0] * z[:, -1] - c[:, 1])


def row_vector_chain(a, w, c):
    return (a @ w[:, 0]) @ a


def row_through_transpose(a, w, c):
    return (a @ w[:, 1:2] + c[:, :1]).T @ a


PROGRAMS = {"atax": atax, "relu_gradient": relu_gradient, "masked": masked,
            "two_columns": two_columns, "row_vector_chain": row_vector_chain,
            "row_through_transpose": row_through_transpose}


def logistic_gradient(X, y, w):
    return X.T @ (1.0 / (1.0 + np.exp(-(X @ w))) - y)


def logreg(X, y, w, steps):
    n = X.shape[0]
    for _ in range(steps):
        p = 1.0 / (1.0 + np.exp(-(X @ w)))
        w = w - 0.1 * (X.T @ (p - y)) / n
    return w


def kernels(fn, *args) -> list[tuple[str, list[str]]]:
    return [k for ks in lowering.explain(lowering.compile(fn))(*args).kernels for k in ks]


def uses_blas(fn, *args) -> bool:
    return any(name.startswith(("blas", "extern")) for name, _ in kernels(fn, *args))


@st.composite
def cases(draw):
    dt = np.dtype(draw(st.sampled_from([np.float32, np.float64])))
    m = draw(st.sampled_from([17, 64, 257]))
    k = draw(st.sampled_from([8, 33, 64]))
    n = draw(st.sampled_from([2, 3]))
    name = draw(st.sampled_from(sorted(PROGRAMS)))
    specials = draw(st.booleans())
    return dt, m, k, n, name, specials, draw(st.integers(0, 2**32 - 1))


@examples(1.0)
@given(cases())
def test_shared_passes_match_numpy_exactly_on_exact_sums(case):
    dt, m, k, n, name, specials, seed = case
    rng = np.random.default_rng(seed)
    # |A| <= 2, |W| <= 1: every partial sum an integer below 2**24 (float32's exact
    # range; two_columns: |z0 z2| <= 64 * 64, times |A| <= 2, over 257 rows)
    a = rng.integers(-2, 3, (m, k)).astype(dt)
    w = rng.integers(-1, 2, (k, n)).astype(dt)
    c = rng.integers(-2, 3, (m, n)).astype(dt)
    if specials:  # a NaN and infinities reach whole rows and columns of the results
        a.flat[rng.integers(0, a.size)] = np.nan
        w.flat[rng.integers(0, w.size)] = np.inf
        a.flat[rng.integers(0, a.size)] = -np.inf
    fn = PROGRAMS[name]
    for path in cost_model.PATHS:
        with cost_model.forced({FORCED: path}):
            assert uses_blas(fn, a, w, c) == (path == "library"), (path, kernels(fn, a, w, c))
            assert_matches_numpy(fn, a, w, c, rtol=0.0, calls=2, compiled=lowering.compile(fn))


@examples(0.5)
@given(dt=st.sampled_from([np.float32, np.float64]), m=st.sampled_from([17, 300, 2049]),
       k=st.sampled_from([8, 100, 256]), seed=st.integers(0, 2**32 - 1))
def test_logistic_gradients_are_within_the_products_bound(dt, m, k, seed):
    """Each element within the reduction tolerance (over the M rows and the
    K columns summed) of the bound |X|^T (|p - y| + |X| |w| |p'|), p' <= 1/4
    the sigmoid's slope: the error of X @ w moves p by at most a quarter of
    it."""
    rng = np.random.default_rng(seed)
    X = (rng.standard_normal((m, k)) * 10.0 ** rng.integers(-2, 2, (m, k))).astype(dt)
    y = (rng.random(m) > 0.5).astype(dt)
    w = (rng.standard_normal(k) / np.sqrt(k)).astype(dt)
    X64, w64 = X.astype(np.float64), w.astype(np.float64)
    want = logistic_gradient(X64, y.astype(np.float64), w64)
    z_bound = np.abs(X64) @ np.abs(w64)
    bound = np.abs(X64).T @ (np.abs(1.0 / (1.0 + np.exp(-(X64 @ w64))) - y) + z_bound / 4)
    tol = TOLERANCES.rtol(dt, "reduction", m + k)
    for path in cost_model.PATHS:
        with cost_model.forced({FORCED: path}):
            with np.errstate(over="ignore"):
                got = lowering.compile(logistic_gradient)(X, y, w)
        assert got.dtype == dt
        assert np.all(np.abs(got - want) <= tol * bound), (path, np.max(np.abs(got - want) / bound))


def test_a_logistic_regression_step_reads_X_once():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((4096, 128)).astype(np.float32)
    y = (rng.random(4096) > 0.5).astype(np.float32)
    w = np.zeros(128, np.float32)
    with cost_model.forced({FORCED: "generated"}):
        cf = lowering.compile(logreg)
        ex = lowering.explain(cf)(X, y, w, 3)
        got = cf(X, y, w, 3)
    names = [name for ks in ex.kernels for name, _ in ks]
    # per step: one pass over X (both products, the sigmoid between), then w's update
    assert len(names) == 6 and not any(n.startswith(("blas", "extern")) for n in names), names
    for step in ex.kernels[0][::2]:
        assert sum(op.startswith("array.dot") for op in step[1]) == 2, step
        assert any(op.startswith("math.exp") for op in step[1]), step
    assert any("matmul-shared-rows: one ordered pass" in p for ps in ex.paths for p in ps)
    assert any("computed in the pass of array.dot" in p for ps in ex.paths for p in ps)
    np.testing.assert_allclose(got, logreg(X, y, w, 3), rtol=1e-4, atol=1e-6)


def loop_text(fn, spec: str, backend: str = "cpu") -> str:
    from xdsl.parser import Parser

    from lowering.dump import make_inputs
    from lowering.pipeline import context, lower

    args, _ = make_inputs(spec)
    (graph,) = lowering.explain(lowering.compile(fn, backend="numpy"))(*args).graphs
    module = Parser(context(), graph).parse_module()
    final, _ = lower(module, backend, ["C"] * len(args))
    out = io.StringIO()
    print(final, file=out)
    return out.getvalue()


def test_the_gpu_backend_keeps_blas():
    """The Triton emitter has no rule for an ordered kernel with a
    reduction: on the GPU backend both products stay matmuls."""
    with cost_model.forced({FORCED: "generated"}):
        cpu, gpu = (loop_text(atax, "f64[64,64] f64[64,2] f64[64,2]", b) for b in ("cpu", "gpu"))
    assert "{accumulate}" in cpu and 'loop.extern "matmul"' not in cpu, cpu
    assert "{accumulate}" not in gpu and gpu.count('loop.extern "matmul') == 2, gpu


def _product_returned_too(a, w, c):
    z = a @ w
    return a.T @ z, z


def _read_across_its_columns(a, w, c):
    z = a @ w
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return a.T @ (e / e.sum(axis=1, keepdims=True))


def _another_matrix(a, w, c):
    return c.T @ (a @ w[:, :1])


def _into_three_columns(a, w, c):
    return a.T @ np.tanh(a @ w)


@pytest.mark.parametrize("fn", [_product_returned_too, _read_across_its_columns, _another_matrix,
                                _into_three_columns])
def test_no_shared_pass_where_the_rows_are_not_only_the_products(fn):
    """The product is stored for another reader, its row is read across
    columns (a row reduction over them), the transposed product is over
    another matrix, or into several columns (each row added into 3
    interleaved outputs: BLAS's gemm): BLAS for the transposed product."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((300, 64))
    w = rng.standard_normal((64, 3))
    c = rng.standard_normal((300, 64))
    with cost_model.forced({FORCED: "generated"}):
        paths = [p for ps in lowering.explain(lowering.compile(fn))(a, w, c).paths for p in ps]
        assert not any("matmul-shared-rows" in p for p in paths), paths
        got, want = lowering.compile(fn)(a, w, c), fn(a, w, c)
        for got, want in zip(*((x,) if isinstance(x, np.ndarray) else x for x in (got, want))):
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12 * np.abs(want).max())


def test_a_matrix_laid_out_by_columns_is_not_read_by_rows():
    rng = np.random.default_rng(0)
    a = np.asfortranarray(rng.standard_normal((300, 64)))
    w = rng.standard_normal((64, 2))
    with cost_model.forced({FORCED: "generated"}):
        assert uses_blas(atax, a, w, w)
        assert_matches_numpy(atax, a, w, w)


def test_rows_longer_than_the_pass_keeps_in_cache_stay_blas():
    """The pass re-reads each row and the output from cache: rows beyond
    SHARED_ROW_BYTES (4 KiB) would come from L2 at each row: BLAS's."""
    from passes.lower_to_loop import SHARED_ROW_BYTES

    rng = np.random.default_rng(0)
    for k, blas in ((SHARED_ROW_BYTES // 8, False), (SHARED_ROW_BYTES // 8 + 1, True)):
        a, w = rng.standard_normal((40, k)), rng.standard_normal((k, 2))
        with cost_model.forced({FORCED: "generated"}):
            assert uses_blas(atax, a, w, w) == blas, k
            np.testing.assert_allclose(lowering.compile(atax)(a, w, w), atax(a, w, w), rtol=1e-10)
