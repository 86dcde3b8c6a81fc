"""Softmax over the last axis, the row max subtracted first (the benchmark's W2).

Run: python examples/softmax.py    (or `make demo` for all examples)"""

import sys

import numpy as np
from _show import show

from lowering.examples import softmax


def main() -> bool:
    x = 4 * np.random.default_rng(0).standard_normal((64, 256), dtype=np.float32)
    return show(softmax, x)


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
