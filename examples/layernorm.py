"""LayerNorm over the last axis (the benchmark's W1, at a small size).

Run: python examples/layernorm.py    (or `make demo` for all examples)"""

import sys

import numpy as np
from _show import show

from lowering.examples import layernorm


def main() -> bool:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 256), dtype=np.float32)
    w = (1 + 0.1 * rng.standard_normal(256)).astype(np.float32)
    b = (0.1 * rng.standard_normal(256)).astype(np.float32)
    return show(layernorm, x, w, b)


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
