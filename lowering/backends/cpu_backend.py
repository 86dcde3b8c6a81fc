"""The CPU backend's emitter and program: kernel level -> LLVM (llvmlite) -> MCJIT.

A compiled program is a list of steps over buffer slots: allocations, kernel
launches (ctypes, split across threads) and externs (BLAS matmul through
numpy, and numpy for the tensor ops the loop level does not generate yet).

The emitter runs in three stages, each timed by the `stage` the pipeline
hands in (their names are `pipeline.EMITTERS["cpu"]`): llvm-emit (LLVM IR),
llvm-jit (-O3 and MCJIT), memory-plan (the steps, then their memory plan).
The memory plan is the emitter's stage, not a pass over the kernel level:
its input is the step list, from which the constants made once at build time
(`hoist_constants`, their values numpy's) are already gone, and its output is
run-time state — the per-step drop lists the run loop and the fast path
read, and the program-owned buffers."""

from __future__ import annotations

import ctypes
import itertools
import re
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, replace

import numpy as np
from xdsl.dialects import func, memref
from xdsl.dialects.builtin import IndexType, ModuleOp, StringAttr
from xdsl.ir import SSAValue

from dialects import kernel as K
from dialects import loop as L
from runtime import blas, cpu, errors, pool
from runtime.memory import POOL

from dialects.dtypes import from_ir
from dialects.symbols import SymStr, prod_dims, symbols_of
from dialects.symbols import active as symbols_active
from ..codegen.llvm import SCALAR_PARAMS, Emitter
from . import cpu_blas, numpy_backend

_ids = itertools.count()


def body_key(k: K.KernelOp) -> tuple:
    """What a kernel's code depends on: the kernel op with everything in it —
    each op's name, operands (numbered by definition; a buffer by its
    position), result types, properties, attributes and regions — but its
    name, its parameters' values and the schedule's bookkeeping, and the
    vector width the emitter targets. Kernels with one key share one compiled
    function. The key is built from the generic fields every op has, so no
    op's meaning can be missed; a kernel whose body reads a value from outside
    it that is not one of its buffers shares with no other."""
    ids: dict[SSAValue, object] = {}
    for i, b in enumerate(k.buffers):
        ids.setdefault(b, ("buffer", i))
    try:
        body = _regions_key(k.regions, ids)
    except KeyError:
        return ("unshared", next(_ids))
    props = tuple((n, v) for n, v in sorted(k.properties.items())
                  if n not in ("sym_name", "params", "work", "threads"))  # (the launch's)
    attrs = tuple((n, v) for n, v in sorted(k.attributes.items()) if n != "merged")
    key = (cpu.vector_bits(), k.name, tuple(b.type for b in k.buffers), props, attrs, body)
    # a size symbol left in a body compiles as its value: that body is this
    # program's alone (see `lowering/dynamic.py`: such a program is not kept
    # for other sizes). Symbols exist only while a compile that made them runs.
    return key + (symbols_of(key) if symbols_active() else (),)


def _regions_key(regions, ids: dict) -> tuple:
    out = []
    for region in regions:
        blocks = []
        for block in region.blocks:
            for a in block.args:
                ids[a] = len(ids)
            ops = []
            for op in block.ops:
                key = (op.name, tuple(ids[o] for o in op.operands),
                       tuple(r.type for r in op.results),
                       tuple(sorted(op.properties.items())), tuple(sorted(op.attributes.items())),
                       _regions_key(op.regions, ids) if op.regions else (),
                       len(op.successors))
                for r in op.results:
                    ids[r] = len(ids)
                ops.append(key)
            blocks.append((tuple(a.type for a in block.args), tuple(ops)))
        out.append(tuple(blocks))
    return tuple(out)


def distinct_bodies(kernels: list[K.KernelOp]) -> dict[tuple, K.KernelOp]:
    """Each distinct body (`body_key`) and the first kernel that has it."""
    first: dict[tuple, K.KernelOp] = {}
    for k in kernels:
        first.setdefault(body_key(k), k)
    return first


def emit_llvm(kernel_module: ModuleOp, prefix: str = "",
              kernels: list[K.KernelOp] | None = None) -> tuple[str, list[K.KernelOp]]:
    """LLVM IR for `kernels` (default: one per distinct body of the module's
    kernels), named `prefix` + the kernel's name."""
    em = Emitter(array_offsets=cpu.ARRAY_OFFSETS)
    if kernels is None:
        kernels = list(distinct_bodies(
            [op for op in kernel_module.walk() if isinstance(op, K.KernelOp)]).values())
    for k in kernels:
        if prefix:
            k.sym_name = StringAttr(prefix + k.sym_name.data)
        em.kernel(k)
    outline_math(em.module, em.alternative_calls)
    # AVX-512 CPUs: LLVM otherwise prefers 256-bit vectors; our loops are
    # written for the full width (llvmlite's builder has no string attributes)
    bits = cpu.vector_bits()
    text = quiet_compares(str(em.module))
    for attrs in ("nounwind", "noinline nounwind"):  # the kernels and their bodies
        text = text.replace(f") {attrs}\n{{", f') {attrs} "prefer-vector-width"="{bits}" '
                            f'"min-legal-vector-width"="{bits}"\n{{')
    return text, kernels


