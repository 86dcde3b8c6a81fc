"""Column reductions on the GPU backend (a bias gradient, `x.sum(axis=0)`):
lower-to-loop splits their rows into chunks (`Lowering.column_split`), the
Triton emitter runs one program per chunk and block of columns
(`KernelEmitter.chunks`), each walking its chunk's rows in order into a row
of partial results, and a join adds the partials in chunk order. Checked on
a machine without a GPU: the kernels' shape (how many programs, which
reductions split), every kernel compiling for sm_90, and their values in
Triton's interpreter against numpy (sums within the reduction tolerance of
their row count; max, min and integer sums exactly; products unsplit)."""

from __future__ import annotations

import os
import tempfile

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from xdsl.parser import Parser

os.environ.setdefault("TRITON_CACHE_DIR", tempfile.mkdtemp(prefix="lowering-test-triton-"))

pytest.importorskip("triton")

import lowering  # noqa: E402
from lowering.backends import triton_launch as TL  # noqa: E402
from lowering.codegen import triton_kernel as TK  # noqa: E402
from lowering.explain import explain  # noqa: E402
from lowering.pipeline import GPU_COLUMN_SPLIT, context, lower  # noqa: E402
from lowering.testing import TOLERANCES, assert_same_value  # noqa: E402
from passes.lower_to_loop import COLUMN_CHUNK_ROWS  # noqa: E402


def colsum(x):
    return x.sum(axis=0)


def colmax(x):
    return np.max(x * 2.0, axis=0)


def colmin(x):
    return np.min(np.abs(x) - 1.0, axis=0)


def colprod(x):
    return np.prod(x, axis=0)


def bias_grad(g, w):
    """A gradient's shape: an elementwise chain, then its column sum."""
    return (g * w + 1.0).sum(axis=0), np.tanh(g) * 2.0


def gpu_level(fn, args):
    """The kernel level of fn on `args` as the GPU pipeline leaves it."""
    rep = explain(lowering.compile(fn, backend="numpy"))(*args)
    (graph,) = rep.graphs
    module = Parser(context(), graph).parse_module()
    final, _ = lower(module, "gpu", ["C"] * len(args))
    return final


def kernels(fn, args):
    return {tk.name: tk for tk in TK.emit_module(gpu_level(fn, args))}


