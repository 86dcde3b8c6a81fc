"""Dense linear algebra as people write it in numpy: BLAS products with
epilogues, matvec chains, and the classic factorizations and solves as
Python loops over rows or columns (most follow PolyBench's kernels)."""

from __future__ import annotations

import numpy as np

from .base import Program, rng


# ---- BLAS products with a little around them ---------------------------------
def gemm(alpha, beta, A, B, C):
    """C' = alpha·A@B + beta·C."""
    return alpha * A @ B + beta * C


def matvec_chain(A, x):
    """(A@x)@A: a matvec, then a vector-matrix product with the same matrix."""
    return (A @ x) @ A


def atax(A, x):
    """A.T@(A@x)."""
    return A.T @ (A @ x)


def doitgen(A, C4):
    """A batched vector × matrix: every A[r, q, :] times C4, through a
    reshape to stacked 1×p matrices."""
    nr, nq, npp = A.shape
    return np.reshape(np.reshape(A, (nr, nq, 1, npp)) @ C4, (nr, nq, npp))


def outer_update(A, u, v):
    """A rank-1 update."""
    return A + np.outer(u, v) * 0.5


def gemver(alpha, beta, A, u1, v1, u2, v2, y, z):
    """PolyBench gemver: two rank-1 updates, then two matvecs."""
    A = A + np.outer(u1, v1) + np.outer(u2, v2)
    x = beta * (y @ A) + z
    w = alpha * (A @ x)
    return A, x, w


def _products(n: int) -> tuple:
    g = rng(1)
    return 1.5, 1.2, g.random((n, n)), g.random((n, n)), g.random((n, n))


def _matvec(n: int) -> tuple:
    g = rng(2)
    return g.random((n, n)), g.random(n)


def _doitgen(nr: int, nq: int, npp: int) -> tuple:
    g = rng(3)
    return g.random((nr, nq, npp)), g.random((npp, npp))


def _outer(n: int) -> tuple:
    g = rng(4)
    return g.random((n, n)), g.random(n), g.random(n)


def _gemver(n: int) -> tuple:
    g = rng(5)
    A = g.random((n, n))
    u1, v1, u2, v2, y, z = (g.random(n) for _ in range(6))
    return 1.5, 1.2, A, u1, v1, u2, v2, y, z


# ---- loops over rows and columns ---------------------------------------------
def syrk(alpha, beta, C, A):
    """Symmetric rank-k update of the lower triangle, one row per iteration."""
    C = C.copy()
    for i in range(C.shape[0]):
        C[i, : i + 1] = beta * C[i, : i + 1] + alpha * (A[: i + 1] @ A[i])
    return C


def trisolv(L, b):
    """Forward substitution L x = b for k right-hand sides (b[n, k]), L
    lower triangular."""
    x = np.empty_like(b)
    for i in range(b.shape[0]):
        x[i] = (b[i] - L[i, :i] @ x[:i]) / L[i, i]
    return x


def gramschmidt(A):
    """Modified Gram–Schmidt QR, one column per iteration."""
    A = A.copy()
    m, n = A.shape
    Q = np.zeros((m, n))
    R = np.zeros((n, n))
    for k in range(n):
        R[k, k] = np.sqrt(A[:, k] @ A[:, k])
        Q[:, k] = A[:, k] / R[k, k]
        R[k, k + 1 :] = Q[:, k] @ A[:, k + 1 :]
        A[:, k + 1 :] -= np.outer(Q[:, k], R[k, k + 1 :])
    return Q, R


def lu(A):
    """LU without pivoting, in place on a copy (L below the diagonal, unit
    diagonal implied; U on and above it)."""
    A = A.copy()
    n = A.shape[0]
    for k in range(n - 1):
        A[k + 1 :, k] /= A[k, k]
        A[k + 1 :, k + 1 :] -= np.outer(A[k + 1 :, k], A[k, k + 1 :])
    return A


def cholesky(A):
    """Cholesky–Crout, one column of L per iteration."""
    n = A.shape[0]
    L = np.zeros_like(A)
    for j in range(n):
        L[j, j] = np.sqrt(A[j, j] - L[j, :j] @ L[j, :j])
        L[j + 1 :, j] = (A[j + 1 :, j] - L[j + 1 :, :j] @ L[j, :j]) / L[j, j]
    return L


def correlation(data):
    """PolyBench correlation: columns centred and scaled, then the upper
    triangle one row at a time, mirrored."""
    n, m = data.shape
    mean = data.mean(axis=0)
    std = np.sqrt(((data - mean) ** 2).mean(axis=0))
    std[std <= 0.1] = 1.0
    data = (data - mean) / (np.sqrt(n) * std)
    corr = np.eye(m)
    for i in range(m - 1):
        corr[i + 1 :, i] = corr[i, i + 1 :] = data[:, i] @ data[:, i + 1 :]
    return corr


