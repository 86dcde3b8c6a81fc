"""The ops-handler protocol (lowering/codegen/ops.py): its implementations
cover the same ops, the op table's; an implementation missing a rule or a
method, or ruling an op no kernel holds, fails when its class is defined
(so at import of its module); `emit` names the backend and the op it has no
rule for."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from xdsl.dialects import arith
from xdsl.dialects.builtin import IntegerAttr, f32, i1, i64
from xdsl.ir import Block

from dialects import loop as L
from dialects import ufuncs as U
from lowering.backends.numpy_ops import NumpyOps
from lowering.codegen import ops
from lowering.codegen.llvm_ops import LLVMOps

IMPLEMENTATIONS = [LLVMOps, NumpyOps]


@pytest.mark.parametrize("impl", IMPLEMENTATIONS, ids=lambda c: c.__name__)
def test_an_implementation_rules_the_op_table_s_ops(impl):
    assert set(impl.UFUNCS) == set(U.names(lambda u: u.generated))
    assert set(impl.UPSTREAM) == set(ops.upstream_names())
    assert not ops.abstract_methods(impl)


def test_the_implementations_cover_the_same_ops():
    keys = [(set(c.UFUNCS), set(c.UPSTREAM)) for c in IMPLEMENTATIONS]
    assert all(k == keys[0] for k in keys)


def test_a_missing_ufunc_rule_fails_when_the_class_is_defined():
    partial = {k: v for k, v in NumpyOps.UFUNCS.items() if k != "hypot"}
    with pytest.raises(U.UfuncTableError, match=r"Incomplete.UFUNCS: no rule for hypot"):
        class Incomplete(NumpyOps):
            UFUNCS = partial


def test_a_missing_upstream_rule_fails_when_the_class_is_defined():
    partial = {k: v for k, v in LLVMOps.UPSTREAM.items() if k != "math.fma"}
    with pytest.raises(U.UfuncTableError, match=r"UPSTREAM: no rule for math.fma"):
        class Incomplete(LLVMOps):
            UPSTREAM = partial


def test_a_rule_for_an_op_no_kernel_holds_fails():
    stale = {**NumpyOps.UPSTREAM, "arith.remf": NumpyOps.UPSTREAM["arith.addf"]}
    with pytest.raises(U.UfuncTableError, match=r"UPSTREAM: rules for arith.remf"):
        class Stale(NumpyOps):
            UPSTREAM = stale
    with pytest.raises(U.UfuncTableError, match=r"fabs \(dialects/ufuncs.py does not select"):
        class Extra(NumpyOps):
            UFUNCS = {**NumpyOps.UFUNCS, "fabs": NumpyOps.UFUNCS["absolute"]}


def test_a_method_left_abstract_fails_when_the_class_is_defined():
    with pytest.raises(U.UfuncTableError, match=r"no method affine_apply, cast"):
        class NoMethods(ops.ScalarOps):
            backend = "test"
            UFUNCS = NumpyOps.UFUNCS
            UPSTREAM = NumpyOps.UPSTREAM

            def constant(self, text, rt): ...
            def cmpf(self, predicate, a, b): ...
            def cmpi(self, predicate, a, b): ...
            def select(self, cond, a, b): ...
            def index_cast(self, op, args): ...


@pytest.mark.parametrize("impl", IMPLEMENTATIONS, ids=lambda c: c.__name__)
def test_a_new_table_row_needs_a_rule_in_every_implementation(impl):
    row = dataclasses.replace(U.UFUNCS["hypot"], name="frobnicate")
    with pytest.raises(U.UfuncTableError, match="UFUNCS: no rule for frobnicate"):
        ops.check_handler(impl, table=U.TABLE + (row,))
    ops.check_handler(impl, table=U.TABLE + (dataclasses.replace(row, gen="no"),))
    rewrite = dataclasses.replace(row, gen="no", float_op="arith.remf")
    with pytest.raises(U.UfuncTableError, match="UPSTREAM: no rule for arith.remf"):
        ops.check_handler(impl, table=U.TABLE + (rewrite,))


def test_emit_dispatches_by_op_and_names_what_it_lacks():
    block = Block(arg_types=[f32, f32])
    x, y = (np.array([1.0, np.nan, -2.0], np.float32), np.array([3.0, 1.0, -2.0], np.float32))
    h = NumpyOps(1)
    assert ops.emit(h, L.UfuncOp("hypot", list(block.args), f32), [x, y]).dtype == np.float32
    np.testing.assert_array_equal(ops.emit(h, arith.AddfOp(*block.args), [x, y]), x + y)
    ule = arith.CmpfOp(*block.args, "ule")
    np.testing.assert_array_equal(ops.emit(h, ule, [x, y]), [True, True, True])
    cmp = Block(arg_types=[i64, i64])
    ult = arith.CmpiOp(*cmp.args, "ult")
    got = ops.emit(h, ult, [np.array([-1, 2]), np.array([1, 3])])  # -1 is huge unsigned
    np.testing.assert_array_equal(got, [False, True])
    const = L.ConstOp("-0.0", f32)
    assert np.signbit(ops.emit(NumpyOps(2), const, [])).shape == (1, 1)
    with pytest.raises(NotImplementedError, match="interpreter: no rule for arith.constant"):
        ops.emit(h, arith.ConstantOp(IntegerAttr(1, i1)), [])
