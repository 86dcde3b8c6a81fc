"""`autograd`: reverse-mode differentiation of tensor-level IR.

`backward(ops, wrt, outputs, cotangents, prims)` walks `ops` (a straight-line
piece of a block) in reverse and appends the backward computation through
`prims`: one VJP rule per primitive (`RULES`, and `UFUNC_RULES` for
`array.ufunc` by numpy name). The result is a joint function: the forward ops
followed by the backward ops, each backward op tagged with the `bwd` attribute
so that the partition pass (`passes/remat.py`) can cut the joint function into
a forward and a backward function.

Conventions:
- Only floating-point values carry gradients. Integer and bool values
  (indices, masks, `argmax`, comparisons) are constants to the derivative.
- A gradient flowing into `array.broadcast` is summed back to the input's shape.
- Subgradients, chosen as JAX and HIPS autograd choose them: `maximum`/
  `minimum`/`fmax`/`fmin` split the gradient equally between tied operands
  (so `np.maximum(x, 0)` — ReLU — has derivative 0.5 at x == 0);
  `max`/`min` reductions split it equally among the tied maxima; `abs` has
  derivative 0 at 0 (np.sign); floor/ceil/trunc/rint/sign/floor_divide have
  derivative 0. `x ** y` has derivative 0 in x where y == 0, and 0 in y where
  x == 0.
- The derivative of `cumprod` is not provided (an error names it).
- `array.routine` (numpy's sort/LAPACK routines) has rules per routine name
  (`ROUTINE_RULES`): linalg.norm (2-norm and Frobenius; derivative 0 at 0),
  solve, inv, det, slogdet, cholesky, and sort (the gradient scattered back
  through a stable argsort: of tied values, each keeps its own position's).
  Others (svd, eigh, qr, partition, ...) raise NotDifferentiable naming them.

`Autograd` is the same transformation as a module pass (`xdsl-opt -p
autograd`): the function's first result, a scalar, is differentiated with
respect to every floating-point argument; the gradients are appended to the
function's results.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, UnitAttr
from xdsl.ir import Block, Operation, SSAValue
from xdsl.passes import ModulePass

from dialects import array as A
from dialects.dtypes import from_ir
from dialects.dtypes import kind as dtype_kind
from dialects.prims import Prims
from dialects import ufuncs as U

BWD = "bwd"  # attribute marking ops of the backward computation
REMAT = "remat"  # attribute marking ops inside lowering.checkpoint regions


class NotDifferentiable(NotImplementedError):
    """No derivative rule for an operation a gradient must flow through."""


def _shape(v: SSAValue) -> tuple[int, ...]:
    return tuple(v.type.get_shape())  # type: ignore[attr-defined]


def _dtype(v: SSAValue) -> np.dtype:
    return from_ir(v.type.element_type)  # type: ignore[attr-defined]


def is_float(v: SSAValue) -> bool:
    try:
        return dtype_kind(_dtype(v)) == "f"
    except Exception:
        return False


class Emit:
    """Small algebra over `Prims` for writing the rules: every helper emits
    tensor-level ops of the operands' dtype and shape."""

    def __init__(self, prims):
        self.P = prims

    # -- constants and shapes --
    def full(self, value, shape, dtype) -> SSAValue:
        return self.P.broadcast(self.P.constant(value, dtype), tuple(shape))

    def like(self, value, v: SSAValue) -> SSAValue:
        return self.full(value, _shape(v), _dtype(v))

    def zeros_like(self, v: SSAValue) -> SSAValue:
        return self.like(0.0, v)

    # -- pointwise --
    def u(self, name: str, *xs: SSAValue) -> SSAValue:
        return self.P.ufunc(name, list(xs), _dtype(xs[0]))

    def add(self, a, b):
        return self.u("add", a, b)

    def sub(self, a, b):
        return self.u("subtract", a, b)

    def mul(self, a, b):
        return self.u("multiply", a, b)

    def div(self, a, b):
        return self.u("divide", a, b)

    def neg(self, a):
        return self.u("negative", a)

    def scale(self, a, c: float):
        return self.mul(a, self.like(c, a))

    def eq(self, a, b):
        return self.P.compare("eq", a, b)

    def select(self, c, a, b):
        return self.P.select(c, a, b)

    def where_zero(self, cond, value):
        """value where not cond, 0 where cond (no NaN leaks from `value`)."""
        return self.select(cond, self.zeros_like(value), value)

    # -- structure --
    def sum_to(self, g: SSAValue, shape: tuple[int, ...]) -> SSAValue:
        """Sum a gradient of a broadcast result back to `shape`."""
        gs = _shape(g)
        lead = len(gs) - len(shape)
        axes = [d for d in range(len(gs))
                if d < lead or (shape[d - lead] == 1 and gs[d] != 1)]
        return self.P.reshape(self.wide(g, lambda w: self.P.reduce(w, "sum", axes)), shape)

    def wide(self, g: SSAValue, accumulate: Callable[[SSAValue], SSAValue]) -> SSAValue:
        """`accumulate(g)` for a sum the chain rule introduces (a broadcast's
        or a cumulative sum's gradient): a float16 or bfloat16 gradient is
        summed in float32 and rounded once, as torch and JAX accumulate
        them. These sums are not numpy's (the forward has none); in the
        operand's own dtype a bias gradient summed over 4096 rows keeps about
        256 terms' worth of bfloat16 and loses the rest."""
        dt = _dtype(g)
        if dt.itemsize >= 4 or not is_float(g):
            return accumulate(g)
        return self.P.cast(accumulate(self.P.cast(g, np.dtype(np.float32))), dt)

    def expand(self, g: SSAValue, in_shape, axes) -> SSAValue:
        """Broadcast a reduction's gradient back over the reduced axes."""
        keep = tuple(1 if d in axes else n for d, n in enumerate(in_shape))
        return self.P.broadcast(self.P.reshape(g, keep), tuple(in_shape))

    def flip(self, v: SSAValue, axis: int) -> SSAValue:
        s = _shape(v)
        if s[axis] <= 1:
            return v
        start = [0] * len(s)
        step = [1] * len(s)
        start[axis], step[axis] = s[axis] - 1, -1
        return self.P.slice(v, start, step, s)