def covariance(data):
    """PolyBench covariance: the upper triangle one row at a time, mirrored."""
    n, m = data.shape
    d = data - data.mean(axis=0)
    cov = np.empty((m, m))
    for i in range(m):
        cov[i:, i] = cov[i, i:] = d[:, i] @ d[:, i:] / (n - 1)
    return cov


def _syrk(n: int, k: int) -> tuple:
    g = rng(6)
    return 1.5, 1.2, g.random((n, n)), g.random((n, k))


def _lower(n: int, k: int) -> tuple:
    """A well-conditioned lower-triangular L and k right-hand sides."""
    g = rng(7)
    L = np.tril(g.random((n, n))) / n + np.eye(n)
    return L, g.random((n, k))


def _tall(m: int, n: int) -> tuple:
    return (rng(8).standard_normal((m, n)),)


def _diag_dominant(n: int) -> tuple:
    g = rng(9)
    return (g.random((n, n)) + n * np.eye(n),)


def _spd(n: int) -> tuple:
    g = rng(10)
    R = g.random((n, n))
    return (R @ R.T / n + np.eye(n),)


def _data(n: int, m: int) -> tuple:
    g = rng(11)
    return (g.random((n, m)) * 4.0 + g.random(m),)


# ---- peers' own versions -------------------------------------------------------
def numba_variants() -> dict:
    """Explicit-loop numba versions where njit of the numpy program fails:
    4-d `@` (doitgen), np.outer of strided columns (gramschmidt), `mean`
    with an axis and `@` of strided columns (correlation, covariance: the
    column means by a row loop, the dot products as loops over rows of the
    transposed, centred data, in parallel over rows of the result; no BLAS
    call inside a prange, whose threads would fight OpenBLAS's)."""
    from numba import njit, prange

    @njit
    def dot(a, b):
        s = 0.0
        for k in range(a.shape[0]):
            s += a[k] * b[k]
        return s

    @njit
    def centred_columns(data):
        n, m = data.shape
        mean = np.zeros(m)
        for k in range(n):
            mean += data[k]
        return np.ascontiguousarray((data - mean / n).T)

    @njit(parallel=True)
    def correlation_nb(data):
        n, m = data.shape
        d = centred_columns(data)
        corr = np.eye(m)
        for i in range(m):
            std = np.sqrt((d[i] * d[i]).mean())
            d[i] /= np.sqrt(n) * (1.0 if std <= 0.1 else std)
        for i in prange(m - 1):
            for j in range(i + 1, m):
                corr[i, j] = corr[j, i] = dot(d[i], d[j])
        return corr

    @njit(parallel=True)
    def covariance_nb(data):
        n, m = data.shape
        d = centred_columns(data)
        cov = np.empty((m, m))
        for i in prange(m):
            for j in range(i, m):
                cov[i, j] = cov[j, i] = dot(d[i], d[j]) / (n - 1)
        return cov

    @njit
    def doitgen_nb(A, C4):
        nr, nq, npp = A.shape
        out = np.empty_like(A)
        for r in range(nr):
            out[r] = A[r] @ C4
        return out

    @njit
    def gramschmidt_nb(A):
        A = A.copy()
        m, n = A.shape
        Q = np.zeros((m, n))
        R = np.zeros((n, n))
        for k in range(n):
            nrm = 0.0
            for i in range(m):
                nrm += A[i, k] * A[i, k]
            R[k, k] = np.sqrt(nrm)
            for i in range(m):
                Q[i, k] = A[i, k] / R[k, k]
            for j in range(k + 1, n):
                s = 0.0
                for i in range(m):
                    s += Q[i, k] * A[i, j]
                R[k, j] = s
                for i in range(m):
                    A[i, j] -= Q[i, k] * s
        return Q, R

    return {"doitgen": doitgen_nb, "gramschmidt": gramschmidt_nb,
            "correlation": correlation_nb, "covariance": covariance_nb}


