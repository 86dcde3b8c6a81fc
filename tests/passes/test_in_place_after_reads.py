"""Slice assignments written into the destination's own buffer although
other ops read it (`passes.lower_to_loop.slice_write`): ops that run before
(a product reading `x[:i]`), reads apart from the window, reads of the
window point by point ("direct": the new part computed in the writing
kernel); a shifted or reversed read of the window or a reduction of it
("staged": the new part computed first, into a buffer of its own, as numpy's
temporary); anything else — the caller's array, a read after the assignment
— is written into a copy by generated kernels ("copy"), and a read that the
analysis cannot see coming (a value computed inline in a later kernel) sends
the assignment to a copy as kernels are emitted (`Lowering.read`). Each case
is checked against numpy, and the loops that should write in place do (no
numpy copy of the whole array per iteration)."""

from __future__ import annotations

import numpy as np
import pytest

import lowering
from lowering.testing import assert_matches_numpy


def shifted(x):
    y = x + 0.5
    y[1:] = y[:-1] + 1
    return y


def reversed_window(x):
    y = x + 0.5
    y[10:90] = y[89:9:-1] * 2
    return y


def point_by_point(x):
    y = x + 0.5
    for i in range(3):
        y[i] = y[i] * 2 + 1
    return y


def broadcast_corner(x):
    y = x + 0.5
    y[0:40] = y[0:1] + y[0:40]
    return y


def reduced_window(x):
    y = x + 0.5
    y[2] = y[2].sum()
    return y


def read_after(x):
    y = x + 0.5
    z = y[:5] * 3
    y[1] = 5.0
    return y, np.sort(z)


def transposed(x):
    y = x + 0.5
    y[:, :] = y.T + 1
    return y


def augmented_twice(x, q, r):
    """`y[w] -= f(...)`: the window's new value is stored by two assignments
    (through the view, then by the assignment), as in Gram-Schmidt."""
    y = x + 0.5
    for k in range(3):
        y[:, k + 1:] -= np.outer(q[:, k], r[k, k + 1:])
    return y


def forward_substitution(L, b):
    x = np.zeros_like(b)
    for i in range(b.shape[0]):
        x[i] = (b[i] - L[i, :i] @ x[:i]) / L[i, i]
    return x


def rank_update_rows(C, A):
    C = C + 0.0
    for i in range(C.shape[0]):
        C[i, : i + 1] = 1.2 * C[i, : i + 1] + 1.5 * (A[: i + 1] @ A[i])
    return C


def knapsack(weights, values):
    """best[w:] reads best[:-w], overlapping the window: staged."""
    best = np.zeros(40)
    for w, v in zip(weights, values):
        best[w:] = np.maximum(best[w:], best[:-w] + v)
    return best


def jacobi(A, B):
    """Ping-pong stencil: the first write of each array copies the caller's
    array, the later ones write in place."""
    A, B = A.copy(), B.copy()
    for _ in range(3):
        B[1:-1] = 0.33333 * (A[:-2] + A[1:-1] + A[2:])
        A[1:-1] = 0.33333 * (B[:-2] + B[1:-1] + B[2:])
    return A, B


def read_inline_later(x):
    """t reads y before the assignment in program order, but t is computed
    inline in the kernel of t * 3, which runs after it: the assignment must
    not write over y (`Lowering.read` sends it to a copy)."""
    y = x * 2
    t = y[:-1] + 1
    y[1:] = 7.0
    return y, t * 3


def into_fresh_rows(x):
    """cur[0] = i into np.empty: the constant destination is made by the
    copy kernel itself."""
    out = []
    for i in range(3):
        cur = np.empty(x.shape[0] + 1)
        cur[0] = i
        cur[1:] = x * i
        out.append(cur.sum())
    return out


def seidel(A):
    """Row by row, each row from the rows above (written this sweep), itself
    and below: staged writes whose new part the next row reads again."""
    A = A.copy()
    for _ in range(2):
        for i in range(1, A.shape[0] - 1):
            A[i, 1:-1] = (A[i - 1, :-2] + A[i - 1, 1:-1] + A[i - 1, 2:] + A[i, :-2]
                          + A[i, 1:-1] + A[i, 2:] + A[i + 1, :-2] + A[i + 1, 1:-1]
                          + A[i + 1, 2:]) / 9.0
    return A


