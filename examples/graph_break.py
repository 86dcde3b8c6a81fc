"""Graph breaks: a Python `if` on an array value and `np.unique` (its output
shape depends on the data) cannot be captured. At each, the graph captured so
far is compiled and run, that piece runs in numpy, and capture resumes with
its results as inputs of a new graph. `lowering.explain` names each reason and
line; `fullgraph=True` turns the first one into an error.

Run: python examples/graph_break.py    (or `make demo`)"""

import sys

import numpy as np
from _show import show

import lowering


def graph_break(x):
    y = np.tanh(x) * 2.0
    if y.sum() > 0:  # bool() of a traced value
        y = y - y.mean()
    levels = np.unique(np.floor(y))  # data-dependent output shape
    return y * levels.size + levels.max()


def main() -> bool:
    x = np.random.default_rng(0).standard_normal(32, dtype=np.float32)
    ok = show(graph_break, x)
    print("--- the same with fullgraph=True")
    try:
        lowering.compile(graph_break, fullgraph=True)(x)
        print("no error: UNEXPECTED")
        return False
    except lowering.GraphBreakError as e:
        print(f"GraphBreakError: {e}")
    return ok


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
