"""The CPU workloads of shared/BENCH.md (W1–W8) and the real programs R1–R3
(Python control flow around array code: a data-dependent branch, a row
loop), each written once as a plain numpy function, with input builders
from a fixed seed.

These functions are what every numpy-consuming peer runs (numpy eager,
lowering, torch.compile's numpy tracing) and, on float64 copies of the same
inputs, the reference every peer is checked against. Peers that need their
own code (numexpr strings, numba loops, jax.numpy) live in `bench/peers/`
and must compute the same formulas.

Constants are Python floats on purpose: under NEP 50 a numpy float64 scalar
(`np.sqrt(2 / np.pi)`, `np.float64(r)`) would promote a float32 array to
float64, while a Python float stays weak and keeps float32.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

SEED = 20241101

LN_EPS = 1e-5
RMS_EPS = 1e-6
SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
BS_R = 0.02  # Black-Scholes riskless rate
BS_V = 0.30  # Black-Scholes volatility
CND_A1, CND_A2, CND_A3, CND_A4, CND_A5 = (
    0.31938153,
    -0.356563782,
    1.781477937,
    -1.821255978,
    1.330274429,
)
RSQRT2PI = 1.0 / math.sqrt(2.0 * math.pi)


# ---- W1–W4: row-wise memory-bound kernels -----------------------------------
def layernorm(x, w, b):
    """W1 LayerNorm over the last axis, eps 1e-5."""
    xc = x - x.mean(axis=-1, keepdims=True)
    return xc / np.sqrt((xc * xc).mean(axis=-1, keepdims=True) + LN_EPS) * w + b


def softmax(x):
    """W2 Softmax over the last axis, the row max subtracted first."""
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def bias_gelu(x, b):
    """W3 bias + GELU (tanh form), the cube written as `**3`."""
    z = x + b
    return 0.5 * z * (1 + np.tanh(SQRT_2_OVER_PI * (z + 0.044715 * z**3)))


def rmsnorm(x, w):
    """W4 RMSNorm over the last axis, eps 1e-6."""
    return x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + RMS_EPS) * w


# ---- W5: an MLP train step with a hand-written backward ---------------------
def mlp_step(X, labels, W1, b1, W2, b2):
    """W5 forward + backward of relu MLP, softmax cross-entropy (mean).

    The label terms are a fancy-index gather (loss) and scatter (gradient),
    as people write them by hand. Returns (loss, dW1, db1, dW2, db2)."""
    n = X.shape[0]
    rows = np.arange(n)
    h_pre = X @ W1 + b1
    h = np.maximum(h_pre, 0)
    logits = h @ W2 + b2
    shifted = logits - logits.max(axis=1, keepdims=True)
    e = np.exp(shifted)
    s = e.sum(axis=1, keepdims=True)
    logp = shifted - np.log(s)
    loss = -logp[rows, labels].mean()
    dlogits = e / s
    dlogits[rows, labels] -= 1
    dlogits /= n
    dW2 = h.T @ dlogits
    db2 = dlogits.sum(axis=0)
    dh = dlogits @ W2.T
    dh_pre = dh * (h_pre > 0)
    dW1 = X.T @ dh_pre
    db1 = dh_pre.sum(axis=0)
    return loss, dW1, db1, dW2, db2


# ---- W8: the same MLP step, its gradient by automatic differentiation --------
def mlp_grad_step(X, labels, W1, b1, W2, b2):
    """W8 the gradient of W5's forward (`bench.models.mlp_loss`) by automatic
    differentiation. This plain version is numpy + HIPS autograd (the
    baseline); lowering runs `compile(value_and_grad(mlp_loss))`, torch
    `torch.compile(torch.func.grad_and_value(...))`, jax `jit(value_and_grad)`.
    Returns (loss, dW1, db1, dW2, db2) like W5."""
    import autograd
    import autograd.numpy as anp

    def loss(W1, b1, W2, b2):
        h = anp.maximum(anp.dot(X, W1) + b1, 0)
        logits = anp.dot(h, W2) + b2
        shifted = logits - anp.max(logits, axis=1, keepdims=True)
        logp = shifted - anp.log(anp.sum(anp.exp(shifted), axis=1, keepdims=True))
        return -anp.mean(logp[anp.arange(X.shape[0]), labels])

    value, grads = autograd.value_and_grad(loss, argnum=(0, 1, 2, 3))(W1, b1, W2, b2)
    return (value, *grads)


# ---- W6: dispatch ----------------------------------------------------------
def axpb(x):
    """W6 dispatch: `x*2+1` on 16 elements, timed per call."""
    return x * 2 + 1


# ---- W7: Black-Scholes -------------------------------------------------------
def cnd(d):
    """Cumulative normal distribution, the classic 5-term polynomial."""
    k = 1.0 / (1.0 + 0.2316419 * np.abs(d))
    ret = (
        RSQRT2PI
        * np.exp(-0.5 * d * d)
        * (k * (CND_A1 + k * (CND_A2 + k * (CND_A3 + k * (CND_A4 + k * CND_A5)))))
    )
    return np.where(d > 0, 1.0 - ret, ret)


def black_scholes(S, K, T):
    """W7 Black-Scholes call and put prices, r = 0.02, v = 0.30."""
    sqrt_t = np.sqrt(T)
    d1 = (np.log(S / K) + (BS_R + 0.5 * BS_V * BS_V) * T) / (BS_V * sqrt_t)
    d2 = d1 - BS_V * sqrt_t
    c1, c2 = cnd(d1), cnd(d2)
    k_exp = K * np.exp(-BS_R * T)
    call = S * c1 - k_exp * c2
    put = k_exp * (1.0 - c2) - S * (1.0 - c1)
    return call, put


# ---- R1–R3: real programs: Python control flow around array code -------------
ROW_FILL_ROWS = 200  # R3's loop trip count (and the output's rows)


def branch(x):
    """R1/R2 one data-dependent Python branch: which return runs depends on
    the values of x (R1's inputs take the tanh side, R2's the `y * 3` side)."""
    y = x * 2 + 1
    if y.sum() > 0:
        return np.tanh(y) - 1
    return y * 3


def row_fill(x, w):
    """R3 a Python loop of 200 iterations filling the rows of a preallocated
    output, one row per iteration."""
    out = np.zeros((ROW_FILL_ROWS, x.shape[1]), dtype=x.dtype)
    for i in range(ROW_FILL_ROWS):
        out[i] = np.tanh(x[i] * w) + i
    return out


# ---- inputs ------------------------------------------------------------------
def _rows_inputs(rows: int, cols: int, params: str):
    """x[rows, cols] ~ N(0,1), then per `params` letter: w = 1 + 0.1·N(0,1),
    b = 0.1·N(0,1), each [cols]."""
    rng = np.random.default_rng(SEED)
    out = [rng.standard_normal((rows, cols), dtype=np.float32)]
    for p in params:
        noise = 0.1 * rng.standard_normal(cols)
        out.append((1 + noise if p == "w" else noise).astype(np.float32))
    return tuple(out)


def _mlp_inputs(n: int, d_in: int, d_hidden: int, classes: int):
    rng = np.random.default_rng(SEED)
    X = rng.standard_normal((n, d_in), dtype=np.float32)
    labels = rng.integers(0, classes, n, dtype=np.int64)
    W1 = (rng.standard_normal((d_in, d_hidden)) * math.sqrt(2.0 / d_in)).astype(np.float32)
    b1 = (0.01 * rng.standard_normal(d_hidden)).astype(np.float32)
    W2 = (rng.standard_normal((d_hidden, classes)) * math.sqrt(1.0 / d_hidden)).astype(np.float32)
    b2 = (0.01 * rng.standard_normal(classes)).astype(np.float32)
    return X, labels, W1, b1, W2, b2


def _bs_inputs(n: int):
    rng = np.random.default_rng(SEED)
    S = rng.uniform(5.0, 30.0, n).astype(np.float32)
    K = rng.uniform(1.0, 100.0, n).astype(np.float32)
    T = rng.uniform(0.25, 10.0, n).astype(np.float32)
    return S, K, T


def _branch_inputs(n: int, shift: float) -> tuple:
    """x = N(0,1) + shift, float32: y = 2x + 1 sums to about n·(1 + 2·shift),
    far from 0 for the shifts used (the branch is the same in float32 and in
    the float64 reference)."""
    rng = np.random.default_rng(SEED)
    return ((rng.standard_normal(n, dtype=np.float32) + np.float32(shift)),)


@dataclass(frozen=True)
class Workload:
    key: str  # "W1"
    name: str  # "LayerNorm"
    fn: Callable
    build: dict[str, Callable[[], tuple]]  # size name -> inputs
    unit: str = "ms"  # how the table shows its time
    memory_bound: bool = True  # whether % of copy roofline means anything
    per_call: bool = False  # dispatch: time many calls, report per call
    # a goal for lowering's time, as (peer, factor): lowering ≤ factor × peer
    target: tuple[str, float] | None = None
    real_program: bool = False  # R1–R3: first calls and lowering's stats reported

    def inputs(self, size: str) -> tuple:
        return self.build[size]()


N, N_SMALL = 4096, 512  # W1-W4 rows and columns
BS_N, BS_N_SMALL = 4 * 1024 * 1024, 64 * 1024  # W7 options
BRANCH_N, BRANCH_N_SMALL = 1024 * 1024, 64 * 1024  # R2 elements
ROW_FILL_COLS, ROW_FILL_COLS_SMALL = 1024, 256  # R3 columns


def _rows(params: str) -> dict[str, Callable[[], tuple]]:
    return {
        "full": lambda: _rows_inputs(N, N, params),
        "small": lambda: _rows_inputs(N_SMALL, N_SMALL, params),
    }


def _vec16() -> tuple:
    return (np.arange(16, dtype=np.float32),)


WORKLOADS: dict[str, Workload] = {
    w.key: w
    for w in [
        Workload("W1", "LayerNorm", layernorm, _rows("wb")),
        Workload("W2", "Softmax", softmax, _rows("")),
        Workload("W3", "bias+GELU", bias_gelu, _rows("b")),
        Workload("W4", "RMSNorm", rmsnorm, _rows("w")),
        Workload(
            "W5",
            "MLP train step",
            mlp_step,
            memory_bound=False,
            build={
                "full": lambda: _mlp_inputs(256, 784, 1024, 10),
                "small": lambda: _mlp_inputs(64, 784, 256, 10),
            },
        ),
        Workload(
            "W8",
            "MLP train step, autodiff",
            mlp_grad_step,
            memory_bound=False,
            build={
                "full": lambda: _mlp_inputs(256, 784, 1024, 10),
                "small": lambda: _mlp_inputs(64, 784, 256, 10),
            },
        ),
        Workload(
            "W6",
            "dispatch x*2+1 [16]",
            axpb,
            {"full": _vec16, "small": _vec16},
            unit="us",
            memory_bound=False,
            per_call=True,
        ),
        Workload(
            "W7",
            "Black-Scholes",
            black_scholes,
            {"full": lambda: _bs_inputs(BS_N), "small": lambda: _bs_inputs(BS_N_SMALL)},
        ),
        # R1 takes the tanh branch (shift +0.5: y sums to +29.6), R2 the
        # `y * 3` branch (shift -1: -1.05e6, small -6.6e4): both sides are measured
        Workload(
            "R1",
            "branch [16]",
            branch,
            {"full": lambda: _branch_inputs(16, 0.5), "small": lambda: _branch_inputs(16, 0.5)},
            unit="us",
            memory_bound=False,
            per_call=True,
            target=("numpy", 10.0),
            real_program=True,
        ),
        Workload(
            "R2",
            "branch [1M]",
            branch,
            {
                "full": lambda: _branch_inputs(BRANCH_N, -1.0),
                "small": lambda: _branch_inputs(BRANCH_N_SMALL, -1.0),
            },
            target=("numpy", 1.0),
            real_program=True,
        ),
        Workload(
            "R3",
            "row fill [200]",
            row_fill,
            {
                "full": lambda: _rows_inputs(ROW_FILL_ROWS, ROW_FILL_COLS, "w"),
                "small": lambda: _rows_inputs(ROW_FILL_ROWS, ROW_FILL_COLS_SMALL, "w"),
            },
            memory_bound=False,
            real_program=True,
        ),
    ]
}


def as_tuple(out) -> tuple:
    """A workload's result as a tuple of arrays (W5, W7 and W8 return several)."""
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def reference(w: Workload, inputs: tuple) -> tuple[np.ndarray, ...]:
    """The float64 reference: the same function on float64 copies."""
    up = tuple(a.astype(np.float64) if a.dtype == np.float32 else a for a in inputs)
    return tuple(np.asarray(o, np.float64) for o in as_tuple(w.fn(*up)))


def traffic_bytes(inputs: tuple, outputs: tuple) -> int:
    """Roofline bytes: inputs read once plus outputs written once."""
    return sum(np.asarray(a).nbytes for a in inputs) + sum(np.asarray(o).nbytes for o in outputs)
