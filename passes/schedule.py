"""`schedule`: every `loop.kernel` becomes a `kernel.kernel` with its schedule.

The cost model, all of it:
* vector width = the target's vector bits / the widest element type the
  kernel touches (32 bits at least): 16 f32 lanes on AVX-512, 8 on AVX2;
  twice that for a kernel with a transcendental or a division: one step's
  dependency chain is then so long that the out-of-order window holds too
  few steps, and two registers per value give it independent work (AVX2,
  same-run ratios: GELU 1.24x, Black-Scholes 1.24x, softmax 1.07x;
  LayerNorm, RMSNorm and the MLP step unchanged); four times that with
  VERY_LONG_CHAIN such ops or more on AVX-512, whose 32 registers hold it
  (Black-Scholes: 4 divisions, sqrt, log, 3 exp per option: 5.7 vs 6.45 ms;
  eight times: 7.3 ms, it spills); a reduction shorter than that runs on
  narrower vectors, down to the target's (discardable attribute
  `base_width`), not scalar;
* reductions whose innermost extent holds 16 vectors or more get 4
  independent accumulators (hides the add latency, shortens rounding chains);
  an extent known only at the launch (DYN) counts as that long;
* the launch splits the flattened parallel dims across threads; a kernel with
  no parallel dims and a single map splits that map's outermost dim; anything
  else runs whole;
* a kernel touching fewer than `parallel_threshold` elements runs on one
  thread (waking a thread costs more than that much work), and so does one
  that accumulates into its output row after row (`accumulate`, a column
  reduction: its rows must run in order) — unless it accumulates each of n
  chunks of its points into an output of its own (`ordered_chunks` n, a
  shared pass over a matrix's rows: `lower_to_loop.SharedRowsEmitter`),
  which runs on a number of threads that divides n, each thread whole
  chunks in order;
* a reduction row that fits in half the L2 cache is re-read from cache by
  each stage ("row-in-cache"), else (or of a length known only at the
  launch) it streams from memory ("streaming");
* an output of STREAM_BYTES or more that the kernel only writes is stored
  around the cache (discardable attribute `nontemporal`, buffer positions):
  it would not stay in the last-level cache anyway, and a normal store first
  reads each line it writes (1.5x the memory traffic of a copy); an output
  whose size is a size symbol's is marked too, with the threshold
  (`stream_bytes`): the emitter checks it against each launch's array;
* a kernel of several reductions on a target of 16 vector registers (AVX2,
  SSE: vector bits under 512) keeps at most ACCUMULATORS_16_REGISTERS vector
  accumulators in one pass over them (discardable attribute
  `accumulators`; the emitter's default, 16, is for AVX-512's 32): the
  sixteen dot products of a narrow matmul into 16 columns in one pass
  spilled on a Zen 3 (float64 256x512x16 after a ReLU: 427 us against
  BLAS's 159);
* consecutive point-wise kernels over the same domain (parallel dims and
  map) become one launch
  (`merge_pointwise`; discardable attribute `merged`, the kernels' names):
  each kernel's pass over memory costs more than its arithmetic, and values
  a later kernel reloads are forwarded instead;
* then consecutive kernels over the same parallel dims that read a common
  buffer, or where one reads rows the other wrote at the same point, become
  one launch (`merge_rows`, horizontal fusion: `x.sum(-1)`, `x.max(-1)` and
  `(x*x).sum(-1)` read each row of x from memory once; the later passes over
  it hit the cache), up to MERGE_ROWS_MAX_OPS ops per launch."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func, memref
from xdsl.dialects.builtin import (
    ArrayAttr,
    IntegerAttr,
    IntegerType,
    MemRefType,
    ModuleOp,
    StringAttr,
    i64,
)
from xdsl.ir import Operation, Region, SSAValue
from xdsl.ir.affine import AffineExpr, AffineMap
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter
from xdsl.transforms.common_subexpression_elimination import cse

from dialects import array as A
from dialects import kernel as K
from dialects import loop as L
from dialects import ufuncs as U
from dialects.symbols import SymDim, hint, parallel_threads

L2_BYTES = 512 * 1024
LONG_CHAIN = 1  # transcendentals and divisions per point that make a chain "long"
VERY_LONG_CHAIN = 4  # ... and four registers per value (AVX-512: 32 registers)
STREAM_BYTES = 32 << 20  # about a server L3: outputs this big evict it anyway
# the widest vectors of a pass over a matrix's shared rows (`shared_rows`: each
# row's products, then the row re-read from cache into the output). Measured
# (2 cores, Intel AVX-512, against 512-bit vectors): where A streams from
# memory, 30000x1024 float64 10.9 against 15.4 ms, float32 4.4 against 7.7,
# 4000x4000 float64 6.4 against 12.3; from cache the same within 5%; plain
# streaming kernels (row sums, LayerNorm, axpy) the same at either width
SHARED_ROWS_VECTOR_BITS = 256


def _bits(t) -> int:
    if isinstance(t, IntegerType):
        return max(t.width.data, 8)
    return {"f16": 16, "bf16": 16, "f32": 32, "f64": 64}.get(str(t), 64)


def _at_least(n: int, m: int) -> bool:
    """Whether extent n is m or more; one known only at the launch (DYN, or
    a size symbol's: `dialects.symbols`) is taken as large, unguarded (a
    choice of speed, not of results)."""
    return n == A.DYN or isinstance(n, SymDim) or hint(n) >= m


def _size(t: MemRefType) -> int:
    n = 1
    for d in t.get_shape():
        n *= d
    return n


def _touched(k: L.KernelOp, P, bufs) -> int:
    """About how many elements a launch reads: its points (the parallel
    dims times its largest loop nest) times the loads at each point, no
    more than its buffers hold. (A kernel copying one row of a big array
    touches the row, not the array: waking a second thread for it cost more
    than the copy; a time loop unrolled into one kernel reads a row of its
    input per step at each point: `S = S * np.exp(Z[t])` for 50 steps over
    60000 paths reads 3M elements, not 60000.)"""
    total = 0
    for b in bufs:
        total = total + _size(b.type)
    points = 1
    for n in P:
        points = points * n
    inner = 1
    loads = 0
    for o in k.body.walk():
        if isinstance(o, (L.MapOp, L.ReduceOp)):
            n = 1
            for e in A.ints(o.ranges):
                n = n * e
            inner = max(inner, n, key=hint)
        elif isinstance(o, L.LoadOp):
            loads += 1
    return min(total, points * inner * max(loads, 1), key=hint)


@dataclass(frozen=True)
class Schedule(ModulePass):
    name = "schedule"

    vector_bits: int = 256
    threads: int = 1
    parallel_threshold: int = 1 << 20
    merge: bool = True
    split_reductions: bool = True
    # chunks a split reduction may take (0: `threads`) and the elements it
    # must touch to split (0: `parallel_threshold`): a GPU splits into many
    # programs, from a much smaller size
    reduction_chunks: int = 0
    split_threshold: int = 0

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for f in [o for o in op.walk() if isinstance(o, func.FuncOp)]:
            hoist_past_externs(f)  # first: a kernel after a matmul may join its producer
            if self.merge:
                merge_pointwise(f, self.parallel_threshold)
                fuse_into_reductions(f, self._chunks(), self._split_threshold())
                merge_rows(f)
            drop_dead_stores(f)
            if self.split_reductions and self._chunks() > 1:
                split_reductions(f, self._chunks(), self._split_threshold())
        for k in [o for o in op.walk() if isinstance(o, L.KernelOp)]:
            Rewriter.replace_op(k, self.schedule(k))

    def _chunks(self) -> int:
        """The most chunks a reduction to a scalar splits into (1: none)."""
        if not self.split_reductions:
            return 1
        return self.reduction_chunks or self.threads

    def _split_threshold(self) -> int:
        return self.split_threshold or self.parallel_threshold

    def schedule(self, k: L.KernelOp) -> K.KernelOp:
        bufs = list(k.buffers)
        bits = max([32] + [_bits(b.type.element_type) for b in bufs])
        width = base = max(self.vector_bits // bits, 1)
        if "shared_rows" in k.attributes:
            width = base = max(min(self.vector_bits, SHARED_ROWS_VECTOR_BITS) // bits, 1)
        chain = _chain_ops(k)
        if chain >= LONG_CHAIN:
            width *= 2
        if chain >= VERY_LONG_CHAIN and self.vector_bits >= 512:
            width *= 2
        if "scatter_add" in k.attributes:  # one element at a time: equal indices add in turn
            width = 1
        P = A.ints(k.parallel)
        body = [o for o in k.body.block.ops if not isinstance(o, L.YieldOp)]
        reduces = [o for o in k.body.walk() if isinstance(o, L.ReduceOp)]
        # (speed, not results: a symbolic size decides by its hint, unguarded)
        unroll = 4 if any(A.ints(r.ranges) and _at_least(A.ints(r.ranges)[-1], 16 * width)
                          for r in reduces) else 1
        if P:
            split, work = "parallel", 1
            for n in P:
                work *= n
        elif len(body) == 1 and isinstance(body[0], L.MapOp) and A.ints(body[0].ranges):
            split, work = "map", A.ints(body[0].ranges)[0]
        else:
            split, work = "none", 1
        touched = _touched(k, P, bufs)
        chunks = k.attributes.get("ordered_chunks")
        if split == "none" or ("accumulate" in k.attributes and chunks is None):
            threads = 1
        else:
            threads = parallel_threads(touched, work, self.threads, self.parallel_threshold)
        if chunks is not None:  # whole chunks per thread: a divisor of their count
            threads = next(t for t in range(min(hint(threads), chunks.value.data), 0, -1)
                           if chunks.value.data % t == 0)
        reduction = "none"
        if reduces and "chunks" in k.attributes:  # (each chunk is read once: `split_reductions`)
            reduction = "streaming"
        elif reduces:
            row = 1
            for n in A.ints(reduces[0].ranges):
                row = None if row is None or n == A.DYN else row * hint(n)
            reduction = ("row-in-cache" if row is not None and row * bits // 8 * 2 <= L2_BYTES
                         else "streaming")
        streamed = self.streamed(k)
        region = Region()  # (the body moves: the loop-level kernel is replaced by this one)
        k.body.move_blocks(region)
        kop = K.KernelOp(k.sym_name.data, bufs, P, vector_width=width, unroll=unroll, split=split,
                         work=work, threads=threads, reduction=reduction, body=region)
        if width > base:
            kop.attributes["base_width"] = IntegerAttr(base, i64)
        if len(reduces) > 1 and self.vector_bits < 512:
            kop.attributes["accumulators"] = IntegerAttr(ACCUMULATORS_16_REGISTERS, i64)
        if streamed:
            kop.attributes["nontemporal"] = A.i64_array(streamed)
            if any(isinstance(_size(bufs[j].type), SymDim) for j in streamed):
                kop.attributes["stream_bytes"] = IntegerAttr(STREAM_BYTES, i64)
        for a in ("merged", "accumulate", "scatter_add", "ordered_chunks"):
            if a in k.attributes:
                kop.attributes[a] = k.attributes[a]
        return kop

    @staticmethod
    def streamed(k: L.KernelOp) -> list[int]:
        """Positions of the buffers whose stores go around the cache: the
        written-only ones of STREAM_BYTES or more, and those whose size is a
        size symbol's (whether a launch streams them is the emitter's check,
        as their size is known only then; the size when compiling says
        nothing about the next call's)."""
        loaded = {o.buffer for o in k.body.walk() if isinstance(o, L.LoadOp)}
        stored = {o.buffer for o in k.body.walk() if isinstance(o, L.StoreOp)}
        return [j for j, b in enumerate(k.buffers) if b in stored and b not in loaded
                and (isinstance(_size(b.type), SymDim)
                     or _size(b.type) * _bits(b.type.element_type) // 8 >= STREAM_BYTES)]


ACCUMULATORS_16_REGISTERS = 12


def _chain_ops(k: L.KernelOp) -> int:
    """Transcendental functions and divisions in the kernel's body: ops whose
    ufunc the table (dialects/ufuncs.py) calls expensive."""
    return sum(1 for o in k.body.walk() if U.expensive_op(o))


# ---- merging point-wise kernels ---------------------------------------------
def _single_map(k: Operation) -> L.MapOp | None:
    """The map of a kernel whose body is one map."""
    if not isinstance(k, L.KernelOp):
        return None
    ops = [o for o in k.body.block.ops if not isinstance(o, L.YieldOp)]
    return ops[0] if len(ops) == 1 and isinstance(ops[0], L.MapOp) else None


def _accesses(m: L.MapOp) -> list[L.LoadOp | L.StoreOp]:
    return [o for o in m.body.block.ops if isinstance(o, (L.LoadOp, L.StoreOp))]


def _mergeable(kernels: list[L.KernelOp], serial_limit: int = 0) -> bool:
    """Running the maps' bodies one after the other at each point is the same
    as running the kernels one after the other: the same parallel dims and
    map ranges, every buffer one of them writes a fresh allocation of that
    domain's shape, read and written only at the point itself (so no point
    sees another point's value), and no map's body holding a region.

    A column reduction (`accumulate`: its output gathers every row, in row
    order) may close the run when the merged kernel is small enough to run
    on one thread anyway (a domain under `serial_limit` points) and nothing
    else in the run touches its output: the bias gradient is then summed
    while its producer computes it, with no second pass."""
    maps = [_single_map(k) for k in kernels]
    par = list(A.ints(kernels[0].parallel))
    ranges = list(A.ints(maps[0].ranges))
    acc_out: set = set()
    if any("accumulate" in k.attributes for k in kernels):
        if any("accumulate" in k.attributes for k in kernels[:-1]):  # only last
            return False
        points = 1
        for n in par + ranges:
            points *= n
        if points >= serial_limit:
            return False
        acc_out = {o.buffer for o in _accesses(maps[-1]) if isinstance(o, L.StoreOp)}
        if any(o.buffer in acc_out for m in maps[:-1] for o in _accesses(m)):
            return False
    if any(list(A.ints(k.parallel)) != par for k in kernels):
        return False
    if any(list(A.ints(m.ranges)) != ranges for m in maps):
        return False
    if any(o.regions for m in maps for o in m.body.block.ops):
        return False
    written = {o.buffer for m in maps for o in _accesses(m)
               if isinstance(o, L.StoreOp)} - acc_out
    identity = AffineMap.identity(len(par) + len(ranges))
    for b in written:
        if not isinstance(b.owner, memref.AllocOp) or list(b.type.get_shape()) != par + ranges:
            return False
    for k, m in zip(kernels, maps):
        point = list(k.body.block.args) + list(m.body.block.args)
        for o in _accesses(m):
            if o.buffer in written and (o.map.data != identity or list(o.indices) != point):
                return False
    return True


def _kernel_buffers(k: L.KernelOp) -> tuple[set, set]:
    """(buffers it reads, buffers it writes)."""
    reads = {o.buffer for o in k.body.walk() if isinstance(o, L.LoadOp)}
    writes = {o.buffer for o in k.body.walk() if isinstance(o, L.StoreOp)}
    return reads, writes


def hoist_past_externs(f: func.FuncOp) -> None:
    """A kernel moves up past the externs (BLAS calls, numpy routines) just
    before it that neither write what it reads nor touch what it writes,
    taking its outputs' allocations along: it then runs while its inputs are
    still in cache, instead of after a matmul has streamed megabytes through
    (the MLP step's bias gradient, summed from the hidden gradient, ran in 53
    us after the weight gradient's sgemm and in ~20 us before it)."""
    block = f.body.block
    for k in [o for o in block.ops if isinstance(o, L.KernelOp)]:
        reads, writes = _kernel_buffers(k)
        own = []  # allocations of buffers only k writes, right before it
        at = k
        p = k.prev_op
        while p is not None:
            if isinstance(p, memref.AllocOp):
                if p.memref in writes:
                    own.append(p)
                elif p.memref in reads:
                    break
            elif isinstance(p, L.ExternOp):
                n = p.num_inputs.value.data
                ins, outs = set(p.buffers[:n]), set(p.buffers[n:])
                if outs & (reads | writes) or ins & writes:
                    break
                at = p
            else:
                break
            p = p.prev_op
        if at is k:
            continue
        for a in reversed(own):
            a.detach()
            block.insert_op_before(a, at)
        k.detach()
        block.insert_op_before(k, at)


def merge_pointwise(f: func.FuncOp, serial_limit: int = 0) -> None:
    """Runs of `loop.kernel`s (only allocations between them) that each are
    one map over the same ranges, with the same parallel dims, become one kernel
    with one map when `_mergeable`: the bodies in order, a load of a buffer
    an earlier body stored replaced by the stored value, and stores to a
    buffer that nothing outside the run uses dropped with its allocation.
    Black-Scholes' five kernels (each re-reading its inputs from memory)
    become one pass."""
    runs, run = [], []
    for op in list(f.body.block.ops):
        if isinstance(op, memref.AllocOp):
            continue
        m = _single_map(op)
        if m is not None and run and _mergeable(run + [op], serial_limit):
            run.append(op)
            if "accumulate" in op.attributes:  # it closes its run
                runs.append(run)
                run = []
            continue
        runs.append(run)
        run = [op] if m is not None and "accumulate" not in op.attributes else []
    runs.append(run)
    for run in runs:
        if len(run) > 1:
            _merge(run)


def _merge(run: list[L.KernelOp]) -> None:
    maps = [_single_map(k) for k in run]
    inside = set(run)

    def only_inside(v: SSAValue) -> bool:
        for use in v.uses:
            op = use.operation
            while op is not None and op not in inside:
                op = op.parent_op()
            if op is None:
                return False
        return True

    written = {o.buffer for m in maps for o in _accesses(m) if isinstance(o, L.StoreOp)}
    dead = {b for b in written if only_inside(b)}
    par = A.ints(run[0].parallel)
    merged = L.KernelOp(run[0].sym_name.data, [], par)
    new_map = L.MapOp(A.ints(maps[0].ranges))
    block = new_map.body.block
    mapper: dict[SSAValue, SSAValue] = {}
    stored: dict[SSAValue, SSAValue] = {}  # buffer -> the value last stored (identity point)
    loaded: dict[tuple, SSAValue] = {}  # (buffer, map, indices) -> value, read-only buffers
    for k, m in zip(run, maps):
        mapper.update(zip(k.body.block.args, merged.body.block.args))
        mapper.update(zip(m.body.block.args, block.args))
        for o in m.body.block.ops:
            if isinstance(o, L.YieldOp):
                continue
            if isinstance(o, L.LoadOp) and o.buffer in stored:
                mapper[o.result] = stored[o.buffer]
                continue
            if isinstance(o, L.LoadOp) and o.buffer not in written:
                key = (o.buffer, o.map, tuple(mapper.get(i, i) for i in o.indices))
                if key in loaded:
                    mapper[o.result] = loaded[key]
                    continue
            if isinstance(o, L.StoreOp) and o.buffer in written:
                stored[o.buffer] = mapper.get(o.value, o.value)
                if o.buffer in dead:
                    continue
            c = o.clone(value_mapper=mapper)
            block.add_op(c)
            mapper.update(zip(o.results, c.results))
            if isinstance(o, L.LoadOp) and o.buffer not in written:
                loaded[key] = c.result
    block.add_op(L.YieldOp())
    cse(block)  # the kernels' common arithmetic (Black-Scholes: sqrt(T), exp(-rT)) once
    buffers: list[SSAValue] = []
    for k in run:
        buffers += [b for b in k.buffers if b not in dead and b not in buffers]
    merged.body.block.add_ops([new_map, L.YieldOp()])
    merged = merged.with_buffers(buffers)
    merged.attributes["merged"] = ArrayAttr([StringAttr(k.sym_name.data) for k in run])
    for a in ("accumulate", "scatter_add"):  # (only the last may have them)
        if a in run[-1].attributes:
            merged.attributes[a] = run[-1].attributes[a]
    Rewriter.insert_op(merged, InsertPoint.before(run[-1]))
    for k in run:
        Rewriter.erase_op(k)
    for b in dead:
        Rewriter.erase_op(b.owner)


# ---- merging kernels over the same rows (horizontal fusion) ------------------
def _row_local(k: L.KernelOp, access: L.LoadOp | L.StoreOp) -> bool:
    """The access reads or writes only the kernel's own point: the buffer's
    leading dims are the parallel dims, indexed by the point itself."""
    point = list(k.body.block.args)
    shape = list(access.buffer.type.get_shape())
    if shape[: len(point)] != list(A.ints(k.parallel)):
        return False
    idx = list(access.indices)
    for d, e in enumerate(access.map.data.results[: len(point)]):
        s = str(e)
        if not (s.startswith("d") and s[1:].isdigit() and idx[int(s[1:])] is point[d]):
            return False
    return len(access.map.data.results) >= len(point)


def _accesses_of(k: L.KernelOp, buf: SSAValue) -> list:
    return [o for o in k.body.walk() if isinstance(o, (L.LoadOp, L.StoreOp)) and o.buffer is buf]


def _joins(run: list[L.KernelOp], k: L.KernelOp) -> bool:
    """k may run, point by point, right after the run's kernels at the same
    point: the same parallel dims, it writes nothing they touch nor touches
    what they write, except rows they wrote that both sides access only at
    the point itself. Worth it when it shares an input with the run or
    reads such a row."""
    par = list(A.ints(k.parallel))
    if not par or "accumulate" in k.attributes or any(
            list(A.ints(r.parallel)) != par for r in run):
        return False
    reads, writes = _kernel_buffers(k)
    shared = False
    for r in run:
        r_reads, r_writes = _kernel_buffers(r)
        if writes & (r_reads | r_writes):
            return False
        for b in reads & r_writes:
            if not all(_row_local(x, a) for x in (r, k) for a in _accesses_of(x, b)):
                return False
            shared = True
        shared = shared or bool(reads & r_reads)
    return shared


# a run of merged kernels closes before its body passes this many ops: past
# it, LLVM's optimizer and code generation grow faster than the kernel (a
# 100-step tanh/mean chain merged into one kernel: 8 s of LLVM), while the
# row a later kernel reads is still in cache; runs of equal kernels then
# share one compiled body (share-kernels)
MERGE_ROWS_MAX_OPS = 256
# ... and before it holds this many row passes (reductions and maps): each
# is a loop LLVM vectorizes and unrolls, the costliest part of its work (the
# 50-step tanh/mean chain on 256x256: 2 bodies of up to 42 passes took 0.9 s
# of LLVM; 16 passes a body, 1.1 s -> 0.3 s), while a matmul into a few
# columns and the kernel writing its rows (2-4 passes) stay one launch
MERGE_ROWS_MAX_PASSES = 16


def _ops(k: L.KernelOp) -> int:
    return sum(1 for _ in k.body.walk())


def _passes(k: L.KernelOp) -> int:
    return sum(1 for o in k.body.walk() if isinstance(o, (L.ReduceOp, L.MapOp)))


def merge_rows(f: func.FuncOp) -> None:
    """Runs of kernels (only allocations between them) that `_joins` accepts
    become one kernel whose body is theirs in order, at each point of the
    parallel dims: reductions of the same rows (`x.sum(-1)`, `x.max(-1)`)
    then read each row from memory once, the later passes from cache. A run
    stops short of MERGE_ROWS_MAX_OPS ops and MERGE_ROWS_MAX_PASSES passes."""
    runs, run = [], []
    size = passes = 0
    for op in list(f.body.block.ops):
        if isinstance(op, memref.AllocOp):
            continue
        if (isinstance(op, L.KernelOp) and run and size + _ops(op) <= MERGE_ROWS_MAX_OPS
                and passes + _passes(op) <= MERGE_ROWS_MAX_PASSES and _joins(run, op)):
            run.append(op)
            size += _ops(op)
            passes += _passes(op)
            continue
        runs.append(run)
        run = [op] if isinstance(op, L.KernelOp) and A.ints(op.parallel) and (
            "accumulate" not in op.attributes) else []
        size = _ops(op) if run else 0
        passes = _passes(op) if run else 0
    runs.append(run)
    for run in runs:
        if len(run) < 2:
            continue
        merged = L.KernelOp(run[0].sym_name.data, [], A.ints(run[0].parallel))
        block = merged.body.block
        buffers: list[SSAValue] = []
        names: list = []
        for k in run:
            mapper: dict[SSAValue, SSAValue] = dict(zip(k.body.block.args, block.args))
            for o in k.body.block.ops:
                if not isinstance(o, L.YieldOp):
                    block.add_op(o.clone(value_mapper=mapper))
            buffers += [b for b in k.buffers if b not in buffers]
            names += (k.attributes["merged"].data if "merged" in k.attributes
                      else [StringAttr(k.sym_name.data)])
        block.add_op(L.YieldOp())
        merged = merged.with_buffers(buffers)
        merged.attributes["merged"] = ArrayAttr(names)
        Rewriter.insert_op(merged, InsertPoint.before(run[-1]))
        for k in run:
            Rewriter.erase_op(k)


# ---- point-wise producers computed inside the reduction that reads them -------
def _lone_reduce(k: Operation) -> L.ReduceOp | None:
    """The reduction of a kernel whose body is one reduction (holding no
    loop of its own) and scalar ops around it."""
    if not isinstance(k, L.KernelOp):
        return None
    passes = [o for o in k.body.block.ops if isinstance(o, (L.MapOp, L.ReduceOp))]
    if len(passes) != 1 or not isinstance(passes[0], L.ReduceOp):
        return None
    r = passes[0]
    if any(o.regions for o in r.body.block.ops):
        return None
    return r


def _at_point(access: L.LoadOp | L.StoreOp, point: list[SSAValue]) -> bool:
    return (access.map.data == AffineMap.identity(len(point))
            and list(access.indices) == point)


def _feeds(p: L.KernelOp, q: L.KernelOp) -> L.ReduceOp | None:
    """q's reduction, where point-wise p may run inside it point by point:
    p is one map over the reduction's ranges with q's parallel dims, each
    buffer p writes a fresh allocation of that domain that both kernels
    touch only at the point itself (q only reading it), and q writes
    nothing p touches. None where it may not, or where q reads nothing p
    writes (nothing to forward)."""
    m, r = _single_map(p), _lone_reduce(q)
    if m is None or r is None or m.sizes or r.sizes:
        return None
    if any(a in k.attributes for k in (p, q) for a in ("accumulate", "scatter_add")):
        return None
    par = list(A.ints(p.parallel))
    ranges = list(A.ints(m.ranges))
    if list(A.ints(q.parallel)) != par or list(A.ints(r.ranges)) != ranges:
        return None
    if any(o.regions for o in m.body.block.ops):
        return None
    p_reads, p_writes = _kernel_buffers(p)
    q_reads, q_writes = _kernel_buffers(q)
    if q_writes & (p_reads | p_writes) or not p_writes & q_reads:
        return None
    p_point = list(p.body.block.args) + list(m.body.block.args)
    q_point = list(q.body.block.args) + list(r.body.block.args)
    for b in p_writes:
        if not isinstance(b.owner, memref.AllocOp) or list(b.type.get_shape()) != par + ranges:
            return None
        if not all(_at_point(a, p_point) for a in _accesses_of(p, b)):
            return None
        if not all(a.parent_op() is r and _at_point(a, q_point) for a in _accesses_of(q, b)):
            return None
    return r


def fuse_into_reductions(f: func.FuncOp, split_threads: int = 1,
                         threshold: int = 1 << 20) -> None:
    """A point-wise kernel followed (only allocations between) by a
    reduction over the same domain that reads what it writes (`_feeds`)
    runs inside that reduction: its body first at each point, the
    reduction's loads of its outputs replaced by the stored values. Its
    stores stay for other readers; those nobody else reads go with
    `drop_dead_stores`. A time loop's states, each read by the next step
    and by the running total a mean then reduces (Monte Carlo paths), were
    written as one buffer per step by the loop's kernel and read back by
    the reduction's.

    Not where the producer would run on several threads and the reduction
    on one: a reduction to a scalar runs on one thread unless
    `split_reductions` splits it (`split_threads` > 1 and `_split_parts`),
    and a producer touching `threshold` elements or more is split across
    threads; fused, its work would run on one."""
    prev: L.KernelOp | None = None
    for op in list(f.body.block.ops):
        if isinstance(op, memref.AllocOp):
            continue
        r = _feeds(prev, op) if prev is not None and isinstance(op, L.KernelOp) else None
        if r is not None and not A.ints(op.parallel) and not _split_parts(op, split_threads) \
                and hint(_touched(prev, [], list(prev.buffers))) >= threshold:
            r = None
        if r is not None:
            op = _fuse_into(prev, op, r)
        prev = op if isinstance(op, L.KernelOp) else None


def _fuse_into(p: L.KernelOp, q: L.KernelOp, r: L.ReduceOp) -> L.KernelOp:
    m = _single_map(p)
    mapper: dict[SSAValue, SSAValue] = dict(zip(p.body.block.args, q.body.block.args))
    mapper.update(zip(m.body.block.args, r.body.block.args))
    stored: dict[SSAValue, SSAValue] = {}
    first = r.body.block.first_op
    for o in m.body.block.ops:
        if isinstance(o, L.YieldOp):
            continue
        c = o.clone(value_mapper=mapper)
        r.body.block.insert_op_before(c, first)
        mapper.update(zip(o.results, c.results))
        if isinstance(o, L.StoreOp):
            stored[o.buffer] = c.value
    for o in list(r.body.block.ops):
        if isinstance(o, L.LoadOp) and o.buffer in stored:
            o.result.replace_all_uses_with(stored[o.buffer])
            Rewriter.erase_op(o)
    cse(r.body.block)
    names = [n for k in (p, q) for n in (k.attributes["merged"].data if "merged" in k.attributes
                                         else [StringAttr(k.sym_name.data)])]
    buffers = list(p.buffers) + [b for b in q.buffers if b not in p.buffers]
    fused = q.with_buffers(buffers)
    fused.attributes["merged"] = ArrayAttr(names)
    Rewriter.insert_op(fused, InsertPoint.before(q))
    Rewriter.erase_op(q)
    Rewriter.erase_op(p)
    return fused


def drop_dead_stores(f: func.FuncOp) -> None:
    """A buffer the function allocates that nothing loads, returns or hands
    to another op (only kernels store into it) is dropped with its stores:
    a value realized for two readers that fusion then put in one kernel
    is forwarded there and never needs memory."""
    for a in [o for o in f.body.block.ops if isinstance(o, memref.AllocOp)
              and L.UNDO_ATTR not in o.attributes]:  # (read by the runtime on a re-run)
        b = a.memref
        users = [u.operation for u in b.uses]
        stores = [u for u in users if isinstance(u, L.StoreOp) and u.buffer is b]
        kernels = [u for u in users if isinstance(u, L.KernelOp)]
        if not stores or len(stores) + len(kernels) != len(users):
            continue
        for s in stores:
            Rewriter.erase_op(s)
        for k in kernels:
            attrs = dict(k.attributes)
            nk = k.with_buffers([x for x in k.buffers if x is not b])
            nk.attributes.update(attrs)
            Rewriter.replace_op(k, nk)
        Rewriter.erase_op(a)


# ---- full reductions split across threads ------------------------------------
# reductions whose partial results combine by the same reduction
SPLIT_KINDS = ("sum", "prod", "max", "min")


def _split_parts(k: L.KernelOp, threads: int) -> int:
    """How many equal chunks k's reduction splits into (0: it does not): k
    has no parallel dims and one reduction of a combinable kind over
    static ranges whose first extent some chunk count from `threads` down
    to 2 divides; the ops before it store nothing, and its first index is
    used only to address loads and stores."""
    r = _lone_reduce(k)
    if r is None or A.ints(k.parallel) or r.sizes or r.kind.data not in SPLIT_KINDS:
        return 0
    if any(a in k.attributes for a in ("accumulate", "scatter_add")):
        return 0
    ranges = A.ints(r.ranges)
    if not ranges or any(type(n) is not int or n <= 0 for n in ranges):
        return 0
    before = []
    for o in k.body.block.ops:
        if o is r:
            break
        before.append(o)
    if any(isinstance(o, L.StoreOp) or o.regions for o in before):
        return 0
    i0 = r.body.block.args[0]
    for use in i0.uses:
        o = use.operation
        if not isinstance(o, (L.LoadOp, L.StoreOp)):
            return 0
        at = use.index - (len(o.operands) - len(o.indices))  # its place among the indices
        if not 0 <= at < o.map.data.num_dims:  # (a symbol operand is not shifted)
            return 0
    for n in range(min(threads, ranges[0] // 2), 1, -1):
        if ranges[0] % n == 0:
            return n
    return 0


def _shift(o: L.LoadOp | L.StoreOp, inner: SSAValue, chunk_index: SSAValue,
           chunk: int) -> Operation:
    """The access o makes at `inner`, made at `chunk_index * chunk + inner`
    instead: the chunk index becomes a new last dim of o's map."""
    mp = o.map.data
    nd = mp.num_dims
    idx = list(o.indices)
    new_dim = AffineExpr.dimension(nd)
    dims = [AffineExpr.dimension(d) + new_dim * chunk if idx[d] is inner
            else AffineExpr.dimension(d) for d in range(nd)]
    syms = [AffineExpr.symbol(s) for s in range(mp.num_symbols)]
    new_map = mp.replace_dims_and_symbols(dims, syms, nd + 1, mp.num_symbols)
    new_idx = idx[:nd] + [chunk_index] + idx[nd:]
    if isinstance(o, L.LoadOp):
        return L.LoadOp(o.buffer, new_idx, new_map)
    return L.StoreOp(o.value, o.buffer, new_idx, new_map)


def _with_used(k: L.KernelOp, candidates: list[SSAValue]) -> L.KernelOp:
    """k over those of `candidates` its body loads or stores."""
    reads, writes = _kernel_buffers(k)
    return k.with_buffers([b for b in candidates if b in reads or b in writes])


def split_reductions(f: func.FuncOp, threads: int, threshold: int) -> None:
    """A kernel reducing a big domain to a scalar (no parallel dims) ran on
    one thread. Where `_split_parts` allows and it touches `threshold`
    elements or more, it becomes two: one reducing each of n equal chunks
    of the first dim into a buffer of n partial results, the chunks its
    parallel dim (split across threads), then one reducing the partials
    and running the ops after the reduction. The sum's order changes
    (chunk by chunk, then the chunks' totals): as any blocked summation,
    within the reduction tolerances; max and min are exact."""
    for k in [o for o in f.body.block.ops if isinstance(o, L.KernelOp)]:
        n = _split_parts(k, threads)
        if not n or hint(_touched(k, [], list(k.buffers))) < threshold:
            continue
        r = _lone_reduce(k)
        ranges = list(A.ints(r.ranges))
        chunk = ranges[0] // n
        partial = memref.AllocOp([], [], MemRefType(r.result.type, [n]))
        part = L.KernelOp(k.sym_name.data + "_part", [], [n])
        join = L.KernelOp(k.sym_name.data + "_join", [], [])
        (c,) = part.body.block.args
        pm: dict[SSAValue, SSAValue] = {}
        jm: dict[SSAValue, SSAValue] = {}
        ops = [o for o in k.body.block.ops if not isinstance(o, L.YieldOp)]
        at = ops.index(r)
        for o in ops[:at]:
            x = o.clone(value_mapper=pm)
            part.body.block.add_op(x)
            pm.update(zip(o.results, x.results))
            y = o.clone(value_mapper=jm)
            join.body.block.add_op(y)
            jm.update(zip(o.results, y.results))
        red = L.ReduceOp(r.kind.data, [chunk] + ranges[1:], r.result.type)
        bm = dict(pm)
        bm.update(zip(r.body.block.args, red.body.block.args))
        old, inner = r.body.block.args[0], red.body.block.args[0]
        for o in r.body.block.ops:
            x = o.clone(value_mapper=bm)
            if isinstance(o, (L.LoadOp, L.StoreOp)) and old in list(o.indices):
                y = _shift(x, inner, c, chunk)
                x.erase()
                x = y
            red.body.block.add_op(x)
            bm.update(zip(o.results, x.results))
        part.body.block.add_ops([red, L.StoreOp(red.result, partial.memref, [c],
                                                AffineMap.identity(1)), L.YieldOp()])
        total = L.ReduceOp(r.kind.data, [n], r.result.type)
        (i,) = total.body.block.args
        ld = L.LoadOp(partial.memref, [i], AffineMap.identity(1))
        total.body.block.add_ops([ld, L.YieldOp(ld.result)])
        join.body.block.add_op(total)
        jm[r.result] = total.result
        for o in ops[at + 1:]:
            y = o.clone(value_mapper=jm)
            join.body.block.add_op(y)
            jm.update(zip(o.results, y.results))
        join.body.block.add_op(L.YieldOp())
        part = _with_used(part, list(k.buffers) + [partial.memref])
        join = _with_used(join, list(k.buffers) + [partial.memref])
        part.attributes["chunks"] = IntegerAttr(n, i64)
        # (explain lists the part under the kernels it computes)
        part.attributes["merged"] = k.attributes.get("merged", ArrayAttr([k.sym_name]))
        for x in (partial, part, join):
            Rewriter.insert_op(x, InsertPoint.before(k))
        Rewriter.erase_op(k)
