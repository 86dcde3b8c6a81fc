"""Kernel-level codegen decisions of the LLVM emitter, checked on the IR it
plans from and on results: a reduce's per-element values kept for a later
map (softmax computes exp once per element)."""

from __future__ import annotations

import io
import re

import numpy as np
import pytest
from xdsl.parser import Parser

import lowering
from lowering.testing import TOLERANCES, assert_matches_numpy, assert_same_value, stage_text
from dialects import kernel as K
from dialects import loop as L
from lowering import dump
from lowering.codegen import llvm as emitter
from lowering.pipeline import context
from passes import schedule


def kernel_ops(example: str, args: str) -> list[list]:
    """The top-level ops of every kernel of a built-in example."""
    out = io.StringIO()
    assert dump.main(["--example", example, "--args", args, "--stage", "kernel"], out=out) == 0
    module = Parser(context(), out.getvalue()).parse_module()
    return [
        [o for o in k.body.block.ops if not isinstance(o, L.YieldOp)]
        for k in module.walk()
        if isinstance(k, K.KernelOp)
    ]


def test_softmax_keeps_exp_row():
    (ops,) = kernel_ops("softmax", "f32[8,64]")
    plan = emitter.plan_row_cache(ops)
    assert len(plan) == 1
    (red, (m, v)) = next(iter(plan.items()))
    assert red.kind.data == "sum" and isinstance(m, L.MapOp)
    assert v.owner.name == "math.exp"


@pytest.mark.parametrize(
    "example,args", [("layernorm", "f32[8,64] f32[64] f32[64]"), ("rmsnorm", "f32[8,64] f32[64]")]
)
def test_no_row_for_cheap_values(example, args):
    for ops in kernel_ops(example, args):
        assert emitter.plan_row_cache(ops) == {}


