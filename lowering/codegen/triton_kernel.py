"""The Triton emitter: each `kernel.kernel` op becomes the source of one
`@triton.jit` function, plus the launch plan that runs it (`TritonKernel`:
its arguments in order, block sizes, grid, warps). The scalar ops of the body
go through the ops-handler protocol to `triton_ops.TritonOps`, as the LLVM
emitter's go to `LLVMOps`; this module maps the body's structure (parallel
dims, `loop.map`, `loop.reduce`, loads, stores) onto Triton programs.

Two shapes of kernel, chosen per kernel:

- pointwise (no `loop.reduce`; every `loop.map` of the same extents): the
  parallel dims and the map's dims are one flattened domain, `XBLOCK`
  points per program under a mask; each index is the flattened offset's
  div/mod by the extents, and a load or store of a row-major buffer of the
  domain's shape uses the offset itself.
- rows (a kernel with reductions, or maps of different extents): one
  program per point of the parallel domain (a row); each `loop.map` and
  `loop.reduce` runs over its own flattened extents. A row of a static
  length up to `ROW_MAX` stays in registers: one block of `R_BLOCK` = the
  next power of two, no loop, so the loads and values a reduction and a
  later map of the same row share are loaded and computed once (the source
  is CSE'd by text). A longer row, or one of a length known only at the
  launch, loops over blocks of `LOOP_BLOCK` with a per-lane accumulator,
  reduced across lanes after the loop.

Reductions (sum, prod, max, min, any, all, argmax, argmin) combine with
masked lanes set to the kind's neutral value; float16 sums accumulate in
float32; max/min propagate NaN (`_np_max`), argmax/argmin give the first
position of the extreme, NaN winning (`_combine_argmax`).

Sizes: what the kernel level leaves dynamic is a run-time argument of the
function — a DYN extent (the first parallel dim's: `n_p0`; a map's or a
reduce's: its kernel parameter), the strides of a memref with a `?` dim or a
strided layout (`b{j}_s{d}`, in elements), every kernel parameter (`p{k}`)
— so kernels that share a body share one compiled function; what it makes
static is a literal, so that index division is by constants. Index math is
int32 when every buffer and the domain have fewer than 2**31 elements and
nothing is dynamic, else int64.

An ordered kernel (`accumulate`: a column reduction, a scan down the rows)
whose map's points never share an address of a buffer it writes runs as
XBLOCK points of the map per program with the parallel dims a loop nest in
order around the map's body (`emit_ordered`): numpy's order, bit for bit. An
accumulator no row moves (a column sum's output) stays in registers across
the rows (`promote`), so the rows' loads issue ORDERED_UNROLL at a time.

A gather (`loop.index`) checks its index on the device: a value out of
range stores its check's number to the kernel's `status` argument (an int32
the runtime allocates zeroed and reads after the program) and reads element
0 instead (`emit_index`).

Not covered yet, each a NotImplementedError "triton: no rule for ...":
stores at data-dependent indices (scatters), other ordered kernels
(a scan along the last axis: no map), a reduce or map nested in a map
(inlined dot products: matmul), `loop.extern` (BLAS and numpy routines),
and a store that a map or a flattened domain repeats at one address. (A
store inside a reduction's body — a value realized for a later kernel and
reduced here too, a training step's residual and its loss — is one masked
store per block, in the reduction's loop where it loops.) The CPU schedule's vector width, unroll and thread
split are not read: the block sizes are this module's.

`lowering/backends/triton_launch.py` loads the source (through `linecache`),
compiles it for a CUDA target (no GPU needed) and runs it, in Triton's
interpreter on numpy arrays or on a CUDA device."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from xdsl.dialects import func, memref
from xdsl.dialects.builtin import IndexType, MemRefType, ModuleOp, NoneAttr
from xdsl.ir import Attribute, Block, BlockArgument, Operation, SSAValue
from xdsl.ir.affine import AffineDimExpr

from dialects import array as A
from dialects import kernel as K
from dialects import loop as L

from .ops import emit
from .triton_ops import (
    PRELUDE,
    TritonOps,
    affine_text,
    helper_source,
    helpers_called,
    is_bool,
    is_float,
    is_half,
    reduce_neutral,
    tl_dtype,
    type_code,
)
from .triton_ops import OPTIONS as OPTIONS

# elements of a row one program keeps in registers (BENCH.md: hand-written kernels
# keeping 4096-wide rows so reach 94.5% of the copy roofline)
ROW_MAX = 8192
LOOP_BLOCK = 1024  # elements per step of a looped map or reduction
# points per program of a pointwise kernel (4 warps: 4 points per thread). Measured
# on an H200 with max-autotune's candidates: 512 is as fast as 1024 on bias+GELU at
# 16384x4096 (memory-bound, 97% of copy bandwidth either way) and 18% faster on
# Black-Scholes at 64M (compute-bound: IEEE divisions and libdevice functions)
POINTWISE_BLOCK = 512
ORDERED_BLOCK = 128  # map points per program of an ordered kernel
# rows an ordered kernel with its accumulator in registers loads at once
# (H200, a column sum of 4096x4096 float32: 1.54 ms one row at a time, 0.27
# ms 8 at once, 0.16 ms 32 at once; the block of columns per program made no
# difference), fewer for a body of more than ORDERED_UNROLL_OPS ops (each
# unrolled copy is compiled)
ORDERED_UNROLL = 32
ORDERED_UNROLL_OPS = 24
INT32_LIMIT = 2 ** 31


def no_rule(what: str) -> NotImplementedError:
    return NotImplementedError(f"triton: no rule for {what}")


def next_pow2(n: int) -> int:
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


@dataclass(frozen=True)
class KernelArg:
    """One run-time argument of the generated function: a buffer's data
    pointer (`buffer`, index = its operand number), a buffer's stride in
    elements (`stride`, dim), kernel parameter `index` (`param`), or the
    extent of the first parallel dim (`extent`: the kernel's work over the
    other dims' extents)."""

    name: str
    kind: str
    sig: str  # Triton's signature type: *fp32, i64, fp64, ...
    index: int = 0
    dim: int = 0


@dataclass
class TritonKernel:
    """The generated function of one `kernel.kernel` and how to launch it."""

    name: str  # the kernel's sym_name
    fn_name: str  # the @triton.jit function's name in `source`
    source: str  # a whole module: imports, helpers, the function
    args: tuple[KernelArg, ...]
    constexprs: dict[str, int]  # block sizes
    points: tuple[int | str, ...]  # extents whose product is the domain the grid covers
    block: int  # points of that domain per program (the grid: ceil(product / block))
    num_warps: int
    strategy: str  # "pointwise" or "rows"
    index_bits: int
    param_values: tuple[str, ...] = ()  # this launch's kernel parameters (`kernel.param`)
    first_extent: int = 0  # this launch's first parallel extent, where it is dynamic
    options: dict = field(default_factory=lambda: dict(OPTIONS))

    def signature(self) -> dict[str, str]:
        """`triton.compiler.ASTSource`'s signature: every argument's type,
        "constexpr" for the block sizes."""
        sig = {a.name: a.sig for a in self.args}
        sig.update({c: "constexpr" for c in self.constexprs})
        return sig

    def block_points(self, values: dict[str, int]) -> int:
        """The size of the domain the grid covers, for the run-time argument
        values `values` (by name)."""
        n = 1
        for p in self.points:
            n *= p if isinstance(p, int) else int(values[p])
        return n

    def programs(self, values: dict[str, int]) -> int:
        """The grid for the run-time argument values `values` (by name)."""
        return -(-self.block_points(values) // self.block)


# ---- the emitter --------------------------------------------------------------------

_IDENT = re.compile(r"[A-Za-z_]\w*")


class KernelEmitter:
    """Builds one kernel's function text. Values are variable names; `blocky`
    holds the ones that are tensors (vary along a block), `types` the IR type
    of each op result."""

    def __init__(self, k: K.KernelOp):
        self.k = k
        self.bufs = list(k.buffers)
        self.lines: list[str] = []
        self.depth = 1
        self.n = 0
        self.types: dict[str, Attribute] = {}
        self.vals: dict[SSAValue, str] = {}
        self.args: list[KernelArg] = [
            KernelArg(f"b{j}", "buffer", "*" + type_code(b.type.element_type), j)  # type: ignore
            for j, b in enumerate(self.bufs)]
        self.constexprs: dict[str, int] = {}
        self.scopes: list[dict[str, str]] = [{}]
        self.blocky: set[str] = set()
        self.mask: str | None = None  # the mask of the block being emitted
        self.stores: dict[SSAValue, int] = {}  # stores so far, per buffer root (`root`)
        self.block_vars: dict[tuple, tuple[str, str, str]] = {}
        self.index_checks: dict[L.IndexOp, int] = {}  # a gather's check -> its number
        self.promoted: dict = {}  # an ordered kernel's accumulators in registers (`promote`)
        self.check()
        self.index_bits = self.choose_index_bits()
        self.h = TritonOps(self)

    # ---- what the handler asks ----
    def let(self, expr: str, t: Attribute | None = None, key: str | None = None,
            scalar: bool = False) -> str:
        """A variable holding expr (the one that already does, in this scope
        or an enclosing one)."""
        if t is None and key is None and _IDENT.fullmatch(expr):
            return expr
        key = key if key is not None else expr
        for scope in reversed(self.scopes):
            if key in scope:
                return scope[key]
        self.n += 1
        v = f"v{self.n}"
        self.line(f"{v} = {expr}")
        self.scopes[-1][key] = v
        if t is not None:
            self.types[v] = t
        if not scalar and any(w in self.blocky for w in _IDENT.findall(expr)):
            self.blocky.add(v)
        return v

    def type_of(self, v: str) -> Attribute | None:
        return self.types.get(v)

    def line(self, text: str) -> None:
        self.lines.append("    " * self.depth + text)

    def arg(self, a: KernelArg) -> str:
        if all(x.name != a.name for x in self.args):
            self.args.append(a)
        return a.name

    # ---- what the kernel holds ----
    def check(self) -> None:
        """Refuse what this emitter cannot express, naming it."""
        if "accumulate" in self.k.attributes:
            why = self.ordered_refusal()
            if why:
                raise no_rule(f"kernel {self.k.sym_name.data!r}: an ordered kernel (accumulate: "
                              f"a scan, a scatter or a column reduction) {why}")
        indexed = {op.result for op in self.k.body.walk() if isinstance(op, L.IndexOp)}
        for op in self.k.body.walk():
            if isinstance(op, L.StoreOp) and indexed & _addressing(op):
                # (points storing to one address race; numpy's last one wins)
                raise no_rule(f"a store at data-dependent indices in kernel "
                              f"{self.k.sym_name.data!r} (a scatter)")
            if isinstance(op, (L.MapOp, L.ReduceOp)):
                outer = op.parent_op()
                if isinstance(outer, (L.MapOp, L.ReduceOp)):
                    raise no_rule(f"a {op.name} inside a {outer.name} in kernel "
                                  f"{self.k.sym_name.data!r} (an inlined dot product)")
        par = A.ints(self.k.parallel)
        if any(n == A.DYN for n in par[1:]):
            raise no_rule("a dynamic parallel extent other than the first")

    def choose_index_bits(self) -> int:
        """32 where every buffer and the domain are static and below 2**31
        elements, else 64."""
        sizes = []
        for b in self.bufs:
            t = b.type
            assert isinstance(t, MemRefType)
            shape = t.get_shape()
            if A.DYN in shape or not isinstance(t.layout, NoneAttr):
                return 64
            sizes.append(math.prod(shape))
        if any(isinstance(op, K.ParamOp) for op in self.k.body.walk()):
            return 64
        total = 1
        for n in A.ints(self.k.parallel):
            if n == A.DYN:
                return 64
            total *= n
        chunks = self.k.attributes.get("ordered_chunks")
        if chunks is not None:  # (a chunk's bounds m c // n and a row's n i + n - 1)
            sizes.append(total * (chunks.value.data + 1))
        for op in self.k.body.walk():
            if isinstance(op, (L.MapOp, L.ReduceOp)):
                ext = op.extents()
                if not all(isinstance(e, int) for e in ext):
                    return 64
                sizes.append(total * math.prod(ext))  # type: ignore[arg-type]
        return 32 if max(sizes + [total]) < INT32_LIMIT else 64

    # ---- the function ----
    def emit(self) -> TritonKernel:
        ops = [o for o in self.k.body.block.ops if not isinstance(o, L.YieldOp)]
        for op in self.k.body.walk():
            if isinstance(op, K.ParamOp):
                k = op.index.value.data
                self.vals[op.result] = f"p{k}"
                self.types[f"p{k}"] = op.result.type
        maps = [o for o in ops if isinstance(o, L.MapOp)]
        reduces = [o for o in self.k.body.walk() if isinstance(o, L.ReduceOp)]
        stores = [o for o in ops if isinstance(o, L.StoreOp)]
        extents = {tuple(self.extent_key(e) for e in m.extents()) for m in maps}
        pointwise = not reduces and len(extents) <= 1 and not (maps and stores)
        par = A.ints(self.k.parallel)
        self.par_extents: list[str] = []
        points: list[int | str] = []
        for d, n in enumerate(par):
            if n == A.DYN:
                name = self.arg(KernelArg("n_p0", "extent", f"i{self.index_bits}"))
                self.par_extents.append(name)
                points.append(name)
            else:
                self.par_extents.append(str(n))
                points.append(n)
        for op in self.k.body.walk():
            if isinstance(op, K.ParamOp):
                k = op.index.value.data
                self.arg(KernelArg(f"p{k}", "param", type_code(op.result.type, self.index_bits), k))
        if "accumulate" in self.k.attributes:
            points = []
            block, warps = self.emit_ordered(ops, maps, points)
            strategy = "ordered"
        elif pointwise:
            block, warps = self.emit_pointwise(ops, maps, points)
            strategy = "pointwise"
        else:
            self.emit_rows(ops, par)
            block, strategy = 1, "rows"
            widest = max(self.constexprs.values(), default=1)
            # 256 elements of the widest block per warp, up to 16 warps (max-autotune on
            # an H200: 4096-wide rows ran fastest with 16 warps at 16384 rows, within
            # 1% of 8 at 4096 rows; 32 warps were 20-40% slower)
            warps = min(16, max(1, widest // 256))
        name = self.k.sym_name.data
        fn = re.sub(r"\W", "_", name)
        fn = fn if fn[:1].isalpha() else f"k_{fn}"
        first = 0
        if par and par[0] == A.DYN:
            first = self.k.work.value.data // max(math.prod(par[1:]), 1)
        return TritonKernel(name, fn, self.source(fn, strategy), tuple(self.args),
                            dict(self.constexprs), tuple(points), block, warps, strategy,
                            self.index_bits, tuple(self.k.param_values()), first)

    def source(self, fn: str, strategy: str) -> str:
        what = {"pointwise": "pointwise: the flattened domain, XBLOCK points per program",
                "rows": "rows: one program per point of the parallel domain",
                "ordered": "ordered: XBLOCK points of the map per program, the parallel "
                           "domain looped over in order"}[strategy]
        head = [f'# kernel.kernel "{self.k.sym_name.data}" ({what}), '
                f"int{self.index_bits} indices",
                "# " + ", ".join(f"b{j}: {b.type}" for j, b in enumerate(self.bufs)),
                PRELUDE]
        params = [a.name for a in self.args] + [f"{c}: tl.constexpr" for c in self.constexprs]
        body = "\n".join(self.lines)
        helpers = [helper_source(h).strip("\n") for h in helpers_called(body)]
        return ("\n".join(head) + "\n" + "".join(f"\n{h}\n" for h in helpers) +
                f"\n@triton.jit\ndef {fn}({', '.join(params)}):\n{body}\n")

    # ---- extents and blocks ----
    def extent_key(self, e: int | SSAValue) -> int | str:
        if isinstance(e, int):
            return e
        if e not in self.vals:
            raise no_rule("an extent computed inside the kernel")
        return self.vals[e]

    def extent_points(self, extents: Sequence[int | SSAValue]) -> list[int | str]:
        """Extents as the launch reads them: ints, or kernel parameter names."""
        out: list[int | str] = []
        for e in extents:
            key = self.extent_key(e)
            if isinstance(key, str) and not re.fullmatch(r"p\d+", key):
                raise no_rule("an extent computed inside the kernel")
            out.append(key)
        return out

    def pid(self) -> str:
        pid = "tl.program_id(0)"
        return self.let(pid if self.index_bits == 32 else f"{pid}.to(tl.int64)")

    def decompose(self, flat: str, extents: Sequence[str]) -> list[str]:
        """Row-major indices of the flattened `flat` over `extents`."""
        out: list[str] = []
        rem = flat
        for i, n in enumerate(reversed(extents)):
            if i == len(extents) - 1:
                out.append(rem)
            else:
                out.append(self.let(f"{rem} % {n}"))
                rem = self.let(f"{rem} // {n}")
        return out[::-1]

    # ---- pointwise ----
    def emit_pointwise(self, ops: list[Operation], maps: list[L.MapOp],
                       points: list[int | str]) -> tuple[int, int]:
        inner = list(maps[0].extents()) if maps else []
        ext_text = self.par_extents + [str(self.extent_key(e)) for e in inner]
        points += self.extent_points(inner)
        block, idx = self.flat_domain(points, ext_text, POINTWISE_BLOCK)
        for a, v in zip(self.k.body.block.args, idx[:len(self.par_extents)]):
            self.bind(a, v)
        self.domain_vars = idx
        for m in maps:
            for a, v in zip(m.body.block.args, idx[len(self.par_extents):]):
                self.bind(a, v)
        for op in ops:
            if isinstance(op, L.MapOp):
                self.emit_ops(op.body.block)
            else:
                self.emit_op(op)
        return block, 4

    # ---- ordered (accumulate) ----
    def ordered_refusal(self) -> str:
        """Why an accumulate kernel cannot run as `emit_ordered` ("" where
        it can): its points must run in order, so each program takes a block
        of the map's points and loops over the parallel domain itself; that
        is numpy's order only where different map points never touch one
        address of a buffer the kernel writes: one map (no reduce), and every
        access to a written buffer holding each map index as a coordinate of
        its own (`out[j] += x[i, j]`, `c[i, j] = c[i - 1, j] + x[i, j]`)."""
        top = [o for o in self.k.body.block.ops if not isinstance(o, L.YieldOp)]
        maps = [o for o in top if isinstance(o, L.MapOp)]
        if len(maps) != 1 or any(isinstance(o, L.ReduceOp) for o in self.k.body.walk()):
            return "(not one map over independent points)"
        if any(isinstance(o, (L.LoadOp, L.StoreOp)) for o in top):
            return "(an access outside its map)"
        margs = set(maps[0].body.block.args)
        written = {root(o.buffer) for o in self.k.body.walk() if isinstance(o, L.StoreOp)}
        for o in self.k.body.walk():
            if not isinstance(o, (L.LoadOp, L.StoreOp)) or root(o.buffer) not in written:
                continue
            pos = {i for i, v in enumerate(o.indices) if v in margs}
            own = set()
            for e in o.map.data.results:
                if isinstance(e, AffineDimExpr) and e.position in pos:
                    own.add(e.position)
                elif e.used_dims() & pos:
                    return "(a written buffer indexed by an expression of the map's points)"
            if own != pos or len({o.indices[i] for i in pos}) != len(margs):
                return "(a written buffer not indexed by every point of the map)"
        return ""

    def emit_ordered(self, ops: list[Operation], maps: list[L.MapOp],
                     points: list[int | str]) -> tuple[int, int]:
        """An accumulate kernel: XBLOCK points of its map per program, the
        parallel dims a loop nest in order around the map's body (each
        program's points read what the same points stored at the previous
        parallel point: the same lane, in program order)."""
        inner = list(maps[0].extents())
        ext_text = [str(self.extent_key(e)) for e in inner]
        inner_points = self.extent_points(inner)
        points += inner_points
        # few points per program: each program walks every row (or every row
        # of its chunk), so the map's points are what spreads the work over
        # the multiprocessors
        chunks = self.chunks(inner_points)
        pid = None
        if chunks:  # program = chunk * (the map's blocks) + block
            n, blocks, block = chunks
            pid = self.let(f"{self.pid()} % {blocks}")
            c = self.let(f"{self.pid()} // {blocks}")
            m = self.par_extents[0]
            lo, hi = self.let(f"{m} * {c} // {n}"), self.let(f"{m} * ({c} + 1) // {n}")
            points[:] = [n * blocks * block]
            self.bind(self.k.body.block.args[0], lo)  # (a chunk's accumulators: at its first row)
        else:
            lo, hi = "0", self.par_extents[0] if len(self.par_extents) == 1 else ""
        block, idx = self.flat_domain(points if not chunks else inner_points, ext_text,
                                      ORDERED_BLOCK, pid)
        for a, v in zip(maps[0].body.block.args, idx):
            self.bind(a, v)
        self.domain_vars = idx
        ity = f"tl.int{self.index_bits}"
        promoted = self.promote(maps[0], chunked=bool(chunks))
        if promoted and len(self.par_extents) == 1:
            # an accumulator in registers: nothing in the loop stores, so the
            # rows' loads issue ORDERED_UNROLL at a time, then add in order
            (a,) = self.k.body.block.args
            size = sum(1 for _ in maps[0].body.walk())
            unroll = ORDERED_UNROLL if size <= ORDERED_UNROLL_OPS else ORDERED_UNROLL // 4
            whole = f"{lo} + (({hi}) - {lo}) - (({hi}) - {lo}) % {unroll}"
            self.line(f"for q0 in range({lo}, {whole}, {unroll}):")
            self.depth += 1
            self.line(f"for u0 in tl.static_range({unroll}):")
            self.ordered_body(ops, a, f"q0 + u0 + tl.full([], 0, {ity})")
            self.depth -= 1
            self.line(f"for q0 in range({whole}, {hi}):")  # the rows left over
            self.ordered_body(ops, a, f"q0 + tl.full([], 0, {ity})")
            self.store_promoted()
            return block, 4
        if chunks:  # (one parallel dim: the chunk's rows in order)
            (a,) = self.k.body.block.args
            self.line(f"for q0 in range({lo}, {hi}):")
            self.ordered_body(ops, a, f"q0 + tl.full([], 0, {ity})")
            return block, 4
        # the parallel dims a loop nest in order, the map's body innermost
        args = list(self.k.body.block.args)
        if not args:  # (no parallel dims: the map's body once)
            self.depth -= 1
            self.ordered_body(ops, None, "0")
            self.depth += 1
        for d, (a, ext) in enumerate(zip(args, self.par_extents)):
            self.line(f"for q{d} in range(0, {ext}):")
            if d < len(args) - 1:
                self.depth += 1
                self.scopes.append({})
                self.bind(a, self.let(f"q{d} + tl.full([], 0, {ity})", scalar=True))
            else:
                self.ordered_body(ops, a, f"q{d} + tl.full([], 0, {ity})")
        for _ in args[:-1]:
            self.depth -= 1
            self.scopes.pop()
        self.store_promoted()
        return block, 4

    def ordered_body(self, ops: list[Operation], a: SSAValue | None, index: str) -> None:
        """One row of an ordered kernel (inside its loop) at row `index` (a
        tensor in the compiled kernel and in the interpreter alike)."""
        self.depth += 1
        self.scopes.append({})
        if a is not None:
            self.bind(a, self.let(index, scalar=True))
        for op in ops:
            if isinstance(op, L.MapOp):
                self.emit_ops(op.body.block)
            else:
                self.emit_op(op)
        self.depth -= 1
        self.scopes.pop()

    def chunks(self, inner: list[int | str]) -> tuple[int, int, int] | None:
        """(n, blocks, XBLOCK) of an ordered kernel whose rows run in n
        chunks (`ordered_chunks` n: chunk c the rows [M c // n, M (c + 1) // n)
        of its one parallel dim, adding into addresses that depend on the row
        only through its chunk — lower-to-loop's column reductions split for
        a GPU): one program per chunk and block of the map's points, each
        walking its chunk's rows in order. None: one program walks every row
        (a dynamic extent; no chunks)."""
        attr = self.k.attributes.get("ordered_chunks")
        if attr is None or len(self.par_extents) != 1 or not self.par_extents[0].isdigit() \
                or not all(isinstance(p, int) for p in inner):
            return None
        total = math.prod(inner)  # type: ignore[arg-type]
        block = min(ORDERED_BLOCK, max(16, next_pow2(total)))
        return attr.value.data, -(-total // block), block

    def promote(self, m: L.MapOp, chunked: bool = False) -> dict:
        """Written buffers an ordered kernel keeps in registers across its
        rows (`out[j] += x[i, j]`: a column reduction's accumulator): every
        access to one is at the same address, which no parallel dim moves,
        and no other buffer the kernel touches may be the same memory. Its
        value is loaded before the loop, carried by a variable (the loop's
        loads and stores of it read and assign the variable: the same adds
        in the same order, bit for bit) and stored after it
        (`store_promoted`). Returns {root: (variable, buffer j, offset)}."""
        par = set(self.k.body.block.args)
        accesses = [o for o in self.k.body.walk() if isinstance(o, (L.LoadOp, L.StoreOp))]
        written = {root(o.buffer) for o in accesses if isinstance(o, L.StoreOp)}
        out: dict = {}
        for r in written:
            mine = [o for o in accesses if root(o.buffer) is r]
            others = {root(o.buffer) for o in accesses} - {r}
            if any(may_alias(r, x) for x in others) or any(o.parent_op() is not m for o in mine):
                continue
            if not chunked and any(_addressing(o) & par for o in mine):
                continue  # (chunked: moved only from chunk to chunk, evaluated at its first row)
            if len({(o.buffer, o.map.data, tuple(o.indices)) for o in mine}) != 1:
                continue
            first = mine[0]
            j = self.bufs.index(first.buffer)
            for a in par:  # (in the indices, not in the address: `_addressing`)
                self.vals.setdefault(a, "0")
            off = self.let(self.offset(first))
            self.n += 1
            var = f"acc{self.n}"
            masked = "" if self.mask is None else f", mask={self.mask}"
            self.line(f"{var} = tl.load(b{j} + {off}{masked})")
            self.types[var] = first.buffer.type.element_type
            out[r] = (var, j, off)
        self.promoted = out
        return out

    def store_promoted(self) -> None:
        for var, j, off in self.promoted.values():
            masked = "" if self.mask is None else f", mask={self.mask}"
            self.line(f"tl.store(b{j} + {off}, {var}{masked})")
        self.promoted = {}

    def flat_domain(self, points: list[int | str], ext_text: list[str],
                    most: int, pid: str | None = None) -> tuple[int, list[str]]:
        """XBLOCK points of the flattened domain `points` per program (up to
        `most`), program `pid` taking block `pid` (default the program's id):
        the block's offsets, mask and row-major indices."""
        static = all(isinstance(p, int) for p in points)
        total = math.prod(p for p in points if isinstance(p, int))
        block = min(most, max(16, next_pow2(total))) if static else most
        self.constexprs["XBLOCK"] = block
        pid = self.pid() if pid is None else pid
        offs = self.let(f"{pid} * XBLOCK + tl.arange(0, XBLOCK)")
        self.blocky.add(offs)
        n = " * ".join(ext_text) if ext_text else "1"
        self.mask = self.let(f"{offs} < {n}")
        self.flat = (offs, [int(p) if isinstance(p, int) else None for p in points])
        self.single_point = static and total == 1
        return block, (self.decompose(offs, ext_text) if ext_text else [])

    def bind(self, a: SSAValue, v: str) -> None:
        self.vals[a] = v
        self.types.setdefault(v, IndexType())

    # ---- rows ----
    def emit_rows(self, ops: list[Operation], par: Sequence[int]) -> None:
        self.flat = None
        self.single_point = False
        self.domain_vars = []
        if par:
            idx = self.decompose(self.pid(), self.par_extents)
            for a, v in zip(self.k.body.block.args, idx):
                self.bind(a, v)
        for op in ops:
            self.emit_op(op)

    def block_of(self, extents: Sequence[int | SSAValue]) -> tuple[str, str, str, int, bool]:
        """(flat index, mask, constexpr name, block, looped) for a map or
        reduce over `extents`: one register block for a static row up to
        ROW_MAX, else a loop (the caller opens it with `open_loop`)."""
        texts = [str(self.extent_key(e)) for e in extents]
        static = all(isinstance(e, int) for e in extents)
        total = math.prod(e for e in extents if isinstance(e, int))
        looped = not static or total > ROW_MAX
        n = " * ".join(texts) if texts else "1"
        key = (tuple(texts), looped)
        if looped:  # (the loop's index and mask come from `open_loop`: here its extent)
            name = f"R{len(self.constexprs)}_BLOCK"
            self.constexprs[name] = LOOP_BLOCK
            return "", n, name, LOOP_BLOCK, True
        if key not in self.block_vars:
            name = f"R{len(self.constexprs)}_BLOCK"
            self.constexprs[name] = next_pow2(max(total, 1))
            r = self.let(f"tl.arange(0, {name})" if self.index_bits == 32
                         else f"tl.arange(0, {name}).to(tl.int64)", key=f"arange {name}")
            self.blocky.add(r)
            # (a block the row fills exactly needs no mask: unmasked loads
            # and stores vectorize without a predicate; ~0.5% of copy
            # bandwidth on LayerNorm's 4096-wide rows. max-autotune keeps a
            # rows kernel's blocks, so the block stays the row's size)
            mask = None if total == self.constexprs[name] else self.let(f"{r} < {n}")
            self.block_vars[key] = (r, mask, name)
        r, mask, name = self.block_vars[key]
        return r, mask, name, self.constexprs[name], False

    def open_loop(self, n: str, name: str) -> tuple[str, str]:
        """`for base in range(0, n, name):` and the block's flat index and mask
        inside it (the caller closes it with `close_loop`)."""
        self.n += 1
        base = f"base{self.n}"
        self.line(f"for {base} in range(0, {n}, {name}):")
        self.depth += 1
        self.scopes.append({})
        ar = f"tl.arange(0, {name})" if self.index_bits == 32 else \
            f"tl.arange(0, {name}).to(tl.int64)"
        r = self.let(f"{base} + {ar}")
        self.blocky.add(r)
        return r, self.let(f"{r} < {n}")

    def close_loop(self) -> None:
        self.depth -= 1
        self.scopes.pop()

    def emit_map(self, op: L.MapOp) -> None:
        ext = op.extents()
        texts = [str(self.extent_key(e)) for e in ext]
        r, mask, name, _, looped = self.block_of(ext)
        if looped:
            r, mask = self.open_loop(mask, name)
        outer = self.mask
        self.mask = mask
        for a, v in zip(op.body.block.args, self.decompose(r, texts)):
            self.bind(a, v)
        self.emit_ops(op.body.block, in_block=True)
        self.mask = outer
        if looped:
            self.close_loop()

    def emit_reduce(self, op: L.ReduceOp) -> None:
        ext = op.extents()
        kind = op.kind.data
        texts = [str(self.extent_key(e)) for e in ext]
        r, mask, name, block, looped = self.block_of(ext)
        yt = op.body.block.last_op.values[0].type  # type: ignore[union-attr]
        acc_t, combine = self.reduction(kind, yt)
        rt = op.result.type
        neutral = reduce_neutral(kind, yt) if kind not in ("any", "all") else \
            ("0" if kind == "any" else "1")
        arg = kind in ("argmax", "argmin")
        if looped:
            n_text = mask
            self.n += 1
            acc = f"acc{self.n}"
            self.line(f"{acc} = tl.full([{name}], {neutral}, {acc_t})")
            if arg:
                self.line(f"{acc}_i = tl.full([{name}], {2 ** 63 - 1}, tl.int64)")
            r, mask = self.open_loop(n_text, name)
        y = self.reduce_body(op, r, mask, texts)
        v = self.acc_value(y, yt, kind, acc_t)
        v = self.let(v if mask is None else f"tl.where({mask}, {v}, {neutral})")
        if arg:
            i = self.let(f"{r}.to(tl.int64)" if mask is None
                         else f"tl.where({mask}, {r}.to(tl.int64), {2 ** 63 - 1})")
        if looped:
            if arg:
                self.line(f"{acc}, {acc}_i = {combine}({acc}, {acc}_i, {v}, {i})")
            else:
                self.line(f"{acc} = {combine.format(acc, v)}")
            self.close_loop()
            v = acc
            if arg:
                i = f"{acc}_i"
        if arg:
            self.n += 1
            out = f"v{self.n}"
            self.line(f"_, {out} = tl.reduce(({v}, {i}), 0, {combine})")
            res = out
        else:
            res = self.let(self.across(kind, yt, v), scalar=True)
        self.vals[op.result] = self.let(f"{res}.to({self.h.dtype(rt)})", rt)

    def reduce_body(self, op: L.ReduceOp, r: str, mask: str, texts: list[str]) -> str:
        outer = self.mask
        self.mask = mask
        for a, v in zip(op.body.block.args, self.decompose(r, texts)):
            self.bind(a, v)
        (y,) = self.emit_ops(op.body.block, in_block=True)
        self.mask = outer
        return y

    def reduction(self, kind: str, yt: Attribute) -> tuple[str, str]:
        """(accumulator dtype, elementwise combine: a format of (acc, value),
        or a helper's name for argmax/argmin)."""
        if kind in ("argmax", "argmin"):
            return ("tl.int8" if is_bool(yt) else "tl.float32" if is_half(yt)
                    else tl_dtype(yt, self.index_bits), f"_combine_{kind}")
        if kind in ("any", "all") or is_bool(yt):
            k = {"sum": "any", "max": "any", "prod": "all", "min": "all"}.get(kind, kind)
            return "tl.int1", "({} | {})" if k == "any" else "({} & {})"
        acc = "tl.float32" if type_code(yt) in ("fp16", "bf16") else tl_dtype(yt, self.index_bits)
        if kind == "sum":
            return acc, "({} + {})"
        if kind == "prod":
            return acc, "({} * {})"
        if is_float(yt):
            return acc, f"_np_{kind}({{}}, {{}})"
        return acc, f"tl.{'maximum' if kind == 'max' else 'minimum'}({{}}, {{}})"

    def acc_value(self, y: str, yt: Attribute, kind: str, acc_t: str) -> str:
        if kind in ("any", "all"):
            return y if is_bool(yt) else f"({y} != 0)"
        if kind in ("argmax", "argmin"):
            return f"{y}.to(tl.int8)" if is_bool(yt) else f"{y}.to(tl.float32)" if is_half(yt) \
                else y
        if is_bool(yt):
            return y
        return f"{y}.to({acc_t})" if type_code(yt) in ("fp16", "bf16") else y

    def across(self, kind: str, yt: Attribute, v: str) -> str:
        """The lanes of v combined (axis 0)."""
        if kind in ("any", "all") or is_bool(yt):
            k = {"sum": "any", "max": "any", "prod": "all", "min": "all"}.get(kind, kind)
            return f"(tl.reduce({v}.to(tl.int32), 0, _np_{'max' if k == 'any' else 'min'}) != 0)"
        if kind == "sum" and is_float(yt):
            # numpy's sum starts from +0.0: lanes of -0.0 alone (a block the
            # row fills, no masked +0.0 lane) sum to +0.0, not -0.0
            return f"(tl.reduce({v}, 0, _combine_sum) + 0.0)"
        if kind in ("sum", "prod"):
            return f"tl.reduce({v}, 0, _combine_{kind})"
        return f"tl.reduce({v}, 0, _np_{kind})"  # (on integers the NaN test is false)

    # ---- ops ----
    def emit_ops(self, block: Block, in_block: bool = False) -> list[str]:
        """The ops of a map's or reduce's body; the values it yields."""
        for op in block.ops:
            if isinstance(op, L.YieldOp):
                return [self.vals[v] for v in op.values]
            self.emit_op(op, in_block)
        return []

    def emit_op(self, op: Operation, in_block: bool = False) -> None:
        if isinstance(op, K.ParamOp):
            return
        if isinstance(op, L.MapOp):
            return self.emit_map(op)
        if isinstance(op, L.ReduceOp):
            return self.emit_reduce(op)
        if isinstance(op, L.LoadOp):
            return self.emit_load(op)
        if isinstance(op, L.StoreOp):
            return self.emit_store(op, in_block)
        if isinstance(op, L.ExternOp):
            raise no_rule(f"loop.extern {op.fn.data!r}")
        if isinstance(op, L.IndexOp):
            return self.emit_index(op)
        if isinstance(op, L.FlagsOp):  # (the device reports no floating-point flags)
            return
        args = [self.vals[o] for o in op.operands]
        text = emit(self.h, op, args)
        self.vals[op.results[0]] = self.let(text, op.results[0].type)

    def emit_index(self, op: L.IndexOp) -> None:
        """A data-dependent index (a gather): the value in [-size, size) as
        an index in [0, size), negatives from the end (numpy's intp
        conversion first: an unsigned 64-bit value wraps, as in numpy).
        Any other value stores its check's number + 1 to the `status`
        argument (a lane of the block's, any writer: the runtime re-runs
        the call eagerly, so numpy raises its own IndexError) and reads
        element 0, so that no access leaves the buffer."""
        v = self.let(f"{self.vals[op.value]}.to(tl.int64)")
        size = op.size.value.data
        j = self.let(f"tl.where({v} < 0, {v} + {size}, {v})")
        bad = self.let(f"({j} < 0) | ({j} >= {size})")
        status = self.arg(KernelArg("status", "status", "*i32"))
        check = self.index_checks.setdefault(op, len(self.index_checks)) + 1
        if bad in self.blocky:
            where = bad if self.mask is None else f"{bad} & {self.mask}"
            self.line(f"tl.store({status} + {j} * 0, {check}, mask={where})")
        else:
            self.line(f"tl.store({status}, {check}, mask={bad})")
        it = "tl.int32" if self.index_bits == 32 else "tl.int64"
        self.vals[op.result] = self.let(f"tl.where({bad}, 0, {j}).to({it})", IndexType())

    def offset(self, op: L.LoadOp | L.StoreOp) -> str:
        """The element offset of a load or store from its buffer's start."""
        j = self.bufs.index(op.buffer)
        t = op.buffer.type
        assert isinstance(t, MemRefType)
        m = op.map.data
        idx = [self.vals[i] for i in op.indices]
        dims, syms = idx[:m.num_dims], idx[m.num_dims:]
        coords = [affine_text(e, dims, syms) for e in m.results]
        shape = list(t.get_shape())
        if self.flat is not None and all(isinstance(e, AffineDimExpr) for e in m.results) \
                and coords == self.domain_vars and shape == self.flat[1] \
                and isinstance(t.layout, NoneAttr):
            return self.flat[0]  # a row-major buffer of the domain's shape: the offset itself
        terms = []
        for d, c in enumerate(coords):
            if c == "0":
                continue
            s = self.stride(j, d, t)
            terms.append(c if s == "1" else f"{c} * {s}")
        return " + ".join(terms) if terms else "0"

    def stride(self, j: int, d: int, t: MemRefType) -> str:
        """Buffer j's stride along dim d, in elements: a literal for a
        row-major memref of static inner dims, else a run-time argument."""
        shape = t.get_shape()
        if isinstance(t.layout, NoneAttr):
            inner = shape[d + 1:]
            if A.DYN not in inner:
                return str(math.prod(inner))
        return self.arg(KernelArg(f"b{j}_s{d}", "stride", f"i{self.index_bits}", j, d))

    def emit_load(self, op: L.LoadOp) -> None:
        if self.promoted and root(op.buffer) in self.promoted:  # (an ordered accumulator)
            self.vals[op.result] = self.promoted[root(op.buffer)][0]
            return
        j = self.bufs.index(op.buffer)
        off = self.let(self.offset(op))
        if off in self.blocky and self.mask is not None:
            text = f"tl.load(b{j} + {off}, mask={self.mask})"
        else:
            text = f"tl.load(b{j} + {off})"
        # reused only while no store to a buffer that may be the same memory came between
        gens = sorted(n for r, n in self.stores.items() if may_alias(r, root(op.buffer)))
        self.vals[op.result] = self.let(text, op.result.type, key=f"{text} @{gens}")

    def emit_store(self, op: L.StoreOp, in_block: bool) -> None:
        if self.promoted and root(op.buffer) in self.promoted:  # (an ordered accumulator)
            self.line(f"{self.promoted[root(op.buffer)][0]} = {self.vals[op.value]}")
            return
        j = self.bufs.index(op.buffer)
        off = self.let(self.offset(op))
        val = self.vals[op.value]
        if off in self.blocky:
            masked = "" if self.mask is None else f", mask={self.mask}"
            self.line(f"tl.store(b{j} + {off}, {val}{masked})")
        elif self.single_point:  # a domain of one point: its one lane stores
            self.line(f"tl.store(b{j} + {off} + {self.flat[0]} * 0, {val}, mask={self.mask})")
        elif self.flat is None and not in_block and val not in self.blocky:
            self.line(f"tl.store(b{j} + {off}, {val})")  # a row's own element
        else:
            raise no_rule(f"a store to one address repeated along a block (kernel "
                          f"{self.k.sym_name.data!r})")
        r = root(op.buffer)
        self.stores[r] = self.stores.get(r, 0) + 1


def _addressing(op: L.LoadOp | L.StoreOp) -> set[SSAValue]:
    """The index values an access's address depends on (its map's used
    dims and its symbols)."""
    m = op.map.data
    idx = list(op.indices)
    return {idx[d] for d in m.used_dims()} | set(idx[m.num_dims:])


def root(v: SSAValue) -> SSAValue:
    """The memref a kernel operand is a view of (through memref.cast)."""
    while isinstance(v.owner, memref.CastOp):
        v = v.owner.source
    return v


def may_alias(a: SSAValue, b: SSAValue) -> bool:
    """Two buffer roots may be the same memory: the same value, or two
    arguments of the function (a caller may pass one array twice)."""
    return a is b or (isinstance(a, BlockArgument) and isinstance(b, BlockArgument))


def emit_kernel(k: K.KernelOp) -> TritonKernel:
    """The Triton function and launch plan of one kernel (NotImplementedError
    "triton: no rule for ..." for what is not covered: the module's doc)."""
    return KernelEmitter(k).emit()


def emit_module(module: ModuleOp) -> list[TritonKernel]:
    """Every kernel of a kernel-level module's functions, in order; a
    function-level `loop.extern` (BLAS, numpy routines) has no rule yet."""
    out = []
    for f in module.ops:
        if not isinstance(f, func.FuncOp):
            continue
        for op in f.body.block.ops:
            if isinstance(op, K.KernelOp):
                out.append(emit_kernel(op))
            elif isinstance(op, L.ExternOp):
                raise no_rule(f"loop.extern {op.fn.data!r} (BLAS and numpy routines)")
            elif isinstance(op, L.KernelOp):
                raise no_rule("loop.kernel (a kernel not yet scheduled: run `schedule`)")
    return out


def launch_text(tk: TritonKernel) -> str:
    """How a kernel is launched, as comment lines (the dump's)."""
    n = " * ".join(str(p) for p in tk.points) or "1"
    grid = f"ceil({n} / XBLOCK={tk.block})" if tk.block > 1 else n
    blocks = ", ".join(f"{c}={v}" for c, v in tk.constexprs.items())
    args = ", ".join(f"{a.name}: {a.sig}" for a in tk.args)
    return (f"# launch {tk.fn_name}: grid ({grid},), num_warps {tk.num_warps}, {blocks}; "
            f"options {tk.options}\n# arguments: {args}\n")


def module_text(module: ModuleOp) -> str:
    """Every kernel of a kernel-level module as Triton source with its launch,
    in order; what has no rule yet is a comment saying why."""
    out = []
    for f in module.ops:
        if not isinstance(f, func.FuncOp):
            continue
        for op in f.body.block.ops:
            if isinstance(op, K.KernelOp):
                try:
                    tk = emit_kernel(op)
                except NotImplementedError as e:
                    out.append(f'# kernel.kernel "{op.sym_name.data}": {e}\n')
                    continue
                out.append(tk.source + launch_text(tk))
            elif isinstance(op, L.ExternOp):
                out.append(f"# loop.extern {op.fn.data!r}: triton: no rule for it yet (BLAS and "
                           "numpy routines run outside kernels)\n")
    return "\n".join(out) if out else "# no kernels\n"
