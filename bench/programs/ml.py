"""Machine learning in float32: an MLP forward, conv2d by im2col (columns
built with slicing loops, then one matmul), scaled dot-product attention,
LayerNorm, softmax and logistic-regression gradient steps.

Constants are Python floats (or `math.sqrt`), which keep float32 under
NEP 50; a numpy float64 scalar would promote to float64."""

from __future__ import annotations

import math

import numpy as np

from .base import Program, rng


def mlp_forward(x, W1, b1, W2, b2):
    """Two layers, ReLU between, softmax probabilities out."""
    h = np.maximum(x @ W1 + b1, 0.0)
    logits = h @ W2 + b2
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def conv2d(x, w, b):
    """Valid 2-D convolution (cross-correlation) of x[N, C, H, W] with
    w[F, C, K, K]: im2col rows filled by slicing, one matmul, bias."""
    n, c, h, wd = x.shape
    f, _, k, _ = w.shape
    oh, ow = h - k + 1, wd - k + 1
    cols = np.empty((c * k * k, n * oh * ow), dtype=x.dtype)
    row = 0
    for ci in range(c):
        for i in range(k):
            for j in range(k):
                cols[row] = x[:, ci, i : i + oh, j : j + ow].reshape(-1)
                row += 1
    out = w.reshape(f, -1) @ cols + b[:, None]
    return out.reshape(f, n, oh, ow).transpose(1, 0, 2, 3)


def attention(Q, K, V):
    """softmax(Q K^T / sqrt(d)) V over a batch of heads."""
    s = Q @ K.transpose(0, 2, 1) * (1.0 / math.sqrt(Q.shape[-1]))
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    p /= p.sum(axis=-1, keepdims=True)
    return p @ V


def layernorm(x, gamma, beta):
    """LayerNorm over the features of x[batch, tokens, features], eps 1e-5."""
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + 1e-5) * gamma + beta


def softmax(x):
    """Softmax over the last axis, the max subtracted first."""
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def logreg(X, y, w, steps):
    """Gradient descent on the logistic loss, learning rate 0.1."""
    n = X.shape[0]
    for _ in range(steps):
        p = 1.0 / (1.0 + np.exp(-(X @ w)))
        w = w - 0.1 * (X.T @ (p - y)) / n
    return w


def _f32(*arrays: np.ndarray) -> tuple:
    return tuple(a.astype(np.float32) for a in arrays)


def _mlp(n: int, d: int, hidden: int, classes: int) -> tuple:
    g = rng(40)
    return _f32(g.standard_normal((n, d)), g.standard_normal((d, hidden)) / math.sqrt(d),
                0.1 * g.standard_normal(hidden), g.standard_normal((hidden, classes))
                / math.sqrt(hidden), 0.1 * g.standard_normal(classes))


def _conv(n: int, c: int, hw: int, f: int) -> tuple:
    g = rng(41)
    return _f32(g.standard_normal((n, c, hw, hw)), g.standard_normal((f, c, 3, 3)) / 3.0,
                0.1 * g.standard_normal(f))


def _qkv(b: int, t: int, d: int) -> tuple:
    g = rng(42)
    return _f32(*(g.standard_normal((b, t, d)) for _ in range(3)))


def _tokens(b: int, t: int, d: int) -> tuple:
    g = rng(43)
    return _f32(g.standard_normal((b, t, d)), 1 + 0.1 * g.standard_normal(d),
                0.1 * g.standard_normal(d))


def _scores(b: int, t: int) -> tuple:
    return _f32(3.0 * rng(44).standard_normal((b, t, t)))


def _logreg(n: int, d: int, steps: int) -> tuple:
    g = rng(45)
    X = g.standard_normal((n, d))
    y = (X @ g.standard_normal(d) + 0.5 * g.standard_normal(n) > 0).astype(np.float64)
    return (*_f32(X, y, np.zeros(d)), steps)


