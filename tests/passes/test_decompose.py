"""`decompose` rewrites exactly the `array.ufunc` ops whose numpy meaning an
upstream op has, and nothing else.

The whole contract is the table EXPECTED below: (ufunc, operand class) -> the
op it must become; every other (ufunc, dtype) pair of the Tier 1 surface (and
f16, unsigned and mixed-type loops) must stay `array.ufunc`. Each rewrite is
also run by the reference interpreter before and after on all pairs of edge
values, and must give bit-identical results."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, Region

import lowering
from dialects import array as A
from lowering.backends.numpy_backend import compile_module
from dialects.dtypes import tensor_type
from lowering.pipeline import context
from lowering.testing import TIER1_UFUNCS, assert_same_value, edge_values
from passes.decompose import Decompose

F = {"add": "arith.addf", "subtract": "arith.subf", "multiply": "arith.mulf",
     "divide": "arith.divf", "true_divide": "arith.divf", "negative": "arith.negf",
     "square": "arith.mulf", "absolute": "math.absf", "fabs": "math.absf", "sqrt": "math.sqrt",
     "cbrt": "math.cbrt", "exp": "math.exp", "exp2": "math.exp2", "expm1": "math.expm1",
     "log": "math.log", "log2": "math.log2", "log10": "math.log10", "log1p": "math.log1p",
     "sin": "math.sin", "cos": "math.cos", "tan": "math.tan", "arcsin": "math.asin",
     "arccos": "math.acos", "arctan": "math.atan", "sinh": "math.sinh", "cosh": "math.cosh",
     "tanh": "math.tanh", "arcsinh": "math.asinh", "arccosh": "math.acosh",
     "arctanh": "math.atanh", "floor": "math.floor", "ceil": "math.ceil", "trunc": "math.trunc",
     "rint": "math.roundeven", "copysign": "math.copysign", "power": "math.powf",
     "arctan2": "math.atan2"}
I = {"add": "arith.addi", "subtract": "arith.subi", "multiply": "arith.muli",
     "bitwise_and": "arith.andi", "bitwise_or": "arith.ori", "bitwise_xor": "arith.xori",
     "maximum": "arith.maxsi", "minimum": "arith.minsi"}
B = {"add": "arith.ori", "multiply": "arith.andi", "logical_and": "arith.andi",
     "logical_or": "arith.ori", "logical_xor": "arith.xori", "bitwise_and": "arith.andi",
     "bitwise_or": "arith.ori", "bitwise_xor": "arith.xori", "maximum": "arith.ori",
     "minimum": "arith.andi"}
CMP = {"equal": "eq", "not_equal": "ne", "less": "lt", "less_equal": "le", "greater": "gt",
       "greater_equal": "ge"}
EXPECTED: dict[tuple[str, str], str] = {}
for kind, table in (("f", F), ("i", I), ("b", B)):
    EXPECTED.update({(n, kind): op for n, op in table.items()})
    EXPECTED.update({(n, kind): "array.compare" for n in CMP})

DTYPES = [np.dtype(d) for d in (np.float16, np.float32, np.float64, np.int32, np.int64, np.bool_,
                                np.uint8, np.uint32)]


def ufunc_module(name: str, in_dts, out_dt, shape=(3,)) -> ModuleOp:
    types = [tensor_type(shape, d) for d in in_dts]
    block = Block(arg_types=types)
    op = A.UfuncOp(name, list(block.args), tensor_type(shape, out_dt))
    block.add_ops([op, func.ReturnOp(op.result)])
    return ModuleOp([func.FuncOp("main", (types, [op.result.type]), Region(block))])


def decomposed(module: ModuleOp) -> ModuleOp:
    m = module.clone()
    Decompose().apply(context(), m)
    m.verify()
    return m


def body(module: ModuleOp) -> list:
    fn = next(op for op in module.ops if isinstance(op, func.FuncOp))
    return list(fn.body.blocks[0].ops)


def loop_of(name: str, dt: np.dtype):
    """numpy's loop for all-`dt` operands: (input dtypes, output dtype), or None."""
    uf = getattr(np, name)
    try:
        loop = uf.resolve_dtypes((dt,) * uf.nin + (None,))
    except TypeError:
        return None
    return loop[: uf.nin], loop[-1]


def expected(name: str, in_dts, out_dt) -> str:
    dt = in_dts[0]
    if any(d != dt for d in in_dts):
        return "array.ufunc"
    if name in CMP:  # array.compare has numpy's meaning for every element type
        return "array.compare" if out_dt == np.bool_ else "array.ufunc"
    if out_dt != dt or dt.kind == "u":  # arith is signless: unsigned stays
        return "array.ufunc"
    return EXPECTED.get((name, dt.kind), "array.ufunc")


def edge_inputs(in_dts, n: int):
    """All n-tuples of edge values of the operands' dtypes, as 1-D arrays."""
    cols = [edge_values(d) for d in in_dts]
    rows = list(itertools.product(*cols))
    return [np.array([r[i] for r in rows], dtype=d) for i, d in enumerate(in_dts)]