# ---------------------------------------------------------------------------
# VJP rules: rule(e, op, g, active) -> one gradient (or None) per operand.
# `active[i]` says whether operand i needs a gradient; rules skip the others.
# ---------------------------------------------------------------------------

Rule = Callable[[Emit, Operation, SSAValue, list[bool]], list[SSAValue | None]]


def _broadcast(e: Emit, op: A.BroadcastOp, g, act):
    return [e.sum_to(g, _shape(op.input))]


def _cast(e: Emit, op: A.CastOp, g, act):
    return [e.P.cast(g, _dtype(op.input)) if is_float(op.input) else None]


def _reshape(e: Emit, op: A.ReshapeOp, g, act):
    return [e.P.reshape(g, _shape(op.input))]


def _transpose(e: Emit, op: A.TransposeOp, g, act):
    perm = A.ints(op.permutation)
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return [e.P.transpose(g, inv)]


def _slice(e: Emit, op: A.SliceOp, g, act):
    zeros = e.zeros_like(op.input)
    return [e.P.insert_slice(g, zeros, A.ints(op.start), A.ints(op.step))]


def _insert_slice(e: Emit, op: A.InsertSliceOp, g, act):
    start, step = A.ints(op.start), A.ints(op.step)
    gs = e.P.slice(g, start, step, _shape(op.source)) if act[0] else None
    gd = e.P.insert_slice(e.zeros_like(op.source), g, start, step) if act[1] else None
    return [gs, gd]


def _pad(e: Emit, op: A.PadOp, g, act):
    lo = A.ints(op.low)
    shape = _shape(op.input)
    gi = e.P.slice(g, lo, [1] * len(lo), shape)
    gp = None
    if act[1]:
        total = e.P.reduce(g, "sum", range(len(shape)))
        inner = e.P.reduce(gi, "sum", range(len(shape)))
        gp = e.sub(total, inner)
    return [gi if act[0] else None, gp]


def _concat(e: Emit, op: A.ConcatOp, g, act):
    ax = op.axis.value.data
    out, off = [], 0
    for v, a in zip(op.inputs, act):
        s = _shape(v)
        start = [0] * len(s)
        start[ax] = off
        out.append(e.P.slice(g, start, [1] * len(s), s) if a else None)
        off += s[ax]
    return out


