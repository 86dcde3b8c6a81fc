"""Physics and finance: an n-body leapfrog with pairwise forces by
broadcasting, a linear shallow-water model on a periodic grid, Black–Scholes,
and two Monte Carlo estimates whose random draws are made by the input
builder (a seeded `default_rng`) and passed in, so every run is the same."""

from __future__ import annotations

import math

import numpy as np

from .base import Program, rng


def nbody(pos, vel, mass, steps, dt):
    """Leapfrog steps of softened gravity, all pairs at once."""
    pos, vel = pos.copy(), vel.copy()
    for _ in range(steps):
        d = pos[None, :, :] - pos[:, None, :]  # d[i, j] = pos[j] - pos[i]
        inv_r3 = ((d**2).sum(axis=2) + 0.01) ** -1.5
        acc = (d * (inv_r3 * mass)[:, :, None]).sum(axis=1)
        vel += dt * acc
        pos += dt * vel
    return pos, vel


def shallow_water(eta, u, v, steps):
    """Linearized shallow water on a periodic C-grid (H = 100, g = 9.81,
    dt/dx = 0.002), forward-backward in time."""
    c_u = 9.81 * 0.002
    c_eta = 100.0 * 0.002
    for _ in range(steps):
        u = u - c_u * (np.roll(eta, -1, axis=1) - eta)
        v = v - c_u * (np.roll(eta, -1, axis=0) - eta)
        eta = eta - c_eta * (u - np.roll(u, 1, axis=1) + v - np.roll(v, 1, axis=0))
    return eta, u, v


def _cnd(d):
    """The cumulative normal distribution, the classic 5-term polynomial."""
    k = 1.0 / (1.0 + 0.2316419 * np.abs(d))
    poly = k * (0.31938153 + k * (-0.356563782 + k * (1.781477937
                                                     + k * (-1.821255978 + k * 1.330274429))))
    ret = 0.3989422804014327 * np.exp(-0.5 * d * d) * poly
    return np.where(d > 0, 1.0 - ret, ret)


def black_scholes(S, K, T, r, v):
    """European call and put prices."""
    sqrt_t = np.sqrt(T)
    d1 = (np.log(S / K) + (r + 0.5 * v * v) * T) / (v * sqrt_t)
    d2 = d1 - v * sqrt_t
    c1, c2 = _cnd(d1), _cnd(d2)
    k_exp = K * np.exp(-r * T)
    return S * c1 - k_exp * c2, k_exp * (1.0 - c2) - S * (1.0 - c1)


def mc_pi(xy):
    """pi from the points of the unit square inside the quarter circle."""
    inside = xy[0] ** 2 + xy[1] ** 2 <= 1.0
    return 4.0 * inside.mean()


def mc_asian(Z, S0, K, r, sigma, T):
    """An arithmetic Asian call by Monte Carlo: geometric Brownian paths,
    one time step per row of Z (standard normal draws), the price and its
    standard error."""
    steps, paths = Z.shape
    dt = T / steps
    drift = (r - 0.5 * sigma**2) * dt
    vol = sigma * math.sqrt(dt)
    S = np.full(paths, S0)
    total = np.zeros(paths)
    for t in range(steps):
        S = S * np.exp(drift + vol * Z[t])
        total += S
    payoff = np.exp(-r * T) * np.maximum(total / steps - K, 0.0)
    return payoff.mean(), payoff.std() / math.sqrt(paths)


def _nbody(n: int, steps: int) -> tuple:
    g = rng(30)
    return g.standard_normal((n, 3)), 0.1 * g.standard_normal((n, 3)), g.random(n) / n, steps, 0.01


def _shallow_water(n: int, steps: int) -> tuple:
    g = rng(31)
    x = np.linspace(-1.0, 1.0, n)
    eta = np.exp(-10.0 * (x[:, None] ** 2 + x[None, :] ** 2)) + 0.01 * g.random((n, n))
    return eta, np.zeros((n, n)), np.zeros((n, n)), steps


def _options(n: int) -> tuple:
    g = rng(32)
    return g.uniform(5.0, 30.0, n), g.uniform(1.0, 100.0, n), g.uniform(0.25, 10.0, n), 0.02, 0.3


def _points(n: int) -> tuple:
    return (rng(33).random((2, n)),)


def _paths(steps: int, paths: int) -> tuple:
    return rng(34).standard_normal((steps, paths)), 100.0, 100.0, 0.05, 0.2, 1.0