def test_no_row_past_the_size_limit(monkeypatch):
    monkeypatch.setattr(emitter, "ROW_CACHE_BYTES", 64 * 4 - 4)
    (ops,) = kernel_ops("softmax", "f32[8,64]")
    assert emitter.plan_row_cache(ops) == {}


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("cols", [1, 7, 8, 37, 200, 1000])
def test_kept_row_gives_the_recomputed_values(dtype, cols, monkeypatch):
    """Bitwise the same results with and without the kept row, for widths
    that exercise the unrolled, vector and scalar steps; NaN, inf and huge
    negative values (exp's general path) included."""
    rng = np.random.default_rng(cols)
    x = (rng.standard_normal((5, cols)) * 30).astype(dtype)
    x[1, 0], x[2, -1], x[3, cols // 2] = np.nan, np.inf, -np.inf
    x[4, ::3] = -1e4
    got = lowering.compile(softmax, backend="cpu")(x)
    monkeypatch.setattr(emitter, "ROW_CACHE_BYTES", 0)
    lowering.pipeline.clear_programs()
    again = lowering.compile(softmax, backend="cpu")(x)
    np.testing.assert_array_equal(got, again)
    with np.errstate(invalid="ignore"):
        want = softmax(x)
    fi = np.finfo(dtype)  # subnormal results: a few of the smallest steps
    np.testing.assert_allclose(got, want, rtol=8 * fi.eps, atol=4 * fi.smallest_subnormal)


def test_no_row_when_the_map_stores_into_what_the_value_reads():
    """In place (`x[...] = exp(x - m) / s` kept in one kernel): the map's
    stores would change the input of the kept values."""
    out = io.StringIO()
    dump.main(["--example", "softmax", "--args", "f32[8,64]", "--stage", "kernel"], out=out)
    text = out.getvalue()
    store = re.search(r"loop\.store (%\d+), (%\d+)\[", text)
    assert store is not None
    text = text.replace(store.group(0), f"loop.store {store.group(1)}, %0[")
    module = Parser(context(), text).parse_module()
    (k,) = [k for k in module.walk() if isinstance(k, K.KernelOp)]
    ops = [o for o in k.body.block.ops if not isinstance(o, L.YieldOp)]
    assert emitter.plan_row_cache(ops) == {}


# ---- streamed (non-temporal) stores -------------------------------------------
def affine_map(x):
    return x * 2.0 + 1.0


@pytest.mark.parametrize("shape", [(64, 37), (16, 64), (40004,), (40001,), (13, 8), (3,)])
@pytest.mark.parametrize("fn", [affine_map, softmax])
def test_streamed_stores_give_the_same_values(shape, fn, monkeypatch):
    """Every output streamed (threshold 0): rows and thread halves that start
    misaligned take the cached version, the others the streaming one; the
    values are the same."""
    if fn is softmax and len(shape) == 1:
        shape = (1, shape[0])
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    want = lowering.compile(fn, backend="cpu")(x)
    monkeypatch.setattr(schedule, "STREAM_BYTES", 0)
    lowering.pipeline.clear_programs()
    got = lowering.compile(fn, backend="cpu")(x)
    np.testing.assert_array_equal(got, want)
    if fn is affine_map:
        np.testing.assert_array_equal(got, fn(x))


def test_streamed_buffers_are_the_written_only_big_outputs(monkeypatch):
    out = io.StringIO()
    dump.main(["--example", "softmax", "--args", "f32[8,64]", "--stage", "kernel"], out=out)
    assert "nontemporal" not in out.getvalue()
    monkeypatch.setattr(schedule, "STREAM_BYTES", 8 * 64 * 4)
    out = io.StringIO()
    dump.main(["--example", "softmax", "--args", "f32[8,64]", "--stage", "all"], out=out)
    text = out.getvalue()
    assert "nontemporal = array<i64: 1>}" in text  # the output, not the input
    assert "!nontemporal" in text and "sfence" in text


# ---- max/min reductions: vmaxps step, exact redo for rows with a NaN -----------
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("cols", [5, 8, 37, 300])
@pytest.mark.parametrize("kind", ["max", "min"])
def test_extreme_reductions_with_nan_rows(dtype, cols, kind):
    """NaN anywhere in a row (unrolled, vector and scalar steps) gives NaN;
    rows without one match numpy; infinities and signed zeros included."""
    rng = np.random.default_rng(cols)
    x = rng.standard_normal((cols + 3, cols)).astype(dtype)
    for r in range(cols):  # row r has a NaN at column r
        x[r, r] = np.nan
    x[cols, :] = -np.inf
    x[cols + 1, ::2] = 0.0
    x[cols + 1, 1::2] = -0.0
    x[cols + 2, cols // 2] = np.inf
    fn = (lambda a: a.max(axis=1)) if kind == "max" else (lambda a: a.min(axis=1))
    got = lowering.compile(fn, backend="cpu")(x)
    np.testing.assert_array_equal(got, fn(x))
    assert np.isnan(got[:cols]).all()


# ---- merged point-wise kernels -------------------------------------------------
def black_scholes(S, K, T):
    from bench.workloads import black_scholes as bs

    return bs(S, K, T)


def reversed_mix(x):
    """Two kernels over the same points, the second reading the first one's
    output in reverse: not mergeable."""
    y = np.exp(np.sin(x)) / (1.0 + np.log(np.abs(x) + 1.0))
    return y[::-1] * y + y[::-1] / (y + 1.0) - y


def chain_with_output(x):
    """An intermediate that is also returned stays stored."""
    a = np.log(np.abs(x) + 1.0)
    b = a / (1.0 + np.abs(x))
    return b * np.exp(-a), a


def merged_names(fn, args: str) -> list[list[str]]:
    out = io.StringIO()
    assert (
        dump.main(
            [f"tests/codegen/test_kernels.py::{fn}", "--args", args, "--stage", "kernel"], out=out
        )
        == 0
    )
    module = Parser(
        context(), out.getvalue()[out.getvalue().index("builtin.module") :]
    ).parse_module()
    return [
        [n.data for n in k.attributes["merged"].data]
        if "merged" in k.attributes
        else [k.sym_name.data]
        for k in module.walk()
        if isinstance(k, K.KernelOp)
    ]


def test_black_scholes_is_one_kernel():
    assert merged_names("black_scholes", "f32[1000] f32[1000] f32[1000]") == [
        ["k1", "k2", "k3", "k4", "k5"]
    ]


def test_no_merge_across_points():
    assert merged_names("reversed_mix", "f32[1000]") == [["k1"], ["k2"]]


@pytest.mark.parametrize("fn,n", [(black_scholes, 3), (reversed_mix, 1), (chain_with_output, 1)])
@pytest.mark.parametrize("size", [7, 1000, 70001])
def test_merged_kernels_give_the_same_values(fn, n, size, monkeypatch):
    """Bitwise the values of the kernels run one after the other."""
    rng = np.random.default_rng(size)
    args = [rng.uniform(0.5, 30, size).astype(np.float32) for _ in range(n)]
    args[0][::5] = -args[0][::5]
    got = lowering.compile(fn, backend="cpu")(*args)
    monkeypatch.setattr(schedule, "merge_pointwise", lambda f, *limit: None)
    lowering.pipeline.clear_programs()
    again = lowering.compile(fn, backend="cpu")(*args)
    for g, a in zip(
        got if isinstance(got, tuple) else (got,), again if isinstance(again, tuple) else (again,)
    ):
        np.testing.assert_array_equal(g, a)
    with np.errstate(all="ignore"):
        want = fn(*args)
    for g, w in zip(
        got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)
    ):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6 * np.nanmax(np.abs(w)))