def _gather(e: Emit, op: A.GatherOp, g, act):
    ax = op.axis.value.data
    return [e.P.scatter(e.zeros_like(op.input), op.indices, g, ax, "add"), None]


def _scatter(e: Emit, op: A.ScatterOp, g, act):
    ax = op.axis.value.data
    mode = op.mode.data
    if mode == "add":
        gd = g
        gu = e.P.gather(g, op.indices, ax) if act[2] else None
        return [gd, None, gu]
    # "set": written positions take no gradient back to dest; of duplicate
    # indices only the last write (numpy's winner) gets the gradient
    gd = e.P.scatter(g, op.indices, e.zeros_like(op.updates), ax, "set") if act[0] else None
    gu = None
    if act[2]:
        gu = e.P.gather(g, op.indices, ax)
        idx = op.indices
        ishape = _shape(idx)
        m = int(np.prod(ishape, dtype=np.int64))
        if m > 1:
            i64 = np.dtype(np.int64)
            pos = e.P.reshape(e.P.iota((m,), 0, i64), ishape)
            n = _shape(op.dest)[ax]
            winners = e.P.scatter(e.full(-1, (n,), i64), idx, pos, 0, "set")
            won = e.eq(e.P.gather(winners, idx, 0), pos)
            ushape = _shape(op.updates)
            k = len(ishape)
            mask_shape = tuple(1 if (d < ax or d >= ax + k) else ushape[d] for d in range(len(ushape)))
            mask = e.P.broadcast(e.P.reshape(won, mask_shape), ushape)
            gu = e.select(mask, gu, e.zeros_like(gu))
    return [gd, None, gu]


def _reduce(e: Emit, op: A.ReduceOp, g, act):
    kind = op.kind.data
    x = op.input
    shape = _shape(x)
    axes = A.ints(op.axes)
    if kind == "sum":
        return [e.expand(g, shape, axes)]
    if kind in ("max", "min"):
        out = e.expand(op.result, shape, axes)
        hit = e.eq(x, out)
        ones = e.P.cast(hit, _dtype(x))
        count = e.expand(e.P.reduce(ones, "sum", axes), shape, axes)
        share = e.div(e.expand(g, shape, axes), count)
        return [e.select(hit, share, e.zeros_like(x))]
    if kind == "prod":
        return [_prod_grad(e, x, g, axes)]
    return [None]  # any/all: bool


def _prod_grad(e: Emit, x, g, axes):
    """d prod / d x_i = prod of the others, as (exclusive prefix product) x
    (exclusive suffix product): exact with zeros, no division."""
    shape = _shape(x)
    kept = [d for d in range(len(shape)) if d not in axes]
    perm = kept + list(axes)
    kshape = tuple(shape[d] for d in kept)
    k = int(np.prod([shape[d] for d in axes], dtype=np.int64))
    if k == 0:
        return e.zeros_like(x)
    xt = e.P.reshape(e.P.transpose(x, perm), (*kshape, k))
    last = len(kshape)

    def exclusive(v):
        inc = e.P.scan(v, "prod", last)
        ones = e.full(1.0, (*kshape, 1), _dtype(x))
        if k == 1:
            return ones
        head = e.P.slice(inc, [0] * (last + 1), [1] * (last + 1), (*kshape, k - 1))
        return e.P.concat([ones, head], last)

    left = exclusive(xt)
    right = e.flip(exclusive(e.flip(xt, last)), last)
    gk = e.P.broadcast(e.P.reshape(g, (*kshape, 1)), (*kshape, k))
    gt = e.mul(gk, e.mul(left, right))
    tshape = tuple(shape[d] for d in perm)
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return e.P.transpose(e.P.reshape(gt, tshape), inv)


def _scan(e: Emit, op: A.ScanOp, g, act):
    if op.kind.data != "sum":
        name = {"prod": "cumprod", "max": "maximum.accumulate", "min": "minimum.accumulate"}
        raise NotDifferentiable(
            f"lowering.grad: the derivative of {name[op.kind.data]} is not supported")
    ax = op.axis.value.data
    return [e.flip(e.wide(e.flip(g, ax), lambda w: e.P.scan(w, "sum", ax)), ax)]


