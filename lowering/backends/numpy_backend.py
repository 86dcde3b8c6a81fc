"""The reference backend: every tensor-level op runs as the numpy call with the
same meaning (the ops-handler "numpy interpretation"). It is the oracle that
every pass and every other backend is checked against."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.transforms.dead_code_elimination import would_be_trivially_dead

from dialects import array as A
from dialects import ufuncs as U
from runtime.program import Program

from dialects.dtypes import from_ir


def _arr(x):
    return x if isinstance(x, np.ndarray) else np.asarray(x)


def _elementwise(f: Callable) -> Callable:
    def rule(op: Operation) -> Callable:
        dt = from_ir(op.results[0].type.element_type)  # type: ignore[attr-defined]

        def run(*xs):
            r = f(*xs)
            return _arr(r) if r.dtype == dt else _arr(r).astype(dt)

        return run

    return rule


def parse_constant(text: str, dtype: np.dtype) -> np.ndarray:
    if text.startswith("bytes:"):
        return np.frombuffer(bytes.fromhex(text[6:]), dtype=dtype.newbyteorder("<")).astype(dtype)
    if text in ("true", "false"):
        return np.array(text == "true", dtype=dtype)
    if dtype.kind in "iu":
        return np.array(int(text)).astype(dtype)
    return np.array(float(text), dtype=dtype)


def _constant(op: A.ConstantOp) -> Callable:
    shape = op.result.type.get_shape()
    dt = from_ir(op.result.type.element_type)
    arr = parse_constant(op.value.data, dt)
    arr = arr.reshape(shape) if op.value.data.startswith("bytes:") else np.broadcast_to(arr, shape)
    arr = np.array(arr)
    arr.flags.writeable = False
    return lambda: arr


def _ints(a) -> tuple[int, ...]:
    return A.ints(a)


def _slices(start, step, shape):
    out = []
    for b, s, n in zip(start, step, shape):
        e = b + n * s
        out.append(slice(b, None if e < 0 else e, s))
    return tuple(out)


def _slice(op: A.SliceOp):
    idx = _slices(_ints(op.start), _ints(op.step), op.result.type.get_shape()) + (Ellipsis,)
    return lambda x: x[idx]


def _insert_slice(op: A.InsertSliceOp):
    idx = _slices(_ints(op.start), _ints(op.step), op.source.type.get_shape())

    def run(src, dest):
        out = dest.copy()
        out[idx] = src
        return out

    return run


def _check_indices(idx: np.ndarray, n: int, axis: int) -> None:
    """Out-of-range indices are an error even where the result is empty (where
    numpy's take would not look at them)."""
    if idx.size:
        bad = (idx >= n) | (idx < -n)
        if bad.any():
            raise IndexError(f"index {idx[bad].flat[0]} is out of bounds for axis {axis} with size {n}")


def _gather(op: A.GatherOp):
    axis = op.axis.value.data

    def run(x, idx):
        _check_indices(idx, x.shape[axis], axis)
        return np.take(x, idx, axis=axis)

    return run


def _scatter(op: A.ScatterOp):
    axis = op.axis.value.data
    pre = (slice(None),) * axis
    if op.mode.data == "add":
        def run(dest, idx, upd):
            _check_indices(idx, dest.shape[axis], axis)
            out = dest.copy()
            np.add.at(out, pre + (idx,), upd)
            return out
    else:
        def run(dest, idx, upd):
            _check_indices(idx, dest.shape[axis], axis)
            out = dest.copy()
            out[pre + (idx,)] = upd
            return out
    return run


def _iota(op: A.IotaOp):
    shape = op.result.type.get_shape()
    d = op.dimension.value.data
    dt = from_ir(op.result.type.element_type)
    r = np.arange(shape[d]).reshape([-1 if i == d else 1 for i in range(len(shape))])
    arr = np.array(np.broadcast_to(r, shape).astype(dt))
    arr.flags.writeable = False
    return lambda: arr


_REDUCE = {"sum": np.sum, "prod": np.prod, "max": np.max, "min": np.min, "any": np.any,
           "all": np.all}
_CMP = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
        "gt": np.greater, "ge": np.greater_equal}