def test_costly_row_pass_prefetches_the_next_row():
    out = io.StringIO()
    dump.main(["--example", "softmax", "--args", "f32[8,256]", "--stage", "llvm"], out=out)
    assert "llvm.prefetch" in out.getvalue()
    out = io.StringIO()
    dump.main(
        ["--example", "layernorm", "--args", "f32[8,256] f32[256] f32[256]", "--stage", "llvm"],
        out=out,
    )
    assert "llvm.prefetch" not in out.getvalue()  # no transcendental pass to hide it behind


# ---- horizontal fusion: kernels over the same rows ---------------------------
def three_row_stats(x):
    """Three independent reductions of the same rows."""
    return x.sum(-1), x.max(-1), (x * x).sum(-1)


def reversed_rows(x):
    """The second kernel reads the first one's output at another row: not
    mergeable (it would read rows not yet written)."""
    s = x.sum(-1)
    return s, (x * s[::-1, None]).max(-1)


def shifted_rows(x):
    """A later kernel reads the rows an earlier one wrote, at the same row:
    mergeable. (The flattened gather index keeps lowering from fusing them.)"""
    m = x.max(axis=1, keepdims=True)
    e = np.exp(x - m)
    s = e.sum(axis=1, keepdims=True)
    flat = (np.log(s) - m).reshape(-1)
    return e / s, flat[np.arange(x.shape[0])], m


def test_independent_row_reductions_are_one_kernel():
    assert merged_names("three_row_stats", "f32[64,300]") == [["k1", "k2", "k3"]]
    # (the gather is a kernel of its own, over all of its indices; `flat`,
    # which it reads in part, is computed in full for its flags, k4, a pass
    # over the same rows that stores nothing: merged too)
    assert merged_names("shifted_rows", "f32[64,300]")[0] == ["k1", "k2", "k3", "k4"]


def test_no_row_merge_across_rows():
    names = merged_names("reversed_rows", "f32[64,300]")
    assert len(names) == 2 and all(len(n) == 1 for n in names)


