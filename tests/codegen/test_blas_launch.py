"""Matmuls launched as BLAS calls from generated code (`lowering/backends/
cpu_blas.py`): operands read where they lie — transposed, sliced, broadcast
(a shared B: one gemm over every batch's rows), reshaped, a column as a
strided vector — by gemm or gemv per batch, no copies and no Python between
launches.

With integer-valued inputs every order of a dot product's sum is exact, so
results must equal numpy's bit for bit, NaN and ±Inf placement included;
with arbitrary floats each element is within the reduction tolerance of the
bound |A| @ |B|. Layouts BLAS cannot read (no unit stride) stay numpy's
matmul: equal results either way, and `explain` names the path."""

from __future__ import annotations

import gc

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import lowering
from lowering.backends import cpu_blas
from lowering.testing import TOLERANCES, assert_matches_numpy, examples
from runtime import blas

pytestmark = pytest.mark.skipif(blas.routines() is None,
                                reason="numpy's BLAS is not OpenBLAS with CBLAS symbols")

SIZES = [1, 2, 3, 5, 17, 64]

# lhs views: (base shape from (m, k), the view inside the program; both on
# the last dims, under any batch dims)
LHS = {
    "plain": (lambda m, k: (m, k), lambda a, m, k: a),
    "T": (lambda m, k: (k, m), lambda a, m, k: a.swapaxes(-1, -2)),
    "rows": (lambda m, k: (2 * m, k + 3), lambda a, m, k: a[..., ::2, 1:k + 1]),
    "cols": (lambda m, k: (m, 2 * k), lambda a, m, k: a[..., ::2]),  # no unit stride: numpy
    "flat": (lambda m, k: (m * k,), lambda a, m, k: a.reshape(*a.shape[:-1], m, k)),
    "vector": (lambda m, k: (k, 4), lambda a, m, k: a[..., 1]),  # a strided 1-D lhs
}
RHS = {
    "plain": (lambda k, n: (k, n), lambda b, k, n: b),
    "T": (lambda k, n: (n, k), lambda b, k, n: b.swapaxes(-1, -2)),
    "rows": (lambda k, n: (k, n + 5), lambda b, k, n: b[..., 2:n + 2]),
    "step": (lambda k, n: (2 * k, n), lambda b, k, n: b[..., ::2, :]),
    "vector": (lambda k, n: (3, k), lambda b, k, n: b[..., 2, :]),  # a contiguous 1-D rhs
    "column": (lambda k, n: (k, 3), lambda b, k, n: b[..., 0]),  # a strided 1-D rhs
}
VECTORS = ("vector", "column")


@st.composite
def cases(draw):
    dt = np.dtype(draw(st.sampled_from([np.float32, np.float64])))
    m, k, n = (draw(st.sampled_from(SIZES)) for _ in range(3))
    lhs, rhs = draw(st.sampled_from(sorted(LHS))), draw(st.sampled_from(sorted(RHS)))
    batch = draw(st.sampled_from([(), (3,), (2, 3)]))
    shared = draw(st.booleans()) or rhs in VECTORS  # batched lhs, one rhs for all
    return dt, m, k, n, lhs, rhs, batch, shared, draw(st.booleans()), draw(st.integers(0, 2**32 - 1))


def program(case):
    """The program `view(a) @ view(b)` and its operands' shapes."""
    dt, m, k, n, lhs, rhs, batch, shared, _, _ = case
    (la_shape, la_view), (lb_shape, lb_view) = LHS[lhs], RHS[rhs]
    a_shape = (*(batch if lhs != "vector" else ()), *la_shape(m, k))
    b_shape = (*(() if shared else batch), *lb_shape(k, n))

    def fn(a, b):
        return la_view(a, m, k) @ lb_view(b, k, n)

    return fn, a_shape, b_shape


def operands(case, a_shape, b_shape):
    dt, *_, specials, seed = case
    rng = np.random.default_rng(seed)
    a = rng.integers(-8, 9, a_shape).astype(dt)
    b = rng.integers(-8, 9, b_shape).astype(dt)
    if specials:  # NaN and infinities reach whole rows / columns of the result
        a.flat[rng.integers(0, a.size)] = np.nan
        b.flat[rng.integers(0, b.size)] = np.inf
        b.flat[rng.integers(0, b.size)] = -np.inf
    return a, b


@examples(2.0)
@given(cases())
def test_matmul_views_match_numpy_exactly_on_exact_sums(case):
    fn, a_shape, b_shape = program(case)
    a, b = operands(case, a_shape, b_shape)
    assert_matches_numpy(fn, a, b, rtol=0.0, calls=2, compiled=lowering.compile(fn, backend="cpu"))


