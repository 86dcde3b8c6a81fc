"""Stencils: a few time steps in a Python loop, each step slice arithmetic
on neighbours written into a preallocated array (PolyBench's jacobi-1d,
jacobi-2d, heat-3d, seidel-2d and fdtd-2d)."""

from __future__ import annotations

from .base import Program, rng


def jacobi_1d(A, B, steps):
    A, B = A.copy(), B.copy()
    for _ in range(steps):
        B[1:-1] = 0.33333 * (A[:-2] + A[1:-1] + A[2:])
        A[1:-1] = 0.33333 * (B[:-2] + B[1:-1] + B[2:])
    return A, B


def jacobi_2d(A, B, steps):
    A, B = A.copy(), B.copy()
    for _ in range(steps):
        B[1:-1, 1:-1] = 0.2 * (A[1:-1, 1:-1] + A[1:-1, :-2] + A[1:-1, 2:] + A[2:, 1:-1]
                               + A[:-2, 1:-1])
        A[1:-1, 1:-1] = 0.2 * (B[1:-1, 1:-1] + B[1:-1, :-2] + B[1:-1, 2:] + B[2:, 1:-1]
                               + B[:-2, 1:-1])
    return A, B


def heat_3d(A, B, steps):
    A, B = A.copy(), B.copy()
    for _ in range(steps):
        B[1:-1, 1:-1, 1:-1] = (
            0.125 * (A[2:, 1:-1, 1:-1] - 2.0 * A[1:-1, 1:-1, 1:-1] + A[:-2, 1:-1, 1:-1])
            + 0.125 * (A[1:-1, 2:, 1:-1] - 2.0 * A[1:-1, 1:-1, 1:-1] + A[1:-1, :-2, 1:-1])
            + 0.125 * (A[1:-1, 1:-1, 2:] - 2.0 * A[1:-1, 1:-1, 1:-1] + A[1:-1, 1:-1, :-2])
            + A[1:-1, 1:-1, 1:-1]
        )
        A[1:-1, 1:-1, 1:-1] = (
            0.125 * (B[2:, 1:-1, 1:-1] - 2.0 * B[1:-1, 1:-1, 1:-1] + B[:-2, 1:-1, 1:-1])
            + 0.125 * (B[1:-1, 2:, 1:-1] - 2.0 * B[1:-1, 1:-1, 1:-1] + B[1:-1, :-2, 1:-1])
            + 0.125 * (B[1:-1, 1:-1, 2:] - 2.0 * B[1:-1, 1:-1, 1:-1] + B[1:-1, 1:-1, :-2])
            + B[1:-1, 1:-1, 1:-1]
        )
    return A, B


def seidel_2d(A, steps):
    """Seidel sweeps one row at a time: a row is computed from the rows
    above (already updated this sweep), itself and below (not yet)."""
    A = A.copy()
    n = A.shape[0]
    for _ in range(steps):
        for i in range(1, n - 1):
            A[i, 1:-1] = (A[i - 1, :-2] + A[i - 1, 1:-1] + A[i - 1, 2:]
                          + A[i, :-2] + A[i, 1:-1] + A[i, 2:]
                          + A[i + 1, :-2] + A[i + 1, 1:-1] + A[i + 1, 2:]) / 9.0
    return A


def fdtd_2d(ex, ey, hz, fict):
    """2-D finite-difference time domain, one step per entry of `fict`."""
    ex, ey, hz = ex.copy(), ey.copy(), hz.copy()
    for t in range(fict.shape[0]):
        ey[0, :] = fict[t]
        ey[1:, :] -= 0.5 * (hz[1:, :] - hz[:-1, :])
        ex[:, 1:] -= 0.5 * (hz[:, 1:] - hz[:, :-1])
        hz[:-1, :-1] -= 0.7 * (ex[:-1, 1:] - ex[:-1, :-1] + ey[1:, :-1] - ey[:-1, :-1])
    return ex, ey, hz


def _two(shape: tuple, steps: int, salt: int) -> tuple:
    g = rng(salt)
    return g.random(shape), g.random(shape), steps


def _jacobi_1d(n: int, steps: int) -> tuple:
    return _two((n,), steps, 20)


def _jacobi_2d(n: int, steps: int) -> tuple:
    return _two((n, n), steps, 21)


def _heat_3d(n: int, steps: int) -> tuple:
    return _two((n, n, n), steps, 22)


def _seidel_2d(n: int, steps: int) -> tuple:
    return rng(23).random((n, n)), steps


