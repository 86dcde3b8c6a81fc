"""A CPU program for many sizes: a plan whose numbers are size expressions.

A function compiled with size symbols (`dialects.symbols`) leaves a plan
(`cpu_backend.ProgramPlan`) in which allocation shapes, launch work and
threads, kernel parameters and index-check sizes are `SymDim`s (or, for a
parameter, `SymParam`): expressions over the symbols, whose values are the
sizes of the call's arguments. Its kernels were compiled with those sizes
as parameters (share-kernels), so one compiled body serves every size.

A call reads each symbol from the argument dim it was bound to, evaluates
every expression at once (one generated function), and runs the plan
instantiated for those sizes: a `CpuProgram`, built once per distinct set
of sizes (kept, most recent first, up to `PROGRAMS_PER_SIZE_SET`), so that
calls at sizes seen before cost what a static program's do."""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import fields, is_dataclass, replace

import numpy as np

from xdsl.dialects import func
from xdsl.dialects.builtin import MemRefType, StringAttr, TensorType

from dialects.array import i64_array
from dialects.dtypes import kind as dtype_kind
from dialects.symbols import SymDim, SymStr, evaluate, evaluator, symbols_of

from . import cpu_backend as B
from . import numpy_backend
from .cpu_backend import SymParam

PROGRAMS_PER_SIZE_SET = 16


class NotSymbolic(Exception):
    """The plan cannot serve other sizes (a size compiled into a kernel, an
    extern whose routine was built for the traced shapes): the reason."""


def param_bits(value, dtype: np.dtype) -> int:
    text = repr(float(value)) if dtype_kind(dtype) in "fc" else str(int(value))
    v = numpy_backend.parse_constant(text, dtype)
    return int(v.reshape(1).view(f"u{dtype.itemsize}")[0])


class _Slot:
    """Where the plan's template takes the value of expression `j`."""
    __slots__ = ("j", "dtype")

    def __init__(self, j: int, dtype=None):
        self.j, self.dtype = j, dtype


def _template(obj, exprs: list[str]):
    """obj with each size expression replaced by a `_Slot` (its expression
    appended to `exprs`)."""
    if isinstance(obj, SymDim):
        exprs.append(obj.expr)
        return _Slot(len(exprs) - 1)
    if isinstance(obj, SymParam):
        exprs.append(obj.expr)
        return _Slot(len(exprs) - 1, obj.dtype)
    if isinstance(obj, tuple):
        return tuple(_template(e, exprs) for e in obj)
    if is_dataclass(obj) and not isinstance(obj, type):
        changes = {f.name: _template(getattr(obj, f.name), exprs) for f in fields(obj)
                   if f.name not in ("op", "static")}
        return replace(obj, **changes)
    return obj


def _fill(obj, values: tuple):
    if isinstance(obj, _Slot):
        v = values[obj.j]
        return param_bits(v, obj.dtype) if obj.dtype is not None else int(v)
    if isinstance(obj, tuple):
        return tuple(_fill(e, values) for e in obj)
    if is_dataclass(obj) and not isinstance(obj, type):
        changes = {f.name: _fill(getattr(obj, f.name), values) for f in fields(obj)
                   if f.name not in ("op", "static")}
        return replace(obj, **changes)
    return obj


def check_plan(plan: B.ProgramPlan, keys: dict[str, tuple]) -> None:
    """Raise NotSymbolic where the plan cannot serve other sizes."""
    for name, key in keys.items():
        if symbols_of(key):
            raise NotSymbolic(f"kernel {name} has a size compiled in")


def _op_symbolic(op) -> bool:
    return any(symbols_of([o.properties, o.attributes, [r.type for r in o.results]]
                          + [a.type for reg in o.regions for blk in reg.blocks for a in blk.args])
               for o in op.walk())


def _concrete_attr(a, values: dict[str, int]):
    """An attribute or type with its symbolic sizes evaluated at `values`."""
    sym = getattr(a, "_symbolic", None)
    if isinstance(sym, tuple):
        return i64_array([evaluate(v.expr, values) if isinstance(v, SymDim) else v for v in sym])
    if isinstance(a, StringAttr) and isinstance(a.data, SymStr):
        v = evaluate(a.data.expr, values)
        return StringAttr(repr(float(v)) if isinstance(v, float) else str(int(v)))
    shape = getattr(a, "get_shape", None)
    if shape is not None and isinstance(a, (TensorType, MemRefType)):
        dims = a.get_shape()
        if any(isinstance(d, SymDim) for d in dims):
            new = [evaluate(d.expr, values) if isinstance(d, SymDim) else d for d in dims]
            if isinstance(a, TensorType):
                return TensorType(a.element_type, new)
            return MemRefType(a.element_type, new, a.layout, a.memory_space)
    return a


