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
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.ir import SSAValue

from dialects import kernel as K
from dialects import loop as L
from runtime import blas, cpu, errors
from runtime.memory import POOL

from dialects.dtypes import from_ir
from ..codegen.llvm import Emitter
from . import numpy_backend

_ids = itertools.count()


def emit_llvm(kernel_module: ModuleOp, prefix: str = "") -> tuple[str, list[K.KernelOp]]:
    em = Emitter(array_offsets=cpu.ARRAY_OFFSETS)
    kernels = [op for op in kernel_module.walk() if isinstance(op, K.KernelOp)]
    for k in kernels:
        if prefix:
            k.sym_name = StringAttr(prefix + k.sym_name.data)
        em.kernel(k)
    # AVX-512 CPUs: LLVM otherwise prefers 256-bit vectors; our loops are
    # written for the full width (llvmlite's builder has no string attributes)
    bits = cpu.vector_bits()
    text = quiet_compares(str(em.module))
    for attrs in ("nounwind", "noinline nounwind"):  # the kernels and their bodies
        text = text.replace(f") {attrs}\n{{", f') {attrs} "prefer-vector-width"="{bits}" '
                            f'"min-legal-vector-width"="{bits}"\n{{')
    return text, kernels


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
    """A kernel's `loop.index` checks: the status words it writes ([check
    number + 1, the offending value], zero when all indices were in range)
    and, per check, the axis and size for numpy's IndexError."""

    def __init__(self, table: list[tuple[int, int]]):
        self.table = table
        self.status = (ctypes.c_int64 * 2)()
        self.address = ctypes.addressof(self.status)

    def error(self) -> IndexError:
        axis, size = self.table[self.status[0] - 1]
        return IndexError(f"index {self.status[1]} is out of bounds for axis {axis} with size {size}")


