"""The op table (dialects/ufuncs.py): its rows against numpy, the verifier of
`array.ufunc`/`loop.ufunc`, the lists derived from it, and the completeness
checks of the rule tables keyed by ufunc name.

The literal lists below are the hand-written lists the table replaced, kept
where they document a decision the table made (what stayed, what changed)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from xdsl.dialects import arith, func, math
from xdsl.dialects.builtin import ModuleOp, f32
from xdsl.ir import Block, Region
from xdsl.utils.exceptions import VerifyException

from dialects import array as A
from dialects import loop as L
from dialects import ufuncs as U
from dialects.dtypes import tensor_type

# ---- the rows against numpy ------------------------------------------------


@pytest.mark.parametrize("row", U.TABLE, ids=lambda u: u.name)
def test_a_row_is_a_numpy_ufunc_of_its_arity(row):
    uf = getattr(np, row.name)
    assert isinstance(uf, np.ufunc) and uf.__name__ == row.name
    assert (row.nin, row.nout) == (uf.nin, uf.nout)
    for alias in row.aliases:
        assert getattr(np, alias) is uf


def test_every_rewrite_names_an_upstream_op_of_the_ufunc_s_arity():
    for u in U.TABLE:
        for col in U.OPERAND_CLASSES:
            op = getattr(u, col)
            if op is not None:
                n = len(U.upstream_class(op).get_irdl_definition().operands)
                assert n == u.nin or (u.nin == 1 and op == "arith.mulf"), (u.name, op)


def test_a_malformed_row_is_an_error():
    good = "add 2 1 exact cheap cheap all rule 1 arith.addf arith.addi arith.ori - io"
    assert U._parse(good) == (U.UFUNCS["add"],)
    with pytest.raises(U.UfuncTableError, match="14"):
        U._parse("add 2 1 exact cheap")
    with pytest.raises(U.UfuncTableError, match="cost"):
        U._parse(good.replace("exact cheap", "exact pricey"))
    with pytest.raises(U.UfuncTableError, match="fpe"):
        U._parse(good.replace(" io", " ix"))
    (row,) = U._parse(good.replace(" io", " diou/do"))
    assert row.fpe(False) == {"divide", "over", "under", "invalid"}
    assert row.fpe(True) == {"divide", "over"}


def test_an_inconsistent_table_is_an_error():
    U.check_table(U.TABLE)
    with pytest.raises(U.UfuncTableError, match="add has two rows"):
        U.check_table(U.TABLE + (U.UFUNCS["add"],))
    odd = dataclasses.replace(U.UFUNCS["hypot"], name="frobnicate", float_op="arith.addf")
    with pytest.raises(U.UfuncTableError, match="arith.addf computes disagree"):
        U.check_table(U.TABLE + (odd,))
    with pytest.raises(U.UfuncTableError, match="no xDSL op named math.frob"):
        U.check_table(U.TABLE + (dataclasses.replace(odd, float_op="math.frob"),))


# ---- the verifier ----------------------------------------------------------


def _array_ufunc(fn: str, n: int) -> ModuleOp:
    t = tensor_type((3,), np.dtype(np.float32))
    block = Block(arg_types=[t] * n)
    op = A.UfuncOp(fn, list(block.args), t)
    block.add_ops([op, func.ReturnOp(op.result)])
    return ModuleOp([func.FuncOp("main", ([t] * n, [t]), Region(block))])


def test_array_ufunc_verifies_a_row_of_the_table():
    _array_ufunc("hypot", 2).verify()


@pytest.mark.parametrize("fn,n,msg", [("frobnicate", 1, "unknown ufunc 'frobnicate'"),
                                      ("true_divide", 2, "unknown ufunc 'true_divide'"),
                                      ("hypot", 1, "hypot takes 2 input")])
def test_array_ufunc_rejects_a_name_not_in_the_table(fn, n, msg):
    with pytest.raises(VerifyException, match=msg):
        _array_ufunc(fn, n).verify()


def test_loop_ufunc_rejects_a_name_not_in_the_table():
    block = Block(arg_types=[f32])
    ok = L.UfuncOp("tanh", [block.args[0]], f32)
    bad = L.UfuncOp("frobnicate", [block.args[0]], f32)
    ok.verify()
    with pytest.raises(VerifyException, match="unknown ufunc 'frobnicate'"):
        bad.verify()


# ---- derived lists -------------------------------------------------------


def test_the_generated_set_is_unchanged():
    from passes.lower_to_loop import GENERATED_UFUNCS

    before = frozenset("""
    maximum minimum fmax fmin sign square reciprocal isnan isinf isfinite signbit logical_not
    logical_and logical_or logical_xor negative absolute sqrt exp log tanh floor_divide
    remainder power fmod hypot logaddexp cbrt exp2 expm1 log2 log10 log1p sin cos tan
    arcsin arccos arctan arctan2 sinh cosh arcsinh arccosh arctanh floor ceil trunc rint
    copysign invert bitwise_and bitwise_or bitwise_xor left_shift right_shift divide add
    subtract multiply deg2rad rad2deg degrees radians heaviside
    """.split())
    assert before <= GENERATED_UFUNCS  # rows added since: generated as the table says
    assert GENERATED_UFUNCS - before <= {u.name for u in U.TABLE if u.tier is None}
    # integer loops of these run in numpy (was a tuple in lower_to_loop.generated)
    assert set(U.names(lambda u: u.gen == "float")) == {"power", "reciprocal"}


def test_one_cost_class_and_the_recompute_exception():
    """`cost` is one answer: transcendental or division-like. Fusion's
    recompute cost keeps its old rule for the division-like ufuncs (column
    `recompute`); the other lists that disagreed are unified."""
    expensive = set(U.names(lambda u: u.expensive))
    division_like = {"divide", "reciprocal", "sqrt", "floor_divide", "remainder", "fmod"}
    assert set(U.names(lambda u: u.expensive and u.recompute == "cheap")) == division_like
    assert set(U.names(lambda u: u.recompute == "expensive")) <= expensive
    # lower_to_loop's old _EXPENSIVE (array.ufunc by name) is the recompute
    # class, plus float_power and logaddexp2 (always externs: never recomputed)
    old_expensive = {"exp", "log", "tanh", "power", "sin", "cos", "tan", "expm1", "log1p",
                     "exp2", "log2", "log10", "arctan", "arcsin", "arccos", "arctan2", "sinh",
                     "cosh", "hypot", "logaddexp", "cbrt", "arcsinh", "arccosh", "arctanh"}
    assert set(U.names(lambda u: u.recompute == "expensive")) == old_expensive | {
        "float_power", "logaddexp2"}


def _math(name: str, n: int = 1):
    block = Block(arg_types=[f32] * n)
    return U.upstream_class(name)(*block.args)


def test_fusion_weighs_a_math_op_by_its_ufunc():
    """lower_to_loop.cost had its own list of math ops (exp log tanh powf sin
    cos cost 8, every other math op 1): math.asin, math.cbrt, math.log1p ...
    cost 1 there while _EXPENSIVE called their ufuncs expensive. Now the
    table answers for both forms of an op."""
    old_eight = {"math.exp", "math.log", "math.tanh", "math.powf", "math.sin", "math.cos"}
    now_eight = {op for op, n in U.UPSTREAM.items() if U.UFUNCS[n].recompute == "expensive"}
    assert now_eight - old_eight == {
        "math.tan", "math.asin", "math.acos", "math.atan", "math.atan2", "math.sinh",
        "math.cosh", "math.asinh", "math.acosh", "math.atanh", "math.cbrt", "math.exp2",
        "math.expm1", "math.log2", "math.log10", "math.log1p"}
    assert old_eight <= now_eight


def test_the_chain_counts_the_old_math_ops_and_now_expensive_loop_ufuncs():
    """schedule._chain_ops counted every math op but six rounding ones, and
    arith.divf; a loop.ufunc never counted. Now: the table's cost, for every
    op; a math op of no ufunc (math.fma) counts as before."""
    cheap_math = {"math.absf", "math.copysign", "math.floor", "math.ceil", "math.trunc",
                  "math.roundeven"}
    for op, name in U.UPSTREAM.items():
        want = (op.startswith("math.") and op not in cheap_math) or op == "arith.divf"
        assert U.UFUNCS[name].expensive == want, op
    block = Block(arg_types=[f32] * 3)
    assert U.expensive_op(math.FmaOp(*block.args))
    assert not U.expensive_op(arith.AddfOp(block.args[0], block.args[1]))
    assert U.expensive_op(L.UfuncOp("hypot", block.args[:2], f32))
    assert not U.expensive_op(L.UfuncOp("maximum", block.args[:2], f32))


def test_the_tier1_lists_are_ops_md_in_order():
    from lowering.surface import TIER1
    from lowering.testing import EXACT_UFUNCS, POINTWISE_UFUNCS, ufunc_class

    listed = [e for title, es in TIER1 if title.startswith("Ufuncs") for e in es
              if isinstance(e, str)]
    assert listed == U.names(lambda u: u.tier == 1, aliases=True)
    assert "true_divide" in EXACT_UFUNCS and "mod" in EXACT_UFUNCS
    assert "float_power" in POINTWISE_UFUNCS and "logaddexp2" not in POINTWISE_UFUNCS
    assert ufunc_class("true_divide") == "exact" and ufunc_class("arcsin") == "pointwise"


def test_capture_supports_the_rows():
    from lowering.capture.rules.ufuncs import SUPPORTED_UFUNCS

    assert SUPPORTED_UFUNCS == set(U.UFUNCS)


def test_decompose_and_the_numpy_backend_read_the_rewrites():
    from lowering.backends.numpy_backend import RULES
    from passes.decompose import _BOOL, _COMPARE, _FLOAT, _INT

    assert set(_FLOAT) == set(U.names(lambda u: u.float_op is not None))
    assert set(_INT) == set(U.names(lambda u: u.int_op is not None))
    assert set(_BOOL) == set(U.names(lambda u: u.bool_op is not None))
    assert _COMPARE == {"equal": "eq", "not_equal": "ne", "less": "lt", "less_equal": "le",
                        "greater": "gt", "greater_equal": "ge"}
    for op in U.UPSTREAM:
        assert U.upstream_class(op) in RULES
    assert U.UPSTREAM["arith.ori"] == "bitwise_or"  # int before bool: add on bools is ori too
    assert U.UPSTREAM["math.absf"] == "absolute"


def test_the_vjp_rules_are_the_grad_column():
    from passes.autograd import UFUNC_RULES, ZERO_DERIVATIVE

    assert set(UFUNC_RULES) == set(U.names(lambda u: u.grad == "rule"))
    assert ZERO_DERIVATIVE == set(U.names(lambda u: u.grad == "zero"))
    # no float result: nothing to differentiate
    for name in U.names(lambda u: u.grad is None):
        uf = getattr(np, name)
        assert all(t[-1] in "?bBhHiIlLqQ" for t in uf.types if t[-1] != "O"), name


# ---- completeness checks ----------------------------------------------------


def _with_row(**changes):
    return U.TABLE + (dataclasses.replace(U.UFUNCS["hypot"], **changes),)


def test_the_llvm_check_fires_for_a_generated_row_without_a_rule():
    from lowering.codegen.llvm_ops import LLVMOps

    have = LLVMOps.UFUNCS
    U.require(have, lambda u: u.generated, "llvm")  # the real table: complete
    table = _with_row(name="frobnicate")
    with pytest.raises(U.UfuncTableError, match="llvm: no rule for frobnicate"):
        U.require(have, lambda u: u.generated, "llvm", table=table)
    U.require(have, lambda u: u.generated, "llvm",
              table=_with_row(name="frobnicate", gen="no"))


def test_the_llvm_check_fires_for_a_rewrite_without_a_rule():
    from lowering.codegen.llvm_ops import LLVMOps

    have = set(LLVMOps.UPSTREAM)
    U.require_upstream(have, "llvm")
    with pytest.raises(U.UfuncTableError, match="no rule for arith.remf"):
        U.require_upstream(have, "llvm", table=_with_row(name="frobnicate",
                                                          float_op="arith.remf"))


def test_the_vjp_check_fires_both_ways():
    from passes.autograd import UFUNC_RULES

    rule = lambda u: u.grad == "rule"  # noqa: E731
    U.require(UFUNC_RULES, rule, "vjp", exact=True)
    with pytest.raises(U.UfuncTableError, match="vjp: no rule for frobnicate"):
        U.require(UFUNC_RULES, rule, "vjp", exact=True, table=_with_row(name="frobnicate"))
    stale = {**UFUNC_RULES, "true_divide": None}
    with pytest.raises(U.UfuncTableError, match=r"true_divide \(not in dialects/ufuncs.py\)"):
        U.require(stale, rule, "vjp", exact=True)


def test_loop_ufunc_of_every_generated_row_verifies():
    for u in U.TABLE:
        if u.generated:
            block = Block(arg_types=[f32] * u.nin)
            L.UfuncOp(u.name, list(block.args), f32).verify()