# a vector math function (llvm_math: ~100 instructions) called from more
# places than this in one module is called, not inlined at each: LLVM's -O3
# and code generation grow faster than linearly with a kernel's size (a
# 100-step tanh/mean chain: 11.5 s of LLVM), and a call costs a few cycles
# next to the function's own ~40
MATH_INLINE_MAX_CALLS = 8


def outline_math(module, alternatives: dict[str, int] | None = None) -> None:
    """Math functions called from more than MATH_INLINE_MAX_CALLS places stay
    functions (`noinline`); the others are inlined at each call (`alwaysinline`).
    Of two versions of the same ops (a row's, with and without its cached
    values: the emitter's `alternative_calls`), only the larger's calls
    count: one of them runs, and the hot one keeps the math inline (softmax
    with a row of a length known only at the launch: 5 calls of the 16-lane
    exp in the cached version, 7 in the other; at 256x4096, called, it took
    1.09-1.16x the static program's time, inlined 1.03-1.07x)."""
    calls: dict[str, int] = {n: -k for n, k in (alternatives or {}).items()}
    for fn in module.functions:
        for block in fn.blocks:
            for ins in block.instructions:
                callee = getattr(ins, "callee", None)
                name = getattr(callee, "name", "")
                if name.startswith("lowering."):
                    calls[name] = calls.get(name, 0) + 1
    for fn in module.functions:
        if calls.get(fn.name, 0) > MATH_INLINE_MAX_CALLS and "alwaysinline" in fn.attributes:
            fn.attributes.discard("alwaysinline")
            fn.attributes.add("noinline")


_SIGNALING = re.compile(r"^(\s*%\S+ = )fcmp (olt|ole|ogt|oge|ult|ule|ugt|uge) "
                        r"(<(\d+) x (double|float|half)>|double|float|half) (<[^>]*>|[^,\s]+), (.+)$",
                        re.M)
_FLOAT_SUFFIX = {"double": "f64", "float": "f32", "half": "f16"}


def quiet_compares(text: str) -> str:
    """Float comparisons that raise no exception on a quiet NaN, as numpy's:
    x86 lowers `fcmp olt` and the other ordering predicates to signaling
    compares (`vcmpltpd`: invalid on any NaN) and `select(a > b, a, b)` to
    `vmaxpd` (the same), so `x < nan` or `np.maximum(nan, 1)` would flag
    invalid. The constrained intrinsic with strict exceptions is lowered to
    the quiet predicates (`vcmplt_oqpd`, `vucomisd`)."""
    declared: dict[str, str] = {}

    def sub(m: re.Match) -> str:
        lhs, pred, ty, n, el, a, b = m.groups()
        suffix = (f"v{n}" if n else "") + _FLOAT_SUFFIX[el or ty]
        res = f"<{n} x i1>" if n else "i1"
        name = f"llvm.experimental.constrained.fcmp.{suffix}"
        declared[name] = f"declare {res} @{name}({ty}, {ty}, metadata, metadata)"
        return (f'{lhs}call {res} @{name}({ty} {a}, {ty} {b}, metadata !"{pred}", '
                f'metadata !"fpexcept.strict")')

    text = _SIGNALING.sub(sub, text)
    return text + "".join(f"\n{d}\n" for d in declared.values())


class IndexChecks:
    """A kernel's `loop.index` checks: the status words it writes (the first
    two of its launch's scalars: [check number + 1, the offending value],
    zero when all indices were in range) and, per check, the axis and size
    for numpy's IndexError."""

    def __init__(self, table: list[tuple[int, int]], scalars):
        self.table = table
        self.status = scalars
        self.address = ctypes.addressof(scalars)

    def error(self) -> IndexError:
        axis, size = self.table[self.status[0] - 1]
        return errors.as_numpy(IndexError(  # type: ignore[return-value]
            f"index {self.status[1]} is out of bounds for axis {axis} with size {size}"))


class SymParam(SymStr):
    """A kernel parameter whose value is a size expression (`expr`) of
    `dtype`, evaluated per call (`cpu_dynamic`): a `SymStr`, so that the
    plan's symbols are found where its sizes' are."""

    def __new__(cls, expr: str, dtype: np.dtype):
        obj = SymStr.__new__(cls, "", expr)
        obj.dtype = dtype
        return obj

    def __reduce__(self):
        return (SymParam, (self.expr, self.dtype))


def param_bits(k: K.KernelOp) -> list[int]:
    """The raw bits of each kernel parameter's value (a word each: what the
    kernel reads and reinterprets as the parameter's type)."""
    types = {o.index.value.data: o.result.type for o in k.body.walk() if isinstance(o, K.ParamOp)}
    out = []
    for i, text in enumerate(k.param_values()):
        dt = np.dtype(np.int64) if isinstance(types[i], IndexType) else from_ir(types[i])
        if isinstance(text, SymStr):  # a size's value: each call's (cpu_dynamic)
            out.append(SymParam(text.expr, dt))  # type: ignore[arg-type]
            continue
        v = numpy_backend.parse_constant(text, dt)
        out.append(int(v.reshape(1).view(f"u{dt.itemsize}")[0]))
    return out


@dataclass(frozen=True)
class AllocStep:
    """Slot `slot` gets a buffer: `static` (the program's own, kept from call
    to call; a constant made once) or a fresh one from the pool."""
    slot: int
    shape: tuple[int, ...]
    dtype: np.dtype
    static: np.ndarray | None = None

    @property
    def slots(self) -> tuple[int, ...]:
        return (self.slot,)