@pytest.mark.parametrize("fn", [three_row_stats, reversed_rows, shifted_rows])
@pytest.mark.parametrize("shape", [(1, 1), (3, 17), (64, 300), (0, 4)])  # each takes a max: no empty rows
def test_row_merged_kernels_give_the_same_values(fn, shape, monkeypatch):
    """Bitwise the values of the kernels run one after the other, and numpy's
    within the reduction tolerance."""
    rng = np.random.default_rng(sum(shape))
    x = rng.standard_normal(shape).astype(np.float32)
    if x.size:
        special = np.array([np.nan, np.inf, -np.inf, -0.0], np.float32)
        x.flat[::7] = np.resize(special, x.flat[::7].shape)
    with np.errstate(all="ignore"):
        got = lowering.compile(fn, backend="cpu")(x)
        monkeypatch.setattr(schedule, "merge_rows", lambda f: None)
        lowering.pipeline.clear_programs()
        again = lowering.compile(fn, backend="cpu")(x)
        want = fn(x)
    for g, a, w in zip(got, again, want):
        np.testing.assert_array_equal(g, a)
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=1e-5 * max(shape[-1], 1), atol=0)


def _kernel_module(fn, args: str):
    out = io.StringIO()
    assert dump.main([f"tests/codegen/test_kernels.py::{fn}", "--args", args, "--stage", "kernel"],
                     out=out) == 0
    text = out.getvalue()
    return Parser(context(), text[text.index("builtin.module"):]).parse_module()


def narrow_product(h, w):
    return np.maximum(h, 0) @ w


def test_independent_reductions_share_one_pass():
    from lowering.codegen.llvm import reduction_groups

    def groups(fn, args):
        out = []
        for k in _kernel_module(fn, args).walk():
            if isinstance(k, K.KernelOp):
                ops = [o for o in k.body.block.ops if not isinstance(o, L.YieldOp)]
                out += [[o.kind.data for o in g] for g in reduction_groups(ops, {})]
        return out

    # the two sums in one pass (the float max keeps its NaN-checked passes)
    assert groups("three_row_stats", "f32[64,300]") == [["sum", "sum"]]
    # a narrow matmul: the ten dot products of a row in one pass
    assert groups("narrow_product", "f32[64,300] f32[300,10]") == [["sum"] * 10]
    # a reduction reading another's result waits for it (LayerNorm's variance)
    assert groups("shifted_rows", "f32[64,300]") == []


def norm_plus_abs_sum(x):
    """Three reductions of a row in one kernel: the abs-sum and the mean are
    independent (one pass), the variance reads the mean (its own pass)."""
    s = np.abs(x).sum(-1, keepdims=True)
    m = x.mean(-1, keepdims=True)
    v = ((x - m) ** 2).mean(-1, keepdims=True)
    return s + (x - m) / np.sqrt(v + 1e-5)


def test_a_reduction_reading_a_grouped_one_waits_for_it():
    from lowering.codegen.llvm import reduction_groups

    k = next(o for o in _kernel_module("norm_plus_abs_sum", "f32[16,300]").walk()
             if isinstance(o, K.KernelOp))
    ops = [o for o in k.body.block.ops if not isinstance(o, L.YieldOp)]
    assert [[o.kind.data for o in g] for g in reduction_groups(ops, {})] == [["sum", "sum"]]
    x = np.random.default_rng(1).standard_normal((16, 300)).astype(np.float32)
    np.testing.assert_allclose(lowering.compile(norm_plus_abs_sum)(x), norm_plus_abs_sum(x),
                               rtol=1e-4, atol=1e-4)