# capture names a ufunc by `ufunc.__name__`: true_divide is "divide", mod is "remainder"
NAMES = sorted({getattr(np, n).__name__ for n in TIER1_UFUNCS})
CASES = [(name, dt) for name in NAMES for dt in DTYPES if loop_of(name, dt) is not None]


def run_both(before: ModuleOp, after: ModuleOp, xs: list):
    """Results of both modules, or the exception both raise (numpy's integer
    power raises ValueError for negative exponents, before and after)."""
    out = []
    for m in (before, after):
        try:
            with np.errstate(all="ignore"):
                out.append(compile_module(m)(xs))
        except Exception as e:  # noqa: BLE001  (compared below)
            out.append(e)
    if isinstance(out[0], Exception) or isinstance(out[1], Exception):
        assert type(out[0]) is type(out[1]) and str(out[0]) == str(out[1]), out
        return None, None
    return out


@pytest.mark.parametrize("name,dt", CASES, ids=[f"{n}-{d}" for n, d in CASES])
def test_rewrites_exactly_the_table(name, dt):
    in_dts, out_dt = loop_of(name, dt)
    n = len(in_dts)
    rows = len(edge_inputs(in_dts, n)[0])
    module = ufunc_module(name, in_dts, out_dt, (rows,))
    m = decomposed(module)
    ops = body(m)
    assert len(ops) == 2, "decompose must replace one op by one op"
    assert ops[0].name == expected(name, in_dts, out_dt), str(m)
    if ops[0].name == "array.compare":
        assert ops[0].predicate.data == CMP[name]
    assert ops[0].results[0].type == body(module)[0].results[0].type
    assert list(ops[0].operands) == list(body(m)[0].operands)
    # same results, bit for bit, on every pair of edge values
    want, got = run_both(module, m, edge_inputs(in_dts, n))
    assert_same_value(got, want, 0.0, f"{name} on {dt}")


def test_add_on_f32_becomes_addf_and_keeps_the_location():
    m = lowering.compile(lambda x, y: x + y)
    x = np.ones(4, np.float32)
    m(x, x)
    (seg,) = m.last_trace.segments
    (uf,) = [op for op in body(seg.module) if isinstance(op, A.UfuncOp)]
    out = decomposed(seg.module)
    (addf,) = [op for op in body(out) if op.name == "arith.addf"]
    assert addf.location == uf.location
    assert not [op for op in body(out) if isinstance(op, A.UfuncOp)]


@pytest.mark.parametrize("name", ["maximum", "minimum", "fmax", "fmin"])
@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_float_maximum_minimum_stay_ufuncs(name, dt):
    """numpy's maximum(0.0, -0.0) is -0.0 (IEEE maximum says +0.0) and it
    propagates NaN where fmax does not: no upstream op means either."""
    uf = getattr(np, name)
    a = np.array([0.0, -0.0], dt)
    b = np.array([-0.0, 0.0], dt)
    assert np.signbit(np.maximum(a, b)).tolist() == [True, False]
    m = decomposed(ufunc_module(name, (np.dtype(dt),) * 2, np.dtype(dt), (2,)))
    assert body(m)[0].name == "array.ufunc"
    with np.errstate(all="ignore"):
        got = compile_module(m)([a, b])
    assert_same_value(got[0], uf(a, b), 0.0)


def test_mixed_type_loops_stay():
    cases = [("isnan", (np.float32,), np.bool_), ("signbit", (np.float64,), np.bool_),
             ("less", (np.float32, np.float64), np.bool_),
             ("add", (np.int32, np.int64), np.int64),
             ("logical_and", (np.float32, np.float32), np.bool_),
             ("less", (np.float64, np.float64), np.float64)]  # a compare not producing i1
    for name, ins, out in cases:
        m = decomposed(ufunc_module(name, [np.dtype(d) for d in ins], np.dtype(out)))
        assert body(m)[0].name == "array.ufunc", (name, ins, out)


def test_nothing_but_ufuncs_changes_and_it_is_idempotent():
    def fn(x, y, i):
        z = (x.T @ y).sum(axis=0, keepdims=True)
        w = np.where(z > 0, np.maximum(z, 0.0), np.exp(z))[:, ::-1]
        return w.reshape(-1), i // 3, np.hypot(x, 1.0), i.astype(np.float32) ** 3

    cf = lowering.compile(fn)
    cf(np.ones((3, 2)), np.ones((3, 4)), np.arange(5))
    (seg,) = cf.last_trace.segments
    before = body(seg.module)
    once = decomposed(seg.module)
    after = body(once)
    assert len(before) == len(after)
    for b, a in zip(before, after):
        if isinstance(b, A.UfuncOp):
            assert a.name == expected(b.fn.data, [_dt(v) for v in b.operands],
                                      _dt(b.result))
        else:
            assert a.name == b.name and a.properties == b.properties
            assert [v.type for v in a.operands] == [v.type for v in b.operands]
    assert str(decomposed(once)) == str(once)


def _dt(v) -> np.dtype:
    from dialects.dtypes import from_ir

    return from_ir(v.type.element_type)
