"""Reductions whose extents are known only at the launch (`loop.reduce` with
DYN `ranges` and `sizes` operands): a Python loop over rows of different
lengths (`out[i] = x[i, :i + 1].sum()`) compiles one kernel body, whose
loops take their trip counts from the kernel's parameters — every length
(0 and 1 included) with the vector steps, the unrolled accumulators and the
scalar tail taking what each covers — and gives numpy's answer, NaN rows of
max/min/argmax/argmin included; the loop-level interpreter runs the same
kernels; the op prints and parses with its sizes."""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.dialects.builtin import IndexType, f64
from xdsl.ir import Block
from xdsl.parser import Parser
from xdsl.utils.exceptions import VerifyException

import lowering
from dialects import kernel as K
from dialects import loop as L
from dialects.array import DYN
from lowering.backends import cpu_backend
from lowering.backends.interpreter import run_module
from lowering.pipeline import context, lower
from lowering.testing import TOLERANCES, assert_same_value
from passes.lower_to_loop import LoweringReport
from tests.passes.test_levels_interpreted import graph_inputs

ROWS = 40

# each iteration's reduction over a row of its own length
VARIANTS = {
    "sum": (lambda x, i: x[i, :i + 1].sum(), "reduction"),
    "shorter sum": (lambda x, i: x[i, :i].sum(), "reduction"),  # rows of length 0 and 1
    "max": (lambda x, i: x[i, :i + 1].max(), "exact"),
    "min": (lambda x, i: x[i, i:].min(), "exact"),
    "argmax": (lambda x, i: x[i, :i + 1].argmax(), "exact"),
    "argmin": (lambda x, i: x[i, i:].argmin(), "exact"),
    "mean": (lambda x, i: x[i, i:].mean(), "reduction"),
    "square": (lambda x, i: x[:i + 1, :i + 1].sum(), "reduction"),  # two dynamic extents
    "two sums": (lambda x, i: x[i, :i + 1].sum() + (x[i, :i + 1] * x[i, :i + 1]).sum(),
                 "reduction"),
}


def row_loop(reduce, dtype):
    """out[i] = reduce(x, i) for each row i (out of numpy's result dtype)."""
    def fn(x):
        out = np.zeros(x.shape[0], dtype)
        for i in range(x.shape[0]):
            out[i] = reduce(x, i)
        return out
    return fn


def check(reduce, x, op_class):
    """The compiled row loop gives numpy's values (within the op class's
    tolerance) and runs compiled; its compiled function."""
    with np.errstate(all="ignore"):
        fn = row_loop(reduce, np.asarray(reduce(x, 0)).dtype)
        want = fn(x)
        f = lowering.compile(fn)
        got = f(x)
    assert_same_value(got, want, TOLERANCES.rtol(want.dtype, op_class, x.size))
    assert f.stats["eager_fallbacks"] == 0
    return f


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_rows_of_every_length_share_one_body(variant, dtype):
    """40 iterations, 40 row lengths: at most 2 kernel bodies (the first
    iterations' rows of length 0 or 1 may simplify to a body of their own),
    numpy's values."""
    reduce, op_class = VARIANTS[variant]
    x = (np.random.default_rng(0).standard_normal((ROWS, ROWS)) * 10).astype(dtype)
    f = check(reduce, x, op_class)
    assert f.stats["kernel_bodies"] <= 2


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("variant", ["max", "min", "argmax", "argmin"])
def test_nan_rows_propagate_as_numpy(variant, dtype):
    """A NaN anywhere in a row (its first element, the vector steps, the
    scalar tail) wins, as in numpy, in rows of every length."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((ROWS, ROWS)).astype(dtype)
    x[rng.random(x.shape) < 0.03] = np.nan
    x[5, 0] = x[20, 19] = x[33, 39] = np.nan
    reduce, op_class = VARIANTS[variant]
    f = check(reduce, x, op_class)
    assert f.stats["kernel_bodies"] <= 2


def test_the_shared_body_reduces_over_kernel_parameters():
    """After share-kernels, the iterations' reductions read their extents
    from `kernel.param` operands."""
    fn = row_loop(VARIANTS["sum"][0], np.float64)
    module, inputs = graph_inputs(fn, (np.random.default_rng(2).random((6, 6)),))
    final, _ = lower(module, "cpu", ["C"])
    text = str(final)
    assert f'loop.reduce "sum" [{DYN}] sizes(' in text
    reduces = [o for o in final.walk() if isinstance(o, L.ReduceOp) and o.sizes]
    assert reduces and all(isinstance(s.owner, K.ParamOp) for r in reduces for s in r.sizes)
    assert_same_value(run_module(final, inputs)[0], fn(*inputs))


# ---- the emitter's loops with runtime trip counts -----------------------------------------
def kernel_module(kind: str, dtype: str, extents: list[int], cols: int, vector: int,
                  unroll: int) -> str:
    """A kernel-level function: kernel i reduces x[i, :extents[i]] (the
    extent and the row are its parameters) into out[i]; all kernels have one
    body."""
    rows = len(extents)
    res = "i64" if kind.startswith("arg") else dtype
    xt, ot = f"memref<{rows}x{cols}x{dtype}>", f"memref<{rows}x{res}>"
    kernels = []
    for i, n in enumerate(extents):
        kernels.append(f'''
    kernel.kernel "k{i}"(%x, %out) parallel [] vector {vector} : i64 unroll {unroll} : i64 split "none" work 1 : i64 threads 1 : i64 reduction "row-in-cache" params ["{n}", "{i}"] {{
      %n{i} = kernel.param 0 : i64 : index
      %r{i} = kernel.param 1 : i64 : index
      %s{i} = loop.reduce "{kind}" [{DYN}] sizes(%n{i}) {{
      ^bb0(%j{i}: index):
        %v{i} = loop.load %x[affine_map<(d0)[s0] -> (s0, d0)>] (%j{i}, %r{i}) : {xt} -> {dtype}
        loop.yield %v{i} : {dtype}
      }} : {res}
      loop.map [1] {{
      ^bb0(%m{i}: index):
        loop.store %s{i}, %out[affine_map<(d0)[s0] -> ((d0 + s0))>] (%m{i}, %r{i}) : {res}, {ot}
        loop.yield
      }}
      loop.yield
    }} : {xt}, {ot}''')
    return (f'builtin.module {{\n  func.func @main(%x: {xt} {{lowering.layout = "C"}}) -> {ot} {{\n'
            f'    %out = memref.alloc() : {ot}{"".join(kernels)}\n'
            f'    func.return %out : {ot}\n  }}\n}}\n')


NUMPY = {"sum": np.sum, "max": np.max, "min": np.min, "argmax": np.argmax, "argmin": np.argmin}
DTYPES = {"f32": np.float32, "f64": np.float64, "i64": np.int64}


@pytest.mark.parametrize("unroll", [1, 4])
@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("kind", list(NUMPY))
def test_runtime_trip_counts_of_every_length(kind, dtype, unroll):
    """Extents around the vector width (8) and the unrolled step (4 x 8),
    0 and 1 included: the compiled body (one for all rows) and the
    interpreter give numpy's reduction of each row."""
    extents = [1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100]
    if kind == "sum":
        extents = [0, *extents]  # (numpy has no max or argmax of nothing)
    cols = max(extents)
    text = kernel_module(kind, dtype, extents, cols, vector=8, unroll=unroll)
    module = Parser(context(), text).parse_module()
    module.verify()
    dt = DTYPES[dtype]
    rng = np.random.default_rng(len(extents))
    x = (rng.standard_normal((len(extents), cols)) * 100).astype(dt)
    if dt != np.int64:  # a NaN in a scalar tail, a vector step, an unrolled step
        for n, j in ((33, 32), (9, 3), (100, 40)):
            x[extents.index(n), j] = np.nan
    with np.errstate(all="ignore"):
        want = np.array([NUMPY[kind](x[i, :n]) for i, n in enumerate(extents)])
    rtol = TOLERANCES.rtol(dt, "reduction" if kind == "sum" else "exact", cols)
    kernels = [o for o in module.walk() if isinstance(o, K.KernelOp)]
    assert len(cpu_backend.distinct_bodies(kernels)) == 1
    prog = cpu_backend.build(module, LoweringReport([], []))
    with np.errstate(all="ignore"):
        (got,) = prog([x])
    assert_same_value(got, want, rtol)
    assert_same_value(run_module(Parser(context(), text).parse_module(), [x])[0], want, rtol)