def index_checks(k: K.KernelOp) -> IndexChecks | None:
    table = [(o.axis.value.data, o.size.value.data) for o in k.body.walk() if isinstance(o, L.IndexOp)]
    return IndexChecks(table) if table else None


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
    array `ptrs`; `checks` its `loop.index` checks, if any."""
    fn: object  # the JIT-compiled kernel (a ctypes function)
    bufs: tuple[int, ...]
    work: int
    threads: int
    ptrs: object  # ctypes array of void*, filled per call
    checks: IndexChecks | None = None

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


def _untimed(name: str) -> AbstractContextManager:
    return nullcontext()


class CpuProgram:
    def __init__(self, loop_module: ModuleOp, n_inputs: int,
                 stage: Callable[[str], AbstractContextManager] = _untimed):
        f = next(op for op in loop_module.ops if isinstance(op, func.FuncOp))
        prefix = f"p{next(_ids)}_"
        with stage("llvm-emit"):
            text, kernels = emit_llvm(loop_module, prefix)
        self.llvm_ir = text
        with stage("llvm-jit"):
            addrs = cpu.jit(text, [k.sym_name.data for k in kernels]) if kernels else {}
        self._fns = {n: cpu.KERNEL_TYPE(a) for n, a in addrs.items()}
        with stage("memory-plan"):
            self._plan(f)
        self.report = None  # lower-to-loop's, set by `build`
        self._lock = threading.Lock()
        self.collector = errors.Collector()  # the flags of numpy externs

    def _plan(self, f: func.FuncOp) -> None:
        """The steps over buffer slots, then their memory plan: the buffers
        each step drops (`dead_after`) and the program-owned buffers of the
        intermediates (`static_buffers`)."""
        slots: dict = {a: i for i, a in enumerate(f.body.blocks[0].args)}
        steps: list[Step] = []
        constants: dict[int, np.ndarray] = {}  # extern step -> the constant it makes
        for op in f.body.blocks[0].ops:
            if isinstance(op, memref.AllocOp):
                t = op.memref.type
                slots[op.memref] = len(slots)
                steps.append(AllocStep(slots[op.memref], tuple(t.get_shape()), from_ir(t.element_type)))
            elif isinstance(op, K.KernelOp):
                steps.append(self._kernel_step(op, slots))
            elif isinstance(op, L.ExternOp):
                steps.append(self._extern_step(op, slots, len(steps), constants))
            elif isinstance(op, func.ReturnOp):
                self.outputs = tuple(slots[v] for v in op.arguments)
        steps = hoist_constants(steps, constants, self.outputs)
        self.n_slots = len(slots)
        self.dead_after = memory_plan(steps, len(f.body.blocks[0].args), self.outputs)
        self.steps = static_buffers(steps, self.outputs)
        # outputs in buffers this program allocates (one per output): never an input's memory
        allocated = {st.slot for st in steps if isinstance(st, AllocStep)}
        self.fresh = tuple(s in allocated and self.outputs.count(s) == 1 for s in self.outputs)

    @staticmethod
    def _extern_step(op: L.ExternOp, slots, k: int, constants: dict[int, np.ndarray]) -> ExternStep:
        """Step `k`: a BLAS matmul, or the numpy rule of the tensor op the
        extern computes (a constant's value made now, into `constants`)."""
        ins = tuple(slots[b] for b in op.buffers[: op.num_inputs.value.data])
        outs = tuple(slots[b] for b in op.buffers[op.num_inputs.value.data:])
        if op.fn.data.startswith("matmul"):
            flags = op.fn.data[7:] or "nn"  # "matmul_tn": lhs read transposed
            out_t = op.buffers[-1].type
            n = op.buffers[0].type.get_shape()[-2 if flags[0] == "t" else -1]
            flops = 2 * n * int(np.prod(out_t.get_shape(), dtype=np.int64))
            return ExternStep(blas.matmul(flags[0] == "t", flags[1] == "t", flops), ins + outs)
        inner = op.computed()
        rule = numpy_backend.RULES[type(inner)](inner)
        if op.fn.data == "numpy:array.constant":
            constants[k] = rule()

        def run(*arrs, rule=rule, k=len(ins), m=len(outs)):
            res = rule(*arrs[:k])  # a tuple where the op has several results
            for buf, r in zip(arrs[k:], res if m > 1 else (res,)):
                buf[...] = r
        return ExternStep(run, ins + outs)

    def _kernel_step(self, k: K.KernelOp, slots) -> KernelStep:
        fn = self._fns[k.sym_name.data]
        bufs = tuple(slots[b] for b in k.buffers)
        ptrs = (ctypes.c_void_p * max(len(bufs), 1))()
        return KernelStep(fn, bufs, k.work.value.data, k.threads.value.data, ptrs, index_checks(k))

    def __call__(self, inputs):
        # the launch argument arrays are shared state: one call at a time
        with self._lock:
            return self._run(inputs)

    def _run(self, inputs):
        vals = list(inputs) + [None] * (self.n_slots - len(inputs))
        flags = 0  # IEEE exceptions raised (MXCSR bits): checked before returning
        for st, dead in zip(self.steps, self.dead_after):
            if isinstance(st, KernelStep):
                ptrs, checks = st.ptrs, st.checks
                for j, s in enumerate(st.bufs):
                    a = vals[s]
                    if type(a) is not np.ndarray:
                        raise TypeError(f"kernel buffer {j} is {type(a).__name__}, not ndarray")
                    ptrs[j] = id(a)  # alive in vals until the kernel returned
                if checks is None:
                    flags |= cpu.launch(st.fn, st.work, ptrs, None, st.threads)
                else:
                    checks.status[0] = 0
                    flags |= cpu.launch(st.fn, st.work, ptrs, checks.address, st.threads)
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
        if flags:
            errors.check(flags)
        return [vals[i] for i in self.outputs]


def hoist_constants(steps: list[Step], constants: dict[int, np.ndarray],
                    outputs: tuple[int, ...]) -> list[Step]:
    """An array constant (`np.arange(n)` captured as data) that is not an
    output is made once, read-only, as its buffer's static allocation, instead
    of by an extern on every call. (An output stays a fresh array per call.)"""
    out, drop = list(steps), set()
    for k, arr in constants.items():
        slot = steps[k].args[-1]
        if slot in outputs:
            continue
        a = next(i for i, st in enumerate(steps) if isinstance(st, AllocStep) and st.slot == slot)
        out[a] = replace(steps[a], static=arr)
        drop.add(k)
    return [st for k, st in enumerate(out) if k not in drop]


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


def static_buffers(steps: list[Step], outputs: tuple[int, ...]) -> list[Step]:
    """The memory plan's second half: intermediates (allocated by the program,
    never returned) get buffers the program keeps from call to call, shared
    by intermediates whose lifetimes (allocation to last use) do not overlap
    — first fit by start, the largest free buffer that holds it. A call then
    allocates only its outputs; each pooled allocation costs a few
    microseconds (the block's finalizer), a program-owned view nothing. The
    program's lock keeps calls apart, so one set of buffers serves every
    call. Intermediates of STATIC_MAX_BYTES or more, and any beyond
    STATIC_PROGRAM_BYTES in all, stay pooled (the pool keeps them too)."""
    last = last_uses(steps)
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
    raw = [np.empty(b[0], np.uint8) for b in buffers]
    out = list(steps)
    for k, (i, n) in plan.items():
        st = steps[k]
        out[k] = replace(st, static=raw[i][:n].view(st.dtype).reshape(st.shape))
    return out


def emitted(kernel_module: ModuleOp) -> dict[str, str]:
    """The emitter's output, for `lowering.dump`: the LLVM IR as emitted and
    the machine code for this CPU (after LLVM -O3)."""
    text, kernels = emit_llvm(kernel_module)
    return {"llvm": text, "asm": cpu.assembly(text) if kernels else "; no kernels: externs only\n"}


CONSTANT_ONCE = "constant (made once, not per call)"


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
        report = LoweringReport(entries, report.refused)
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
    return LoweringReport(kernels, report.refused)


def build(kernel_module: ModuleOp, report,
          stage: Callable[[str], AbstractContextManager] = _untimed) -> CpuProgram:
    """The program of a kernel-level module (the pipeline's last level for
    this backend), each emitter stage under `stage(name)`; `report` is
    lower-to-loop's, for `explain`."""
    f = next(op for op in kernel_module.ops if isinstance(op, func.FuncOp))
    prog = CpuProgram(kernel_module, len(f.body.blocks[0].args), stage)
    prog.report = merged_report(report, kernel_module)
    return prog