def _fdtd_2d(nx: int, ny: int, steps: int) -> tuple:
    g = rng(24)
    return g.random((nx, ny)), g.random((nx, ny)), g.random((nx, ny)), g.random(steps)


def jax_variants() -> dict:
    """The same steps with `.at[].set`, the time loop a `lax.fori_loop`
    (seidel's row loop too)."""
    from jax import lax

    def jacobi_1d_j(A, B, steps):
        def body(_, c):
            A, B = c
            B = B.at[1:-1].set(0.33333 * (A[:-2] + A[1:-1] + A[2:]))
            return A.at[1:-1].set(0.33333 * (B[:-2] + B[1:-1] + B[2:])), B

        return lax.fori_loop(0, steps, body, (A, B))

    def jacobi_2d_j(A, B, steps):
        def sweep(A):
            return 0.2 * (A[1:-1, 1:-1] + A[1:-1, :-2] + A[1:-1, 2:] + A[2:, 1:-1] + A[:-2, 1:-1])

        def body(_, c):
            A, B = c
            B = B.at[1:-1, 1:-1].set(sweep(A))
            return A.at[1:-1, 1:-1].set(sweep(B)), B

        return lax.fori_loop(0, steps, body, (A, B))

    def heat_3d_j(A, B, steps):
        def sweep(A):
            c = A[1:-1, 1:-1, 1:-1]
            return (0.125 * (A[2:, 1:-1, 1:-1] - 2.0 * c + A[:-2, 1:-1, 1:-1])
                    + 0.125 * (A[1:-1, 2:, 1:-1] - 2.0 * c + A[1:-1, :-2, 1:-1])
                    + 0.125 * (A[1:-1, 1:-1, 2:] - 2.0 * c + A[1:-1, 1:-1, :-2]) + c)

        def body(_, c):
            A, B = c
            B = B.at[1:-1, 1:-1, 1:-1].set(sweep(A))
            return A.at[1:-1, 1:-1, 1:-1].set(sweep(B)), B

        return lax.fori_loop(0, steps, body, (A, B))

    def seidel_2d_j(A, steps):
        n = A.shape[0]

        def row(i, A):
            w = lax.dynamic_slice_in_dim(A, i - 1, 3, axis=0)
            new = (w[:, :-2].sum(0) + w[:, 1:-1].sum(0) + w[:, 2:].sum(0)) / 9.0
            return A.at[i, 1:-1].set(new)

        return lax.fori_loop(0, steps, lambda _, A: lax.fori_loop(1, n - 1, row, A), A)

    def fdtd_2d_j(ex, ey, hz, fict):
        def body(t, c):
            ex, ey, hz = c
            ey = ey.at[0, :].set(fict[t])
            ey = ey.at[1:, :].add(-0.5 * (hz[1:, :] - hz[:-1, :]))
            ex = ex.at[:, 1:].add(-0.5 * (hz[:, 1:] - hz[:, :-1]))
            hz = hz.at[:-1, :-1].add(
                -0.7 * (ex[:-1, 1:] - ex[:-1, :-1] + ey[1:, :-1] - ey[:-1, :-1]))
            return ex, ey, hz

        return lax.fori_loop(0, fict.shape[0], body, (ex, ey, hz))

    return {
        "jacobi_1d": jacobi_1d_j,
        "jacobi_2d": jacobi_2d_j,
        "heat_3d": heat_3d_j,
        "seidel_2d": seidel_2d_j,
        "fdtd_2d": fdtd_2d_j,
    }


PROGRAMS = [
    Program("jacobi_1d", "3-point Jacobi, 2 arrays", jacobi_1d, _jacobi_1d,
            {"T": (32, 3), "S": (2000, 10), "M": (200_000, 20)}),
    Program("jacobi_2d", "5-point Jacobi, 2 arrays", jacobi_2d, _jacobi_2d,
            {"T": (10, 3), "S": (60, 10), "M": (500, 20)}),
    Program("heat_3d", "7-point heat equation, 2 arrays", heat_3d, _heat_3d,
            {"T": (6, 3), "S": (16, 10), "M": (64, 10)}),
    Program("seidel_2d", "9-point Seidel, row loop", seidel_2d, _seidel_2d,
            {"T": (6, 2), "S": (30, 2), "M": (200, 2)}),
    Program("fdtd_2d", "2-D FDTD (ex, ey, hz)", fdtd_2d, _fdtd_2d,
            {"T": (8, 10, 3), "S": (60, 80, 10), "M": (500, 600, 20)}),
]