def test_a_tall_column_sum_runs_in_chunks_of_rows_on_enough_programs():
    x = np.zeros((4096, 1024), np.float32)
    ks = kernels(colsum, [x])
    part = next(tk for name, tk in ks.items() if name.endswith("_part"))
    assert any(name.endswith("_join") for name in ks)
    assert part.strategy == "ordered"
    block, wanted = GPU_COLUMN_SPLIT
    blocks = 1024 // block
    # enough chunks for the programs wanted, each of COLUMN_CHUNK_ROWS rows or more
    n = min(-(-wanted // blocks), 4096 // COLUMN_CHUNK_ROWS)
    assert part.programs({}) == n * blocks > blocks


def test_short_columns_and_products_keep_one_ordered_pass():
    few = kernels(colsum, [np.zeros((COLUMN_CHUNK_ROWS + 1, 512), np.float32)])
    assert not any(name.endswith("_part") for name in few)
    prods = kernels(colprod, [np.zeros((4096, 256), np.float32)])
    assert not any(name.endswith("_part") for name in prods)
    (tk,) = prods.values()
    assert tk.strategy == "ordered" and tk.programs({}) == 256 // TK.ORDERED_BLOCK


def test_split_kernels_compile_for_sm90():
    for fn, args in ((colsum, [np.zeros((3000, 300), np.float32)]),
                     (colmax, [np.zeros((2000, 50), np.float64)]),
                     (bias_grad, [np.zeros((1000, 200), np.float32), np.zeros(200, np.float32)])):
        ks = kernels(fn, args)
        assert any(name.endswith("_part") for name in ks), fn.__name__
        for tk in ks.values():
            assert TL.compile_for(tk).asm["cubin"]


def _run(fn, args):
    return TL.run_module(gpu_level(fn, args), args)


@pytest.mark.parametrize("rows", [COLUMN_CHUNK_ROWS * 2, 1000, 4097])
def test_split_sums_match_numpy(rows):
    rng = np.random.default_rng(rows)
    x = rng.standard_normal((rows, 130)).astype(np.float32)
    x[3, 5] = -0.0
    (got,) = _run(colsum, [x])
    assert_same_value(got, colsum(x), rtol=TOLERANCES.rtol(np.float32, "reduction", rows))
    # a column of -0.0 sums to +0.0 (each chunk starts from +0.0)
    z = np.full((rows, 3), -0.0, np.float32)
    (got,) = _run(colsum, [z])
    assert_same_value(got, colsum(z), rtol=0.0)


def test_split_integer_sums_max_and_min_are_exact():
    rng = np.random.default_rng(3)
    i = rng.integers(-2**31, 2**31 - 1, size=(3001, 70), dtype=np.int64)
    (got,) = _run(colsum, [i])
    assert_same_value(got, colsum(i), rtol=0.0)  # (wrapping adds: any order)
    x = rng.standard_normal((3001, 70))
    x[17, 3], x[2999, 4], x[1500, 5] = np.nan, np.inf, -np.inf
    for fn in (colmax, colmin):
        (got,) = _run(fn, [x])
        assert_same_value(got, fn(x), rtol=0.0)


@settings(max_examples=20, deadline=None)
@given(hnp.arrays(np.float64, st.tuples(st.integers(COLUMN_CHUNK_ROWS * 2, 700),
                                        st.integers(1, 140)),
                  elements=st.floats(-1e6, 1e6, allow_subnormal=True)))
def test_split_fused_column_sums_match_numpy(g):
    w = np.linspace(-2.0, 2.0, g.shape[1])
    got = _run(bias_grad, [g, w])
    want = bias_grad(g, w)
    # relative to the sum of the terms' magnitudes (a sum that cancels)
    scale = np.abs(g * w + 1.0).sum(axis=0)
    err = np.abs(got[0] - want[0])
    assert np.all(err <= TOLERANCES.rtol(np.float64, "reduction", g.shape[0]) * scale + 1e-300), \
        (err.max(), scale)
    assert_same_value(got[1], want[1])


def test_chunk_bounds_of_many_rows_take_64_bit_indices():
    """m c // n and n i + n - 1 reach m n: a kernel whose buffers fit int32
    indices takes int64 ones where m (n + 1) does not (the chunk count set
    high here on a small kernel; at most COLUMN_CHUNKS_MAX chunks are made,
    so it takes some 16 M rows for real)."""
    from xdsl.dialects.builtin import IntegerAttr, i64

    from dialects import kernel as K
    from passes.lower_to_loop import COLUMN_CHUNKS_MAX

    level = gpu_level(colsum, [np.zeros((4096, 256), np.float32)])
    (part,) = [k for k in level.walk() if isinstance(k, K.KernelOp)
               and "ordered_chunks" in k.attributes]
    assert part.attributes["ordered_chunks"].value.data <= COLUMN_CHUNKS_MAX
    assert TK.KernelEmitter(part).index_bits == 32
    part.attributes["ordered_chunks"] = IntegerAttr(1 << 20, i64)
    assert TK.KernelEmitter(part).index_bits == 64


def test_half_column_sums_keep_numpys_row_by_row_rounding():
    """numpy rounds each row's add of a float16 column sum to float16 (4096
    ones sum to 2048): such sums are not split (chunks from 0 would sum to
    another value). (bfloat16 sums accumulate in float32, rounded once:
    lowering/testing.py's ACCUMULATES_IN; split or not, 4096.)"""
    from dialects.dtypes import BFLOAT16

    x = np.ones((4096, 16), np.float16)
    assert not any(name.endswith("_part") for name in kernels(colsum, [x]))
    (got,) = _run(colsum, [x])
    assert_same_value(np.asarray(got), colsum(x), rtol=0.0)
    b = np.ones((4096, 16), BFLOAT16)
    (got,) = _run(colsum, [b])
    assert_same_value(np.asarray(got), b.astype(np.float32).sum(axis=0).astype(BFLOAT16),
                      rtol=0.0)