def numba_variants() -> dict:
    """numba types a Python float as float64 and promotes float32 arrays with
    it, has no reductions with `axis` and no `@` of 3-d arrays: explicit row
    loops with float32 constants, `@` of 2-d blocks; conv2d's im2col rows
    copied by index loops. prange only where no BLAS call shares the
    function: numba's OpenMP threads and OpenBLAS's busy-wait against each
    other on 2 cores (mlp_forward at S: 12 ms with prange, 0.1 ms without)."""
    from numba import njit, prange

    zero, one = np.float32(0.0), np.float32(1.0)
    eps, lr = np.float32(1e-5), np.float32(0.1)

    @njit
    def mlp_forward_nb(x, W1, b1, W2, b2):
        h = x @ W1
        for i in range(h.shape[0]):
            for j in range(h.shape[1]):
                h[i, j] = max(h[i, j] + b1[j], zero)
        logits = h @ W2
        out = np.empty_like(logits)
        for i in range(logits.shape[0]):
            row = logits[i] + b2
            e = np.exp(row - row.max())
            out[i] = e / e.sum()
        return out

    @njit
    def conv2d_nb(x, w, b):
        n, c, h, wd = x.shape
        f, _, k, _ = w.shape
        oh, ow = h - k + 1, wd - k + 1
        cols = np.empty((c * k * k, n * oh * ow), dtype=x.dtype)
        for r in range(c * k * k):
            ci = r // (k * k)
            i = (r // k) % k
            j = r % k
            for s in range(n):
                for p in range(oh):
                    for q in range(ow):
                        cols[r, (s * oh + p) * ow + q] = x[s, ci, i + p, j + q]
        out = np.ascontiguousarray(w).reshape(f, c * k * k) @ cols
        for r in range(f):
            out[r] += b[r]
        return out.reshape(f, n, oh, ow).transpose(1, 0, 2, 3)

    @njit
    def attention_nb(Q, K, V):
        scale = np.float32(1.0 / np.sqrt(Q.shape[-1]))
        out = np.empty_like(Q)
        for h in range(Q.shape[0]):
            s = (Q[h] @ K[h].T) * scale
            for i in range(s.shape[0]):
                e = np.exp(s[i] - s[i].max())
                s[i] = e / e.sum()
            out[h] = s @ V[h]
        return out

    @njit(parallel=True)
    def layernorm_nb(x, gamma, beta):
        rows = x.reshape(-1, x.shape[-1])
        out = np.empty_like(rows)
        for r in prange(rows.shape[0]):
            c = rows[r] - rows[r].mean()
            out[r] = c / np.sqrt((c * c).mean() + eps) * gamma + beta
        return out.reshape(x.shape)

    @njit(parallel=True)
    def softmax_nb(x):
        rows = x.reshape(-1, x.shape[-1])
        out = np.empty_like(rows)
        for r in prange(rows.shape[0]):
            e = np.exp(rows[r] - rows[r].max())
            out[r] = e / e.sum()
        return out.reshape(x.shape)

    @njit
    def logreg_nb(X, y, w, steps):
        n = np.float32(X.shape[0])
        for _ in range(steps):
            p = one / (one + np.exp(-(X @ w)))
            w = w - lr * (X.T @ (p - y)) / n
        return w

    return {
        "mlp_forward": mlp_forward_nb,
        "conv2d": conv2d_nb,
        "attention": attention_nb,
        "layernorm": layernorm_nb,
        "softmax": softmax_nb,
        "logreg": logreg_nb,
    }


def jax_variants() -> dict:
    import jax
    import jax.numpy as jnp
    from jax import lax

    def mlp_forward_j(x, W1, b1, W2, b2):
        h = jnp.maximum(x @ W1 + b1, 0.0)
        return jax.nn.softmax(h @ W2 + b2, axis=1)

    def conv2d_j(x, w, b):
        n, c, h, wd = x.shape
        f, _, k, _ = w.shape
        oh, ow = h - k + 1, wd - k + 1
        rows = [x[:, ci, i : i + oh, j : j + ow].reshape(-1)
                for ci in range(c) for i in range(k) for j in range(k)]
        out = w.reshape(f, -1) @ jnp.stack(rows) + b[:, None]
        return out.reshape(f, n, oh, ow).transpose(1, 0, 2, 3)

    def attention_j(Q, K, V):
        s = Q @ K.transpose(0, 2, 1) * (1.0 / math.sqrt(Q.shape[-1]))
        return jax.nn.softmax(s, axis=-1) @ V

    def layernorm_j(x, gamma, beta):
        mu = x.mean(axis=-1, keepdims=True)
        var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
        return (x - mu) / jnp.sqrt(var + 1e-5) * gamma + beta

    def softmax_j(x):
        return jax.nn.softmax(x, axis=-1)

    def logreg_j(X, y, w, steps):
        n = X.shape[0]

        def body(_, w):
            p = 1.0 / (1.0 + jnp.exp(-(X @ w)))
            return w - 0.1 * (X.T @ (p - y)) / n

        return lax.fori_loop(0, steps, body, w)

    return {
        "mlp_forward": mlp_forward_j,
        "conv2d": conv2d_j,
        "attention": attention_j,
        "layernorm": layernorm_j,
        "softmax": softmax_j,
        "logreg": logreg_j,
    }


PROGRAMS = [
    Program("mlp_forward", "2-layer MLP forward, ReLU, softmax", mlp_forward, _mlp,
            {"T": (8, 16, 32, 4), "S": (128, 256, 256, 10), "M": (1024, 784, 512, 10)},
            numba="loops"),
    Program("conv2d", "conv2d by im2col (slicing loops) and one matmul", conv2d, _conv,
            {"T": (1, 2, 6, 3), "S": (2, 8, 16, 8), "M": (8, 16, 96, 32)}, numba="loops"),
    Program("attention", "softmax(QK^T/sqrt(d))V, batch of heads", attention, _qkv,
            {"T": (2, 8, 4), "S": (4, 64, 32), "M": (16, 512, 64)}, numba="loops"),
    Program("layernorm", "LayerNorm over features", layernorm, _tokens,
            {"T": (2, 4, 16), "S": (4, 64, 256), "M": (16, 512, 768)}, numba="loops"),
    Program("softmax", "softmax over the last axis", softmax, _scores,
            {"T": (2, 8), "S": (8, 64), "M": (16, 512)}, numba="loops"),
    Program("logreg", "logistic regression, gradient-descent steps", logreg, _logreg,
            {"T": (32, 8, 3), "S": (500, 32, 10), "M": (50_000, 128, 10)}, numba="loops"),
]
