"""Column reductions (over leading axes, keeping a long innermost axis: bias
gradients, `g.sum(axis=0)`) run as one accumulating kernel on the CPU backend
(`passes/lower_to_loop.py: ColumnEmitter`), its input's expression fused in.

On C-contiguous inputs the kernel adds rows in numpy's own order, so results
must be numpy's bit for bit — NaN, ±Inf, signed zeros, huge and tiny values
included. On other layouts numpy walks memory in another order; there the
values are integer-valued (sums and products exact in any order) and the
comparison is still exact."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

import lowering
from lowering.testing import (TOLERANCES, assert_matches_numpy, edge_values, examples,
                              stage_text)
from passes.lower_to_loop import COLUMN_REDUCTION_BYTES


KINDS = {"sum": np.sum, "prod": np.prod, "max": np.max, "min": np.min}
EXPRS = {
    "x": lambda x, y: x,
    "x*(y>0)": lambda x, y: x * (y > 0),
    "(x+y)*2": lambda x, y: (x + y) * 2,
}


def _values(rng, dt, shape, kind, exact):
    """Random values of `shape`; `exact`: small integers (order-free sums and
    products), else normal values with every edge value sprinkled in."""
    if exact:
        hi = 2 if kind == "prod" else 8
        return rng.integers(-hi, hi + 1, shape).astype(dt)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        x = rng.integers(info.min, info.max, shape, dtype=dt, endpoint=True)
    else:
        x = (rng.standard_normal(shape) * 4).astype(dt)
    edges = np.array(edge_values(dt), dtype=dt)
    if kind in ("max", "min") and dt.kind == "f":
        edges = edges[~((edges == 0) & np.signbit(edges))]  # numpy's own ±0 tie is loop-dependent
    flat = x.reshape(-1)
    at = rng.choice(flat.size, min(flat.size, 4 * edges.size), replace=False)
    flat[at] = rng.choice(edges, at.size)
    return x


@st.composite
def cases(draw):
    dt = np.dtype(draw(st.sampled_from([np.float32, np.float64, np.int32, np.int64])))
    kind = draw(st.sampled_from(sorted(KINDS)))
    expr = draw(st.sampled_from(sorted(EXPRS)))
    lead = draw(st.sampled_from([(1,), (3,), (37,), (64,), (4, 9), (2, 3, 5)]))
    rows = int(np.prod(lead))
    cols = max(8, -(-COLUMN_REDUCTION_BYTES // (rows * dt.itemsize)))
    cols = draw(st.sampled_from([cols, cols + 1, cols + 15]))
    layout = draw(st.sampled_from(["C", "C", "F", "strided", "broadcast"]))
    seed = draw(st.integers(0, 2**32 - 1))
    return dt, kind, expr, lead + (cols,), layout, seed


def _layout(x: np.ndarray, layout: str) -> np.ndarray:
    if layout == "F":
        return np.asfortranarray(x)
    if layout == "strided":
        base = np.zeros(tuple(2 * n for n in x.shape), x.dtype)
        out = base[tuple(slice(None, None, 2) for _ in x.shape)]
        out[...] = x
        return out
    if layout == "broadcast":  # one row, broadcast over the reduced axes
        return np.broadcast_to(x[(0,) * (x.ndim - 1)], x.shape)
    return x


@examples(1.0)
@given(cases())
def test_column_reductions_match_numpy(case):
    dt, kind, expr, shape, layout, seed = case
    rng = np.random.default_rng(seed)
    exact_only = layout != "C" or (kind == "prod" and dt.kind in "iu")
    x = _layout(_values(rng, dt, shape, kind, exact_only), layout)
    y = _values(rng, dt, shape, kind, True)
    axes = tuple(range(len(shape) - 1))
    red, body = KINDS[kind], EXPRS[expr]

    def fn(x, y):
        return red(body(x, y), axis=axes)

    assert_matches_numpy(fn, x, y, rtol=0.0, calls=2, compiled=lowering.compile(fn, backend="cpu"))


def test_the_bias_gradient_is_one_kernel_fused_with_its_producer():
    """`(g * (h > 0)).sum(axis=0)`: the mask, the product and the column sum
    are one kernel; under the parallel threshold the schedule keeps it on one
    thread (numpy's order, bit for bit); above it the same fused kernel runs
    one chunk of rows per thread (`k1_part`) and a join adds the chunks'
    partial sums (within the reduction tolerance)."""
    from runtime import cpu

    def bias_grad(g, h):
        return (g * (h > 0)).sum(axis=0)

    for rows in (128, 1024):
        split = rows * 1024 >= cpu.parallel_threshold() and cpu.THREADS > 1
        g = np.random.default_rng(0).standard_normal((rows, 1024)).astype(np.float32)
        h = np.random.default_rng(1).standard_normal((rows, 1024)).astype(np.float32)
        ex = lowering.explain(lowering.compile(bias_grad, backend="cpu"))(g, h)
        assert ex.kernel_count == (2 if split else 1)
        (name, ops) = ex.kernels[0][0]
        assert any("reduce" in o for o in ops) and any("compare" in o for o in ops)
        assert name == ("k1_part" if split else "k1")
        kernel = stage_text(bias_grad, f"f32[{rows},1024] f32[{rows},1024]")
        assert "accumulate" in kernel
        assert ("ordered_chunks" in kernel) == split and ("threads 1" in kernel)  # (the join's)
        assert (f"threads {min(cpu.THREADS, 2)}" in kernel) == split or cpu.THREADS == 1
        got, want = lowering.compile(bias_grad, backend="cpu")(g, h), bias_grad(g, h)
        if split:
            bound = TOLERANCES.rtol(np.float32, "reduction", rows) * np.abs(g).sum(axis=0)
            assert np.all(np.abs(got - want) <= bound)
        else:
            assert np.array_equal(got, want)


def test_a_kernel_runs_before_an_unrelated_matmul():
    """The bias gradient reads the hidden gradient while it is still cached:
    its kernel is scheduled before the weight gradient's matmul, which it
    does not depend on."""
    def grads(x, dh):
        return x.T @ dh, dh.sum(axis=0)

    x = np.ones((256, 128), np.float32)
    dh = np.ones((256, 1024), np.float32)
    kernel = stage_text(grads, "f32[256,128] f32[256,1024]")
    assert kernel.index("kernel.kernel") < kernel.index("loop.extern \"matmul")
    got = lowering.compile(grads, backend="cpu")(x, dh)
    want = grads(x, dh)
    assert all(np.array_equal(a, b) for a, b in zip(got, want))


def test_a_column_sum_of_a_kept_value_joins_its_producer_when_small():
    """`d = g * (h > 0)` is returned too, so it is written; its column sum is
    still taken in the same pass (one launch, on one thread) when the domain
    is under the parallel threshold, and stays a kernel of its own (the
    producer split across threads) above it. Either way numpy's values."""
    def grad_and_bias(g, h):
        d = g * (h > 0)
        return d, d.sum(axis=0)

    from runtime import cpu

    small = cpu.parallel_threshold() // 1024 // 4  # rows of a domain under the threshold
    # (above it: the producer's kernel, then the sum in one chunk of rows per
    # thread and their join)
    for rows, launches in ((small, 1), (16 * small, 3 if cpu.THREADS > 1 else 2)):
        rng = np.random.default_rng(rows)
        g = rng.standard_normal((rows, 1024)).astype(np.float32)
        h = rng.standard_normal((rows, 1024)).astype(np.float32)
        cf = lowering.compile(grad_and_bias, backend="cpu")
        assert lowering.explain(cf)(g, h).kernel_count == launches
        kernel = stage_text(grad_and_bias, f"f32[{rows},1024] f32[{rows},1024]")
        assert ("merged" in kernel) == (launches == 1)
        got, want = cf(g, h), grad_and_bias(g, h)
        assert np.array_equal(got[0], want[0])
        if launches == 3:  # (the split sum: within the reduction tolerance)
            bound = TOLERANCES.rtol(np.float32, "reduction", rows) * np.abs(want[0]).sum(axis=0)
            assert np.all(np.abs(got[1] - want[1]) <= bound)
        else:
            assert_matches_numpy(grad_and_bias, g, h, rtol=0.0, compiled=cf)


def test_bool_sums_and_products_in_bool_are_or_and_and():
    """`np.sum(b, axis, dtype=bool)` is numpy's bool add (or), `prod` its
    multiply (and) — not i1 wrap-around (xor): a column with two Trues sums
    to True. Both the column kernel (big inputs) and a strided row reduction."""
    for rows in (COLUMN_REDUCTION_BYTES // 128, 1100):  # under and over COLUMN_REDUCTION_BYTES
        x = np.zeros((rows, 64), bool)
        x[::7, ::3] = True
        x[:, 5] = True
        x[3, 6] = True
        for f in (lambda x: np.sum(x, axis=0, dtype=bool), lambda x: np.prod(x, axis=0, dtype=bool),
                  lambda x: np.sum(x, axis=1, dtype=bool), lambda x: np.prod(x, axis=1, dtype=bool)):
            assert_matches_numpy(f, x, rtol=0.0)
