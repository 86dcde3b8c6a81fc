"""The LLVM emitter: `loop.kernel` ops become LLVM IR functions (llvmlite),
vectorized along the innermost dim of every `loop.map` / `loop.reduce`.

We emit llvmlite IR directly from the loop level rather than going through
xDSL's LLVM dialect: our kernels need explicit SIMD types, masked tails and
our own vector math, which are simplest to build with llvmlite's builder.

Kernel ABI: `i32 kN(i64 start, i64 stop, i8** bufs, i64* strides)`: run the
points [start, stop) of the flattened parallel domain (or of the outermost
map dim when the kernel has no parallel dims); `bufs[j]` is buffer j's data
pointer; `strides[off_j + d]` its stride in elements along dim d. It returns
the IEEE exception flags raised on its thread while it ran (MXCSR bits:
`fp_flags_wrapper`, `KernelCodegen.op_flags`).

Scalar semantics are numpy's (the ops handler `llvm_ops.LLVMOps`): no `nnan`/`ninf`
flags, NaN-propagating maximum/minimum like np.maximum, Python-style floor
division and modulo, numpy's integer division by zero (0), shifts past the
width, and numpy's float->int casts on x86 (out of range -> INT_MIN).

What the emitter adds to the schedule, per kernel (each keeps the values
bitwise those of the plain loops; tests/codegen/test_kernels.py):
- a reduce whose costly per-element value a later map of the same row
  computes again keeps it in a stack row (`plan_row_cache`: softmax's exp);
  for a row of a length known only at the launch, the ops from the reduce
  through the map run in two versions, with a row of a static capacity for
  the rows that fit it and recomputing for the others (`emit_row_versions`);
- float max/min reductions step with vmaxps/vminps plus a NaN flag, and
  redo a row that had a NaN with the NaN-propagating step;
- a costly pass over a row that a later pass re-reads prefetches the next
  row (the next max pass then reads from cache);
- stores to buffers the schedule marks `nontemporal` go around the cache
  when the map's first vector store is aligned (else ordinary stores) and,
  for a buffer of a shape known only at the launch, when the launch's array
  holds the schedule's `stream_bytes` or more."""

from __future__ import annotations

import math
from collections.abc import Callable

import llvmlite.ir as ir
from xdsl.dialects import affine, arith
from xdsl.dialects.builtin import IntAttr, IntegerType, MemRefType, NoneAttr, StridedLayoutAttr
from xdsl.ir import Operation, SSAValue
from xdsl.ir.affine import AffineExpr
from xdsl.ir.affine.affine_expr import (
    AffineBinaryOpExpr,
    AffineBinaryOpKind,
    AffineConstantExpr,
    AffineDimExpr,
    AffineSymExpr,
)

from dialects import array as A
from dialects import kernel as K
from dialects import loop as L
from dialects import ufuncs as U
from runtime import cpu
from runtime.errors import MXCSR_IE, MXCSR_OE, MXCSR_UE, MXCSR_ZE

from . import numpy_fpe
from .llvm_ops import MATH_UFUNC, LLVMOps
from .llvm_types import (
    FM,
    I1,
    I8,
    I32,
    I64,
    X86,
    const,
    is_float,
    is_unsigned,
    item_bytes,
    llvm_math,
    llvm_type,
    mem_type,
    np_extreme,
    vec,
)
from .ops import emit

# a kernel's 4th argument, the launch's scalars (int64 words): the two status
# words of its index checks, then its parameters' raw bits
SCALAR_PARAMS = 2
VOID = ir.VoidType()
MXCSR_FLAGS = 0x3F  # the sticky exception flags: IE DE ZE OE UE PE
MXCSR_REPORTED = MXCSR_IE | MXCSR_ZE | MXCSR_OE | MXCSR_UE  # numpy's four categories




class Emitter:
    """One LLVM module for a loop-level program: a function per kernel."""

    def __init__(self, name: str = "lowering", array_offsets: tuple[int, int] = (16, 40)):
        self.module = ir.Module(name=name)
        # byte offsets of `data` and `strides` in numpy's PyArrayObject
        self.array_offsets = array_offsets
        self._intrinsics: dict[tuple, ir.Function] = {}
        self._libm: dict[str, ir.Function] = {}
        # per function, its call sites that run instead of others (the two
        # versions of a row's ops, `KernelCodegen.emit_row_versions`): the
        # smaller version's count, which a count of the places a function is
        # called from may leave out
        self.alternative_calls: dict[str, int] = {}

    def intrinsic(self, name: str, ty: ir.Type, nargs: int = 1) -> ir.Function:
        key = (name, str(ty), nargs)
        f = self._intrinsics.get(key)
        if f is None:
            suffix = ty.element.intrinsic_name if isinstance(ty, ir.VectorType) else ty.intrinsic_name
            suffix = f"v{ty.count}{suffix}" if isinstance(ty, ir.VectorType) else suffix
            fname = f"llvm.{name}.{suffix}"
            f = self.module.globals.get(fname)  # the math library may have declared it
            if f is None:
                f = ir.Function(self.module, ir.FunctionType(ty, [ty] * nargs), fname)
            self._intrinsics[key] = f
        return f

    def any_lane(self, b: ir.IRBuilder, mask: ir.Value) -> ir.Value:
        """i1: whether any lane of a <w x i1> mask is set."""
        name = f"llvm.vector.reduce.or.v{mask.type.count}i1"
        f = self.module.globals.get(name)
        if f is None:
            f = ir.Function(self.module, ir.FunctionType(I1, [mask.type]), name)
        return b.call(f, [mask])

    def intrinsic_void(self, name: str) -> ir.Function:
        f = self.module.globals.get(name)
        if f is None:
            f = ir.Function(self.module, ir.FunctionType(VOID, []), name)
        return f

    def libm(self, name: str, ty: ir.Type, nargs: int) -> ir.Function:
        sym = name + ("f" if isinstance(ty, ir.FloatType) else "")
        f = self._libm.get(sym)
        if f is None:
            f = ir.Function(self.module, ir.FunctionType(ty, [ty] * nargs), sym)
            self._libm[sym] = f
        return f

    def kernel(self, k: K.KernelOp) -> str:
        KernelCodegen(self, k).emit()
        return k.sym_name.data


def fp_flags_wrapper(module: ir.Module, body: ir.Function, name: str) -> ir.Function:
    """The exported kernel: clear the thread's sticky MXCSR exception flags,
    run the body, return the flags it raised (IE, ZE, OE, UE; not DE, PE)
    with the body's own. The body is a separate, never-inlined function so
    that no floating-point instruction can be scheduled across the MXCSR
    reads (without `strictfp`, LLVM treats FP arithmetic as free of side
    effects). On other architectures only the body's own flags come back."""
    fn = ir.Function(module, body.function_type, name)
    fn.attributes.add("nounwind")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    if not X86:
        b.ret(b.call(body, fn.args))
        return fn
    csr = b.alloca(I32, name="mxcsr")
    st = module.globals.get("llvm.x86.sse.stmxcsr") or ir.Function(
        module, ir.FunctionType(VOID, [I8.as_pointer()]), "llvm.x86.sse.stmxcsr")
    ld = module.globals.get("llvm.x86.sse.ldmxcsr") or ir.Function(
        module, ir.FunctionType(VOID, [I8.as_pointer()]), "llvm.x86.sse.ldmxcsr")
    p = b.bitcast(csr, I8.as_pointer())
    b.call(st, [p])
    b.store(b.and_(b.load(csr), const(I32, ~MXCSR_FLAGS)), csr)
    b.call(ld, [p])
    own = b.call(body, fn.args)
    b.call(st, [p])
    b.ret(b.or_(b.and_(b.load(csr), const(I32, MXCSR_REPORTED)), own))
    return fn


def _element(ty: ir.Type) -> ir.Type:
    return ty.element if isinstance(ty, ir.VectorType) else ty


def buffer_strides(t: MemRefType) -> list[int | None] | None:
    """Compile-time element strides of a memref (None for a dim whose stride
    is known only at run time: read from the array): a C-contiguous one's
    from its shape, a strided layout's as it states them."""
    if isinstance(t.layout, StridedLayoutAttr):
        return [s.data if isinstance(s, IntAttr) else None for s in t.layout.strides.data]
    if not isinstance(t.layout, NoneAttr):
        return None
    out: list[int | None] = []
    acc: int | None = 1
    for n in reversed(t.get_shape()):
        out.append(acc)
        acc = None if acc is None or n == A.DYN else acc * n
    return out[::-1]