def concrete_op(op, values: dict[str, int]):
    """A copy of a numpy extern's op (`loop.extern` and the tensor-level op
    it computes) with its sizes, offsets and types evaluated at `values`:
    what its numpy routine is built from for those sizes."""
    new = op.clone()
    for o in new.walk():
        for name, v in list(o.properties.items()):
            o.properties[name] = _concrete_attr(v, values)
        for name, v in list(o.attributes.items()):
            o.attributes[name] = _concrete_attr(v, values)
        for r in o.results:
            r._type = _concrete_attr(r.type, values)
        for reg in o.regions:
            for blk in reg.blocks:
                for a in blk.args:
                    a._type = _concrete_attr(a.type, values)
    return new


class DynamicProgram:
    """See the module's docstring. `arg_shapes` are the program's argument
    shapes (symbols where a dim is one): each symbol is read from the first
    argument dim that is exactly it."""

    def __init__(self, plan: B.ProgramPlan, addresses: dict[str, int], report, llvm_ir: str,
                 arg_shapes: list[tuple], keys: dict[str, tuple] | None = None,
                 stage=B._untimed):
        self.plan = plan
        self.keys = keys or {}  # each kernel's body key (`cpu_backend.body_key`)
        self.addresses = addresses
        self.bindings: list[tuple[str, int, int]] = []  # (symbol, argument, dim)
        seen: set[str] = set()
        for i, shape in enumerate(arg_shapes):
            for d, n in enumerate(shape):
                if isinstance(n, SymDim) and n.expr.isidentifier() and n.expr not in seen:
                    seen.add(n.expr)
                    self.bindings.append((n.expr, i, d))
        exprs: list[str] = []
        self._template = _template(plan, exprs)
        # numpy externs built from symbolic ops: rebuilt per set of sizes
        self._symbolic_externs = {k for k, st in enumerate(plan.steps)
                                  if isinstance(st, B.ExternPlan) and st.op is not None
                                  and _op_symbolic(st.op)}
        self.exprs = exprs
        try:
            self._eval = evaluator(exprs, [s for s, _, _ in self.bindings]) if exprs else None
        except SyntaxError as e:  # (an expression of ours that does not compile)
            raise NotSymbolic(f"a size expression does not compile: {e}") from None
        self._programs: OrderedDict[tuple, B.CpuProgram] = OrderedDict()
        self._lock = threading.Lock()
        hints = tuple(int.__int__(arg_shapes[i][d]) for _, i, d in self.bindings)
        try:  # (the first instantiation is the emitter's memory-plan stage)
            first = self.program_for(hints, stage)
        except NameError as e:  # an expression over a size no argument gives
            raise NotSymbolic(str(e)) from None
        self.fresh = first.fresh
        self.kernel_bodies = first.kernel_bodies
        self.outputs = first.outputs
        self.report, self.llvm_ir = report, llvm_ir

    @property
    def symbols(self) -> list[str]:
        return [s for s, _, _ in self.bindings]

    def program_for(self, sizes: tuple, stage=B._untimed) -> B.CpuProgram:
        """The plan instantiated for `sizes` (the symbols' values, in
        `bindings` order): built on their first call, then kept."""
        with self._lock:
            prog = self._programs.get(sizes)
            if prog is not None:
                self._programs.move_to_end(sizes)
                return prog
        values = self._eval(*sizes) if self._eval is not None else ()
        plan = _fill(self._template, values)
        if self._symbolic_externs:
            named = dict(zip(self.symbols, sizes))
            plan = replace(plan, steps=tuple(
                replace(st, op=concrete_op(st.op, named)) if k in self._symbolic_externs else st
                for k, st in enumerate(plan.steps)))
        prog = B.program(plan, self.addresses, None, "", stage)
        with self._lock:  # (calls on several threads: one program per set of sizes kept)
            prog = self._programs.setdefault(sizes, prog)
            if len(self._programs) > PROGRAMS_PER_SIZE_SET:
                self._programs.popitem(last=False)
        return prog

    def __call__(self, inputs):
        sizes = tuple(inputs[i].shape[d] for _, i, d in self.bindings)
        return self.program_for(sizes)(inputs)


def build(kernel_module, report, stage=B._untimed, reuse: bool = True):
    """The CPU backend's program for a kernel-level module: a `DynamicProgram`
    where its plan holds size expressions (checked before any kernel is
    compiled), else `cpu_backend.build`'s."""
    plan, kernels, keys = B.program_plan(kernel_module)
    if not symbols_of(plan.steps):
        return B.build_plan(kernel_module, report, plan, kernels, keys, stage, reuse)
    check_plan(plan, keys)
    addresses, text = B.compile_kernels(kernel_module, kernels, keys, stage, reuse)
    f = next(op for op in kernel_module.ops if isinstance(op, func.FuncOp))
    prog = DynamicProgram(plan, addresses, B.merged_report(report, kernel_module), text,
                          [tuple(a.type.get_shape()) for a in f.body.blocks[0].args],
                          {name: keys[name][:-1] for name in keys}, stage)
    prog.kernel_module = kernel_module  # (what `lowering.dump --dynamic` prints)
    return prog