def _dot(e: Emit, op: A.DotOp, g, act):
    a, b = op.lhs, op.rhs
    r = len(_shape(a))
    swap = list(range(r - 2)) + [r - 1, r - 2]
    ga = e.P.dot(g, e.P.transpose(b, swap)) if act[0] else None
    gb = e.P.dot(e.P.transpose(a, swap), g) if act[1] else None
    return [ga, gb]


def _select(e: Emit, op: A.SelectOp, g, act):
    z = e.zeros_like(g)
    return [None, e.select(op.cond, g, z) if act[1] else None,
            e.select(op.cond, z, g) if act[2] else None]


def _ufunc(e: Emit, op: A.UfuncOp, g, act):
    name = op.fn.data
    rule = UFUNC_RULES.get(name)
    if rule is None:
        if name in ZERO_DERIVATIVE:
            return [None] * len(op.inputs)
        raise NotDifferentiable(f"lowering.grad: no derivative rule for np.{name}")
    ins = list(op.inputs)
    if any(not is_float(v) for v, a in zip(ins, act) if a):
        return [None] * len(ins)
    return rule(e, ins, op.result, g, act)


# ---------------------------------------------------------------------------
# array.routine by numpy name: rule(e, op, g, active) -> per-operand gradient,
# g one cotangent per result (None for a result no gradient reaches) where the
# routine has several results. Derivatives as HIPS autograd takes them.
# ---------------------------------------------------------------------------

def _mT(e: Emit, v: SSAValue) -> SSAValue:
    r = len(_shape(v))
    return e.P.transpose(v, [*range(r - 2), r - 1, r - 2])


def _call(e: Emit, fn: str, inputs: list[SSAValue], shape, dtype, **config) -> SSAValue:
    return e.P.routine(fn, inputs, config, [(tuple(shape), dtype)])[0]


def _config(op: A.RoutineOp) -> dict:
    return op.kwargs()


def _matrix_scale(e: Emit, c: SSAValue, m: SSAValue) -> SSAValue:
    """c[..., None, None] * m, c of m's batch shape."""
    s = _shape(m)
    return e.mul(e.P.broadcast(e.P.reshape(c, (*s[:-2], 1, 1)), s), m)


def _norm_vjp(e: Emit, op, g, act):
    x, n = op.inputs[0], op.results[0]
    cfg = _config(op)
    ord_, axis = cfg.get("ord"), cfg.get("axis")
    nd = len(_shape(x))
    axes = tuple(range(nd)) if axis is None else (axis,) if isinstance(axis, int) else axis
    axes = tuple(a % nd for a in axes) if nd else ()
    two = ord_ is None or ord_ == "fro" or (ord_ == 2 and len(axes) == 1)
    if not two:
        raise NotDifferentiable(f"lowering.grad: the derivative of np.linalg.norm is provided "
                                f"for the 2-norm and the Frobenius norm, not ord={ord_!r}")
    # g * x / norm; 0 where the norm is 0 (the subgradient 0, as abs has at 0),
    # dividing by 1 there: no 0/0 to raise numpy's "invalid" flag
    shape = _shape(x)
    ne = e.expand(n, shape, axes)
    zero = e.eq(ne, e.zeros_like(ne))
    q = e.div(x, e.select(zero, e.like(1.0, ne), ne))
    return [e.mul(e.expand(g, shape, axes), e.where_zero(zero, q))]


def _solve_vjp(e: Emit, op, g, act):
    a, b = op.inputs
    x = op.results[0]
    m = _shape(a)[-1]
    vector = len(_shape(b)) == 1
    x2 = e.P.reshape(x, (*_shape(x), 1)) if vector else x
    g2 = e.P.reshape(g, _shape(x2))
    batch = _shape(x2)[:-2]
    at = e.P.broadcast(_mT(e, a), (*batch, m, m))
    gb2 = _call(e, "np.linalg.solve", [at, g2], _shape(x2), _dtype(x))
    ga = gb = None
    if act[0]:
        ga = e.sum_to(e.neg(e.P.dot(gb2, _mT(e, x2))), _shape(a))
    if act[1]:
        gb = e.sum_to(e.P.reshape(gb2, _shape(x)) if vector else gb2, _shape(b))
    return [ga, gb]


def _inv_vjp(e: Emit, op, g, act):
    yt = _mT(e, op.results[0])
    return [e.neg(e.P.dot(e.P.dot(yt, g), yt))]