class KernelCodegen:
    def __init__(self, em: Emitter, k: K.KernelOp):
        self.em, self.k = em, k
        self.vector_width = k.vector_width.value.data
        self.unroll = k.unroll.value.data
        acc = k.attributes.get("accumulators")  # (schedule: the target's registers)
        self.accumulators = MULTI_REDUCE_ACCUMULATORS if acc is None else acc.value.data
        self.bufs = list(k.buffers)
        args = [I64, I64, I8.as_pointer().as_pointer(), I64.as_pointer()]
        # the body returns the exception flags it raised itself (integer
        # division); the exported kernel wraps it with the MXCSR reads
        self.fn = ir.Function(em.module, ir.FunctionType(I32, args), k.sym_name.data + ".body")
        self.fn.linkage = "internal"
        self.fn.attributes.add("nounwind")
        self.fn.attributes.add("noinline")
        self.entry = fp_flags_wrapper(em.module, self.fn, k.sym_name.data)
        self.raised: ir.Value | None = None  # the body's own flags: an i32 stack slot
        self.lane_arg: SSAValue | None = None  # the index the current vector step runs over
        # `loop.index` checks, numbered in walk order (the runtime's table of
        # axis and size for the IndexError uses the same order)
        self.check_ids = {o: i for i, o in enumerate(o for o in k.body.walk() if isinstance(o, L.IndexOp))}

    # ---- entry: buffer pointers and strides ----------------------------------
    def emit(self) -> None:
        """Arguments: `objs[j]` is buffer j's ndarray object (PyArrayObject*):
        its data pointer and byte strides are read from the object itself, so
        a launch hands over object addresses and nothing else."""
        entry = self.fn.append_basic_block("entry")
        b = self.b = ir.IRBuilder(entry)
        start, stop, objs, scalars = self.fn.args
        self.raised = b.alloca(I32, name="raised")
        b.store(const(I32, 0), self.raised)
        self.ptr: dict[SSAValue, ir.Value] = {}
        self.strides: dict[SSAValue, list] = {}
        data_off, strides_off = self.em.array_offsets
        for j, buf in enumerate(self.bufs):
            t = buf.type
            obj = b.load(b.gep(objs, [const(I64, j)]))
            raw = b.load(b.bitcast(b.gep(obj, [const(I64, data_off)]), I8.as_pointer().as_pointer()))
            self.ptr[buf] = b.bitcast(raw, mem_type(t.element_type).as_pointer())
            static = buffer_strides(t)
            if static is not None and None not in static:
                self.strides[buf] = [const(I64, s) for s in static]
            else:
                sp = b.load(b.bitcast(b.gep(obj, [const(I64, strides_off)]), I64.as_pointer().as_pointer()))
                mt = mem_type(t.element_type)
                size = item_bytes(mt)
                # strides of aligned arrays are multiples of the item size
                self.strides[buf] = [
                    const(I64, static[d]) if static is not None and static[d] is not None
                    else b.sdiv(b.load(b.gep(sp, [const(I64, d)])), const(I64, size))
                    for d in range(t.get_num_dims())]
        P = A.ints(self.k.parallel)
        block = self.k.body.block
        ops = [op for op in block.ops if not isinstance(op, (L.YieldOp, K.ParamOp))]
        self.split_map = self.k.split.data == "map"
        self.any_width = False  # (emitting a map marked `any_width`)
        self.vals: dict[SSAValue, ir.Value] = {}
        for op in block.ops:
            if isinstance(op, K.ParamOp):
                self.vals[op.result] = self.param(scalars, op)
        nt = self.k.attributes.get("nontemporal")
        self.streamed = {self.bufs[j] for j in (A.ints(nt) if nt is not None else ())}
        self.stream_sized = self.stream_sizes(objs)
        self.streaming = False  # inside the aligned version of a map with streamed stores
        self.row_plan = plan_row_cache(ops)
        self.prefetch_next = False  # vector loads also prefetch the next row (see emit_reduce)
        self.row_rows: dict[L.ReduceOp, ir.Value] = {}  # reduce -> its row (stack array)
        self.row_reads: dict[SSAValue, tuple[ir.Value, SSAValue]] = {}  # value -> row, index
        self.carried: dict[SSAValue, ir.Value] = {}  # buffer -> slot (`carry_previous_point`)
        self.carried_loads: set[Operation] = set()  # the loads that read those slots
        if P:
            def at_point(p):
                coords = []
                rem = p
                for i, n in enumerate(reversed(P)):
                    if n == A.DYN or i == len(P) - 1:
                        # the outermost dim: rem is in range (a point is below the
                        # product of the extents; DYN: the launch's extent). No
                        # remainder: a scan's points run one by one (`accumulate`),
                        # and a division per point cost the int64 scan of an edit
                        # distance row more than its own work
                        coords.append(rem)
                        continue
                    coords.append(b.urem(rem, const(I64, n)))
                    rem = b.udiv(rem, const(I64, n))
                for arg, c in zip(block.args, reversed(coords)):
                    self.vals[arg] = c

            def body(p):
                at_point(p)
                self.emit_kernel_ops(ops)
            self.carry_previous_point(ops, start, stop, at_point)
            self.loop(start, stop, 1, body)
        else:
            self.emit_kernel_ops(ops)
        if self.streamed:  # the write-combined stores are ordered before the launch returns
            if X86:
                self.b.call(self.em.intrinsic_void("llvm.x86.sse.sfence"), [])
            else:
                self.b.fence("seq_cst")
        self.b.ret(self.b.load(self.raised))
        self.hide_select_constants(entry)

    def hide_select_constants(self, entry: ir.Block) -> None:
        """Each float constant a select chooses (`np.where(x > 0, 0.0, x)`,
        `np.maximum(x, 0.0)`'s select, the select of a math function's
        special value) replaced by the same value passed through an empty
        asm, made once in the entry block (`opaque`): LLVM folds an op of a
        select with a constant arm into a select of the op's values (`1.0 /
        np.maximum(x, 0.0)`: select(x > 0, 1 / x, inf)), computing the
        constant arm at compile time, and the IEEE flag numpy raises for it
        (divide by zero there) would never be raised."""
        hidden: dict[str, ir.Value] = {}
        saved = self.b
        self.b = ir.IRBuilder(entry)
        self.b.position_at_start(entry)  # (before any select the entry block holds)
        for block in self.fn.blocks:
            for ins in list(block.instructions):
                if not isinstance(ins, ir.instructions.SelectInstr):
                    continue
                for arm in ins.operands[1:]:
                    found = _constant_of(arm)
                    if found is None:
                        continue
                    c, lanes = found
                    key = f"{c.type} {c} {lanes}"
                    if key not in hidden:  # (one asm per value, splat to the lanes)
                        x = self.opaque(c)
                        hidden[key] = self.splat(x, lanes) if lanes else x
                    ins.replace_usage(arm, hidden[key])
        self.b = saved

    def carry_previous_point(self, ops, start, stop, at_point) -> None:
        """A load marked `previous_point` (a scan along the last axis) reads
        what the kernel stored into its buffer at the point before: that
        value rides in a stack slot (a register once SROA runs) that every
        store into the buffer updates, so the chain from one point to the
        next does not go through memory. The slot starts as the memory load
        at the first point (before the loop, where there is one), which is
        what the load reads there. Only a kernel whose points run in order
        on one thread (`accumulate`) carries values."""
        if "accumulate" not in self.k.attributes:
            return
        loads = [o for o in ops if isinstance(o, L.LoadOp) and "previous_point" in o.attributes]
        if not loads:
            return
        b = self.b
        top = set(ops)
        for op in loads:
            if op.buffer in self.carried:  # (one slot per buffer: its last stored value)
                continue
            if any(isinstance(o, L.StoreOp) and o.buffer is op.buffer and o not in top
                   for o in self.k.body.walk()):
                continue  # (a store in a map or a reduction would not update the slot)
            with b.goto_entry_block():
                slot = b.alloca(mem_type(op.buffer.type.element_type))
            with b.if_then(b.icmp_signed("<", start, stop)):
                at_point(start)
                x = self.load(op, 1)
                b.store(self.to_mem(x, op.buffer.type.element_type), slot)
            self.carried[op.buffer] = slot
        self.carried_loads = {o for o in loads if o.buffer in self.carried}

    def stream_sizes(self, objs: ir.Value) -> dict[SSAValue, ir.Value]:
        """For the streamed buffers whose shape is known only at the launch
        (the schedule's `stream_bytes`: their size is a size symbol's):
        whether this launch's array holds that many bytes (i1), from the
        array's dimensions (the field before its strides in numpy's
        PyArrayObject: data, nd, dimensions, strides)."""
        sb = self.k.attributes.get("stream_bytes")
        if sb is None:
            return {}
        b = self.b
        out = {}
        for j, buf in enumerate(self.bufs):
            t = buf.type
            if buf not in self.streamed or A.DYN not in t.get_shape():
                continue
            obj = b.load(b.gep(objs, [const(I64, j)]))
            dims = b.gep(obj, [const(I64, self.em.array_offsets[1] - 8)])
            dp = b.load(b.bitcast(dims, I64.as_pointer().as_pointer()))
            size = const(I64, item_bytes(mem_type(t.element_type)))
            for d, n in enumerate(t.get_shape()):
                extent = b.load(b.gep(dp, [const(I64, d)])) if n == A.DYN else const(I64, n)
                size = b.mul(size, extent)
            out[buf] = b.icmp_signed(">=", size, const(I64, sb.value.data))
        return out

    def param(self, scalars: ir.Value, op: K.ParamOp) -> ir.Value:
        """Kernel parameter k: word 2 + k of the launch's scalars (after the
        two status words of the index checks), as the raw bits of its value."""
        b = self.b
        raw = b.load(b.gep(scalars, [const(I64, SCALAR_PARAMS + op.index.value.data)]))
        t = llvm_type(op.result.type)
        if isinstance(t, ir.IntType):
            return raw if t.width == 64 else b.trunc(raw, t)
        bits = ir.IntType(item_bytes(t) * 8)
        return b.bitcast(raw if bits.width == 64 else b.trunc(raw, bits), t)

    def raise_flags(self, cond: ir.Value, bits: int) -> None:
        """Record exception flags (MXCSR bits) for an event the hardware does
        not flag itself (`op_flags`) when any lane of `cond` holds."""
        b = self.b
        if isinstance(cond.type, ir.VectorType):
            cond = self.em.any_lane(b, cond)
        old = b.load(self.raised)
        b.store(b.or_(old, b.select(cond, const(I32, bits), const(I32, 0))), self.raised)

    # ---- loops ---------------------------------------------------------------
    def loop(self, lo, hi, step: int, body: Callable[[ir.Value], None]) -> None:
        """for (i = lo; i < hi; i += step) body(i); counter kept in a register."""
        b = self.b
        pre = b.block
        head = self.fn.append_basic_block("loop")
        bodyb = self.fn.append_basic_block("body")
        done = self.fn.append_basic_block("done")
        b.branch(head)
        b.position_at_end(head)
        i = b.phi(I64)
        i.add_incoming(lo, pre)
        cond = b.icmp_signed("<", b.add(i, const(I64, step - 1)) if step > 1 else i, hi)
        b.cbranch(cond, bodyb, done)
        b.position_at_end(bodyb)
        body(i)
        nxt = b.add(i, const(I64, step))
        i.add_incoming(nxt, b.block)
        b.branch(head)
        b.position_at_end(done)
        self._last_iv = i

    def region_loops(self, ranges, block_args, width_body: Callable[[int], None],
                     lo=None, hi=None) -> None:
        """Nested loops over `ranges` (outer ones scalar); the innermost one is
        vectorized with a scalar tail. width_body(w) emits one step."""
        if not ranges:
            width_body(1)
            return

        def nest(d: int) -> None:
            n = ranges[d]  # an int, or an LLVM value (an extent known at the launch)
            start = lo if (d == 0 and lo is not None) else const(I64, 0)
            stop = hi if (d == 0 and hi is not None) else n if isinstance(n, ir.Value) else const(I64, n)
            if d < len(ranges) - 1:
                def outer(i):
                    self.vals[block_args[d]] = i
                    nest(d + 1)
                self.loop(start, stop, 1, outer)
                return
            w = self.width_for(n)
            if w > 1:
                def vbody(i):
                    self.vals[block_args[d]] = i
                    self.lane_arg = block_args[d]
                    width_body(w)
                self.loop(start, stop, w, vbody)
                tail_start = self._last_iv
            else:
                tail_start = start

            def sbody(i):
                self.vals[block_args[d]] = i
                width_body(1)
            self.loop(tail_start, stop, 1, sbody)

        nest(0)

    def width_for(self, n) -> int:
        """The vector width of a loop over n (an int, or an extent known at
        the launch: vector steps then a scalar tail, whatever it is). A
        kernel whose vectors are widened for a long chain (`base_width`,
        schedule) runs a shorter loop on narrower vectors, down to the
        target's, rather than scalar (a shared pass's 32-long rows on 64
        lanes)."""
        w = self.vector_width
        base = self.k.attributes.get("base_width")
        if base is not None and isinstance(n, int):
            while w > base.value.data and n < w:
                w //= 2
        if self.any_width and isinstance(n, int):  # (a map over a block's rows: 2 lanes at least)
            while w > 2 and n < w:
                w //= 2
        return w if not isinstance(n, int) or n >= w else 1

    # ---- op emission -------------------------------------------------------
    def emit_ops(self, ops, width: int) -> None:
        for op in ops:
            self.emit_op(op, width)

    def emit_kernel_ops(self, ops) -> None:
        """The kernel body at one point: independent reductions over the same
        ranges (`reduction_groups`) share one pass, where the first is; the
        ops from a reduce whose cached row has a length known only at the
        launch through the map that reads it run in two versions
        (`row_versions`, `emit_row_versions`)."""
        first = {g[0]: g for g in reduction_groups(ops, self.row_plan, self.accumulators)}
        spans = row_versions(ops, self.row_plan)
        done: set = set()
        i = 0
        while i < len(ops):
            if i in spans:
                stop, reds = spans[i]
                self.emit_row_versions(ops[i:stop], reds, first, done)
                i = stop
                continue
            self.emit_kernel_op(ops[i], first, done)
            i += 1

    def emit_kernel_op(self, op: Operation, first: dict, done: set) -> None:
        """One op of the kernel body (`emit_kernel_ops`): a reduction group's
        pass where its first member is, nothing for the later members (in
        `done`)."""
        if op in done:
            return
        group = first.get(op)
        if group is None:
            self.emit_op(op, 1)
            return
        specs = [(r, [o for o in r.body.block.ops if not isinstance(o, L.YieldOp)],
                  r.body.block.last_op.values[0]) for r in group]
        totals, _ = self._reduce_passes(specs, self.width_for(self.extents(op)[-1]))
        for r, t in zip(group, totals):
            self.vals[r.result] = self.opaque(t) if _folded(r.result) else t
        done.update(group)

    def emit_row_versions(self, span, reds, first: dict, done: set) -> None:
        """The kernel-level ops `span` (from the first of the reduces `reds`,
        whose cached rows have lengths known only at the launch, through the
        last map that reads one) twice: with the rows when every extent fits
        its row (`row_capacity`), without them (recomputing, as uncached
        plans do) otherwise; their results meet in phis. Each version starts
        from the state before the span (the row plan, rows and reads, the
        groups emitted, no value of the span's ops), so that nothing cached
        in one is seen by the other."""
        b = self.b
        fits = const(I1, 1)
        for r in reds:
            cap = row_capacity(r.body.block.last_op.values[0].type)
            fits = b.and_(fits, b.icmp_signed("<=", self.extents(r)[0], const(I64, cap)))
        # the values the span defines, for the ops after it: its ops' results
        # and those of the later members of the groups it starts
        made = list(dict.fromkeys(x for op in span if op not in done
                                  for m in first.get(op, [op]) for x in m.results))
        cached, plain, joined = (self.fn.append_basic_block(n)
                                 for n in ("row.cached", "row.recomputed", "row.joined"))
        b.cbranch(fits, cached, plain)
        saved = (self.row_plan, self.row_rows, self.row_reads)
        outs = []
        calls = []  # per version, its calls of each function
        for block, use_rows in ((cached, True), (plain, False)):
            n0 = len(self.fn.blocks)
            b.position_at_end(block)
            self.row_plan = saved[0] if use_rows else {
                r: p for r, p in saved[0].items() if r not in reds}
            self.row_rows, self.row_reads = dict(saved[1]), dict(saved[2])
            for x in made:
                self.vals.pop(x, None)
            emitted = set(done)
            for op in span:
                self.emit_kernel_op(op, first, emitted)
            outs.append((b.block, [self.vals[x] for x in made]))
            b.branch(joined)
            calls.append(_calls_in([block, *self.fn.blocks[n0:]]))
        self.row_plan, self.row_rows, self.row_reads = saved
        alt = self.em.alternative_calls
        for name in calls[0].keys() & calls[1].keys():
            alt[name] = alt.get(name, 0) + min(calls[0][name], calls[1][name])
        done.update(m for op in span if op not in done for m in first.get(op, [op]))
        b.position_at_end(joined)
        for k, x in enumerate(made):
            phi = b.phi(outs[0][1][k].type)
            for block, values in outs:
                phi.add_incoming(values[k], block)
            self.vals[x] = phi

    def value(self, v: SSAValue, w: int) -> ir.Value:
        x = self.vals[v]
        if w > 1 and not isinstance(x.type, ir.VectorType):
            key = (v, w)
            s = self.splats.get(key) if hasattr(self, "splats") else None
            if s is None:
                s = self.splat(x, w)
            return s
        return x

    def splat(self, x: ir.Value, w: int) -> ir.Value:
        b = self.b
        undef = ir.Constant(ir.VectorType(x.type, w), ir.Undefined)
        v = b.insert_element(undef, x, const(I32, 0))
        return b.shuffle_vector(v, undef, ir.Constant(ir.VectorType(I32, w), [0] * w))

    def index_as_data(self, v: SSAValue, w: int) -> ir.Value:
        """An index used as a value (iota): in a vector step, lane l holds the
        index of element l — not the step's first index."""
        op = v.owner
        if isinstance(op, affine.ApplyOp):
            self.scope, self.scope_dims = list(op.operands), op.map.data.num_dims
            e = op.map.data.results[0]
            if w == 1:
                return self.affine(e)
            lane_dim = self.scope.index(self.lane_arg) if self.lane_arg in self.scope else None
            out = ir.Constant(ir.VectorType(I64, w), ir.Undefined)
            for lane in range(w):
                out = self.b.insert_element(out, self.affine(e, lane_dim, lane), const(I32, lane))
            return out
        x = self.vals[v]
        if w == 1 or isinstance(x.type, ir.VectorType):  # (a gathered index: one per lane)
            return x
        x = self.splat(x, w)
        if v is self.lane_arg:
            x = self.b.add(x, ir.Constant(ir.VectorType(I64, w), list(range(w))))
        return x

    def emit_op(self, op: Operation, w: int) -> None:
        if isinstance(op, L.ReduceOp):
            r = self.emit_reduce(op)
            # (a reduction over no points: its identity, hidden from LLVM as
            # a constant operand is: `opaque`)
            self.vals[op.result] = self.opaque(r) if _folded(op.result) else r
            return
        if isinstance(op, L.MapOp):
            self.emit_map(op)
            return
        if isinstance(op, L.LoadOp):
            self.vals[op.result] = self.load(op, w)
            return
        if isinstance(op, L.StoreOp):
            self.store(op, w)
            return
        if isinstance(op, L.YieldOp):
            return
        if isinstance(op, L.IndexOp):
            self.vals[op.result] = self.checked_index(op)
            return
        if isinstance(op, L.FlagsOp):
            self.keep_flags(self.value(op.value, w))
            return
        if op.results and op.results[0] in self.row_reads:
            row, index = self.row_reads[op.results[0]]
            self.vals[op.results[0]] = self.row_access(row, self.vals[index], w)
            return
        args = [self.value(o, w) for o in op.operands]
        if op.operands and all(_folded(o) for o in op.operands) and _may_raise(op):
            args = [self.opaque(a) for a in args]
        self.vals[op.results[0]] = r = emit(LLVMOps(self, w), op, args)
        if X86:
            self.op_flags(op, args, r)

    def opaque(self, v: ir.Value) -> ir.Value:
        """A float operand of an op all of whose operands LLVM knows
        (`_folded`: `1.0 / np.zeros(3)`, `np.exp(np.full(4, 1e3))`, `1.0 /
        x.sum(axis=0)` of an empty axis), passed through an
        empty `asm`: LLVM would fold the op at compile time, and the IEEE
        flags numpy raises on every call (its warning, its error under
        `np.errstate`) would never be raised."""
        b, ty = self.b, v.type
        el = ty.element if isinstance(ty, ir.VectorType) else ty
        if not X86 or not isinstance(el, (ir.FloatType, ir.DoubleType, ir.HalfType)):
            return v

        def hidden(x: ir.Value) -> ir.Value:
            # (readnone: LLVM computes it once, before the loop that needs it)
            return b.call(ir.InlineAsm(ir.FunctionType(x.type, [x.type]), "", "=x,0"), [x],
                          attrs=("nounwind", "readnone"))

        if not isinstance(ty, ir.VectorType):
            return hidden(v)
        out = ir.Constant(ty, ir.Undefined)
        for piece, idx in self.asm_pieces(v):
            piece = hidden(piece)
            for j, lane in enumerate(idx):
                x = b.extract_element(piece, const(I32, j)) if len(idx) > 1 else piece
                out = b.insert_element(out, x, const(I32, lane))
        return out

    def asm_pieces(self, v: ir.Value) -> list[tuple[ir.Value, list[int]]]:
        """A vector as the pieces an inline asm operand takes (each as wide
        as the widest register such an asm takes: `asm_vector_bits`), with
        the lanes each holds; a piece of one lane is that element."""
        b, ty = self.b, v.type
        lanes = max(1, cpu.asm_vector_bits() // (item_bytes(ty.element) * 8))
        out = []
        for at in range(0, ty.count, lanes):
            idx = list(range(at, min(at + lanes, ty.count)))
            if len(idx) == 1:
                out.append((b.extract_element(v, const(I32, at)), idx))
            elif len(idx) == ty.count:
                out.append((v, idx))
            else:
                out.append((b.shuffle_vector(v, ir.Constant(ty, ir.Undefined),
                                             ir.Constant(ir.VectorType(I32, len(idx)), idx)), idx))
        return out

    # ---- IEEE exception flags the hardware does not raise as numpy does -----
    def op_flags(self, op: Operation, args: list[ir.Value], r: ir.Value) -> None:
        """numpy's flags for the ops whose result is not the hardware's own:
        integer division, the vector math functions (`llvm_math`: special
        values are selected, not computed) and logaddexp of a NaN (numpy's
        loop compares signal on it)."""
        name = MATH_UFUNC.get(op.name) or (op.fn.data if op.name == "loop.ufunc" else None)
        if name is None or not op.operands:
            return
        t = op.operands[0].type
        if name in ("floor_divide", "remainder", "fmod") and isinstance(t, IntegerType):
            self.int_division_flags(name, t, *args)
        elif name in ("logaddexp", "logaddexp2") and is_float(t):
            self.raise_flags(self.b.fcmp_unordered("uno", args[0], args[1]), MXCSR_IE)
        elif (llvm_math is not None and name in llvm_math.SUPPORTED and is_float(t)
              and isinstance(_element(r.type), (ir.FloatType, ir.DoubleType, ir.HalfType))):
            self.math_flags(name, args, r)

    def keep_flags(self, v: ir.Value) -> None:
        """`loop.flags`: v is computed for the flags it raises and nothing
        reads it. An empty `asm` that takes it in registers (and touches no
        memory) keeps LLVM from dropping the computation as dead; a vector
        goes in pieces of the widest register such an asm takes (a ymm
        where the host has AVX, else 128 bits: `asm_vector_bits`). The
        flags of the ops LLVM computes in software (`op_flags`) are the
        body's own already; elsewhere than on x86 those are all there is."""
        if not X86 or v.type == I1 or (isinstance(v.type, ir.VectorType)
                                       and v.type.element == I1):
            return
        b, ty = self.b, v.type
        if not isinstance(ty, ir.VectorType):
            pieces, cons = [v], "r" if isinstance(ty, ir.IntType) else "x"
        else:
            pieces, cons = [p for p, _ in self.asm_pieces(v)], "x"
        for piece in pieces:
            c = "r" if isinstance(piece.type, ir.IntType) else cons
            asm = ir.InlineAsm(ir.FunctionType(VOID, [piece.type]), "", c, side_effect=True)
            b.call(asm, [piece])

    def int_division_flags(self, name: str, t, a: ir.Value, y: ir.Value) -> None:
        """numpy's integer loops: divide for a zero divisor, overflow for
        INT_MIN // -1."""
        b, el = self.b, _element(y.type)
        w = y.type.count if isinstance(y.type, ir.VectorType) else 1
        self.raise_flags(b.icmp_signed("==", y, const(el, 0, w)), MXCSR_ZE)
        if name == "floor_divide" and not is_unsigned(t) and el != I1:
            int_min = b.icmp_signed("==", a, const(el, 1 << (el.width - 1), w))
            self.raise_flags(b.and_(int_min, b.icmp_signed("==", y, const(el, -1, w))), MXCSR_OE)

    def math_flags(self, name: str, args: list[ir.Value], r: ir.Value) -> None:
        """From the result and the inputs: invalid for a NaN out of no NaN,
        divide for a pole's infinity (log's 0, 0 to a negative power),
        overflow for another infinity out of finite inputs, underflow where
        exp/exp2/power give a tiny value, arctan2 one of y != 0, and for
        the tiny inputs numpy's own loops flag. Where numpy's flags depend on
        the loop its SIMD dispatch picks on this CPU (SVML's, glibc's, its
        own), they come from `numpy_fpe.table()`, numpy's behaviour probed
        here: the tiny inputs that underflow, pow's divide for 0 ** -inf,
        its overflow for a huge x ** +inf and its underflow for an exact tiny
        power. The common case (a finite, normal result) is one test; the
        flags are worked out in a cold block. The vector functions
        themselves are meant to raise no flag numpy does not (they compute on
        harmless operands where an input is special, and select the special
        results); what tests/codegen/test_fpe.py still finds (underflow from
        tiny intermediates) is over-reported and costs the caller an eager
        re-run."""
        b, ty = self.b, r.type
        el = _element(ty)
        w = ty.count if isinstance(ty, ir.VectorType) else 1
        fpe = numpy_fpe.table()
        underflows = name in ("exp", "exp2", "power", "arctan2")
        # numpy's own loops raise underflow for these tiny inputs (on AVX2,
        # glibc flags a subnormal x of expm1, sinh, tan, ...; numpy's SIMD
        # float32 sin/cos square x): below the bound, by the element type
        tiny_in = fpe.tiny_input_underflows.get((name, str(el)))

        def fabs(v):
            return b.call(self.em.intrinsic("fabs", ty), [v])

        inf, zero = const(el, math.inf, w), const(el, 0.0, w)
        tiny = const(el, {"half": 2.0 ** -14, "float": 2.0 ** -126}.get(str(el), 2.0 ** -1022), w)
        ar = fabs(r)
        special = b.fcmp_unordered(">=", ar, inf)  # NaN or infinite
        if underflows:
            special = b.or_(special, b.fcmp_ordered("<", ar, tiny))
        cold, cont = self.fn.append_basic_block("fpe.special"), self.fn.append_basic_block("fpe.ok")
        if tiny_in is not None:
            ax0 = fabs(args[0])
            tiny_x = b.and_(b.fcmp_ordered("<", ax0, const(el, tiny_in, w)),
                            b.fcmp_ordered("!=", ax0, zero))
            special = b.or_(special, tiny_x)
        any_special = self.em.any_lane(b, special) if w > 1 else special
        b.cbranch(any_special, cold, cont).set_weights([1, 1000])
        b.position_at_end(cold)
        finite = [b.fcmp_ordered("<", fabs(a), inf) for a in args]  # (false for NaN)
        all_finite = finite[0] if len(finite) == 1 else b.and_(finite[0], finite[1])
        ordered = b.fcmp_ordered("ord", args[0], args[-1])
        self.raise_flags(b.and_(b.fcmp_unordered("uno", r, r), ordered), MXCSR_IE)
        r_inf = b.and_(b.fcmp_ordered("==", ar, inf), all_finite)
        if name in ("log", "log2", "log10", "log1p", "arctanh"):
            self.raise_flags(r_inf, MXCSR_ZE)
        elif name == "power":  # 0 to a negative power is a pole; to -inf, where numpy says so
            pole = b.fcmp_ordered("==", args[0], zero)
            self.raise_flags(b.and_(r_inf, b.not_(pole)), MXCSR_OE)
            plus, minus = fpe.pow_pole_divides[str(el)]
            if not (plus and minus):  # numpy raises no divide for (this) zero ** -inf
                quiet = b.fcmp_ordered("==", args[1], const(el, -math.inf, w))
                if plus or minus:  # only for the zero of the other sign
                    neg = b.icmp_signed("<", b.bitcast(args[0], self.int_like(ty)),
                                        const(self.int_like(el), 0, w))
                    quiet = b.and_(quiet, neg if plus else b.not_(neg))
                pole = b.and_(pole, b.not_(quiet))
            self.raise_flags(b.and_(b.fcmp_ordered("==", ar, inf), pole), MXCSR_ZE)
            over = fpe.pow_inf_overflows.get(str(el))
            if over is not None:  # x ** +inf of a huge x (glibc once squared x)
                ax = fabs(args[0])
                huge = b.and_(b.fcmp_ordered(">=", ax, const(el, over, w)),
                              b.fcmp_ordered("<", ax, inf))
                self.raise_flags(b.and_(huge, b.fcmp_ordered("==", args[1], inf)), MXCSR_OE)
        else:
            self.raise_flags(r_inf, MXCSR_OE)
        if underflows:
            small = b.and_(b.fcmp_ordered("<", ar, tiny), all_finite)
            if name == "arctan2":  # a tiny angle of y != 0 (glibc flags some of those
                # that round to 0, not all: more is an eager re-run, less wrong)
                small = b.and_(small, b.fcmp_ordered("!=", args[0], zero))
            if name == "power":  # 0 to a power is exact
                small = b.and_(small, b.fcmp_ordered("!=", args[0], zero))
                if not fpe.pow_exact_tiny_underflows[str(el)]:  # and so are these (glibc's powf)
                    small = b.and_(small, b.not_(self.exact_powers(args[0], args[1])))
            self.raise_flags(small, MXCSR_UE)
        if tiny_in is not None:
            self.raise_flags(tiny_x, MXCSR_UE)
        b.branch(cont)
        b.position_at_end(cont)

    @staticmethod
    def int_like(ty: ir.Type) -> ir.Type:
        """The integer type of a float (vector) type's bits."""
        el = _element(ty)
        it = ir.IntType({"half": 16, "float": 32}.get(str(el), 64))
        return ir.VectorType(it, ty.count) if isinstance(ty, ir.VectorType) else it

    def exact_powers(self, x: ir.Value, y: ir.Value) -> ir.Value:
        """Lanes where x ** y is exactly 2^(y k): |x| = 2^k (subnormal or
        normal) and y k an integer (y finite). All integer ops on the bit
        patterns: nothing here raises a flag whatever the lanes hold. y k is
        an integer when y = 0, k = 0, or the lowest set bit of y (2^ly) and
        the trailing zeros of k (tk) make ly + tk >= 0."""
        b, ty = self.b, x.type
        w = ty.count if isinstance(ty, ir.VectorType) else 1
        mant, bias = {"half": (10, 15), "float": (23, 127)}.get(str(_element(ty)), (52, 1023))
        ity = self.int_like(ty)
        iel = _element(ity)
        emax = (1 << (iel.width - 1 - mant)) - 1

        def c(v):
            return const(iel, v, w)

        def cttz(v):
            suffix = f"v{w}i{iel.width}" if w > 1 else f"i{iel.width}"
            fname = f"llvm.cttz.{suffix}"
            f = self.em.module.globals.get(fname) or ir.Function(
                self.em.module, ir.FunctionType(ity, [ity, I1]), fname)
            return b.call(f, [v, const(I1, 0)])  # (defined at 0: the width)

        def fields(v):
            bits = b.bitcast(v, ity)
            return b.and_(b.lshr(bits, c(mant)), c(emax)), b.and_(bits, c((1 << mant) - 1))

        ex, mx = fields(x)
        ey, my = fields(y)
        sub_x = b.icmp_signed("==", ex, c(0))
        single = b.icmp_signed("==", b.and_(mx, b.sub(mx, c(1))), c(0))  # mx has <= 1 bit set
        pow2 = b.select(sub_x, b.and_(single, b.icmp_signed("!=", mx, c(0))),
                        b.and_(b.icmp_signed("==", mx, c(0)), b.icmp_signed("!=", ex, c(emax))))
        k = b.select(sub_x, b.add(cttz(mx), c(1 - bias - mant)), b.sub(ex, c(bias)))
        sub_y = b.icmp_signed("==", ey, c(0))
        my = b.select(sub_y, my, b.or_(my, c(1 << mant)))
        ly = b.add(b.sub(b.select(sub_y, c(1), ey), c(bias + mant)), cttz(my))
        tk = cttz(b.select(b.icmp_signed("<", k, c(0)), b.sub(c(0), k), k))
        integral = b.or_(b.or_(b.icmp_signed("==", my, c(0)), b.icmp_signed("==", k, c(0))),
                         b.icmp_signed(">=", b.add(ly, tk), c(0)))
        return b.and_(b.and_(pow2, b.icmp_signed("!=", ey, c(emax))), integral)

    def checked_index(self, op: L.IndexOp) -> ir.Value:
        """The index in [0, size) for a value in [-size, size) (one lane per
        element in a vector step, a scalar where the value is one). Any other
        value: the first such lane's value goes to the status words (the 4th
        kernel argument: [check number + 1, value], first writer wins) and the
        index is 0, so that no access leaves the buffer; the runtime raises."""
        b = self.b
        x = self.vals[op.value]
        t = op.value.type
        ity = ir.VectorType(I64, x.type.count) if isinstance(x.type, ir.VectorType) else I64
        if t.width.data < 64:
            x = b.zext(x, ity) if is_unsigned(t) else b.sext(x, ity)
        n, zero = ir.Constant(ity, op.size.value.data), ir.Constant(ity, 0)
        j = b.select(b.icmp_signed("<", x, zero), b.add(x, n), x)
        ok = b.icmp_unsigned("<", j, n)
        bad = b.not_(ok)
        vector = isinstance(ity, ir.VectorType)
        err, cont = self.fn.append_basic_block("index.bad"), self.fn.append_basic_block("index.ok")
        b.cbranch(self.em.any_lane(b, bad) if vector else bad, err, cont).set_weights([1, 1000])
        b.position_at_end(err)
        value = x
        if vector:
            value = const(I64, 0)
            for lane in reversed(range(ity.count)):
                value = b.select(b.extract_element(bad, const(I32, lane)),
                                 b.extract_element(x, const(I32, lane)), value)
        status = self.fn.args[3]
        res = b.cmpxchg(status, const(I64, 0), const(I64, self.check_ids[op] + 1), "monotonic",
                        "monotonic")
        first = self.fn.append_basic_block("index.first")
        b.cbranch(b.extract_value(res, 1), first, cont)
        b.position_at_end(first)
        b.store_atomic(value, b.gep(status, [const(I64, 1)]), "monotonic", 8)
        b.branch(cont)
        b.position_at_end(cont)
        return b.select(ok, j, zero)

    def extents(self, op: L.MapOp | L.ReduceOp) -> list:
        """The op's extents: ints, and LLVM values for those known at the
        launch (DYN: kernel parameters)."""
        return [n if isinstance(n, int) else self.vals[n] for n in op.extents()]

    def emit_map(self, op: L.MapOp) -> None:
        ranges = self.extents(op)
        body = [o for o in op.body.block.ops if not isinstance(o, L.YieldOp)]
        for red, (m, v) in self.row_plan.items():
            if m is op and red in self.row_rows:
                self.row_reads[v] = (self.row_rows[red], op.body.block.args[0])
        lo = hi = None
        if self.split_map:
            lo, hi = self.fn.args[0], self.fn.args[1]
            n0 = ranges[0] if isinstance(ranges[0], ir.Value) else const(I64, ranges[0])
            hi = self.b.select(self.b.icmp_signed("<", hi, n0), hi, n0)
        args = list(op.body.block.args)

        def loops():
            self.any_width = "any_width" in op.attributes
            try:
                self.region_loops(ranges, args, lambda w: self.emit_ops(body, w), lo, hi)
            finally:
                self.any_width = False

        aligned = self.streaming_aligned(op, body, ranges, lo)
        if aligned is None:
            loops()
            return
        # two versions: streamed stores need each vector's address aligned to its size
        b = self.b
        fast, slow, done = (self.fn.append_basic_block(n) for n in ("stream", "cached", "stored"))
        b.cbranch(aligned, fast, slow)
        for bb, streaming in ((fast, True), (slow, False)):
            b.position_at_end(bb)
            self.streaming = streaming
            loops()
            b.branch(done)
        self.streaming = False
        b.position_at_end(done)

    def streaming_aligned(self, op: L.MapOp, body, ranges, lo) -> ir.Value | None:
        """For a 1-D map with stores to streamed buffers: whether, for this
        call, every such store's first vector is aligned to the vector size
        (then all are: the vector steps are contiguous) and, for a buffer of
        a shape known only at the launch, its array is big enough to stream
        (`stream_sizes`). None if no store qualifies."""
        w = self.width_for(ranges[0]) if len(ranges) == 1 else 1
        outside = set(op.body.block.args) | set(self.k.body.block.args)
        stores = [s for s in body if isinstance(s, L.StoreOp) and s.buffer in self.streamed
                  and all(i in outside for i in s.indices)]
        if w == 1 or not stores:
            return None
        b = self.b
        self.vals[op.body.block.args[0]] = lo if lo is not None else const(I64, 0)
        ok = const(I1, 1)
        for s in stores:
            self.scope, self.scope_dims = list(s.indices), s.map.data.num_dims
            size = w * item_bytes(mem_type(s.buffer.type.element_type))
            first = b.gep(self.ptr[s.buffer], [self.offset(s.buffer, s.map.data.results)])
            misaligned = b.and_(b.ptrtoint(first, I64), const(I64, size - 1))
            ok = b.and_(ok, b.icmp_unsigned("==", misaligned, const(I64, 0)))
            if s.buffer in self.stream_sized:
                ok = b.and_(ok, self.stream_sized[s.buffer])
        return ok

    # ---- memory --------------------------------------------------------------
    def affine(self, e: AffineExpr, lane_dim: int | None = None, lane: int = 0) -> ir.Value:
        b = self.b
        if isinstance(e, AffineConstantExpr):
            return const(I64, e.value)
        if isinstance(e, AffineSymExpr):  # a kernel parameter: the operand after the dims
            return self.vals[self.scope[self.scope_dims + e.position]]
        if isinstance(e, AffineDimExpr):
            v = self.vals[self.scope[e.position]]
            if isinstance(v.type, ir.VectorType):  # a gathered index, one per lane
                return b.extract_element(v, const(I32, lane))
            return b.add(v, const(I64, lane)) if (e.position == lane_dim and lane) else v
        assert isinstance(e, AffineBinaryOpExpr)
        x, y = self.affine(e.lhs, lane_dim, lane), self.affine(e.rhs, lane_dim, lane)
        k = e.kind
        if k == AffineBinaryOpKind.Add:
            return b.add(x, y)
        if k == AffineBinaryOpKind.Mul:
            return b.mul(x, y)
        if k == AffineBinaryOpKind.FloorDiv:
            return b.sdiv(x, y)  # indices are non-negative here
        if k == AffineBinaryOpKind.Mod:
            return b.srem(x, y)
        if k == AffineBinaryOpKind.CeilDiv:
            return b.sdiv(b.add(x, b.sub(y, const(I64, 1))), y)
        raise NotImplementedError(str(e))

    def offset(self, buf, exprs, lane_dim=None, lane=0) -> ir.Value:
        b = self.b
        off = const(I64, 0)
        for e, s in zip(exprs, self.strides[buf]):
            off = b.add(off, b.mul(self.affine(e, lane_dim, lane), s))
        return off

    def lane_stride(self, buf, exprs, lane_dim: int):
        """Element stride between lanes: a constant int, an LLVM value, or None
        (not affine in the lane dim, or reading a gathered index per lane)."""
        if any(isinstance(self.vals[self.scope[d.position]].type, ir.VectorType)
               for e in exprs for d in _dims_of(e)):
            return None
        coef = []
        for e in exprs:
            c = linear_coef(e, lane_dim)
            if c is None:
                return None
            coef.append(c)
        st = self.strides[buf]
        if all(c == 0 for c in coef):
            return 0
        if all(isinstance(s, ir.Constant) for c, s in zip(coef, st) if c):
            return sum(c * s.constant for c, s in zip(coef, st) if c)
        b = self.b
        acc = const(I64, 0)
        for c, s in zip(coef, st):
            if c:
                acc = b.add(acc, b.mul(const(I64, c), s))
        return acc

    def _access(self, op, w: int):
        self.scope, self.scope_dims = list(op.indices), op.map.data.num_dims
        exprs = op.map.data.results
        buf = op.buffer
        lane_dim = None
        if w > 1:  # the step's lane index; gathered indices may follow it
            lane_dim = (self.scope.index(self.lane_arg) if self.lane_arg in self.scope
                        else len(self.scope) - 1)
        return buf, exprs, lane_dim

    def load(self, op: L.LoadOp, w: int) -> ir.Value:
        if w == 1 and op in self.carried_loads:
            slot = self.carried[op.buffer]
            return self.from_mem(self.b.load(slot), op.buffer.type.element_type)
        b = self.b
        buf, exprs, lane_dim = self._access(op, w)
        mt = mem_type(buf.type.element_type)
        base = self.ptr[buf]
        align = item_bytes(mt)
        if w == 1:
            x = b.load(b.gep(base, [self.offset(buf, exprs)]), align=align)
            return self.from_mem(x, buf.type.element_type)
        stride = self.lane_stride(buf, exprs, lane_dim)
        if stride == 0:
            x = b.load(b.gep(base, [self.offset(buf, exprs)]), align=align)
            return self.splat(self.from_mem(x, buf.type.element_type), w)
        if stride == 1:
            p = b.gep(base, [self.offset(buf, exprs)])
            if self.prefetch_next:
                self.prefetch_next_point(buf, exprs, p)
            x = b.load(b.bitcast(p, ir.VectorType(mt, w).as_pointer()), align=align)
            return self.from_mem(x, buf.type.element_type)
        if stride == -1:  # (a dim walked backwards) the lanes' elements, last lane's first
            p = b.gep(base, [self.offset(buf, exprs, lane_dim, w - 1)])
            x = b.load(b.bitcast(p, ir.VectorType(mt, w).as_pointer()), align=align)
            return self.from_mem(self.reversed_lanes(x), buf.type.element_type)
        if isinstance(stride, ir.Value) and not isinstance(stride, ir.Constant):
            # a stride known at run time (an F-ordered argument read along its
            # first axis, `x.T`): one vector load where it is 1, lane by lane
            # otherwise (the branch is the same on every iteration: LLVM
            # unswitches the loop on it)
            with b.if_else(b.icmp_signed("==", stride, const(I64, 1))) as (unit, other):
                with unit:
                    p = b.gep(base, [self.offset(buf, exprs)])
                    vec = b.load(b.bitcast(p, ir.VectorType(mt, w).as_pointer()), align=align)
                    unit_end = b.block
                with other:
                    lanes = self.lanes_loaded(buf, exprs, lane_dim, base, mt, w, align)
                    other_end = b.block
            x = b.phi(ir.VectorType(mt, w))
            x.add_incoming(vec, unit_end)
            x.add_incoming(lanes, other_end)
            return self.from_mem(x, buf.type.element_type)
        vals = self.lanes_loaded(buf, exprs, lane_dim, base, mt, w, align)
        return self.from_mem(vals, buf.type.element_type)

    def lanes_loaded(self, buf, exprs, lane_dim, base, mt, w: int, align: int) -> ir.Value:
        """The w lanes' elements, one load each."""
        b = self.b
        vals = ir.Constant(ir.VectorType(mt, w), ir.Undefined)
        for lane in range(w):
            x = b.load(b.gep(base, [self.offset(buf, exprs, lane_dim, lane)]), align=align)
            vals = b.insert_element(vals, x, const(I32, lane))
        return vals

    def prefetch_next_point(self, buf, exprs, p: ir.Value) -> None:
        """Prefetch what this load reads at the next parallel point (the next
        row), so that the next row's first pass over memory finds it cached."""
        par = self.k.body.block.args
        if len(par) != 1 or par[0] not in self.scope:
            return
        coefs = [linear_coef(e, self.scope.index(par[0])) for e in exprs]
        if any(c is None for c in coefs) or not any(coefs):
            return
        b = self.b
        delta = const(I64, 0)
        for c, st in zip(coefs, self.strides[buf]):
            if c:
                delta = b.add(delta, b.mul(const(I64, c), st))
        addr = b.bitcast(b.gep(p, [delta]), I8.as_pointer())
        name = "llvm.prefetch.p0"
        f = self.em.module.globals.get(name) or ir.Function(
            self.em.module, ir.FunctionType(VOID, [I8.as_pointer(), I32, I32, I32]), name)
        b.call(f, [addr, const(I32, 0), const(I32, 3), const(I32, 1)])  # read, keep, data

    def store(self, op: L.StoreOp, w: int) -> None:
        b = self.b
        buf, exprs, lane_dim = self._access(op, w)
        mt = mem_type(buf.type.element_type)
        base = self.ptr[buf]
        align = item_bytes(mt)
        v = self.to_mem(self.value(op.value, w), buf.type.element_type)
        if w == 1:
            b.store(v, b.gep(base, [self.offset(buf, exprs)]), align=align)
            if buf in self.carried:
                b.store(v, self.carried[buf])
            return
        stride = self.lane_stride(buf, exprs, lane_dim)
        if stride == 1:
            p = b.gep(base, [self.offset(buf, exprs)])
            if self.streaming and buf in self.streamed:
                st = b.store(v, b.bitcast(p, ir.VectorType(mt, w).as_pointer()), align=w * align)
                st.set_metadata("nontemporal", self.em.module.add_metadata([const(I32, 1)]))
                return
            b.store(v, b.bitcast(p, ir.VectorType(mt, w).as_pointer()), align=align)
            return
        if stride == -1:
            p = b.gep(base, [self.offset(buf, exprs, lane_dim, w - 1)])
            b.store(self.reversed_lanes(v), b.bitcast(p, ir.VectorType(mt, w).as_pointer()),
                    align=align)
            return
        for lane in range(w):
            b.store(b.extract_element(v, const(I32, lane)),
                    b.gep(base, [self.offset(buf, exprs, lane_dim, lane)]), align=align)

    def reversed_lanes(self, x: ir.Value) -> ir.Value:
        w = x.type.count
        return self.b.shuffle_vector(x, x, ir.Constant(ir.VectorType(I32, w),
                                                       list(range(w - 1, -1, -1))))

    def row_access(self, row: ir.Value, i: ir.Value, w: int, store: ir.Value | None = None):
        """Load (or store) `w` elements of a cached row at index i."""
        b = self.b
        p = b.gep(row, [const(I64, 0), i], inbounds=True)
        el = row.type.pointee.element
        if w > 1:
            p = b.bitcast(p, ir.VectorType(el, w).as_pointer())
        if store is not None:
            b.store(store, p, align=item_bytes(el))
            return None
        return b.load(p, align=item_bytes(el))

    def from_mem(self, x, t):
        if llvm_type(t) == I1:
            return self.b.icmp_unsigned("!=", x, ir.Constant(x.type, None))
        return x

    def to_mem(self, x, t):
        if llvm_type(t) == I1:
            ty = I8 if not isinstance(x.type, ir.VectorType) else ir.VectorType(I8, x.type.count)
            return self.b.zext(x, ty)
        return x

    # ---- reductions ----------------------------------------------------------
    def emit_reduce(self, op: L.ReduceOp) -> ir.Value:
        """Vector accumulators over the innermost dim, combined at the end.
        Float max/min first run with the plain vmaxps/vminps step (numpy's
        result whenever no NaN is met) and a flag of NaNs seen; a row that
        had one is reduced again with numpy's NaN-propagating step."""
        b = self.b
        kind = op.kind.data
        ranges = self.extents(op)
        rb = op.body.block
        body = [o for o in rb.ops if not isinstance(o, L.YieldOp)]
        yielded = rb.last_op.values[0]
        t = yielded.type
        if kind in ("argmax", "argmin"):
            return self.emit_argreduce(op, body, yielded, kind, ranges)
        w = self.width_for(ranges[-1]) if ranges else 1
        if op in self.row_plan:  # (a DYN extent: the version for rows that fit runs this)
            n = ranges[0] if isinstance(ranges[0], int) else row_capacity(t)
            with b.goto_entry_block():
                row = b.alloca(ir.ArrayType(llvm_type(t), n))
            row.align = 64
            self.row_rows[op] = row
        if not (kind in ("max", "min") and is_float(t) and w > 1):
            # a costly pass over a row that another pass re-reads: fetch the
            # next row meanwhile, so the first pass over it runs from cache
            self.prefetch_next = (self.k.reduction.data == "row-in-cache"
                                  and any(o.name.startswith("math.") for o in body))
            total = self._reduce_pass(op, body, yielded, w, None)[0]
            self.prefetch_next = False
            return total
        pred = ">" if kind == "max" else "<"
        total, nan_seen = self._reduce_pass(
            op, body, yielded, w, lambda a, x: b.select(b.fcmp_ordered(pred, a, x), a, x))
        fast_end = b.block
        redo, done = self.fn.append_basic_block("reduce.nan"), self.fn.append_basic_block("reduced")
        b.cbranch(nan_seen, redo, done).set_weights([1, 1000])
        b.position_at_end(redo)
        exact, _ = self._reduce_pass(op, body, yielded, w, None)
        redo_end = b.block
        b.branch(done)
        b.position_at_end(done)
        phi = b.phi(total.type)
        phi.add_incoming(total, fast_end)
        phi.add_incoming(exact, redo_end)
        return phi

    def _reduce_pass(self, op: L.ReduceOp, body, yielded, w: int, step_combine,
                     kind: str | None = None):
        """One pass of the reduction: (total, NaN seen). `step_combine` folds
        each value into its accumulator (None: numpy's `combine`, and no NaN
        flag is kept); `kind` in place of the op's (an arg-reduction's
        extreme)."""
        totals, nan_seen = self._reduce_passes([(op, body, yielded)], w, step_combine, kind)
        return totals[0], nan_seen

    def _reduce_passes(self, specs, w: int, step_combine=None, kind_of_one: str | None = None):
        """One pass over the reduction domain for several reductions of the
        same ranges (`specs`: (op, body ops, yielded value) each): each step
        emits every body, so loads they share are one load (LLVM's CSE), and
        keeps each reduction's accumulators. Returns (totals, NaN seen)."""
        b = self.b
        op0 = specs[0][0]
        ranges = self.extents(op0)
        n = ranges[-1] if ranges else 1
        unroll = max(1, min(self.unroll, self.accumulators // len(specs)))
        if sum(len(body) for _, body, _ in specs) > LONG_REDUCE_BODY:
            unroll = 1  # (a long body has work in flight of its own: one copy of it)
        # an extent known at the launch may be long: all accumulators (the
        # narrower loops after the unrolled one take what is left, none or all)
        accs = unroll if (w > 1 and (isinstance(n, ir.Value) or n >= 4 * w * unroll)) else 1
        flag = step_combine is not None
        assert not flag or len(specs) == 1
        folds, vslots, sslots = [], [], []
        flags: list = []
        for op, _body, yielded in specs:
            kind, t = kind_of_one or op.kind.data, yielded.type
            lt = llvm_type(t)
            contract = kind == "sum" and "contract" in op.attributes and isinstance(
                yielded.owner, arith.MulfOp)
            folds.append(step_combine or (
                lambda a, x, kind=kind, t=t: combine(self, kind, t, a, x)))
            ident = identity(kind, t)
            # accumulators live in stack slots; SROA turns them into registers
            with b.goto_entry_block():
                vs = [b.alloca(vec(lt, w)) for _ in range(accs)] if w > 1 else []
                ss = b.alloca(lt)
                if flag:  # lanes as wide as the data: the compares' all-ones masks OR in place
                    flags = [b.alloca(vec(ir.IntType(item_bytes(lt) * 8), w)), b.alloca(I1)]
            for sl in vs:
                b.store(const(lt, ident, w), sl)
            b.store(const(lt, ident), ss)
            vslots.append(vs)
            sslots.append(ss)
            if contract:
                folds[-1] = ("fma", yielded.owner)
        for f in flags:
            b.store(ir.Constant(f.type.pointee, None), f)

        def values(width: int, index: ir.Value, count: int = 1) -> list[list[ir.Value]]:
            """Per reduction, the yielded values of `count` consecutive steps."""
            out = []
            for op, body, yielded in specs:
                args = list(op.body.block.args)
                self.lane_arg = args[-1] if width > 1 else self.lane_arg
                xs = []
                for k in range(count):
                    self.vals[args[-1]] = b.add(index, const(I64, k * width)) if k else index
                    self.emit_ops(body, width)
                    xs.append(self.value(yielded, width))
                    self.keep_row(op, xs[-1], width)
                    if isinstance(folds[len(out)], tuple):  # the product's factors, this step's
                        mul = yielded.owner
                        xs[-1] = (self.value(mul.lhs, width), self.value(mul.rhs, width))
                if flag:  # one unordered compare per pair of values
                    f = flags[0] if width > 1 else flags[1]
                    seen = b.load(f)
                    for k in range(0, count, 2):
                        nan = b.fcmp_unordered("uno", xs[k], xs[min(k + 1, count - 1)])
                        seen = b.or_(seen, nan if width == 1 else b.sext(nan, seen.type))
                    b.store(seen, f)
                out.append(xs)
            return out

        def fold(i: int, acc: ir.Value, x: ir.Value, width: int) -> ir.Value:
            f = folds[i]
            if isinstance(f, tuple):  # acc + a*b as one fused multiply-add (a dot product)
                return b.call(self.em.intrinsic("fma", acc.type, 3), [*x, acc])
            return f(acc, x)

        def step(width: int, index: ir.Value, slots_of, count: int = 1) -> None:
            for i, xs in enumerate(values(width, index, count)):
                for slot, x in zip(slots_of(i), xs):
                    b.store(fold(i, b.load(slot), x, width), slot)

        def inner():
            if accs > 1:  # independent accumulators: hides the latency, shortens rounding chains
                self.loop(const(I64, 0), bound(n), accs * w,
                          lambda i: step(w, i, lambda r: vslots[r], accs))
                start = self._last_iv
            else:
                start = const(I64, 0)
            if w > 1:
                self.loop(start, bound(n), w, lambda i: step(w, i, lambda r: vslots[r][:1]))
                start = self._last_iv
            self.loop(start, bound(n), 1, lambda i: step(1, i, lambda r: [sslots[r]]))

        if not ranges:
            for i, (op, body, yielded) in enumerate(specs):
                self.emit_ops(body, 1)
                x = self.value(yielded, 1)
                if isinstance(folds[i], tuple):
                    x = (self.value(yielded.owner.lhs, 1), self.value(yielded.owner.rhs, 1))
                b.store(fold(i, b.load(sslots[i]), x, 1), sslots[i])
        else:
            args0 = [list(op.body.block.args) for op, _, _ in specs]

            def nest(d: int) -> None:
                if d == len(ranges) - 1:
                    inner()
                    return

                def outer(i):
                    for args in args0:
                        self.vals[args[d]] = i
                    nest(d + 1)
                self.loop(const(I64, 0), bound(ranges[d]), 1, outer)
            nest(0)
        totals = []
        for (op, _body, yielded), vs, ss in zip(specs, vslots, sslots):
            kind, t = kind_of_one or op.kind.data, yielded.type
            total = b.load(ss)
            if vs:
                vacc = b.load(vs[0])
                for sl in vs[1:]:
                    vacc = combine(self, kind, t, vacc, b.load(sl))
                total = combine(self, kind, t, horizontal(self, kind, t, vacc, w), total)
            if kind == "sum" and "contract" in op.attributes and is_float(t):
                # a product's sum is +0.0 + its terms, as numpy's (BLAS adds
                # into a zeroed output): fused multiply-adds of products that
                # underflow to -0.0 would otherwise leave -0.0
                total = b.fadd(total, const(llvm_type(t), 0.0))
            totals.append(total)
        nan_seen = None
        if flag:
            lanes = b.load(flags[0])
            lanes = b.icmp_signed("!=", lanes, ir.Constant(lanes.type, None))
            nan_seen = b.or_(self.em.any_lane(b, lanes), b.load(flags[1]))
        return totals, nan_seen

    def keep_row(self, op: L.ReduceOp, x: ir.Value, w: int) -> None:
        """Store the yielded value into the reduce's cached row (see
        `plan_row_cache`), at the current index of its (single) dim."""
        row = self.row_rows.get(op)
        if row is not None:
            self.row_access(row, self.vals[op.body.block.args[0]], w, store=x)

    def emit_argreduce(self, op, body, yielded, kind, ranges) -> ir.Value:
        """The first position of the extreme, a NaN winning (numpy's). Over
        one dim of numbers, one vector pass as numpy's own SIMD loop: per
        lane the best value and its position (a strict compare keeps a
        lane's first), a flag of NaNs seen; the lanes then merged (the
        extreme, the least position holding it) and the scalar tail folded
        in. Where a NaN was seen, a search for the first one (`_first_nan`).
        Else (bools, several dims) one scalar pass."""
        t = yielded.type
        if len(ranges) != 1 or op in self.row_plan:
            return self._argreduce_scalar(op, body, yielded, kind, ranges)
        b = self.b
        lt = llvm_type(t)
        if lt == I1:  # a bool's: the first True (argmax) or False, searched for
            want = const(I1, int(kind == "argmax"))
            return self._first_hit(body, yielded, op.body.block.args[0], bound(ranges[0]),
                                   self.width_for(ranges[0]),
                                   lambda x, w: b.icmp_unsigned("==", x, self.splat(want, w)
                                                                if w > 1 else want))
        ext = "max" if kind == "argmax" else "min"
        pred = ">" if ext == "max" else "<"
        w = self.width_for(ranges[0])
        n = bound(ranges[0])
        arg = op.body.block.args[0]
        flt = is_float(t)
        ident = identity(ext, t)

        def better(x, cur):
            if flt:
                return b.fcmp_ordered(pred, x, cur)
            return (b.icmp_unsigned if is_unsigned(t) else b.icmp_signed)(pred, x, cur)

        # independent accumulators (as the reductions' `unroll`): the
        # compare-and-select chain's latency hidden
        accs = max(1, self.unroll) if w > 1 and (isinstance(ranges[0], ir.Value)
                                               or ranges[0] >= 4 * w * self.unroll) else 1
        with b.goto_entry_block():
            best = [b.alloca(vec(lt, w)) for _ in range(accs)]
            at = [b.alloca(vec(I64, w)) for _ in range(accs)]
            nans = b.alloca(vec(I1, w))
            cur, ci = b.alloca(lt), b.alloca(I64)
        for u in range(accs):
            b.store(const(lt, ident, w), best[u])
            b.store(const(I64, 0, w), at[u])
        b.store(const(I1, 0, w), nans)
        start = const(I64, 0)
        if w > 1:
            lanes = ir.Constant(vec(I64, w), [ir.Constant(I64, k) for k in range(w)])

            def vstep(j, count):
                for u in range(count):
                    ju = b.add(j, const(I64, u * w)) if u else j
                    self.vals[arg] = ju
                    self.lane_arg = arg
                    self.emit_ops(body, w)
                    x = self.value(yielded, w)
                    take = better(x, b.load(best[u]))
                    b.store(b.select(take, x, b.load(best[u])), best[u])
                    b.store(b.select(take, b.add(self.splat(ju, w), lanes), b.load(at[u])), at[u])
                    if flt:
                        b.store(b.or_(b.load(nans), b.fcmp_unordered("uno", x, x)), nans)
            if accs > 1:
                self.loop(const(I64, 0), n, accs * w, lambda j: vstep(j, accs))
                start = self._last_iv
            self.loop(start, n, w, lambda j: vstep(j, 1))
            start = self._last_iv
        # the lanes merged (the accumulators' vectors first): the extreme,
        # then the least position holding it
        def merge(x, xi, m, mi):
            eq = b.fcmp_ordered("==", x, m) if flt else b.icmp_signed("==", x, m)
            take = b.or_(better(x, m), b.and_(eq, b.icmp_signed("<", xi, mi)))
            return b.select(take, x, m), b.select(take, xi, mi)

        bv, av = b.load(best[0]), b.load(at[0])
        for u in range(1, accs):
            bv, av = merge(b.load(best[u]), b.load(at[u]), bv, av)
        if w == 1:  # (scalar accumulators: untouched, the tail does all)
            m, mi = bv, av
        else:
            m, mi = b.extract_element(bv, const(I32, 0)), b.extract_element(av, const(I32, 0))
        for k in range(1, w):
            m, mi = merge(b.extract_element(bv, const(I32, k)), b.extract_element(av, const(I32, k)),
                          m, mi)
        b.store(m, cur)
        b.store(mi, ci)
        seen = self.em.any_lane(b, b.load(nans)) if flt and w > 1 else const(I1, 0)
        with b.goto_entry_block():
            tail_nan = b.alloca(I1)
        b.store(seen, tail_nan)

        def sstep(i):
            self.vals[arg] = i
            self.emit_ops(body, 1)
            x = self.value(yielded, 1)
            take = better(x, b.load(cur))
            b.store(b.select(take, x, b.load(cur)), cur)
            b.store(b.select(take, i, b.load(ci)), ci)
            if flt:
                b.store(b.or_(b.load(tail_nan), b.fcmp_unordered("uno", x, x)), tail_nan)
        self.loop(start, n, 1, sstep)
        if not flt:
            return b.load(ci)
        found = b.load(ci)
        plain = b.block
        redo, done = self.fn.append_basic_block("arg.nan"), self.fn.append_basic_block("arg.done")
        b.cbranch(b.load(tail_nan), redo, done).set_weights([1, 1000])
        b.position_at_end(redo)
        first = self._first_hit(body, yielded, arg, n, w, lambda x, _w: b.fcmp_unordered("uno", x, x))
        redo_end = b.block
        b.branch(done)
        b.position_at_end(done)
        res = b.phi(I64)
        res.add_incoming(found, plain)
        res.add_incoming(first, redo_end)
        return res

    def _first_hit(self, body, yielded, arg, n, w: int, hit) -> ir.Value:
        """The first position of a row whose value `hit(x, width)` holds
        (0 where none does): whole vectors up to the one holding it, then a
        scalar search that stops there."""
        start = const(I64, 0)
        if w > 1:
            start = self._search(start, n, w, body, yielded, arg, hit, None)
        return self._search(start, n, 1, body, yielded, arg, hit, const(I64, 0))

    def _search(self, lo, n, w: int, body, yielded, arg, hit, missing) -> ir.Value:
        """Steps of w points from lo while whole steps fit in n, stopping at
        the first whose values `hit` holds in some lane: that step's first
        position, or `missing` where none does (None: where the steps ended)."""
        b = self.b
        pre = b.block
        head, step, nxt, done = (self.fn.append_basic_block(f"search{w}{part}")
                                 for part in ("", ".step", ".next", ".done"))
        b.branch(head)
        b.position_at_end(head)
        i = b.phi(I64)
        i.add_incoming(lo, pre)
        b.cbranch(b.icmp_signed("<=", b.add(i, const(I64, w)), n), step, done)
        b.position_at_end(step)
        self.vals[arg] = i
        if w > 1:
            self.lane_arg = arg
        self.emit_ops(body, w)
        hits = hit(self.value(yielded, w), w)
        found = b.block
        b.cbranch(self.em.any_lane(b, hits) if w > 1 else hits, done, nxt)
        b.position_at_end(nxt)
        i.add_incoming(b.add(i, const(I64, w)), nxt)
        b.branch(head)
        b.position_at_end(done)
        at = b.phi(I64)
        at.add_incoming(i, found)
        at.add_incoming(i if missing is None else missing, head)
        return at

    def _argreduce_scalar(self, op, body, yielded, kind, ranges) -> ir.Value:
        """Scalar loop: first position of the extreme; a NaN wins (numpy)."""
        b = self.b
        t = yielded.type
        lt = llvm_type(t)
        with b.goto_entry_block():
            best = b.alloca(lt)
            besti = b.alloca(I64)
            pos = b.alloca(I64)
            seen = b.alloca(I1)
        b.store(const(I64, 0), besti)
        b.store(const(I64, 0), pos)
        b.store(const(I1, 0), seen)
        b.store(ir.Constant(lt, None) if not is_float(t) else ir.Constant(lt, 0.0), best)
        args = list(op.body.block.args)

        def step(width):
            self.emit_ops(body, 1)
            x = self.value(yielded, 1)
            cur = b.load(best)
            if is_float(t):
                better = b.fcmp_ordered(">" if kind == "argmax" else "<", x, cur)
                x_nan = b.fcmp_unordered("uno", x, x)
                cur_nan = b.fcmp_unordered("uno", cur, cur)
                better = b.or_(better, b.and_(x_nan, b.not_(cur_nan)))
            else:
                sgn = not is_unsigned(t)
                cmp = b.icmp_signed if sgn else b.icmp_unsigned
                better = cmp(">" if kind == "argmax" else "<", x, cur)
            first = b.not_(b.load(seen))
            take = b.or_(first, better)
            b.store(b.select(take, x, cur), best)
            b.store(b.select(take, b.load(pos), b.load(besti)), besti)
            b.store(const(I1, 1), seen)
            b.store(b.add(b.load(pos), const(I64, 1)), pos)

        self.region_loops_scalar(ranges, args, step)
        return b.load(besti)

    def region_loops_scalar(self, ranges, args, step) -> None:
        """Nested scalar loops over `ranges` (ints or LLVM values);
        step(1) at each point."""
        def nest(d):
            def body(i):
                self.vals[args[d]] = i
                if d == len(ranges) - 1:
                    step(1)
                else:
                    nest(d + 1)
            self.loop(const(I64, 0), bound(ranges[d]), 1, body)
        nest(0)


def bound(n) -> ir.Value:
    """A loop bound: an extent's LLVM value (known at the launch), or its int."""
    return n if isinstance(n, ir.Value) else const(I64, n)


def same_extents(a: L.ReduceOp | L.MapOp, b: L.ReduceOp | L.MapOp) -> bool:
    """Whether two reductions (or maps) run over the same domain: equal
    static extents, and the same SSA values (kernel parameters) for dynamic
    ones."""
    ea, eb = a.extents(), b.extents()
    return len(ea) == len(eb) and all(
        x == y if isinstance(x, int) and isinstance(y, int) else x is y for x, y in zip(ea, eb))


def _groupable(op: Operation, row_plan) -> bool:
    if not isinstance(op, L.ReduceOp) or op in row_plan or not A.ints(op.ranges):
        return False
    kind = op.kind.data
    # argmax/argmin run scalar; float max/min keep their NaN-checked passes
    return kind in ("sum", "prod", "any", "all") or (
        kind in ("max", "min") and not is_float(op.body.block.last_op.values[0].type))


def reduction_groups(ops, row_plan, most: int = 1 << 30) -> list[list[L.ReduceOp]]:
    """Reductions of the kernel-level ops that share one pass: a reduction
    joins an earlier one over the same ranges (`same_extents`) when
    computing it there, ahead of the ops in between, changes nothing (its
    body uses no value they make and loads no buffer they store to), and
    more than `most` of them (one accumulator each at least: more would
    spill) split into passes of equal size. Groups of two or more."""
    groups: list[list[L.ReduceOp]] = []
    taken: set = set()
    for i, r in enumerate(ops):
        if r in taken or not _groupable(r, row_plan):
            continue
        group = [r]
        made: set = set(r.results)
        stored: set = set()
        for op in ops[i + 1:]:
            if op not in taken and _groupable(op, row_plan) and same_extents(op, r):
                inner = list(op.body.walk())
                if not any(x in made for o in inner for x in o.operands) and not any(
                        isinstance(o, L.LoadOp) and o.buffer in stored for o in inner):
                    group.append(op)
                    made.update(op.results)  # (a later member may not read it either)
                    continue
            for o in op.walk():
                made.update(o.results)
                if isinstance(o, L.StoreOp):
                    stored.add(o.buffer)
        parts = -(-len(group) // most)  # (more than `most`: passes of equal size)
        size = -(-len(group) // parts)
        for p in range(0, len(group), size):
            if len(group[p:p + size]) > 1:
                groups.append(group[p:p + size])
        taken.update(group)
    return groups


def _dims_of(e: AffineExpr):
    if isinstance(e, AffineDimExpr):
        yield e
    elif isinstance(e, AffineBinaryOpExpr):
        yield from _dims_of(e.lhs)
        yield from _dims_of(e.rhs)


def linear_coef(e: AffineExpr, d: int) -> int | None:
    """d(e)/d(dim d) when e is affine in dim d, else None."""
    if isinstance(e, (AffineConstantExpr, AffineSymExpr)):
        return 0
    if isinstance(e, AffineDimExpr):
        return 1 if e.position == d else 0
    assert isinstance(e, AffineBinaryOpExpr)
    if d not in e.used_dims():
        return 0
    k = e.kind
    if k == AffineBinaryOpKind.Add:
        a, c = linear_coef(e.lhs, d), linear_coef(e.rhs, d)
        return None if a is None or c is None else a + c
    if k == AffineBinaryOpKind.Mul:
        if isinstance(e.rhs, AffineConstantExpr):
            a = linear_coef(e.lhs, d)
            return None if a is None else a * e.rhs.value
        if isinstance(e.lhs, AffineConstantExpr):
            a = linear_coef(e.rhs, d)
            return None if a is None else a * e.lhs.value
    return None


# ---- row cache: a reduce's per-element value reused by a later map ----------
MULTI_REDUCE_ACCUMULATORS = 16  # vector registers for the accumulators of one pass
# a reduction pass whose bodies hold more ops than this keeps one accumulator:
# independent accumulators hide the add's latency behind a short body, and
# each is one more copy of the body for LLVM to compile (the Monte Carlo
# Asian option's 50-step body: 6 copies; its first call 2.6 s -> 1.1 s, the
# 20-step one 1.1 s -> 0.56 s, the calls as fast)
LONG_REDUCE_BODY = 64
ROW_CACHE_BYTES = 64 * 1024  # a stack array per kernel call: stays in L1/L2
_PURE = ("arith.", "math.", "loop.const", "loop.cast", "loop.ufunc", "loop.load", "affine.apply")


def row_capacity(t) -> int:
    """Elements of type t that a row of ROW_CACHE_BYTES holds."""
    return ROW_CACHE_BYTES // item_bytes(mem_type(t))


def plan_row_cache(ops) -> dict[L.ReduceOp, tuple[L.MapOp, SSAValue]]:
    """Reduces whose yielded value a later map of the same 1-D range computes
    again (softmax: `exp(x - max)` summed, then divided by the sum): the
    reduce keeps its values in a row and the map loads them instead of
    recomputing. Only for costly values (a transcendental, a division),
    rows up to ROW_CACHE_BYTES (the row is a stack array of a static size),
    and when nothing in between (the map included) stores to a buffer the
    value reads. A row of a length known only at the launch (DYN) gets a
    row of `row_capacity` elements, which the rows that fit use
    (`KernelCodegen.emit_row_versions`: the others recompute)."""
    plan = {}
    for i, red in enumerate(ops):
        if not isinstance(red, L.ReduceOp) or red.kind.data in ("argmax", "argmin"):
            continue
        ranges = A.ints(red.ranges)
        y = red.body.block.last_op.values[0]
        expr = _expr_ops(y, red.body.block)
        if (len(ranges) != 1 or not is_float(y.type) or expr is None
                or not any(U.expensive_op(o) for o in expr)):
            continue
        if ranges[0] != A.DYN and ranges[0] > row_capacity(y.type):
            continue
        loaded = {o.buffer for o in expr if isinstance(o, L.LoadOp)}
        for j in range(i + 1, len(ops)):
            m = ops[j]
            if isinstance(m, L.MapOp) and same_extents(m, red):
                args = (red.body.block.args[0], m.body.block.args[0])
                v = next((o.results[0] for o in m.body.block.ops if len(o.results) == 1
                          and _same_value(y, o.results[0], args)), None)
                if v is not None:
                    stores = [s for op in ops[i + 1 : j + 1] for s in op.walk()
                              if isinstance(s, L.StoreOp) and s.buffer in loaded]
                    if not stores:
                        plan[red] = (m, v)
                    break
    return plan


def _calls_in(blocks) -> dict[str, int]:
    """The calls in `blocks`, per callee name."""
    out: dict[str, int] = {}
    for block in blocks:
        for ins in block.instructions:
            name = getattr(getattr(ins, "callee", None), "name", None)
            if name:
                out[name] = out.get(name, 0) + 1
    return out


def row_versions(ops, row_plan) -> dict[int, tuple[int, list[L.ReduceOp]]]:
    """Where the kernel-level `ops` run in two versions (`emit_row_versions`):
    from a reduce of `row_plan` whose extent is known only at the launch
    through the map that reads its row, spans that overlap joined; start ->
    (stop, the span's reduces)."""
    pos = {op: i for i, op in enumerate(ops)}
    spans = sorted((pos[r], pos[m] + 1, r) for r, (m, _) in row_plan.items()
                   if not isinstance(r.extents()[0], int))
    out: list[list] = []
    for start, stop, r in spans:
        if out and start < out[-1][1]:
            out[-1][1] = max(out[-1][1], stop)
            out[-1][2].append(r)
        else:
            out.append([start, stop, [r]])
    return {start: (stop, reds) for start, stop, reds in out}


def _expr_ops(v: SSAValue, block) -> list[Operation] | None:
    """The ops of `block` that compute v, if all are pure and region-free."""
    out, todo, seen = [], [v], set()
    while todo:
        x = todo.pop()
        op = x.owner
        if not isinstance(op, Operation) or op.parent_block() is not block or op in seen:
            continue
        if op.regions or not op.name.startswith(_PURE):
            return None
        seen.add(op)
        out.append(op)
        todo.extend(op.operands)
    return out


def _same_value(a: SSAValue, b: SSAValue, args: tuple[SSAValue, SSAValue]) -> bool:
    """a (in the reduce body) and b (in the map body) compute the same thing,
    args being the two bodies' index arguments. (A worklist of pairs, each
    compared once: no recursion along the expressions' depth.)"""
    todo, seen = [(a, b)], set()
    while todo:
        a, b = todo.pop()
        if (a, b) in seen:
            continue
        seen.add((a, b))
        if a is args[0] or b is args[1]:
            if a is args[0] and b is args[1]:
                continue
            return False
        if a is b:
            continue  # defined outside both bodies
        oa, ob = a.owner, b.owner
        if not (isinstance(oa, Operation) and isinstance(ob, Operation)) or oa.name != ob.name:
            return False
        if (oa.regions or ob.regions or oa.properties != ob.properties
                or oa.attributes != ob.attributes
                or [r.type for r in oa.results] != [r.type for r in ob.results]
                or oa.results.index(a) != ob.results.index(b)
                or len(oa.operands) != len(ob.operands)):
            return False
        todo.extend(zip(oa.operands, ob.operands))
    return True


def identity(kind: str, t):
    if kind == "sum" or kind == "any":
        return 0.0 if is_float(t) else 0
    if kind == "prod" or kind == "all":
        return 1.0 if is_float(t) else 1
    if is_float(t):
        return -math.inf if kind == "max" else math.inf
    w = t.width.data
    if is_unsigned(t):
        return 0 if kind == "max" else (1 << w) - 1
    return (1 << (w - 1)) if kind == "max" else (1 << (w - 1)) - 1  # INT_MIN bits / INT_MAX


def combine(cg: KernelCodegen, kind: str, t, a, x):
    b = cg.b
    f = is_float(t)
    if llvm_type(t) == I1:  # bools add as `or`, multiply as `and` (numpy's bool loops)
        kind = {"sum": "any", "prod": "all"}.get(kind, kind)
    if kind == "sum":
        return b.fadd(a, x, flags=FM) if f else b.add(a, x)
    if kind == "prod":
        return b.fmul(a, x, flags=FM) if f else b.mul(a, x)
    if kind == "any":
        return b.or_(a, x)
    if kind == "all":
        return b.and_(a, x)
    if kind in ("max", "min"):
        return np_extreme(cg, kind == "max", t, a, x)
    raise NotImplementedError(kind)


def horizontal(cg, kind, t, v, w):
    """Tree-combine the lanes of a vector accumulator."""
    b = cg.b
    while w > 1:
        h = w // 2
        lo = b.shuffle_vector(v, v, ir.Constant(ir.VectorType(I32, h), list(range(h))))
        hi = b.shuffle_vector(v, v, ir.Constant(ir.VectorType(I32, h), list(range(h, w))))
        v = combine(cg, kind, t, lo, hi)
        w = h
    return b.extract_element(v, const(I32, 0)) if isinstance(v.type, ir.VectorType) else v


def _may_raise(op: Operation) -> bool:
    """Whether `op` can raise an IEEE flag numpy reports: a ufunc's by the
    op table's `fpe` column; selects, compares and the sign ops none; any
    other op of float values (a cast) may."""
    u = U.of_op(op)
    if u is not None:
        return bool(u.fpe(not any(is_float(o.type) for o in op.operands)))
    if isinstance(op, (arith.SelectOp, arith.CmpfOp, arith.CmpiOp, arith.NegfOp)):
        return False
    return any(is_float(v.type) for v in (*op.operands, *op.results))


def _folded(v: SSAValue) -> bool:
    """v is a value LLVM knows at compile time: a constant, or a reduction
    over a domain of no points (its identity: the loop runs no step)."""
    op = v.owner
    return isinstance(op, L.ConstOp) or (isinstance(op, L.ReduceOp)
                                         and 0 in tuple(op.ranges.get_values()))


def _constant_of(v: ir.Value) -> tuple[ir.Constant, int] | None:
    """v as (the float constant every lane of it holds, its lanes; 0: a
    scalar), else None (not a constant, or lanes of different values)."""
    t = v.type
    lanes = t.count if isinstance(t, ir.VectorType) else 0
    el = t.element if lanes else t
    if not isinstance(el, (ir.FloatType, ir.DoubleType, ir.HalfType)):
        return None
    if isinstance(v, ir.Constant):
        if not lanes:
            return v, 0
        vals = v.constant if isinstance(v.constant, list) else None
        if not vals:
            return None
        first = [c.constant if isinstance(c, ir.Constant) else c for c in vals]
        if any(not isinstance(c, float) or repr(c) != repr(first[0]) for c in first):
            return None
        return ir.Constant(el, first[0]), lanes
    if (lanes and isinstance(v, ir.instructions.ShuffleVector)
            and isinstance(v.operands[0], ir.instructions.InsertElement)):
        ins = v.operands[0]
        x, at = ins.operands[1], ins.operands[2]
        if (isinstance(x, ir.Constant) and isinstance(at, ir.Constant) and at.constant == 0
                and all(m == 0 for m in v.operands[2].constant)):
            return x, lanes
    return None
