"""The op table's `fpe` column (dialects/ufuncs.py) and `dialects.array.
fp_flags` against numpy itself: every category numpy raises for a ufunc,
a cast or a reduction on special values (zeros of both signs, NaN, the
infinities, the largest and smallest numbers, subnormals) is one the facts
name. They may name more (another CPU's loops); never fewer, or an unused
op raising it would be dropped (passes/keep_flags.py)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from xdsl.dialects.builtin import TensorType
from xdsl.ir import Block

from dialects import array as A
from dialects import ufuncs as U
from dialects.dtypes import to_ir
from lowering.codegen import numpy_fpe

SPECIAL = [0.0, -0.0, 1.0, -1.0, 0.5, 2.0, 3.0, np.nan, np.inf, -np.inf, 1e308, -1e308,
           1e-308, 5e-324, -5e-324, 1e-30, 1e30, 1e5, -1e5, 700.0, -750.0, 1e-200, 100.0,
           1e-45, 3.4e38, 1e200, 89.0, -104.0, 65504.0, 6e-8]
INTS = [0, 1, -1, 2, 7, -7, np.iinfo(np.int64).min, np.iinfo(np.int64).max]
NAMES = {"divide": "divide", "overflow": "over", "underflow": "under", "invalid": "invalid"}


def raised(fn, *args) -> set[str]:
    """The categories numpy reports computing fn(*args)."""
    seen: set[str] = set()
    with np.errstate(all="call", call=lambda kind, flag: seen.add(NAMES[kind.split()[0]])):
        fn(*args)
    return seen


def operands(nin: int, values, dtype):
    with np.errstate(all="ignore"):
        v = np.array(values).astype(dtype)
    if nin == 1:
        return (v,)
    a, b = zip(*itertools.product(v, v))
    return np.array(a, dtype=dtype), np.array(b, dtype=dtype)


FLOAT_ROWS = [u for u in U.TABLE if u.name not in
              ("bitwise_and", "bitwise_or", "bitwise_xor", "invert", "left_shift", "right_shift",
               "ldexp")]


@pytest.mark.parametrize("u", FLOAT_ROWS, ids=lambda u: u.name)
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16])
def test_float_loops_raise_only_what_the_table_says(u, dtype):
    got = raised(getattr(np, u.name), *operands(u.nin, SPECIAL, dtype))
    assert got <= u.fpe(False), f"{u.name} {np.dtype(dtype)}: numpy raises {got}"


def _integer_loop(u) -> bool:
    """numpy has an integer loop of it (int64 in, an integer out): the IR
    casts to float first for the others; integer powers raise ValueError."""
    fn = getattr(np, u.name)
    out = fn.resolve_dtypes((np.dtype(np.int64),) * u.nin + (None,) * u.nout)[-1]
    return u.name not in ("power", "ldexp") and out.kind in "iub"


@pytest.mark.parametrize("u", [u for u in U.TABLE if _integer_loop(u)], ids=lambda u: u.name)
def test_integer_loops_raise_only_what_the_table_says(u):
    got = raised(getattr(np, u.name), *operands(u.nin, INTS, np.int64))
    assert got <= u.fpe(True), f"{u.name} int64: numpy raises {got}"


def test_tiny_inputs_numpy_flags_here_are_in_the_table():
    for (name, el), _ in numpy_fpe.table().tiny_input_underflows.items():
        assert "under" in U.UFUNCS[name].fpe(False), (name, el)


def _tensor(shape, dtype) -> TensorType:
    return TensorType(to_ir(np.dtype(dtype)), list(shape))


@pytest.mark.parametrize("src,dst", list(itertools.product(
    [np.float64, np.float32, np.float16, np.int64, np.int32, np.uint64, np.bool_],
    [np.float64, np.float32, np.float16, np.int64, np.int32, np.int8, np.uint8, np.bool_])))
def test_casts(src, dst):
    with np.errstate(all="ignore"):
        v = np.array(SPECIAL + [2.0 ** 63, -2.0 ** 63, 70000.0]).astype(src)
    got = raised(lambda: v.astype(dst))
    blk = Block(arg_types=[_tensor((len(v),), src)])
    op = A.CastOp(blk.args[0], _tensor((len(v),), dst))
    assert got <= A.fp_flags(op), (src, dst, got)


@pytest.mark.parametrize("kind,fn", [("sum", np.sum), ("prod", np.prod), ("max", np.max),
                                     ("min", np.min)])
def test_reductions(kind, fn):
    got = set()
    for pair in itertools.product(SPECIAL, SPECIAL):
        got |= raised(fn, np.array(pair))
    blk = Block(arg_types=[_tensor((2,), np.float64)])
    op = A.ReduceOp(blk.args[0], kind, (0,), _tensor((), np.float64))
    assert got <= A.fp_flags(op), (kind, got)