def _inv_t(e: Emit, a: SSAValue) -> SSAValue:
    return _mT(e, _call(e, "np.linalg.inv", [a], _shape(a), _dtype(a)))


def _det_vjp(e: Emit, op, g, act):
    a = op.inputs[0]
    return [_matrix_scale(e, e.mul(g, op.results[0]), _inv_t(e, a))]


def _slogdet_vjp(e: Emit, op, g, act):
    a = op.inputs[0]
    g_log = g[1]  # the sign is locally constant
    if g_log is None:
        return [None]
    return [_matrix_scale(e, g_log, _inv_t(e, a))]


def _cholesky_vjp(e: Emit, op, g, act):
    """Murray (2016): with P = Φ(Lᵀ Ḡ) (lower triangle, diagonal halved),
    S = L⁻ᵀ P L⁻¹ and Ā = (S + Sᵀ) / 2."""
    upper = bool(_config(op).get("upper", False))
    L, gL = op.results[0], g
    if upper:  # U = Lᵀ
        L, gL = _mT(e, L), _mT(e, g)
    shape, dt = _shape(L), _dtype(L)
    i64 = np.dtype(np.int64)
    rows, cols = e.P.iota(shape, len(shape) - 2, i64), e.P.iota(shape, len(shape) - 1, i64)
    lower = e.P.compare("ge", rows, cols)
    diag = e.P.compare("eq", rows, cols)
    p = e.P.dot(_mT(e, L), gL)
    p = e.select(lower, p, e.zeros_like(p))
    p = e.select(diag, e.scale(p, 0.5), p)
    linv = _call(e, "np.linalg.inv", [L], shape, dt)
    s = e.P.dot(e.P.dot(_mT(e, linv), p), linv)
    return [e.scale(e.add(s, _mT(e, s)), 0.5)]


def _sort_vjp(e: Emit, op, g, act):
    """The gradient of the sorted values goes back to where each came from:
    a scatter through the (stable) argsort permutation."""
    x = op.inputs[0]
    shape = _shape(x)
    ax = _config(op)["axis"] % len(shape)
    n = shape[ax]
    total = int(np.prod(shape, dtype=np.int64))
    if total == 0:
        return [e.zeros_like(x)]
    i64 = np.dtype(np.int64)
    perm = _call(e, "np.argsort", [x], shape, i64, axis=ax, kind=None, stable=True)
    order = [d for d in range(len(shape)) if d != ax] + [ax]
    inv = [int(i) for i in np.argsort(order)]
    rows = total // n
    pt = e.P.reshape(e.P.transpose(perm, order), (rows, n))
    gt = e.P.reshape(e.P.transpose(g, order), (total,))
    base = e.P.ufunc("multiply", [e.P.iota((rows, n), 0, i64), e.full(n, (rows, n), i64)], i64)
    flat = e.P.reshape(e.P.ufunc("add", [pt, base], i64), (total,))
    gx = e.P.scatter(e.zeros_like(gt), flat, gt, 0, "set")
    tshape = tuple(shape[d] for d in order)
    return [e.P.transpose(e.P.reshape(gx, tshape), inv)]


ROUTINE_RULES: dict[str, Rule] = {
    "np.linalg.norm": _norm_vjp,
    "np.linalg.solve": _solve_vjp,
    "np.linalg.inv": _inv_vjp,
    "np.linalg.det": _det_vjp,
    "np.linalg.slogdet": _slogdet_vjp,
    "np.linalg.cholesky": _cholesky_vjp,
    "np.sort": _sort_vjp,
}


def _routine(e: Emit, op: A.RoutineOp, g, act):
    name = op.fn.data
    ins = list(op.inputs)
    if any(not is_float(v) for v, a in zip(ins, act) if a):
        return [None] * len(ins)
    rule = ROUTINE_RULES.get(name)
    if rule is None:
        raise NotDifferentiable(f"lowering.grad: no derivative rule for {name}")
    return rule(e, op, g, act)