def _reduce(op: A.ReduceOp):
    kind, axes = op.kind.data, _ints(op.axes)
    f = _REDUCE[kind]
    if kind in ("sum", "prod"):
        # in the element type, as the op says (np.sum would widen int32/bool to int64)
        return lambda x: _arr(f(x, axis=axes, dtype=x.dtype))
    return lambda x: _arr(f(x, axis=axes))


def _ufunc(op: A.UfuncOp):
    uf = getattr(np, op.fn.data)
    dt = from_ir(op.result.type.element_type)

    def run(*xs):
        r = _arr(uf(*xs))
        return r if r.dtype == dt else r.astype(dt)

    return run


def _routine(op: A.RoutineOp):
    """The numpy routine itself; a rule of an op with several results returns a
    tuple, one array per result, in the result's dtype."""
    from .. import routines

    name, config = op.fn.data, op.kwargs()
    dts = [from_ir(r.type.element_type) for r in op.results]

    def run(*xs):
        rs = [_arr(r) for r in routines.call(name, list(xs), config)]
        rs = [r if r.dtype == dt else r.astype(dt) for r, dt in zip(rs, dts)]
        return tuple(rs) if len(rs) > 1 else rs[0]

    run.op_name = name  # type: ignore[attr-defined]  # explain names the numpy routine
    return run


_SCANS = {"sum": np.add.accumulate, "prod": np.multiply.accumulate,
          "max": np.maximum.accumulate, "min": np.minimum.accumulate}

RULES: dict[type, Callable[[Operation], Callable]] = {
    A.ConstantOp: _constant,
    A.BroadcastOp: lambda op: (lambda s: lambda x: np.broadcast_to(x, s))(op.result.type.get_shape()),
    A.CastOp: lambda op: (lambda dt: lambda x: x.astype(dt))(from_ir(op.result.type.element_type)),
    A.ReshapeOp: lambda op: (lambda s: lambda x: x.reshape(s))(op.result.type.get_shape()),
    A.TransposeOp: lambda op: (lambda p: lambda x: x.transpose(p))(_ints(op.permutation)),
    A.SliceOp: _slice,
    A.InsertSliceOp: _insert_slice,
    A.PadOp: lambda op: (lambda w: lambda x, v: np.pad(x, w, constant_values=v))(
        np.array(list(zip(_ints(op.low), _ints(op.high))), dtype=np.intp).reshape(-1, 2)),
    A.ConcatOp: lambda op: (lambda ax: lambda *xs: np.concatenate(xs, axis=ax))(op.axis.value.data),
    A.GatherOp: _gather,
    A.ScatterOp: _scatter,
    A.ReduceOp: _reduce,
    A.ArgReduceOp: lambda op: (lambda f, ax: lambda x: _arr(f(x, axis=ax)).astype(np.int64))(
        np.argmax if op.kind.data == "argmax" else np.argmin, op.axis.value.data),
    A.ScanOp: lambda op: (lambda f, ax: lambda x: f(x, axis=ax, dtype=x.dtype))(
        _SCANS[op.kind.data], op.axis.value.data),
    A.DotOp: lambda op: lambda a, b: _arr(np.matmul(a, b)),
    A.IotaOp: _iota,
    A.SelectOp: lambda op: lambda c, a, b: np.where(c, a, b),
    A.CompareOp: lambda op: (lambda f: lambda a, b: _arr(f(a, b)))(_CMP[op.predicate.data]),
    # its operands' steps computed them (and their flags): nothing more to do
    A.FlagsOp: lambda op: lambda *xs: None,
    A.UfuncOp: _ufunc,
    A.RoutineOp: _routine,
}

# upstream ops produced by `decompose`: numpy functions with their meaning (the
# op table's rewrites, dialects/ufuncs.py: arith.divf is np.divide, arith.ori np.bitwise_or)
for _name, _uf in U.UPSTREAM.items():
    RULES[U.upstream_class(_name)] = _elementwise(getattr(np, _uf))