@dataclass(frozen=True)
class KernelStep:
    """A kernel launch over `work` points of its parallel domain, on
    `threads` threads, with the buffers in `bufs` (slots) as its pointer
    array `ptrs` and `scalars` (status words and parameters, see
    `KernelPlan.scalars`) at `scalars_address`; `checks` its `loop.index`
    checks, if any."""
    fn: object  # the JIT-compiled kernel (a ctypes function)
    bufs: tuple[int, ...]
    work: int
    threads: int
    ptrs: object  # ctypes array of void*, filled per call
    checks: IndexChecks | None = None
    scalars: object = None  # ctypes array of int64, or None
    scalars_address: int | None = None  # (its address, taken once)
    flops: int = 0  # a BLAS launch's: a big one runs without the GIL (not in a native entry)

    @property
    def slots(self) -> tuple[int, ...]:
        return self.bufs


@dataclass(frozen=True)
class ExternStep:
    """A routine (BLAS matmul, numpy) called on the arrays in `args` (slots:
    inputs, then outputs written in place)."""
    run: Callable
    args: tuple[int, ...]

    @property
    def slots(self) -> tuple[int, ...]:
        return self.args


Step = AllocStep | KernelStep | ExternStep


# ---- the program's plan: its steps as data ---------------------------------
# What a CpuProgram is made of, read off the kernel-level module once: plain
# values (and, for an extern numpy runs, its op), so that the on-disk cache
# (cpu_cache.py) keeps a program as its plan and its kernels' object code, and
# a new process rebuilds it without the passes or a parse of the module.

@dataclass(frozen=True)
class KernelPlan:
    """A kernel launch: `name` (the kernel's, the key of its function),
    `body` the number of its body among the program's distinct bodies
    (`body_key`: kernels with one number share one function), the slots of
    its buffers, its work and threads, its parameters' bits and its index
    checks' (axis, size)."""
    name: str
    body: int
    bufs: tuple[int, ...]
    work: int
    threads: int
    params: tuple[int, ...]
    checks: tuple[tuple[int, int], ...]
    # the slots it stores into and those it loads from (one that loads
    # nothing, or only constants, computes the same values on every call:
    # `hoist_constant_kernels`)
    stores: tuple[int, ...] = ()
    loads: tuple[int, ...] = ()

    def scalars(self):
        """The int64 words a launch hands the kernel (its 4th argument: the
        two status words of its index checks, then its parameters' bits), or
        None when it needs none."""
        if not self.params and not self.checks:
            return None
        return (ctypes.c_int64 * (SCALAR_PARAMS + len(self.params)))(0, 0, *self.params)


@dataclass(frozen=True)
class ExternPlan:
    """A routine on the buffers in `args` (inputs, then outputs): BLAS
    `matmul` (`transposed` operands, `flops`), or numpy running `op`, the
    `loop.extern` that computes a tensor-level op."""
    fn: str
    args: tuple[int, ...]
    n_inputs: int
    transposed: tuple[bool, bool] = (False, False)
    flops: int = 0
    op: L.ExternOp | None = None


@dataclass(frozen=True)
class BlasPlan:
    """A matmul as BLAS `routine` ("dgemm", "sgemv", ...) on the buffers in
    `args` (launch order: the routine's matrix, its other operand, the
    output), with the launcher's `words` (`runtime.blas.call`): launched as a
    kernel (`cpu_blas`)."""
    routine: str
    args: tuple[int, ...]
    words: tuple[int, ...]
    flops: int


@dataclass(frozen=True)
class ProgramPlan:
    n_inputs: int
    steps: tuple[AllocStep | KernelPlan | ExternPlan | BlasPlan, ...]
    outputs: tuple[int, ...]
    # the slots a kernel stores into or a routine other than an array
    # constant's writes: a constant in one of them is made on every call
    # (`hoist_constants`)
    written: frozenset[int] = frozenset()
    # (undo slot, argument slot, transposed): a buffer holding the old values
    # of an argument a kernel writes in place (`loop.UNDO_ATTR`; transposed:
    # `loop.UNDO_TRANSPOSED_ATTR`), copied back into it before an eager
    # re-run (`CpuProgram._undo`)
    undo: tuple[tuple[int, int, bool], ...] = ()


