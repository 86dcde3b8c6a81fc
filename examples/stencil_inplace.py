"""An in-place stencil: the function writes into the caller's array and
returns nothing. Capture turns each slice assignment into a pure
`array.insert_slice` and writes the final value back into `u`, so the caller
sees exactly what numpy would have left there. `steps` is a Python int: it is
specialized (the loop is unrolled into the graph) and guarded.

Run: python examples/stencil_inplace.py    (or `make demo`)"""

import sys

import numpy as np
from _show import show


def stencil_inplace(u, steps):
    for _ in range(steps):
        u[1:-1] = 0.5 * (u[:-2] + u[2:])


def main() -> bool:
    u = np.zeros(16)
    u[8] = 1.0
    return show(stencil_inplace, u, 3)


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
