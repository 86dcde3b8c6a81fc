"""The models of BENCH.md's rematerialization anchor and the autodiff training
step (W8), each written once in numpy and, for the peers, in torch and
jax.numpy with the same formulas.

- `mlp3`: 3-layer GELU MLP, 256×784 → 1024 → 1024 → 10, MSE loss.
- `block`: a transformer block, d=64, t=128: layernorm, single-head attention
  with softmax, residual, layernorm, GELU MLP (d → 4d → d), residual; loss
  mean of squares.
- `mlp_loss`: W5's relu MLP with softmax cross-entropy, as a forward-only
  loss (its gradient is what W5 writes by hand).
"""

from __future__ import annotations

import math

import numpy as np

SEED = 20241101
GELU_C = math.sqrt(2.0 / math.pi)
LN_EPS = 1e-5


# ---- numpy ------------------------------------------------------------------
def gelu(x):
    return 0.5 * x * (1.0 + np.tanh(GELU_C * (x + 0.044715 * x * x * x)))


def layernorm(x, w, b):
    xc = x - x.mean(axis=-1, keepdims=True)
    return xc / np.sqrt((xc * xc).mean(axis=-1, keepdims=True) + LN_EPS) * w + b


def mlp3(W1, b1, W2, b2, W3, b3, X, Y):
    h = gelu(X @ W1 + b1)
    h = gelu(h @ W2 + b2)
    d = h @ W3 + b3 - Y
    return (d * d).mean()


def block(ln1_w, ln1_b, Wq, Wk, Wv, Wo, ln2_w, ln2_b, W1, b1, W2, b2, x):
    d = x.shape[-1]
    h = layernorm(x, ln1_w, ln1_b)
    q, k, v = h @ Wq, h @ Wk, h @ Wv
    s = (q @ k.T) * (1.0 / math.sqrt(d))
    s = s - s.max(axis=-1, keepdims=True)
    p = np.exp(s)
    p = p / p.sum(axis=-1, keepdims=True)
    x = x + (p @ v) @ Wo
    h = layernorm(x, ln2_w, ln2_b)
    x = x + gelu(h @ W1 + b1) @ W2 + b2
    return (x * x).mean()


def mlp_loss(X, labels, W1, b1, W2, b2):
    """W5's forward: relu MLP, mean softmax cross-entropy."""
    h = np.maximum(X @ W1 + b1, 0)
    logits = h @ W2 + b2
    shifted = logits - logits.max(axis=1, keepdims=True)
    logp = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    return -logp[np.arange(X.shape[0]), labels].mean()


def mlp3_inputs():
    r = np.random.default_rng(SEED)
    f = np.float32

    def lin(i, o):
        return ((r.standard_normal((i, o)) / math.sqrt(i)).astype(f),
                (0.01 * r.standard_normal(o)).astype(f))

    W1, b1 = lin(784, 1024)
    W2, b2 = lin(1024, 1024)
    W3, b3 = lin(1024, 10)
    X = r.standard_normal((256, 784), dtype=f)
    Y = r.standard_normal((256, 10), dtype=f)
    return (W1, b1, W2, b2, W3, b3, X, Y), 6


def block_inputs(t: int = 128, d: int = 64):
    r = np.random.default_rng(SEED)
    f = np.float32

    def mat(i, o):
        return (r.standard_normal((i, o)) / math.sqrt(i)).astype(f)

    ones, zeros = np.ones(d, f), np.zeros(d, f)
    params = (ones, zeros, mat(d, d), mat(d, d), mat(d, d), mat(d, d), ones.copy(), zeros.copy(),
              mat(d, 4 * d), np.zeros(4 * d, f), mat(4 * d, d), zeros.copy())
    x = r.standard_normal((t, d), dtype=f)
    return (*params, x), 12


# ---- torch ------------------------------------------------------------------
def torch_models():
    import torch

    def tgelu(x):
        return 0.5 * x * (1.0 + torch.tanh(GELU_C * (x + 0.044715 * x * x * x)))

    def tln(x, w, b):
        xc = x - x.mean(dim=-1, keepdim=True)
        return xc / torch.sqrt((xc * xc).mean(dim=-1, keepdim=True) + LN_EPS) * w + b

    def t_mlp3(W1, b1, W2, b2, W3, b3, X, Y):
        h = tgelu(X @ W1 + b1)
        h = tgelu(h @ W2 + b2)
        d = h @ W3 + b3 - Y
        return (d * d).mean()

    def t_block(ln1_w, ln1_b, Wq, Wk, Wv, Wo, ln2_w, ln2_b, W1, b1, W2, b2, x):
        d = x.shape[-1]
        h = tln(x, ln1_w, ln1_b)
        q, k, v = h @ Wq, h @ Wk, h @ Wv
        s = (q @ k.T) * (1.0 / math.sqrt(d))
        s = s - s.amax(dim=-1, keepdim=True)
        p = torch.exp(s)
        p = p / p.sum(dim=-1, keepdim=True)
        x = x + (p @ v) @ Wo
        h = tln(x, ln2_w, ln2_b)
        x = x + tgelu(h @ W1 + b1) @ W2 + b2
        return (x * x).mean()

    def t_mlp_loss(X, labels, W1, b1, W2, b2):
        h = torch.clamp_min(X @ W1 + b1, 0)
        logits = h @ W2 + b2
        shifted = logits - logits.amax(dim=1, keepdim=True)
        logp = shifted - torch.log(torch.exp(shifted).sum(dim=1, keepdim=True))
        return -logp[torch.arange(X.shape[0]), labels].mean()

    return {"mlp3": t_mlp3, "block": t_block, "mlp_loss": t_mlp_loss}


MODELS = {"mlp3": (mlp3, mlp3_inputs), "block": (block, block_inputs)}