def test_a_math_function_called_from_many_places_is_called_not_inlined():
    """A long chain of tanh steps in one kernel calls one tanh function
    (`noinline`) instead of inlining ~100 instructions at each of its calls
    (LLVM's time grows faster than the kernel); a kernel with few calls
    inlines it. Results are numpy's either way."""
    import re

    from lowering.backends.cpu_backend import MATH_INLINE_MAX_CALLS, emit_llvm
    from lowering.pipeline import lower
    from tests.passes.test_levels_interpreted import graph_inputs

    def chain(n):
        def f(x):
            for _ in range(n):
                x = np.tanh(x) * 1.01 + x.mean(axis=1, keepdims=True)
            return x
        return f

    from collections import Counter

    x = np.random.default_rng(9).random((8, 40))
    for n in (1, MATH_INLINE_MAX_CALLS + 1):
        module, inputs = graph_inputs(chain(n), (x,))
        text, _ = emit_llvm(lower(module, "cpu", ["C"])[0])
        # each lane count's tanh is its own function (a 40-long row on 32
        # lanes: the 32-lane one and the tail's), its calls counted apart
        defs = re.findall(r'define internal [^\n]*@"(lowering\.tanh\.[^"]*)"([^\n]*)', text)
        calls = Counter(re.findall(r'call [^@]*@"(lowering\.tanh\.[^"]*)"', text))
        assert defs
        for name, attrs in defs:
            many = calls[name] > MATH_INLINE_MAX_CALLS
            assert ("noinline" in attrs) == many and ("alwaysinline" in attrs) != many, (name, calls)
        assert any(calls[name] > MATH_INLINE_MAX_CALLS for name, _ in defs) == (n > 1)
        assert_same_value(lowering.compile(chain(n))(x), chain(n)(x),
                          rtol=TOLERANCES.rtol(np.float64, "reduction", n * (40 + 3)))


def test_a_long_chain_of_row_kernels_merges_in_bounded_runs_that_share_a_body():
    """merge_rows stops a run before MERGE_ROWS_MAX_OPS ops and
    MERGE_ROWS_MAX_PASSES row passes (LLVM's time grows faster than a
    kernel), and the equal runs of a long chain of row
    reductions share one compiled body: a 40-step chain compiles two."""
    from dialects import kernel as K
    from lowering.pipeline import lower
    from dialects import loop as L
    from passes.schedule import MERGE_ROWS_MAX_OPS, MERGE_ROWS_MAX_PASSES
    from tests.passes.test_levels_interpreted import graph_inputs

    def chain(x):
        for _ in range(40):
            x = np.tanh(x) * 1.01 + x.mean(axis=1, keepdims=True)
        return x

    x = np.random.default_rng(10).random((16, 64))
    module, inputs = graph_inputs(chain, (x,))
    kernels = [o for o in lower(module, "cpu", ["C"])[0].walk() if isinstance(o, K.KernelOp)]
    assert len(kernels) > 1
    assert all(sum(1 for _ in k.body.walk()) <= MERGE_ROWS_MAX_OPS for k in kernels)
    assert all(sum(1 for o in k.body.walk() if isinstance(o, (L.ReduceOp, L.MapOp)))
               <= MERGE_ROWS_MAX_PASSES for k in kernels)
    f = lowering.compile(chain)
    # (40 steps of a 64-term mean, a tanh, a multiply and an add: the
    # reduction budget of the chain, as `programs()` adds budgets along paths)
    assert_same_value(f(x), chain(x), rtol=TOLERANCES.rtol(np.float64, "reduction", 40 * (64 + 3)))
    assert f.stats["kernel_bodies"] <= 2 and f.stats["eager_fallbacks"] == 0


def im2col_rows(x):
    """im2col: each row a strided 3-d window of x flattened into cols."""
    n, c, h, w = x.shape
    cols = np.empty((c * 4, n * (h - 1) * (w - 1)), x.dtype)
    r = 0
    for ci in range(c):
        for i in range(2):
            for j in range(2):
                cols[r] = x[:, ci, i : i + h - 1, j : j + w - 1].reshape(-1)
                r += 1
    return cols


def flat_of_computed(x):
    # (a transpose that is not the axes reversed: computed in C order; `x.T + 1`
    # is computed in x's order, its result transposed: capture/rules/ufuncs.py)
    return (np.exp(x[:, 1:, ::2]) * 2).reshape(-1), (x.transpose(2, 0, 1) + 1).reshape(3, -1)