RULES: dict[type, Rule] = {
    A.BroadcastOp: _broadcast,
    A.CastOp: _cast,
    A.ReshapeOp: _reshape,
    A.TransposeOp: _transpose,
    A.SliceOp: _slice,
    A.InsertSliceOp: _insert_slice,
    A.PadOp: _pad,
    A.ConcatOp: _concat,
    A.GatherOp: _gather,
    A.ScatterOp: _scatter,
    A.ReduceOp: _reduce,
    A.ScanOp: _scan,
    A.DotOp: _dot,
    A.SelectOp: _select,
    A.UfuncOp: _ufunc,
    A.RoutineOp: _routine,
}
# ops whose results carry no gradient (integer/bool results, or no operands)
NO_GRADIENT = (A.ConstantOp, A.IotaOp, A.CompareOp, A.ArgReduceOp)

# ---------------------------------------------------------------------------
# ufuncs by numpy name: rule(e, inputs, out, g, active) -> per-input gradient
# ---------------------------------------------------------------------------

# the op table's grad column (dialects/ufuncs.py): "zero" here, "rule" in UFUNC_RULES
ZERO_DERIVATIVE = frozenset(U.names(lambda u: u.grad == "zero"))

LN2, LN10 = math.log(2.0), math.log(10.0)


def _unary(f: Callable[[Emit, SSAValue, SSAValue, SSAValue], SSAValue]):
    return lambda e, ins, out, g, act: [f(e, ins[0], out, g)]


def _sq(e, x):
    return e.mul(x, x)


def _balanced(which: int):
    """maximum/minimum (and fmax/fmin): the gradient goes to the operand equal
    to the result, halved where both are."""
    def rule(e, ins, out, g, act):
        x, y = ins
        tie = e.eq(x, y)
        half = e.select(tie, e.like(0.5, g), e.like(1.0, g))
        res = []
        for v, a in zip((x, y), act):
            if not a:
                res.append(None)
                continue
            res.append(e.select(e.eq(v, out), e.mul(g, half), e.zeros_like(g)))
        return res
    del which
    return rule


def _power(e: Emit, ins, out, g, act):
    x, y = ins
    gx = gy = None
    if act[0]:
        c = const_value(y)
        if c is not None:
            if c == 0:
                gx = e.zeros_like(g)
            elif c == 1:
                gx = g
            else:
                ym1 = e.like(c - 1, y)
                gx = e.mul(g, e.mul(e.like(c, y), e.u("power", x, ym1)))
        else:
            ym1 = e.sub(y, e.like(1.0, y))
            d = e.mul(y, e.u("power", x, ym1))
            gx = e.mul(g, e.where_zero(e.eq(y, e.zeros_like(y)), d))
    if act[1]:
        d = e.mul(out, e.u("log", x))
        gy = e.mul(g, e.where_zero(e.eq(x, e.zeros_like(x)), d))
    return [gx, gy]


def _divide(e: Emit, ins, out, g, act):
    x, y = ins
    gx = e.div(g, y) if act[0] else None
    gy = e.neg(e.div(e.mul(g, out), y)) if act[1] else None
    return [gx, gy]


def _arctan2(e: Emit, ins, out, g, act):
    y, x = ins
    r2 = e.add(_sq(e, x), _sq(e, y))
    return [e.div(e.mul(g, x), r2) if act[0] else None,
            e.neg(e.div(e.mul(g, y), r2)) if act[1] else None]


def _logaddexp(base2: bool):
    def rule(e, ins, out, g, act):
        res = []
        for v, a in zip(ins, act):
            if not a:
                res.append(None)
                continue
            d = e.sub(v, out)
            w = e.u("exp2", d) if base2 else e.u("exp", d)
            res.append(e.mul(g, w))
        return res
    return rule


def _remainder(trunc: bool):
    def rule(e, ins, out, g, act):
        x, y = ins
        gy = None
        if act[1]:
            q = e.u("trunc", e.div(x, y)) if trunc else e.u("floor", e.div(x, y))
            gy = e.neg(e.mul(g, q))
        return [g if act[0] else None, gy]
    return rule


def _hypot(e: Emit, ins, out, g, act):
    return [e.div(e.mul(g, v), out) if a else None for v, a in zip(ins, act)]


def _copysign(e: Emit, ins, out, g, act):
    x, _ = ins
    s = e.mul(e.u("sign", x), e.u("sign", out))
    return [e.mul(g, s) if act[0] else None, None]