def jax_variants() -> dict:
    """jax.numpy versions: products as written; row loops as `lax.fori_loop`
    over masked full-length rows (jit needs static shapes, so `A[:i]` is
    `where(arange < i, A, 0)`)."""
    import jax.numpy as jnp
    from jax import lax

    def gemm_j(alpha, beta, A, B, C):
        return alpha * A @ B + beta * C

    def matvec_chain_j(A, x):
        return (A @ x) @ A

    def atax_j(A, x):
        return A.T @ (A @ x)

    def doitgen_j(A, C4):
        return A @ C4

    def outer_update_j(A, u, v):
        return A + jnp.outer(u, v) * 0.5

    def gemver_j(alpha, beta, A, u1, v1, u2, v2, y, z):
        A = A + jnp.outer(u1, v1) + jnp.outer(u2, v2)
        x = beta * (y @ A) + z
        return A, x, alpha * (A @ x)

    def syrk_j(alpha, beta, C, A):
        n = C.shape[0]
        lower = jnp.tril(jnp.ones((n, n), dtype=bool))
        return jnp.where(lower, beta * C + alpha * (A @ A.T), C)

    def trisolv_j(L, b):
        n = b.shape[0]
        idx = jnp.arange(n)

        def body(i, x):
            s = jnp.where(idx < i, L[i], 0.0) @ x
            return x.at[i].set((b[i] - s) / L[i, i])

        return lax.fori_loop(0, n, body, jnp.zeros_like(b))

    def gramschmidt_j(A):
        m, n = A.shape
        cols = jnp.arange(n)

        def body(k, carry):
            A, Q, R = carry
            a = A[:, k]
            nrm = jnp.sqrt(a @ a)
            q = a / nrm
            r = jnp.where(cols > k, q @ A, 0.0)
            R = R.at[k].set(r.at[k].set(nrm))
            return A - jnp.outer(q, r), Q.at[:, k].set(q), R

        _, Q, R = lax.fori_loop(0, n, body, (A, jnp.zeros((m, n)), jnp.zeros((n, n))))
        return Q, R

    def lu_j(A):
        n = A.shape[0]
        idx = jnp.arange(n)

        def body(k, A):
            below = idx > k
            col = jnp.where(below, A[:, k] / A[k, k], 0.0)
            row = jnp.where(below, A[k], 0.0)
            A = A - jnp.outer(col, row)
            return A.at[:, k].set(jnp.where(below, col, A[:, k]))

        return lax.fori_loop(0, n - 1, body, A)

    def cholesky_j(A):
        n = A.shape[0]
        idx = jnp.arange(n)

        def body(j, L):
            lj = jnp.where(idx < j, L[j], 0.0)
            d = jnp.sqrt(A[j, j] - lj @ lj)
            col = jnp.where(idx > j, (A[:, j] - L @ lj) / d, 0.0)
            return L.at[:, j].set(col.at[j].set(d))

        return lax.fori_loop(0, n, body, jnp.zeros_like(A))

    def correlation_j(data):
        n, m = data.shape
        mean = data.mean(axis=0)
        std = jnp.sqrt(((data - mean) ** 2).mean(axis=0))
        std = jnp.where(std <= 0.1, 1.0, std)
        data = (data - mean) / (jnp.sqrt(n) * std)
        return jnp.fill_diagonal(data.T @ data, 1.0, inplace=False)

    def covariance_j(data):
        d = data - data.mean(axis=0)
        return d.T @ d / (data.shape[0] - 1)

    return {
        "gemm": gemm_j,
        "matvec_chain": matvec_chain_j,
        "atax": atax_j,
        "doitgen": doitgen_j,
        "outer_update": outer_update_j,
        "gemver": gemver_j,
        "syrk": syrk_j,
        "trisolv": trisolv_j,
        "gramschmidt": gramschmidt_j,
        "lu": lu_j,
        "cholesky": cholesky_j,
        "correlation": correlation_j,
        "covariance": covariance_j,
    }


PROGRAMS = [
    Program("gemm", "alpha·A@B + beta·C", gemm, _products,
            {"T": (16,), "S": (160,), "M": (600,)}),
    Program("matvec_chain", "(A@x)@A", matvec_chain, _matvec,
            {"T": (16,), "S": (600,), "M": (4000,)}),
    Program("atax", "A.T@(A@x)", atax, _matvec, {"T": (16,), "S": (600,), "M": (4000,)}),
    Program("doitgen", "reshape(reshape(A,(r,q,1,p)) @ C4, (r,q,p))", doitgen, _doitgen,
            {"T": (4, 4, 8), "S": (20, 20, 64), "M": (60, 60, 128)}, numba="loops"),
    Program("outer_update", "A + np.outer(u, v)*0.5", outer_update, _outer,
            {"T": (16,), "S": (400,), "M": (2000,)}),
    Program("gemver", "two rank-1 updates, two matvecs", gemver, _gemver,
            {"T": (16,), "S": (300,), "M": (1600,)}),
    Program("syrk", "lower C = beta·C + alpha·A@A.T, row loop", syrk, _syrk,
            {"T": (8, 6), "S": (60, 40), "M": (250, 600)}),
    Program("trisolv", "forward substitution, row loop", trisolv, _lower,
            {"T": (8, 3), "S": (60, 20), "M": (250, 1000)}),
    Program("gramschmidt", "modified Gram–Schmidt QR, column loop", gramschmidt, _tall,
            {"T": (10, 6), "S": (60, 40), "M": (1000, 120)}, numba="loops"),
    Program("lu", "LU without pivoting, loop over k", lu, _diag_dominant,
            {"T": (8,), "S": (60,), "M": (200,)}),
    Program("cholesky", "Cholesky–Crout, column loop", cholesky, _spd,
            {"T": (8,), "S": (60,), "M": (250,)}),
    Program("correlation", "PolyBench correlation, row loop", correlation, _data,
            {"T": (12, 8), "S": (100, 60), "M": (2000, 200)}, numba="loops"),
    Program("covariance", "PolyBench covariance, row loop", covariance, _data,
            {"T": (12, 8), "S": (100, 60), "M": (2000, 200)}, numba="loops"),
]