@examples(1.0)
@given(cases())
def test_matmul_views_are_within_the_dot_product_bound(case):
    dt, m, k, n, *_ , seed = case
    fn, a_shape, b_shape = program(case)
    rng = np.random.default_rng(seed)
    a = (rng.standard_normal(a_shape) * 10.0 ** rng.integers(-3, 4, a_shape)).astype(dt)
    b = (rng.standard_normal(b_shape) * 10.0 ** rng.integers(-3, 4, b_shape)).astype(dt)
    got = lowering.compile(fn, backend="cpu")(a, b)
    want = fn(a.astype(np.float64), b.astype(np.float64))
    bound = fn(np.abs(a).astype(np.float64), np.abs(b).astype(np.float64))
    assert got.dtype == dt and got.shape == want.shape
    assert np.all(np.abs(got - want) <= TOLERANCES.rtol(dt, "reduction", k) * bound)


def _paths(fn, *args):
    ex = lowering.explain(lowering.compile(fn, backend="cpu"))(*args)
    return [name for graph in ex.kernels for name, _ in graph if "matmul" in name or "blas" in name]


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_each_layout_class_takes_the_blas_path_it_should(dt):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((60 * 60 * 128,)).astype(dt)
    c = rng.standard_normal((128, 128)).astype(dt)
    data = rng.standard_normal((200, 120)).astype(dt)
    # a batch of vector x matrix products sharing B: one gemm over all 3600 rows
    assert _paths(lambda a, c: np.reshape(a, (60, 60, 1, 128)) @ c, a, c) == ["blas " + "sd"[dt == np.float64] + "gemm"]
    # a column (stride 120) times a slice of columns: gemv with a strided x
    assert _paths(lambda d: d[:, 3] @ d[:, 4:], data) == ["blas " + "sd"[dt == np.float64] + "gemv"]
    # matrix x vector through a transpose
    assert _paths(lambda d, x: d.T @ x, data, data[:, 0].copy()) == ["blas " + "sd"[dt == np.float64] + "gemv"]
    # batched, B per batch: one gemm per batch
    x = rng.standard_normal((4, 30, 40)).astype(dt)
    y = rng.standard_normal((4, 40, 50)).astype(dt)
    assert _paths(lambda x, y: x @ y, x, y) == ["blas " + "sd"[dt == np.float64] + "gemm x4"]
    # every second column: no unit stride, numpy's matmul reads it
    assert _paths(lambda d, y: d[:, ::2] @ y, data, rng.standard_normal((60, 7)).astype(dt)) == ["extern matmul"]


@pytest.mark.parametrize("shape", [((300, 200), (200, 100)), ((300, 200), (200,)), ((200,), (200, 100))])
def test_blas_output_does_not_read_its_buffer(shape):
    """BLAS is called with beta = 0: the output's old contents (a pooled
    buffer that held NaN) never reach the result."""
    sa, sb = shape
    fn = lowering.compile(lambda a, b: a @ b, backend="cpu")
    nan = fn(np.full(sa, np.nan), np.ones(sb))
    assert np.isnan(nan).all()
    del nan
    gc.collect()
    rng = np.random.default_rng(1)
    a, b = rng.integers(-4, 5, sa).astype(np.float64), rng.integers(-4, 5, sb).astype(np.float64)
    for _ in range(3):
        np.testing.assert_array_equal(fn(a, b), a @ b)


def test_overflow_in_a_blas_product_follows_errstate():
    fn = lowering.compile(lambda a, b: a @ b, backend="cpu")
    a = np.full((8, 8), 1e300)
    with np.errstate(over="raise"):
        with pytest.raises(FloatingPointError):
            fn(a, a)
    with np.errstate(over="ignore"):
        assert np.isinf(fn(a, a)).all()


def test_the_plan_of_a_shared_rhs_batch_is_one_product():
    """`runtime.blas.call` on the layouts themselves: batch (60, 60) of
    (1, 128) rows with a shared (128, 128) B is one 3600 x 128 x 128 gemm."""
    a = ((60, 60, 1, 128), (60 * 128, 128, 128, 1), 0)
    b = ((60, 60, 128, 128), (0, 0, 128, 1), 0)
    c = ((60, 60, 1, 128), (60 * 128, 128, 128, 1), 0)
    routine, words, order = blas.call("d", a, b, c)
    assert routine == "dgemm" and words[0] == 1 and words[10:13] == (3600, 128, 128)
    assert order == (0, 1, 2)
    # a reshape numpy would copy is not a view: numpy's path
    assert cpu_blas._reshaped((4, 6), (14, 2), (24,)) is None
    assert cpu_blas._reshaped((4, 6), (12, 2), (24,)) == (2,)
    assert cpu_blas._reshaped((4, 6), (6, 1), (2, 12)) == (12, 1)