@pytest.mark.parametrize("fn", [im2col_rows, flat_of_computed])
def test_a_merging_reshape_runs_over_its_source_dims(fn):
    """A value flattened from a strided window (or a computed value) is
    computed over the window's own dims and stored at the merged index: no
    division of a flat index in its loads; numpy's values."""
    x = np.random.default_rng(2).standard_normal((3, 2, 7, 9)).astype(np.float32)
    if fn is flat_of_computed:
        x = x[0]
    text = stage_text(fn, "f32[" + ",".join(map(str, x.shape)) + "]")
    assert "floordiv" not in text and " mod " not in text, text
    assert_matches_numpy(fn, x, calls=2, compiled=lowering.compile(fn, backend="cpu"))


def test_a_kernel_copying_a_row_of_a_big_array_stays_on_one_thread():
    """Threads are decided by the elements a launch touches (its points),
    not by the size of the buffers it reads from."""
    def row_copy(x):
        return x[3, 1:95, 2:96] * 2

    text = stage_text(row_copy, "f32[64,96,96]")  # (a 2.4 MB buffer, 35 KB touched)
    assert "threads 1" in text and "threads 2" not in text



def rolls_and_stacks(a, b):
    return (np.roll(a, -1, axis=1) - a, np.concatenate([a * 2, b[::-1], a[:0]], axis=0),
            np.stack([a[0], b[1]], axis=1) + 1, np.hstack([a, b.astype(np.float32)]))


def test_concatenations_are_kernels_per_piece():
    """np.roll, concatenate, stack and hstack: one kernel per piece writing
    it at its offset (its expression fused, views read where they lie), no
    numpy routine; float16 and complex pieces stay numpy's."""
    g = np.random.default_rng(3)
    a, b = g.standard_normal((4, 6)), g.standard_normal((4, 6))
    cf = lowering.compile(rolls_and_stacks, backend="cpu")
    assert_matches_numpy(rolls_and_stacks, a, b, calls=2, compiled=cf)
    names = [n for graph in lowering.explain(cf)(a, b).kernels for n, _ in graph]
    assert not any(n.startswith("extern") for n in names), names

    def half_and_complex(a, z):
        return np.concatenate([a, a + 1]), np.concatenate([z, z * 2])

    a16, z = a.astype(np.float16), a + 1j * b
    ch = lowering.compile(half_and_complex, backend="cpu")
    assert_matches_numpy(half_and_complex, a16, z, calls=2, compiled=ch)
    names = [n for graph in lowering.explain(ch)(a16, z).kernels for n, _ in graph]
    assert "extern numpy:array.concat" in names and not any(n.startswith("k") for n in names), names


STEPS = 24


def long_body_sum(x):
    y = x
    for _ in range(STEPS):  # (each step: negate, exp, multiply, add: 4 ops of the body)
        y = np.exp(-y) * 0.5 + x
    return y.sum()


def test_a_long_reduction_body_has_one_accumulator(monkeypatch):
    """`LONG_REDUCE_BODY`: a reduction whose body is long keeps one vector
    accumulator, so its body is emitted once for the vector loop (and once
    for the scalar tail), not once per unrolled accumulator: LLVM compiles
    a third of the code. The sum is numpy's within the reduction tolerance."""
    from lowering.codegen.llvm import LONG_REDUCE_BODY
    from runtime import cpu

    monkeypatch.setattr(cpu, "_kernels", {})
    lowering.pipeline.clear_programs()
    x = np.random.default_rng(0).uniform(0.0, 1.0, 1 << 16)
    f = lowering.compile(long_body_sum)
    got = f(x)
    np.testing.assert_allclose(got, long_body_sum(x),
                               rtol=TOLERANCES.rtol(x.dtype, "reduction", x.size))
    ir = f.programs_run[0].llvm_ir
    vector_exps = re.findall(r'call <(\d+) x double> @"lowering\.exp\.f64x\1"', ir)
    assert 4 * STEPS > LONG_REDUCE_BODY
    assert len(vector_exps) == STEPS, len(vector_exps)
    lowering.pipeline.clear_programs()