def program_plan(loop_module: ModuleOp) -> tuple[ProgramPlan, dict[str, K.KernelOp], dict[str, tuple]]:
    """The plan of a kernel-level module, its kernels by name, and each
    kernel's body key (`body_key`) by name."""
    f = next(op for op in loop_module.ops if isinstance(op, func.FuncOp))
    args = f.body.blocks[0].args
    slots: dict = {a: i for i, a in enumerate(args)}
    steps: list = []
    kernels: dict[str, K.KernelOp] = {}
    keys: dict[str, tuple] = {}
    bodies: dict[tuple, int] = {}
    outputs: tuple[int, ...] = ()
    written: set[int] = set()
    undo: list[tuple[int, int, bool]] = []
    n_slots = len(args)  # (a cast names a slot that exists: slots has more names than slots)
    for op in f.body.blocks[0].ops:
        if isinstance(op, memref.AllocOp):
            t = op.memref.type
            slots[op.memref] = n_slots
            n_slots += 1
            steps.append(AllocStep(slots[op.memref], tuple(t.get_shape()), from_ir(t.element_type)))
            if L.UNDO_ATTR in op.attributes:
                undo.append((slots[op.memref], op.attributes[L.UNDO_ATTR].value.data,
                             L.UNDO_TRANSPOSED_ATTR in op.attributes))
        elif isinstance(op, memref.CastOp):  # the same buffer, its type's sizes dynamic
            slots[op.dest] = slots[op.source]
        elif isinstance(op, K.KernelOp):
            name = op.sym_name.data
            kernels[name] = op
            keys[name] = body_key(op)
            steps.append(kernel_plan(op, slots, bodies.setdefault(keys[name], len(bodies))))
            written.update(slots[s.buffer] for s in op.body.walk() if isinstance(s, L.StoreOp))
        elif isinstance(op, L.ExternOp):
            steps.append(extern_plan(op, slots))
            if op.fn.data != "numpy:array.constant":
                written.update(slots[b] for b in op.buffers[op.num_inputs.value.data:])
        elif isinstance(op, func.ReturnOp):
            outputs = tuple(slots[v] for v in op.arguments)
    return (ProgramPlan(len(args), tuple(steps), outputs, frozenset(written), tuple(undo)),
            kernels, keys)


def kernel_plan(k: K.KernelOp, slots, body: int) -> KernelPlan:
    table = tuple((o.axis.value.data, o.size.value.data) for o in k.body.walk()
                  if isinstance(o, L.IndexOp))
    stores = tuple(dict.fromkeys(slots[o.buffer] for o in k.body.walk() if isinstance(o, L.StoreOp)))
    loads = tuple(dict.fromkeys(slots[o.buffer] for o in k.body.walk() if isinstance(o, L.LoadOp)))
    return KernelPlan(k.sym_name.data, body, tuple(slots[b] for b in k.buffers), k.work.value.data,
                      k.threads.value.data, tuple(param_bits(k)), table, stores, loads)


def extern_plan(op: L.ExternOp, slots) -> ExternPlan:
    n = op.num_inputs.value.data
    args = tuple(slots[b] for b in op.buffers)
    if op.fn.data.startswith("matmul"):
        flags = op.fn.data[7:] or "nn"  # "matmul_tn": lhs read transposed
        out_t = op.buffers[-1].type
        if op.body is not None:  # the product of views of its inputs
            k = op.computed().lhs.type.get_shape()[-1]
        else:
            k = op.buffers[0].type.get_shape()[-2 if flags[0] == "t" else -1]
        flops = 2 * k * prod_dims(out_t.get_shape())
        call = cpu_blas.plan(op) if blas.routines() is not None else None
        if call is not None:
            routine, words, order = call
            return BlasPlan(routine, tuple(args[i] for i in order), words, flops)
        return ExternPlan(op.fn.data, args, n, (flags[0] == "t", flags[1] == "t"), flops,
                          op if op.body is not None else None)
    return ExternPlan(op.fn.data, args, n, op=op)


def extern_run(e: ExternPlan) -> tuple[Callable, np.ndarray | None]:
    """The routine of an extern step, and the constant it makes (an array
    constant's extern), if any."""
    if e.fn.startswith("matmul"):
        matmul = blas.matmul(*e.transposed, e.flops)
        # (its operands: views of its inputs, where it has a body)
        views = numpy_backend.extern_operands(e.op) if e.op is not None else None

        def run_matmul(a, b, out, matmul=matmul, views=views):
            try:
                matmul(*(views(a, b) if views is not None else (a, b)), out)
            except Exception as err:  # (numpy's matmul: its error is numpy's)
                raise errors.as_numpy(err)
        return run_matmul, None
    into = numpy_backend.extern_into(e.op)
    if into is not None:  # straight into its output buffer (`out=`): no copy

        def run_into(*arrs, into=into):
            try:
                into(*arrs)
            except Exception as err:  # the numpy routine's own error
                raise errors.as_numpy(err)
        run_into.__dict__.update(into.__dict__)  # (QUIET: no flags to collect)
        return run_into, None
    rule = numpy_backend.extern_routine(e.op)
    constant = rule() if e.fn == "numpy:array.constant" else None

    def run(*arrs, rule=rule, k=e.n_inputs, m=len(e.args) - e.n_inputs):
        try:
            res = rule(*arrs[:k])  # a tuple where the op has several results
        except Exception as err:  # the numpy routine's own error
            raise errors.as_numpy(err)
        for buf, r in zip(arrs[k:], res if m > 1 else (res,)):
            buf[...] = r
    return run, constant


def _untimed(name: str) -> AbstractContextManager:
    return nullcontext()


def _restore(arg: np.ndarray, undo: np.ndarray) -> None:
    arg[...] = undo


def _restore_transposed(arg: np.ndarray, undo: np.ndarray) -> None:
    arg[...] = undo.T


# an argument's old values put back from its undo buffer (held transposed
# or not): `CpuProgram._undo`, and the native entry's call back where the
# buffer does not hold the argument's bytes (`fastpath._native_undo`)
UNDO_RESTORE = {False: _restore, True: _restore_transposed}