UFUNC_RULES: dict[str, Callable] = {
    "add": lambda e, ins, out, g, act: [g, g],
    "subtract": lambda e, ins, out, g, act: [g if act[0] else None, e.neg(g) if act[1] else None],
    "multiply": lambda e, ins, out, g, act: [e.mul(g, ins[1]) if act[0] else None,
                                             e.mul(g, ins[0]) if act[1] else None],
    "divide": _divide,
    "negative": _unary(lambda e, x, out, g: e.neg(g)),
    "positive": _unary(lambda e, x, out, g: g),
    "conjugate": _unary(lambda e, x, out, g: g),
    "power": _power,
    "float_power": _power,
    "square": _unary(lambda e, x, out, g: e.mul(g, e.scale(x, 2.0))),
    "sqrt": _unary(lambda e, x, out, g: e.div(g, e.scale(out, 2.0))),
    "cbrt": _unary(lambda e, x, out, g: e.div(g, e.scale(_sq(e, out), 3.0))),
    "reciprocal": _unary(lambda e, x, out, g: e.neg(e.mul(g, _sq(e, out)))),
    "exp": _unary(lambda e, x, out, g: e.mul(g, out)),
    "exp2": _unary(lambda e, x, out, g: e.mul(g, e.scale(out, LN2))),
    "expm1": _unary(lambda e, x, out, g: e.mul(g, e.add(out, e.like(1.0, out)))),
    "log": _unary(lambda e, x, out, g: e.div(g, x)),
    "log2": _unary(lambda e, x, out, g: e.div(g, e.scale(x, LN2))),
    "log10": _unary(lambda e, x, out, g: e.div(g, e.scale(x, LN10))),
    "log1p": _unary(lambda e, x, out, g: e.div(g, e.add(x, e.like(1.0, x)))),
    "sin": _unary(lambda e, x, out, g: e.mul(g, e.u("cos", x))),
    "cos": _unary(lambda e, x, out, g: e.neg(e.mul(g, e.u("sin", x)))),
    "tan": _unary(lambda e, x, out, g: e.mul(g, e.add(e.like(1.0, out), _sq(e, out)))),
    "arcsin": _unary(lambda e, x, out, g: e.div(g, e.u("sqrt", e.sub(e.like(1.0, x), _sq(e, x))))),
    "arccos": _unary(lambda e, x, out, g: e.neg(e.div(g, e.u("sqrt", e.sub(e.like(1.0, x), _sq(e, x)))))),
    "arctan": _unary(lambda e, x, out, g: e.div(g, e.add(e.like(1.0, x), _sq(e, x)))),
    "sinh": _unary(lambda e, x, out, g: e.mul(g, e.u("cosh", x))),
    "cosh": _unary(lambda e, x, out, g: e.mul(g, e.u("sinh", x))),
    "tanh": _unary(lambda e, x, out, g: e.mul(g, e.sub(e.like(1.0, out), _sq(e, out)))),
    "arcsinh": _unary(lambda e, x, out, g: e.div(g, e.u("sqrt", e.add(_sq(e, x), e.like(1.0, x))))),
    "arccosh": _unary(lambda e, x, out, g: e.div(g, e.u("sqrt", e.sub(_sq(e, x), e.like(1.0, x))))),
    "arctanh": _unary(lambda e, x, out, g: e.div(g, e.sub(e.like(1.0, x), _sq(e, x)))),
    "absolute": _unary(lambda e, x, out, g: e.mul(g, e.u("sign", x))),
    "fabs": _unary(lambda e, x, out, g: e.mul(g, e.u("sign", x))),
    "deg2rad": _unary(lambda e, x, out, g: e.scale(g, math.pi / 180.0)),
    "radians": _unary(lambda e, x, out, g: e.scale(g, math.pi / 180.0)),
    "rad2deg": _unary(lambda e, x, out, g: e.scale(g, 180.0 / math.pi)),
    "degrees": _unary(lambda e, x, out, g: e.scale(g, 180.0 / math.pi)),
    "maximum": _balanced(0),
    "minimum": _balanced(1),
    "fmax": _balanced(0),
    "fmin": _balanced(1),
    "hypot": _hypot,
    "arctan2": _arctan2,
    "logaddexp": _logaddexp(False),
    "logaddexp2": _logaddexp(True),
    "remainder": _remainder(False),
    "fmod": _remainder(True),
    "copysign": _copysign,
    # x * 2**n: exact scaling, so the gradient in x is g scaled alike (n is an integer)
    "ldexp": lambda e, ins, out, g, act: [e.u("ldexp", g, ins[1]) if act[0] else None, None],
}
U.require(UFUNC_RULES, lambda u: u.grad == "rule", "passes/autograd.py UFUNC_RULES", exact=True)