rng = np.random.default_rng(0)
CASES = [
    (shifted, (rng.random(100),)),
    (reversed_window, (rng.random(100),)),
    (point_by_point, (rng.random((6, 40)),)),
    (broadcast_corner, (rng.random(64),)),
    (reduced_window, (rng.random((5, 30)),)),
    (read_after, (rng.random(60),)),
    (transposed, (rng.random((24, 24)),)),
    (augmented_twice, (rng.random((12, 9)), rng.random((12, 9)), rng.random((9, 9)))),
    (forward_substitution, (np.tril(rng.random((30, 30))) + 3 * np.eye(30), rng.random((30, 4)))),
    (rank_update_rows, (rng.random((30, 30)), rng.random((30, 50)))),
    (knapsack, (np.array([3, 5, 2, 9, 1]), rng.random(5))),
    (jacobi, (rng.random(50), rng.random(50))),
    (read_inline_later, (rng.random(20),)),
    (into_fresh_rows, (rng.random(20),)),
    (seidel, (rng.random((7, 9)),)),
]


@pytest.mark.parametrize("fn,args", CASES, ids=[f.__name__ for f, _ in CASES])
def test_matches_numpy(fn, args):
    assert_matches_numpy(fn, *args, calls=2, compiled=lowering.compile(fn, backend="cpu"))


@pytest.mark.parametrize("fn,args", CASES[-2:], ids=["forward_substitution", "rank_update_rows"])
def test_loops_over_rows_write_in_place(fn, args):
    ex = lowering.explain(lowering.compile(fn, backend="cpu"))(*args)
    names = [name for graph in ex.kernels for name, _ in graph]
    assert not any("insert_slice" in n for n in names), names  # (no numpy copy per row)


@pytest.mark.parametrize("fn,args", CASES[-5:], ids=[f.__name__ for f, _ in CASES[-5:]])
def test_every_slice_assignment_is_generated(fn, args):
    """No numpy routine copies a destination: in place (direct or staged) or
    into a copy made by a kernel."""
    ex = lowering.explain(lowering.compile(fn, backend="cpu"))(*args)
    names = [name for graph in ex.kernels for name, _ in graph]
    assert not any(n.startswith("extern") for n in names), names


def test_a_clobbered_read_found_while_emitting_copies_instead():
    x = rng.random(20)
    ex = lowering.explain(lowering.compile(read_inline_later, backend="cpu"))(x)
    assert "read after it would have been written over" in str(ex)


def test_a_row_sweep_writes_every_row_in_place():
    """Each Seidel row's new values get their buffer (the next row reads
    them there), so no later kernel reads a row written over since: every
    assignment stays in place, found in one lowering attempt."""
    A = rng.random((7, 9))
    text = str(lowering.explain(lowering.compile(seidel, backend="cpu"))(A))
    assert "written over" not in text and "insert_slice (copied)" not in text, text


def jacobi_pair(A, B):
    A, B = A.copy(), B.copy()
    for _ in range(4):
        B[1:-1] = 0.33333 * (A[:-2] + A[1:-1] + A[2:])
        A[1:-1] = 0.33333 * (B[:-2] + B[1:-1] + B[2:])
    return A, B


def test_a_window_written_then_read_is_read_from_the_array():
    """`B[1:-1]` read after `B[1:-1] = f(A)` is read from B, not computed
    again from A: each step's stencil was computed inline over all earlier
    steps' (up to the recompute limit), which kept the old arrays alive and
    sent the assignments to staging buffers and copies. One kernel per
    assignment, each written in place, each reading one array."""
    import io

    from lowering.dump import capture, parse_spec, print_lower_stages

    out = io.StringIO()
    print_lower_stages(capture(jacobi_pair, parse_spec("f64[40] f64[40]")), out, ("loop",))
    text = out.getvalue()
    kernels = text.split('loop.kernel "')[1:]
    # the two copies, then one kernel per assignment, each one stencil:
    # nothing computed again
    assert sorted(k.count("arith.mulf") for k in kernels) == [0, 0] + [1] * 8, text
    assert text.count("memref.alloc") == 2, text  # the two copies: no staging buffer
    g = np.random.default_rng(4)
    assert_matches_numpy(jacobi_pair, g.random(40), g.random(40), calls=2)