class CpuProgram:
    """A program's steps over buffer slots, from its plan and the address of
    each kernel's function (by kernel name)."""

    def __init__(self, plan: ProgramPlan, addresses: dict[str, int],
                 stage: Callable[[str], AbstractContextManager] = _untimed):
        self.plan = plan
        self._fns = {name: cpu.KERNEL_TYPE(a) for name, a in addresses.items()}
        self.kernel_bodies = len({st.body for st in plan.steps if isinstance(st, KernelPlan)})
        self.llvm_ir = ""  # the LLVM IR this program JIT-compiled (`compile_kernels`)
        steps: list[Step] = []
        constants: dict[int, np.ndarray] = {}  # extern step -> the constant it makes
        kernel_plans: dict[int, KernelPlan] = {}  # id(step) -> its plan
        for st in plan.steps:
            if isinstance(st, KernelPlan):
                steps.append(self._kernel_step(st))
                kernel_plans[id(steps[-1])] = st
            elif isinstance(st, BlasPlan):
                steps.append(self._blas_step(st))
            elif isinstance(st, ExternPlan):
                run, constant = extern_run(st)
                if constant is not None:
                    constants[len(steps)] = constant
                steps.append(ExternStep(run, st.args))
            else:
                steps.append(st)
        self.outputs = plan.outputs
        steps = hoist_constants(steps, constants, self.outputs, plan.written)
        steps, self.hoisted = hoist_constant_kernels(steps, kernel_plans, plan, self.outputs)
        # a program of kernels only keeps the pool's workers awake after each
        # split kernel, for the next one or the next call's (`runtime.pool`);
        # one that calls BLAS or numpy leaves the cores to them
        self.linger = 0 if any(isinstance(st, ExternStep) or (
            isinstance(st, KernelStep) and st.flops) for st in steps) else pool.LINGER_TURNS
        self.n_slots = plan.n_inputs + sum(isinstance(st, AllocStep) for st in plan.steps)
        undo_slots = tuple(u for u, _, _ in plan.undo)  # (alive to the end of a call)
        with stage("memory-plan"):  # buffers dropped after their last use, then reused
            self.dead_after = memory_plan(steps, plan.n_inputs, self.outputs + undo_slots)
            self.steps = static_buffers(steps, self.outputs, undo_slots)
        # (undo slot, argument slot, the step that fills it, transposed): `_undo`
        self.undo = tuple((u, a, next(k for k, st in enumerate(self.steps)
                                      if isinstance(st, KernelStep) and u in st.bufs), t)
                          for u, a, t in plan.undo)
        # outputs in buffers this program allocates (one per output): never an input's memory
        allocated = {st.slot for st in steps if isinstance(st, AllocStep)}
        self.fresh = tuple(s in allocated and self.outputs.count(s) == 1 for s in self.outputs)
        self.report = None  # lower-to-loop's, set by `build`
        self.keys: dict[str, tuple] = {}  # each kernel's body key, set by `build`
        self.exprs: list[str] = []  # (a plan of plain numbers: no size expressions)
        self._lock = threading.Lock()
        self.collector = errors.Collector()  # the flags of numpy externs

    def _kernel_step(self, k: KernelPlan) -> KernelStep:
        ptrs = (ctypes.c_void_p * max(len(k.bufs), 1))()
        scalars = k.scalars()
        checks = IndexChecks(list(k.checks), scalars) if k.checks else None
        return KernelStep(self._fns[k.name], k.bufs, k.work, k.threads, ptrs, checks, scalars,
                          None if scalars is None else ctypes.addressof(scalars))

    def _blas_step(self, p: BlasPlan) -> KernelStep:
        fns, address = blas.routines(), cpu_blas.launcher(p.routine)
        if fns is None or address is None:  # (a plan from the disk cache, read elsewhere)
            raise ValueError("a BLAS step, and numpy's BLAS has no CBLAS routines here")
        small = p.flops < blas.SMALL_FLOPS
        setter = fns["set_local_threads"] if blas.one_thread(p.routine, p.flops) else 0
        scalars = (ctypes.c_int64 * (SCALAR_PARAMS + 2 + len(p.words)))(
            0, 0, fns[p.routine], setter, *p.words)
        # a small product (which may set BLAS's thread count and back) runs with
        # the GIL held (`runtime.blas`); a big one releases it, as numpy's matmul does
        fn = (cpu.SERIAL_KERNEL_TYPE if small else cpu.KERNEL_TYPE)(address)
        return KernelStep(fn, p.args, 1, 1, (ctypes.c_void_p * 3)(), None, scalars,
                          ctypes.addressof(scalars), p.flops)

    def __call__(self, inputs):
        # the launch argument arrays are shared state: one call at a time
        with self._lock:
            return self._run(inputs)

    def _run(self, inputs):
        if not self.undo:
            return self._steps(inputs, [])
        vals: list = []
        try:
            return self._steps(inputs, vals)
        except BaseException:
            self._undo(vals)
            raise

    def _undo(self, vals: list) -> None:
        """A call that failed (a flag numpy acts on, an error) after kernels
        wrote over arguments in place: each argument gets its old values
        back from its undo buffer (the last write undone first), so the
        eager re-run sees the caller's arrays as they came."""
        done = vals[-1] if vals and type(vals[-1]) is int else len(self.steps)
        for u, a, k, transposed in reversed(self.undo):
            if k < done and vals[u] is not None:
                UNDO_RESTORE[transposed](vals[a], vals[u])

    def _steps(self, inputs, vals: list):
        """The steps; `vals` (the undo path's) gets the slots' values and,
        while a step runs, its index."""
        vals[:] = list(inputs) + [None] * (self.n_slots - len(inputs))
        if self.undo:
            vals.append(0)
        flags = 0  # IEEE exceptions raised (MXCSR bits): checked before returning
        for k, (st, dead) in enumerate(zip(self.steps, self.dead_after)):
            if self.undo:
                vals[-1] = k
            if isinstance(st, KernelStep):
                ptrs, checks = st.ptrs, st.checks
                for j, s in enumerate(st.bufs):
                    a = vals[s]
                    if type(a) is not np.ndarray:
                        raise TypeError(f"kernel buffer {j} is {type(a).__name__}, not ndarray")
                    ptrs[j] = id(a)  # alive in vals until the kernel returned
                if checks is None:
                    flags |= cpu.launch(st.fn, st.work, ptrs, st.scalars_address, st.threads,
                                        self.linger)
                else:
                    checks.status[0] = 0
                    flags |= cpu.launch(st.fn, st.work, ptrs, checks.address, st.threads,
                                        self.linger)
                    if checks.status[0]:
                        raise checks.error()
            elif isinstance(st, AllocStep):
                vals[st.slot] = POOL.empty(st.shape, st.dtype) if st.static is None else st.static
            else:
                collector = self.collector
                token = collector.enter()  # numpy's own flags, as numpy detects them
                try:
                    st.run(*[vals[i] for i in st.args])
                finally:
                    collector.exit(token)
                flags |= collector.bits
            for s in dead:  # its buffer goes back to the pool for the next alloc
                vals[s] = None
        if self.undo:
            vals[-1] = len(self.steps)
        if flags:
            errors.check(flags)
        return [vals[i] for i in self.outputs]