def test_grouped_reductions_share_a_dynamic_extent():
    """Two sums over one row of the shared body run in one pass: their
    extents are the same kernel parameter."""
    from lowering.codegen.llvm import reduction_groups

    fn = row_loop(VARIANTS["two sums"][0], np.float64)
    module, _ = graph_inputs(fn, (np.random.default_rng(3).random((6, 6)),))
    final, _ = lower(module, "cpu", ["C"])
    shared = [k for k in final.walk() if isinstance(k, K.KernelOp)
              and any(isinstance(o, L.ReduceOp) and o.sizes for o in k.body.walk())]
    assert shared
    for k in shared:
        ops = [o for o in k.body.block.ops if not isinstance(o, (L.YieldOp, K.ParamOp))]
        assert [[r.kind.data for r in g] for g in reduction_groups(ops, {})] == [["sum", "sum"]]


# ---- the op itself ------------------------------------------------------------------------
def test_reduce_with_sizes_round_trips():
    """`loop.reduce` prints its sizes (`sizes(...)`, as `loop.map`) and parses
    back to the same text; without sizes it prints as before."""
    text = kernel_module("sum", "f64", [3, 5], cols=5, vector=4, unroll=1)
    module = Parser(context(), text).parse_module()
    module.verify()
    printed = str(module)
    assert printed.count("sizes(") == 2
    again = Parser(context(), printed).parse_module()
    again.verify()
    assert str(again) == printed
    (r, _) = [o for o in again.walk() if isinstance(o, L.ReduceOp)]
    (size,) = r.extents()
    assert isinstance(size.owner, K.ParamOp)
    static = L.ReduceOp("max", [4, 3], f64)
    assert static.extents() == [4, 3] and "sizes" not in str(static)


def _reduce(ranges, sizes) -> L.ReduceOp:
    r = L.ReduceOp("sum", ranges, f64, sizes=sizes)
    v = L.ConstOp("1.0", f64)
    r.body.block.add_ops([v, L.YieldOp(v.result)])
    return r


def test_reduce_verifies_one_size_per_dynamic_extent():
    n = Block(arg_types=[IndexType()]).args[0]
    r = _reduce([DYN, 3], [n])
    r.verify()
    assert r.extents() == [n, 3]
    with pytest.raises(VerifyException, match="1 dynamic extents, 0 sizes"):
        _reduce([DYN, 3], []).verify()
    with pytest.raises(VerifyException, match="0 dynamic extents, 1 sizes"):
        _reduce([2, 3], [n]).verify()