def numba_variants() -> dict:
    """Loops where numba's numpy lacks the form used: np.roll with an axis
    (shallow water)."""
    from numba import njit, prange

    @njit(parallel=True)
    def shallow_water_nb(eta, u, v, steps):
        c_u = 9.81 * 0.002
        c_eta = 100.0 * 0.002
        n, m = eta.shape
        eta, u, v = eta.copy(), u.copy(), v.copy()
        for _ in range(steps):
            for i in prange(n):
                for j in range(m):
                    u[i, j] -= c_u * (eta[i, (j + 1) % m] - eta[i, j])
                    v[i, j] -= c_u * (eta[(i + 1) % n, j] - eta[i, j])
            new = np.empty_like(eta)
            for i in prange(n):
                for j in range(m):
                    new[i, j] = eta[i, j] - c_eta * (u[i, j] - u[i, j - 1] + v[i, j] - v[i - 1, j])
            eta = new
        return eta, u, v

    return {"shallow_water": shallow_water_nb}


def jax_variants() -> dict:
    import jax.numpy as jnp
    from jax import lax

    def nbody_j(pos, vel, mass, steps, dt):
        def body(_, c):
            pos, vel = c
            d = pos[None, :, :] - pos[:, None, :]
            inv_r3 = ((d**2).sum(axis=2) + 0.01) ** -1.5
            vel = vel + dt * (d * (inv_r3 * mass)[:, :, None]).sum(axis=1)
            return pos + dt * vel, vel

        return lax.fori_loop(0, steps, body, (pos, vel))

    def shallow_water_j(eta, u, v, steps):
        c_u, c_eta = 9.81 * 0.002, 100.0 * 0.002

        def body(_, c):
            eta, u, v = c
            u = u - c_u * (jnp.roll(eta, -1, axis=1) - eta)
            v = v - c_u * (jnp.roll(eta, -1, axis=0) - eta)
            eta = eta - c_eta * (u - jnp.roll(u, 1, axis=1) + v - jnp.roll(v, 1, axis=0))
            return eta, u, v

        return lax.fori_loop(0, steps, body, (eta, u, v))

    def cnd_j(d):
        k = 1.0 / (1.0 + 0.2316419 * jnp.abs(d))
        poly = k * (0.31938153 + k * (-0.356563782 + k * (1.781477937
                                                         + k * (-1.821255978 + k * 1.330274429))))
        ret = 0.3989422804014327 * jnp.exp(-0.5 * d * d) * poly
        return jnp.where(d > 0, 1.0 - ret, ret)

    def black_scholes_j(S, K, T, r, v):
        sqrt_t = jnp.sqrt(T)
        d1 = (jnp.log(S / K) + (r + 0.5 * v * v) * T) / (v * sqrt_t)
        d2 = d1 - v * sqrt_t
        c1, c2 = cnd_j(d1), cnd_j(d2)
        k_exp = K * jnp.exp(-r * T)
        return S * c1 - k_exp * c2, k_exp * (1.0 - c2) - S * (1.0 - c1)

    def mc_pi_j(xy):
        return 4.0 * (xy[0] ** 2 + xy[1] ** 2 <= 1.0).astype(float).mean()

    def mc_asian_j(Z, S0, K, r, sigma, T):
        steps, paths = Z.shape
        dt = T / steps
        drift = (r - 0.5 * sigma**2) * dt
        vol = sigma * jnp.sqrt(dt)

        def body(t, c):
            S, total = c
            S = S * jnp.exp(drift + vol * Z[t])
            return S, total + S

        _, total = lax.fori_loop(0, steps, body, (jnp.full(paths, S0), jnp.zeros(paths)))
        payoff = jnp.exp(-r * T) * jnp.maximum(total / steps - K, 0.0)
        return payoff.mean(), payoff.std() / jnp.sqrt(paths)

    return {
        "nbody": nbody_j,
        "shallow_water": shallow_water_j,
        "black_scholes": black_scholes_j,
        "mc_pi": mc_pi_j,
        "mc_asian": mc_asian_j,
    }


PROGRAMS = [
    Program("nbody", "softened gravity, all pairs by broadcasting, leapfrog", nbody, _nbody,
            {"T": (8, 2), "S": (64, 3), "M": (400, 5)}),
    Program("shallow_water", "linear shallow water, periodic (np.roll)", shallow_water,
            _shallow_water, {"T": (8, 2), "S": (64, 5), "M": (500, 10)}, numba="loops"),
    Program("black_scholes", "call and put, polynomial CND", black_scholes, _options,
            {"T": (64,), "S": (4000,), "M": (300_000,)}),
    Program("mc_pi", "Monte Carlo pi, draws passed in", mc_pi, _points,
            {"T": (64,), "S": (100_000,), "M": (4_000_000,)}),
    Program("mc_asian", "Monte Carlo Asian call, time-step loop", mc_asian, _paths,
            {"T": (4, 32), "S": (20, 2000), "M": (50, 60_000)}),
]