def hoist_constants(steps: list[Step], constants: dict[int, np.ndarray],
                    outputs: tuple[int, ...], written: frozenset[int] = frozenset()
                    ) -> list[Step]:
    """An array constant (`np.arange(n)` captured as data) that is not an
    output is made once, read-only, as its buffer's static allocation, instead
    of by an extern on every call. (An output stays a fresh array per call,
    and so does a constant the program writes into, `written`: a slice
    assignment into an array literal, done in its buffer.)"""
    out, drop = list(steps), set()
    for k, arr in constants.items():
        slot = steps[k].args[-1]
        if slot in outputs or slot in written:
            continue
        a = next(i for i, st in enumerate(steps) if isinstance(st, AllocStep) and st.slot == slot)
        out[a] = replace(steps[a], static=arr)
        drop.add(k)
    return [st for k, st in enumerate(out) if k not in drop]


def hoist_constant_kernels(steps: list[Step], kernel_plans: dict[int, KernelPlan],
                           plan: ProgramPlan, outputs: tuple[int, ...]
                           ) -> tuple[list[Step], frozenset[str]]:
    """A kernel that loads nothing but constants (a constant broadcast into
    a buffer: the 0-d exponent numpy's power loop reads for `x ** 8`; a
    function of `np.arange(n)`, itself made once) computes the same values
    on every call: it runs once, here, and the buffers it stores become
    static, read-only allocations of the program; its step is dropped. Only
    where no other step writes those buffers, none is an output, the kernel
    has no index checks, and its run raised no floating-point flag (numpy
    would warn on every call: the kernel then stays, and so does its
    warning). Also the names of the kernels it ran."""
    writers: dict[int, int] = {}
    for p in plan.steps:
        written = (p.stores if isinstance(p, KernelPlan) else p.args[2:] if isinstance(p, BlasPlan)
                   else p.args[p.n_inputs:] if isinstance(p, ExternPlan) else ())
        for slot in written:
            writers[slot] = writers.get(slot, 0) + 1
    allocs = {st.slot: k for k, st in enumerate(steps) if isinstance(st, AllocStep)}
    out, drop, names = list(steps), set(), set()
    for k, st in enumerate(steps):
        p = kernel_plans.get(id(st)) if isinstance(st, KernelStep) else None
        if (p is None or p.checks or set(p.bufs) != set(p.stores) | set(p.loads)
                or any(s not in allocs or out[allocs[s]].static is None or s in p.stores
                       for s in p.loads)
                or any(writers.get(s) != 1 or s in outputs or s not in allocs
                       or out[allocs[s]].static is not None for s in p.stores)):
            continue
        arrays = {s: out[allocs[s]].static if s in p.loads
                  else _aligned_array(out[allocs[s]].shape, out[allocs[s]].dtype) for s in st.bufs}
        ptrs = (ctypes.c_void_p * max(len(arrays), 1))()
        for j, s in enumerate(st.bufs):
            ptrs[j] = id(arrays[s])
        if st.work > 0 and cpu.launch(st.fn, st.work, ptrs, st.scalars_address, st.threads, 0):
            continue  # (a flag: numpy's warning belongs to every call)
        for s in p.stores:
            arrays[s].flags.writeable = False
            out[allocs[s]] = replace(out[allocs[s]], static=arrays[s])
        drop.add(k)
        names.add(p.name)
    return [st for k, st in enumerate(out) if k not in drop], frozenset(names)


def last_uses(steps: list[Step]) -> dict[int, int]:
    """Slot -> the index of the last step that uses it (allocations count)."""
    last: dict[int, int] = {}
    for k, st in enumerate(steps):
        for s in st.slots:
            last[s] = k
    return last


