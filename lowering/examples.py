"""Built-in example programs: plain numpy functions, nothing compiler-specific.

This is the one home of their code: `python -m lowering.dump --example NAME`
dumps them, `examples/*.py` (`make demo`) runs and checks them, and the tests
use them. Examples that only the demo needs (the in-place stencil, the graph
breaks) live in `examples/` itself, as user code.

Each comes with the argument spec it is dumped with by default (the workloads
of the project's benchmark) and a small spec for quick runs; the spec syntax
is `lowering.dump`'s (`f32[8,16] int:3 ...`)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


def layernorm(x, w, b, eps=1e-5):
    """LayerNorm over the last axis (benchmark W1)."""
    xc = x - x.mean(axis=-1, keepdims=True)
    var = (xc * xc).mean(axis=-1, keepdims=True)
    return xc / np.sqrt(var + eps) * w + b


def softmax(x):
    """Softmax over the last axis, the row max subtracted first (W2)."""
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def gelu(x, b):
    """Bias + GELU, tanh form, written with `**3` (W3)."""
    # math.sqrt, not np.sqrt: a Python float is a weak scalar and keeps the
    # float32 arrays float32, where an np.float64 would promote them (NEP 50).
    z = x + b
    return 0.5 * z * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (z + 0.044715 * z**3)))


def rmsnorm(x, w, eps=1e-6):
    """RMSNorm over the last axis (W4)."""
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def mlp(X, W1, b1, W2, b2):
    """Forward pass of a 2-layer MLP with ReLU: the logits (W5's forward)."""
    h = np.maximum(X @ W1 + b1, 0.0)
    return h @ W2 + b2


@dataclass(frozen=True)
class Example:
    name: str
    fn: Callable
    args: str  # default argument spec for `lowering.dump --example`
    small_args: str  # a quick size for demos and tests

    @property
    def about(self) -> str:
        return (self.fn.__doc__ or "").strip().splitlines()[0]


EXAMPLES: dict[str, Example] = {e.name: e for e in [
    Example("layernorm", layernorm, "f32[4096,4096] f32[4096] f32[4096]",
            "f32[64,256] f32[256] f32[256]"),
    Example("softmax", softmax, "f32[4096,4096]", "f32[64,256]"),
    Example("gelu", gelu, "f32[4096,4096] f32[4096]", "f32[64,256] f32[256]"),
    Example("rmsnorm", rmsnorm, "f32[4096,4096] f32[4096]", "f32[64,256] f32[256]"),
    Example("mlp", mlp, "f32[256,784] f32[784,1024] f32[1024] f32[1024,10] f32[10]",
            "f32[32,64] f32[64,128] f32[128] f32[128,10] f32[10]"),
]}