def test_rows_of_batches_sharing_b_along_one_dim_are_one_gemm_per_batch():
    """`x[:, :, None, :] @ C` (x (60, 60, 128), C (60, 128, 128)): B is
    shared along the first batch dim only, so the batch dims do not merge;
    that dim becomes the gemm's rows (a's and c's strides along it the
    leading dims): 60 gemms of 60 rows, not numpy's 3600 products."""
    a = ((60, 60, 1, 128), (60 * 128, 128, 128, 1), 0)
    b = ((60, 60, 128, 128), (0, 128 * 128, 128, 1), 0)
    c = ((60, 60, 1, 128), (60 * 128, 128, 128, 1), 0)
    routine, words, order = blas.call("d", a, b, c)
    assert routine == "dgemm" and order == (0, 1, 2)
    assert words[:4] == (60, 128, 128 * 128, 128)  # batches: a, b, c strides
    assert words[10:16] == (60, 128, 128, 60 * 128, 128, 60 * 128)  # m, n, k, lda, ldb, ldc
    # shared along no dim: nothing to fold
    b2 = ((60, 60, 128, 128), (60 * 128 * 128, 128 * 128, 128, 1), 0)
    assert blas.call("d", a, b2, c)[0] == "dgemv"


@pytest.mark.parametrize("dt", [np.float64, np.float32])
@pytest.mark.parametrize("shape", [(6, 5, 7, 3), (1, 5, 7, 3), (6, 1, 7, 3), (4, 3, 1, 9)])
def test_shared_b_batches_folded_into_rows_match_numpy_bitwise(dt, shape):
    """The folded products (`blas._fold_rows`) against numpy's matmul, with
    integer values (every order of the sums exact), NaN and infinities
    placed in rows; also B shared along the middle batch dim."""
    p, q, k, n = shape
    rng = np.random.default_rng(p * 100 + q)
    x = rng.integers(-8, 8, (p, q, k)).astype(dt)
    C = rng.integers(-8, 8, (q, k, n)).astype(dt)
    x[0, 0, 0] = np.nan
    x[-1, -1, -1] = np.inf
    f = lowering.compile(lambda x, C: (x[:, :, None, :] @ C)[:, :, 0, :], backend="cpu")
    want = (x[:, :, None, :] @ C)[:, :, 0, :]
    got = f(x, C)
    np.testing.assert_array_equal(got, want)
    assert got.dtype == want.dtype
    C2 = rng.integers(-8, 8, (p, 1, k, n)).astype(dt)  # shared along the second dim
    g = lowering.compile(lambda x, C: x[:, :, None, :] @ C, backend="cpu")
    np.testing.assert_array_equal(g(x, C2), x[:, :, None, :] @ C2)


@pytest.mark.parametrize("shapes", [((3, 64, 64), (64, 64)), ((3, 4, 3), (3, 1)),
                                    ((3, 1, 4), (4, 5)), ((3, 4, 5), (3, 5, 6))])
def test_an_empty_batch_calls_no_blas(shapes):
    """`a[3:] @ b` of 3 batches (a loop's last slice): nothing to multiply;
    BLAS must not be called on the empty buffers (it wrote past them)."""
    sa, sb = shapes
    a, b = np.ones(sa), np.ones(sb)
    f = lowering.compile(lambda a, b: a[3:] @ b[3:] if b.ndim == 3 else a[3:] @ b, backend="cpu")
    want = (a[3:] @ b[3:]) if b.ndim == 3 else a[3:] @ b
    for _ in range(50):
        got = f(a, b)
        assert got.shape == want.shape and got.dtype == want.dtype
    assert blas.call("d", ((0, 4, 5), (20, 5, 1), 0), ((5, 6), (6, 1), 0),
                     ((0, 4, 6), (24, 6, 1), 0)) is None


def test_a_big_product_releases_the_gil_in_the_fast_call():
    """Small BLAS launches hold the GIL (they set BLAS's thread count and
    back); a big one is launched as numpy runs its matmul, without it."""
    big = lowering.compile(lambda a, b: a @ b, backend="cpu")
    a = np.ones((400, 400))
    big(a, a)
    src = getattr(big._fast, "source", None) or big._fast.__self__.source
    assert "launch(K" in src  # (ctypes: the GIL released)
    small = lowering.compile(lambda a, b: a @ b, backend="cpu")
    s = np.ones((8, 8))
    small(s, s)
    src = getattr(small._fast, "source", None) or small._fast.__self__.source
    assert "launch(K" not in src