def memory_plan(steps: list[Step], n_inputs: int, outputs: tuple[int, ...]) -> list[tuple[int, ...]]:
    """Liveness: per step, the intermediate buffers it used for the last time.
    Dropping them there returns their memory to the pool (its finalizer), so a
    later allocation of the same size in the same call reuses it."""
    last = last_uses(steps)
    keep = set(outputs) | set(range(n_inputs))
    dead: list[list[int]] = [[] for _ in steps]
    for s, k in last.items():
        if s not in keep:
            dead[k].append(s)
    return [tuple(sorted(d)) for d in dead]


STATIC_MAX_BYTES = 16 << 20  # an intermediate this big or bigger comes from the pool
STATIC_PROGRAM_BYTES = 64 << 20  # at most this much kept per program


def static_buffers(steps: list[Step], outputs: tuple[int, ...],
                   to_end: tuple[int, ...] = ()) -> list[Step]:
    """The memory plan's second half: intermediates (allocated by the program,
    never returned) get buffers the program keeps from call to call, shared
    by intermediates whose lifetimes (allocation to last use) do not overlap
    — first fit by start, the largest free buffer that holds it. A call then
    allocates only its outputs; each pooled allocation costs a few
    microseconds (the block's finalizer), a program-owned view nothing. The
    program's lock keeps calls apart, so one set of buffers serves every
    call. Intermediates of STATIC_MAX_BYTES or more, and any beyond
    STATIC_PROGRAM_BYTES in all, stay pooled (the pool keeps them too).
    Those of `to_end` (undo buffers) live to the end of the call."""
    last = last_uses(steps)
    for s in to_end:
        last[s] = len(steps)
    keep = set(outputs)
    buffers: list[list] = []  # [nbytes, free from step]
    total = 0
    plan: dict[int, tuple[int, int]] = {}  # alloc step -> (buffer, bytes)
    for k, st in enumerate(steps):
        if not isinstance(st, AllocStep) or st.slot in keep or st.static is not None:
            continue  # (a constant has its own)
        slot, shape, dtype = st.slot, st.shape, st.dtype
        n = np.dtype(dtype).itemsize * int(np.prod(shape, dtype=np.int64))
        if n == 0 or n >= STATIC_MAX_BYTES:
            continue
        free = [i for i, b in enumerate(buffers) if b[1] <= k]
        fit = [i for i in free if buffers[i][0] >= n]
        if fit:
            i = min(fit, key=lambda i: buffers[i][0])
        elif free and total - max(buffers[i][0] for i in free) + n <= STATIC_PROGRAM_BYTES:
            i = max(free, key=lambda i: buffers[i][0])
            total += n - buffers[i][0]
            buffers[i][0] = n
        elif total + n <= STATIC_PROGRAM_BYTES:
            i = len(buffers)
            buffers.append([n, 0])
            total += n
        else:
            continue
        buffers[i][1] = last.get(slot, k) + 1
        plan[k] = (i, n)
    if not plan:
        return steps
    raw = [aligned_bytes(b[0]) for b in buffers]
    out = list(steps)
    for k, (i, n) in plan.items():
        st = steps[k]
        out[k] = replace(st, static=raw[i][:n].view(st.dtype).reshape(st.shape))
    return out


# the alignment of the buffers a program keeps: a vector's width (512 bits),
# so a kernel's vector stores into them never split a cache line (numpy's
# allocator aligns to 16 bytes: a 160x160 float64 `alpha * A` stored 16
# bytes off ran 7.0-7.3 us, aligned 5.7)
BUFFER_ALIGN = 64


def aligned_bytes(n: int) -> np.ndarray:
    """n bytes starting at a multiple of BUFFER_ALIGN."""
    raw = np.empty(n + BUFFER_ALIGN, np.uint8)
    off = -raw.ctypes.data % BUFFER_ALIGN
    return raw[off:off + n]