def const_value(v: SSAValue) -> float | None:
    """The splat value of `v` when it is a (broadcast) scalar constant."""
    op = v.owner
    while isinstance(op, (A.BroadcastOp, A.ReshapeOp)):
        op = op.input.owner
    if isinstance(op, A.ConstantOp) and not op.value.data.startswith("bytes:"):
        text = op.value.data
        if text in ("true", "false"):
            return float(text == "true")
        return float(text)
    return None


# ---------------------------------------------------------------------------
# the transformation
# ---------------------------------------------------------------------------

def backward(ops: Sequence[Operation], wrt: Sequence[SSAValue], outputs: Sequence[SSAValue],
             cotangents: Sequence[SSAValue], prims, tag: bool = True) -> list[SSAValue | None]:
    """Append the backward computation of `ops` to `prims`' block; return the
    gradient of each `wrt` value (None where no gradient reaches it)."""
    block: Block = prims.block
    e = Emit(prims)
    active: set[SSAValue] = {w for w in wrt if is_float(w)}
    for op in ops:
        if op.attributes.get(BWD) is not None:
            del op.attributes[BWD]  # an inner grad's backward is this grad's forward
        if isinstance(op, NO_GRADIENT):
            continue
        if any(o in active for o in op.operands):
            active.update(r for r in op.results if is_float(r))
    first_new = block.last_op
    grads: dict[SSAValue, SSAValue] = {}

    def accumulate(v: SSAValue, g: SSAValue) -> None:
        if _dtype(g) != _dtype(v):
            g = prims.cast(g, _dtype(v))
        old = grads.get(v)
        grads[v] = g if old is None else e.add(old, g)

    for o, c in zip(outputs, cotangents):
        if o in active:
            accumulate(o, c)
    for op in reversed(list(ops)):
        if not any(r in grads for r in op.results):
            continue
        acts = [v in active for v in op.operands]
        if not any(acts):
            continue
        rule = RULES.get(type(op))
        if rule is None:
            raise NotDifferentiable(f"lowering.grad: no derivative rule for {op.name}")
        # an op with several results (`array.routine`) gets one cotangent (or None) each
        g = grads[op.results[0]] if len(op.results) == 1 else [grads.get(r) for r in op.results]
        for v, gv in zip(op.operands, rule(e, op, g, acts)):
            if gv is not None and v in active:
                accumulate(v, gv)
    if tag:
        op = first_new.next_op if first_new is not None else block.first_op
        while op is not None:
            op.attributes[BWD] = UnitAttr()
            op = op.next_op
    return [grads.get(w) for w in wrt]


@dataclass(frozen=True)
class Autograd(ModulePass):
    """Differentiate each function's first (scalar, float) result with respect
    to its floating-point arguments; append the gradients as results."""

    name = "autograd"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for f in [o for o in op.ops if isinstance(o, func.FuncOp)]:
            differentiate_function(f, Prims(f.body.blocks[0]))


def differentiate_function(f: func.FuncOp, prims) -> list[SSAValue]:
    block = f.body.blocks[0]
    ret = block.last_op
    assert isinstance(ret, func.ReturnOp)
    outs = list(ret.arguments)
    if not outs or _shape(outs[0]) != () or not is_float(outs[0]):
        raise ValueError("autograd: the first result must be a floating-point scalar")
    ops = [o for o in block.ops if o is not ret]
    block.detach_op(ret)
    seed = prims.constant(1.0, _dtype(outs[0]))
    wrt = [a for a in block.args if is_float(a)]
    gs = backward(ops, wrt, [outs[0]], [seed], prims)
    grads = [g if g is not None else Emit(prims).zeros_like(w) for w, g in zip(wrt, gs)]
    new_ret = func.ReturnOp(*outs, *grads)
    block.add_op(new_ret)
    f.function_type = func.FunctionType.from_lists(
        [a.type for a in block.args], [v.type for v in new_ret.arguments])
    return grads