def _setter_words(cf) -> list[int]:
    """Per BLAS launch of the last call, the thread-count setter it calls (0: none)."""
    from lowering.codegen.llvm import SCALAR_PARAMS

    return [st.scalars[SCALAR_PARAMS + 1] for p in cf.programs_run for st in p.steps
            if getattr(st, "flops", 0)]


def test_a_matrix_vector_product_keeps_openblas_thread_count():
    """Under SMALL_FLOPS a gemm runs on one BLAS thread (its pool's hand-off
    costs more than the work); a gemv of as many flops is a pass over a
    matrix of 8 MB, which OpenBLAS splits over its threads itself (it keeps
    one below ~460k elements), as in numpy's call: forced onto one, a
    1000x1000 matrix times a vector ran at half numpy's speed."""
    rng = np.random.default_rng(0)
    a, x = rng.standard_normal((1000, 1000)), rng.standard_normal(1000)
    b = rng.standard_normal((100, 100))
    for fn, args, gemv in ((lambda a, x: a @ x, (a, x), True), (lambda a, x: x @ a, (a, x), True),
                           (lambda b, c: b @ c, (b, b), False)):
        cf = lowering.compile(fn, backend="cpu")
        np.testing.assert_allclose(cf(*args), fn(*args), rtol=1e-12)
        (setter,) = _setter_words(cf)
        assert 2 * 1000 * 1000 < blas.SMALL_FLOPS
        assert (setter == 0) == gemv, (gemv, setter)
    assert not blas.one_thread("dgemv", 1000) and blas.one_thread("sgemm", 1000)
    assert not blas.one_thread("dgemm", blas.SMALL_FLOPS)


# ---- F-ordered arguments -----------------------------------------------------
# An F-ordered argument's strides follow from its shape (static in the
# program's buffer types), so BLAS reads it where it lies, transposed, as
# numpy's matmul does; its rows are no rows in memory, so a narrow product
# of it is BLAS's too.

@examples(2.0)
@given(cases(), st.sampled_from(["C", "F"]), st.sampled_from(["C", "F"]))
def test_f_ordered_arguments_match_numpy_exactly_on_exact_sums(case, order_a, order_b):
    fn, a_shape, b_shape = program(case)
    a, b = operands(case, a_shape, b_shape)
    a, b = np.asarray(a, order=order_a), np.asarray(b, order=order_b)
    assert_matches_numpy(fn, a, b, rtol=0.0, calls=2, compiled=lowering.compile(fn, backend="cpu"))


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_f_ordered_arguments_are_read_by_blas_as_they_lie(dt):
    rng = np.random.default_rng(1)
    s = "sd"[dt == np.float64]
    a = np.asfortranarray(rng.standard_normal((64, 48)).astype(dt))
    b = np.asfortranarray(rng.standard_normal((48, 40)).astype(dt))
    v = rng.standard_normal(48).astype(dt)
    c = np.ascontiguousarray(a)
    for fn, args in [(lambda a, b: a @ b, (a, b)), (lambda a, b: a @ b, (c, b)),
                     (lambda a, b: a @ b, (a, np.ascontiguousarray(b))),
                     (lambda a, v: a @ v, (a, v)), (lambda w, a: w @ a, (rng.standard_normal(64).astype(dt), a)),
                     (lambda a, v: a[2:50] @ v, (a, v))]:
        kind = "gemv" if min(args[0].ndim, args[1].ndim) == 1 else "gemm"
        assert _paths(fn, *args) == [f"blas {s}{kind}"], fn
        _within_dot_bound(fn, args, dt, 64)


def _within_dot_bound(fn, args, dt, k):
    got = lowering.compile(fn, backend="cpu")(*args)
    want = fn(*(x.astype(np.float64) for x in args))
    bound = fn(*(np.abs(x).astype(np.float64) for x in args))
    assert got.dtype == dt and got.shape == want.shape
    assert np.all(np.abs(got - want) <= TOLERANCES.rtol(dt, "reduction", k) * bound)


def test_a_generated_matrix_vector_product_reads_its_vector_where_it_lies():
    """`A @ v` generated (one dot product per row): v is read where it lies
    (its one column is a row in memory), no transposed copy of it first."""
    from passes import cost_model

    rng = np.random.default_rng(2)
    a, v = rng.standard_normal((64, 64)), rng.standard_normal(64)
    with cost_model.forced({"matmul-narrow": "generated"}):
        cf = lowering.compile(lambda a, v: a @ v, backend="cpu")
        ex = lowering.explain(cf)(a, v)
        ops = [o for graph in ex.kernels for _, fused in graph for o in fused]
        assert not any("transpose (copied)" in o for o in ops), ops
        _within_dot_bound(lambda a, v: a @ v, (a, v), np.float64, 64)