def _aligned_array(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    d = np.dtype(dtype)
    return aligned_bytes(d.itemsize * int(np.prod(shape, dtype=np.int64))).view(d).reshape(shape)


def emitted(kernel_module: ModuleOp) -> dict[str, str]:
    """The emitter's output, for `lowering.dump`: the LLVM IR as emitted and
    the machine code for this CPU (after LLVM -O3)."""
    text, kernels = emit_llvm(kernel_module)
    return {"llvm": text, "asm": cpu.assembly(text) if kernels else "; no kernels: externs only\n"}


ONCE = "(made once, not per call)"
CONSTANT_ONCE = f"constant {ONCE}"


def merged_report(report, kernel_module: ModuleOp):
    """The lowering's report with the kernels `schedule` merged into one
    launch listed once ("k2+k3+k4", their fused ops together), so that
    `explain`'s kernel_count is the launches a call makes."""
    from passes.lower_to_loop import LoweringReport

    groups: dict[str, list[str]] = {}
    constants: list[SSAValue] = []  # what each constant extern makes, in order
    returned: set = set()
    for op in kernel_module.walk():
        if isinstance(op, K.KernelOp) and "merged" in op.attributes:
            names = [a.data for a in op.attributes["merged"]]  # type: ignore[attr-defined]
            groups[names[0]] = names
        if isinstance(op, func.ReturnOp):
            returned.update(op.arguments)
        if isinstance(op, L.ExternOp) and op.fn.data == "numpy:array.constant":
            constants.append(op.buffers[-1])
    once = [c not in returned for c in constants]  # made once (`hoist_constants`)?
    if once:
        entries, n = [], 0
        for name, ops in report.kernels:
            if name == "extern numpy:array.constant":
                name = CONSTANT_ONCE if once[n] else name
                n += 1
            entries.append((name, ops))
        report = LoweringReport(entries, report.refused, report.paths, report.locations)
    if not groups:
        return report
    head_of = {n: head for head, names in groups.items() for n in names}
    kernels: list[tuple[str, list[str]]] = []
    at: dict[str, int] = {}
    for name, ops in report.kernels:
        head = head_of.get(name)
        if head is None:
            kernels.append((name, ops))
        elif head in at:
            kernels[at[head]][1].extend(o for o in ops if o not in kernels[at[head]][1])
        else:
            at[head] = len(kernels)
            kernels.append(("+".join(groups[head]), list(ops)))
    return LoweringReport(kernels, report.refused, report.paths, report.locations)


def blas_report(report, plan: ProgramPlan):
    """The report with each matmul extern that runs as a BLAS launch named
    by its routine ("blas dgemm", "blas sgemv x60": one call per batch), so
    that `explain` says which path each product takes (the others stay
    "extern matmul": numpy's matmul on copies or strided operands)."""
    from passes.lower_to_loop import LoweringReport

    if report is None:
        return report
    steps = [st for st in plan.steps if isinstance(st, BlasPlan)
             or (isinstance(st, ExternPlan) and st.fn.startswith("matmul"))]
    at = [i for i, (name, _) in enumerate(report.kernels) if name.startswith("extern matmul")]
    if not any(isinstance(st, BlasPlan) for st in steps) or len(at) != len(steps):
        return report
    kernels = list(report.kernels)
    for i, st in zip(at, steps):
        if isinstance(st, BlasPlan):
            count = st.words[0]
            kernels[i] = (f"blas {st.routine}" + (f" x{count}" if count > 1 else ""), kernels[i][1])
    return LoweringReport(kernels, report.refused, report.paths, report.locations)


def compile_kernels(loop_module: ModuleOp, kernels: dict[str, K.KernelOp],
                    keys: dict[str, tuple],
                    stage: Callable[[str], AbstractContextManager] = _untimed,
                    reuse: bool = True) -> tuple[dict[str, int], str]:
    """Each kernel's function address: one function per distinct body
    (`keys`: each kernel's `body_key`), compiled once per process
    (`cpu.compiled_kernel`); those not compiled yet are JIT-compiled
    together (all of them, `reuse` False). The LLVM IR compiled ("" if none)."""
    todo: dict[tuple, K.KernelOp] = {}
    for name, key in keys.items():
        if not reuse or cpu.compiled_kernel(key) is None:
            todo.setdefault(key, kernels[name])
    names = {key: k.sym_name.data for key, k in todo.items()}
    prefix = f"p{next(_ids)}_"
    # (both stages are timed, and logged, even when there is nothing to compile)
    with stage("llvm-emit"):
        text, emitted = emit_llvm(loop_module, prefix, list(todo.values())) if todo else ("", [])
    with stage("llvm-jit"):
        addrs = cpu.jit(text, [k.sym_name.data for k in emitted]) if todo else {}
    for key, k in zip(todo, emitted):
        cpu.remember_kernel(key, addrs[k.sym_name.data])
        k.sym_name = StringAttr(names[key])
    if not reuse:
        return {name: addrs[prefix + names[key]] for name, key in keys.items()}, text
    return {name: cpu.compiled_kernel(key) for name, key in keys.items()}, text


def build(kernel_module: ModuleOp, report,
          stage: Callable[[str], AbstractContextManager] = _untimed,
          reuse: bool = True) -> CpuProgram:
    """The program of a kernel-level module (the pipeline's last level for
    this backend), each emitter stage under `stage(name)`; `report` is
    lower-to-loop's, for `explain`. `reuse` False compiles every body again
    (to time the compile: `lowering.dump --time-passes`)."""
    plan, kernels, keys = program_plan(kernel_module)
    return build_plan(kernel_module, report, plan, kernels, keys, stage, reuse)


def build_plan(kernel_module: ModuleOp, report, plan: ProgramPlan, kernels, keys,
               stage: Callable[[str], AbstractContextManager] = _untimed,
               reuse: bool = True) -> CpuProgram:
    """`build`, from the module's plan (`program_plan`)."""
    addresses, text = compile_kernels(kernel_module, kernels, keys, stage, reuse)
    prog = program(plan, addresses, merged_report(report, kernel_module), text, stage)
    prog.keys = {name: keys[name][:-1] for name in keys}
    return prog


def program(plan: ProgramPlan, addresses: dict[str, int], report, llvm_ir: str = "",
            stage: Callable[[str], AbstractContextManager] = _untimed) -> CpuProgram:
    prog = CpuProgram(plan, addresses, stage)
    prog.report, prog.llvm_ir = blas_report(once_report(report, prog.hoisted), plan), llvm_ir
    return prog


def once_report(report, hoisted: frozenset[str]):
    """The report with each kernel the program ran once at build time
    (`hoist_constant_kernels`) marked so."""
    from passes.lower_to_loop import LoweringReport

    if report is None or not hoisted:
        return report
    kernels = [(f"{name} {ONCE}" if name in hoisted else name, ops) for name, ops in report.kernels]
    return LoweringReport(kernels, report.refused, report.paths, report.locations)
