"""`schedule`: every `loop.kernel` becomes a `kernel.kernel` with its schedule.

The cost model, all of it:
* vector width = the target's vector bits / the widest element type the
  kernel touches (32 bits at least): 16 f32 lanes on AVX-512, 8 on AVX2;
* reductions whose innermost extent holds 16 vectors or more get 4
  independent accumulators (hides the add latency, shortens rounding chains);
* the launch splits the flattened parallel dims across threads; a kernel with
  no parallel dims and a single map splits that map's outermost dim; anything
  else runs whole;
* a kernel touching fewer than `parallel_threshold` elements runs on one
  thread (waking a thread costs more than that much work);
* a reduction row that fits in half the L2 cache is re-read from cache by
  each stage ("row-in-cache"), else it streams from memory ("streaming");
* an output of STREAM_BYTES or more that the kernel only writes is stored
  around the cache (discardable attribute `nontemporal`, buffer positions):
  it would not stay in the last-level cache anyway, and a normal store first
  reads each line it writes (1.5x the memory traffic of a copy)."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import IntegerType, MemRefType, ModuleOp
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter

from dialects import array as A
from dialects import kernel as K
from dialects import loop as L

L2_BYTES = 512 * 1024
STREAM_BYTES = 32 << 20  # about a server L3: outputs this big evict it anyway


def _bits(t) -> int:
    if isinstance(t, IntegerType):
        return max(t.width.data, 8)
    return {"f16": 16, "bf16": 16, "f32": 32, "f64": 64}.get(str(t), 64)


def _size(t: MemRefType) -> int:
    n = 1
    for d in t.get_shape():
        n *= d
    return n


@dataclass(frozen=True)
class Schedule(ModulePass):
    name = "schedule"

    vector_bits: int = 256
    threads: int = 1
    parallel_threshold: int = 1 << 15

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for k in [o for o in op.walk() if isinstance(o, L.KernelOp)]:
            Rewriter.replace_op(k, self.schedule(k))

    def schedule(self, k: L.KernelOp) -> K.KernelOp:
        bufs = list(k.buffers)
        bits = max([32] + [_bits(b.type.element_type) for b in bufs])
        width = max(self.vector_bits // bits, 1)
        P = A.ints(k.parallel)
        body = [o for o in k.body.block.ops if not isinstance(o, L.YieldOp)]
        reduces = [o for o in k.body.walk() if isinstance(o, L.ReduceOp)]
        unroll = 4 if any(A.ints(r.ranges) and A.ints(r.ranges)[-1] >= 16 * width for r in reduces) else 1
        if P:
            split, work = "parallel", 1
            for n in P:
                work *= n
        elif len(body) == 1 and isinstance(body[0], L.MapOp) and A.ints(body[0].ranges):
            split, work = "map", A.ints(body[0].ranges)[0]
        else:
            split, work = "none", 1
        touched = max([_size(b.type) for b in bufs] or [0])
        threads = 1 if (split == "none" or touched < self.parallel_threshold) else max(min(self.threads, work), 1)
        reduction = "none"
        if reduces:
            row = 1
            for n in A.ints(reduces[0].ranges):
                row *= n
            reduction = "row-in-cache" if row * bits // 8 * 2 <= L2_BYTES else "streaming"
        region = k.body.clone()
        kop = K.KernelOp(k.sym_name.data, bufs, P, vector_width=width, unroll=unroll, split=split,
                         work=work, threads=threads, reduction=reduction, body=region)
        streamed = self.streamed(k)
        if streamed:
            kop.attributes["nontemporal"] = A.i64_array(streamed)
        return kop

    @staticmethod
    def streamed(k: L.KernelOp) -> list[int]:
        """Positions of the buffers whose stores go around the cache."""
        loaded = {o.buffer for o in k.body.walk() if isinstance(o, L.LoadOp)}
        stored = {o.buffer for o in k.body.walk() if isinstance(o, L.StoreOp)}
        return [j for j, b in enumerate(k.buffers) if b in stored and b not in loaded
                and _size(b.type) * _bits(b.type.element_type) // 8 >= STREAM_BYTES]