def _field(j: int, name: str) -> Callable:
    def run(results):
        return results[j]

    run.op_name = f"{name}[{j}]"  # type: ignore[attr-defined]
    return run


def compile_module(module: ModuleOp) -> Program:
    fn = next(op for op in module.ops if isinstance(op, func.FuncOp))
    block = fn.body.blocks[0]
    slots: dict = {}
    for a in block.args:
        slots[a] = len(slots)
    n_inputs = len(slots)
    steps = []
    outputs: tuple[int, ...] = ()
    known: dict = {}  # values computable at compile time (constants and ops on them)
    roots: set[int] = set()  # steps kept though no output reads them (their effects)
    for op in block.ops:
        if isinstance(op, func.ReturnOp):
            outputs = tuple(slots[v] for v in op.arguments)
            continue
        rule = RULES.get(type(op))
        if rule is None:
            raise NotImplementedError(f"numpy backend: no rule for {op.name}")
        run = rule(op)
        if not op.results or not would_be_trivially_dead(op):
            # an op kept for its effect (numpy's error or flags): its step runs
            roots.add(len(slots))
        if not op.results:
            slots[op] = len(slots)
            steps.append((run, tuple(slots[v] for v in op.operands), slots[op]))
            continue
        if len(op.results) > 1:  # its results: one step each, reading the routine's tuple
            ins = tuple(slots[v] for v in op.operands)
            slots[op] = len(slots)
            steps.append((run, ins, slots[op]))
            for j, r in enumerate(op.results):
                slots[r] = len(slots)
                steps.append((_field(j, name=op.fn.data), (slots[op],), slots[r]))
            continue
        res = op.results[0]
        slots[res] = len(slots)
        if all(v in known for v in op.operands) and not A.fp_flags(op):
            # (an op that can raise a floating-point flag runs with the
            # program: its flags are the call's, as numpy's own are)
            with np.errstate(all="ignore"):
                # as computed (a broadcast stays a stride-0 view): numpy kernels
                # that depend on strides then see what eager numpy would
                value = np.asarray(run(*[known[v] for v in op.operands]))
            value.flags.writeable = False
            known[res] = value
            run = (lambda v: lambda: v)(value)
            steps.append((run, (), slots[res]))
            continue
        steps.append((run, tuple(slots[v] for v in op.operands), slots[res]))
    # steps that only feed folded values are dead
    live = set(outputs) | roots
    kept = []
    for run, ins, out in reversed(steps):
        if out in live:
            kept.append((run, ins, out))
            live.update(ins)
    return Program(n_inputs, len(slots), kept[::-1], outputs)


def extern_operands(ext, broadcasts: bool = True, identity: bool = False
                    ) -> Callable[..., list] | None:
    """For a `loop.extern` with a body: a function from its input arrays to
    the arrays its computed op reads (the body's views made as numpy views
    of the inputs: no copies). Without `broadcasts`, an operand's last
    views that are broadcasts are left to the routine (a ufunc broadcasts
    its operands itself: `np.broadcast_to` costs more than a small
    ufunc's whole loop). With `identity`, None where the op reads the
    inputs themselves, in order."""
    inner = ext.computed()
    block = ext.body.block
    index = {a: i for i, a in enumerate(block.args)}
    steps = []
    for v in ext.views():
        if not broadcasts and isinstance(v, A.BroadcastOp) and all(
                u.operation is inner or isinstance(u.operation, A.BroadcastOp)
                for u in v.results[0].uses):
            index[v.results[0]] = index[v.operands[0]]
            continue
        index[v.results[0]] = len(index)
        steps.append((RULES[type(v)](v), index[v.operands[0]]))
    reads = [index[o] for o in inner.operands]
    if not steps and reads == list(range(len(block.args))) and identity:
        return None
    if not steps:
        return lambda *arrs: [arrs[i] for i in reads]

    def operands(*arrs):
        env = list(arrs)
        for view, src in steps:
            env.append(view(env[src]))
        return [env[i] for i in reads]
    return operands


def extern_routine(ext) -> Callable:
    """The numpy routine of a `loop.extern` with a body: its computed op's
    rule on the inputs (through the body's views, where it has them)."""
    inner = ext.computed()
    rule = RULES[type(inner)](inner)
    if not ext.views():
        return rule
    operands = extern_operands(ext)
    return lambda *arrs: rule(*operands(*arrs))


def _routine_into(op: A.RoutineOp) -> Callable | None:
    from .. import routines

    return routines.into(op.fn.data, [from_ir(o.type.element_type) for o in op.operands],
                         op.kwargs(), from_ir(op.outputs[0].type.element_type))


def _ufunc_into(uf: np.ufunc) -> Callable[[Operation], Callable | None]:
    """A ufunc computing into the output (`out=`) where its operands are of
    the result's dtype (then `out=` picks the loop numpy picks without it: the
    same values), else None (a cast first: the result copied)."""
    def rule(op: Operation) -> Callable | None:
        dt = op.results[0].type.element_type  # type: ignore[attr-defined]
        if any(o.type.element_type != dt for o in op.operands):
            return None
        if len(op.operands) == 2:
            return lambda a, b, out: uf(a, b, out=out)
        return lambda *xs: uf(*xs[:-1], out=xs[-1])

    return rule


# the op classes whose INTO rule is a ufunc: it broadcasts its operands to
# its output itself
_UPSTREAM_UFUNCS = {U.upstream_class(name): getattr(np, uf) for name, uf in U.UPSTREAM.items()
                    if isinstance(getattr(np, uf), np.ufunc)}
BROADCASTING = frozenset({A.UfuncOp, *_UPSTREAM_UFUNCS})

# op class -> rule(op): the op's routine writing its one result into a given
# array (`run(*inputs, out)`), or None where it cannot (`routines.into`)
def _pad_into(op: A.PadOp) -> Callable:
    """A constant pad written into the output: the borders filled with the
    value, the input copied into the middle (`np.pad` makes a new array,
    which the output would then copy: twice the memory traffic)."""
    low, shape = _ints(op.low), op.input.type.get_shape()
    middle = tuple(slice(lo, lo + n) for lo, n in zip(low, shape))
    out_shape = op.result.type.get_shape()
    borders = []  # per dim: the slabs before and after the middle, the dims before it cut to it
    for d, (lo, n) in enumerate(zip(low, shape)):
        head = middle[:d]
        borders += [head + (slice(0, lo),), head + (slice(lo + n, out_shape[d]),)]

    def run(x, v, out):
        for b in borders:
            out[b] = v
        out[middle] = x
    return run


INTO_RULES: dict[type, Callable[[Operation], Callable | None]] = {
    A.RoutineOp: _routine_into,
    A.PadOp: _pad_into,
    A.UfuncOp: lambda op: _ufunc_into(getattr(np, op.fn.data))(op),
    **{cls: _ufunc_into(uf) for cls, uf in _UPSTREAM_UFUNCS.items()},
}


def extern_into(ext) -> Callable | None:
    """For a `loop.extern` with a body and one output: its routine writing
    straight into the output buffer (`run(*inputs, out)`, the body's views
    made as numpy views), or None where its op has no such rule — then
    `extern_routine`'s result is copied into the buffer."""
    inner = ext.computed()
    rule = INTO_RULES.get(type(inner))
    if len(inner.results) != 1 or rule is None:
        return None
    into = rule(inner)
    if into is None or not ext.views():
        return into
    operands = extern_operands(ext, broadcasts=type(inner) not in BROADCASTING, identity=True)
    n = ext.num_inputs.value.data
    if operands is None:  # (the routine reads the inputs as they are)
        return into

    def viewed(*arrs):
        return into(*operands(*arrs[:n]), arrs[n])
    viewed.__dict__.update(into.__dict__)  # (what the routine's call says of itself: QUIET)
    return viewed
