"""The LLVM IR of the BLAS launchers: one kernel-shaped function per CBLAS
routine (`i32 f(i64 start, i64 stop, i8** objs, i64* words)`, the kernels'
signature, so the program launches it as a kernel and the native entry
calls it directly) that calls the routine, by the address in its words, once
per batch on its three buffers' data (read from the array objects, plus
offsets and batch strides). The words (after the `SCALAR_PARAMS` status
words, see `runtime.blas.call`):

    routine address, per-thread-count setter address (0: leave BLAS's
    threads alone), batch count, three batch strides, three offsets
    (elements), then the routine's own integer arguments

The functions are the same for every product: compiled once per process.
The exported function is wrapped as a kernel is (`fp_flags_wrapper`): it
returns the IEEE exception flags raised on the calling thread, which is what
numpy's matmul checks."""

from __future__ import annotations

from llvmlite import ir

from runtime.cpu import ARRAY_OFFSETS

from .llvm import SCALAR_PARAMS, fp_flags_wrapper

I8, I32, I64 = ir.IntType(8), ir.IntType(32), ir.IntType(64)
P8 = I8.as_pointer()
ROUTINES = ("sgemm", "dgemm", "sgemv", "dgemv")


def launcher_name(routine: str) -> str:
    return f"lowering_blas_{routine}"


def _launcher(module: ir.Module, routine: str) -> None:
    elem = ir.FloatType() if routine[0] == "s" else ir.DoubleType()
    size = 4 if routine[0] == "s" else 8
    ep = elem.as_pointer()
    gemm = routine.endswith("gemm")
    n_ints = 9 if gemm else 7  # order, transposes, sizes, leading dims / increments
    if gemm:  # (order, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc)
        fty = ir.FunctionType(ir.VoidType(), [I32, I32, I32, I64, I64, I64, elem, ep, I64, ep, I64,
                                              elem, ep, I64])
    else:  # (order, trans, M, N, alpha, A, lda, X, incx, beta, Y, incy)
        fty = ir.FunctionType(ir.VoidType(), [I32, I32, I64, I64, elem, ep, I64, ep, I64, elem, ep,
                                              I64])
    body = ir.Function(module, ir.FunctionType(I32, [I64, I64, P8.as_pointer(), I64.as_pointer()]),
                       launcher_name(routine) + ".body")
    body.attributes.add("noinline")
    _, _, objs, words = body.args
    b = ir.IRBuilder(body.append_basic_block("entry"))

    def word(j: int) -> ir.Value:
        return b.load(b.gep(words, [ir.Constant(I64, SCALAR_PARAMS + j)]))

    fn = b.inttoptr(word(0), fty.as_pointer())
    setter = word(1)
    count = word(2)
    steps = [word(3 + i) for i in range(3)]
    bases = []
    for i in range(3):
        obj = b.load(b.gep(objs, [ir.Constant(I64, i)]))
        data = b.load(b.bitcast(b.gep(obj, [ir.Constant(I64, ARRAY_OFFSETS[0])]), P8.as_pointer()))
        bases.append(b.gep(data, [b.mul(word(6 + i), ir.Constant(I64, size))]))
    ints = [word(9 + j) for j in range(n_ints)]
    set_ty = ir.FunctionType(I32, [I32])
    has_setter = b.icmp_unsigned("!=", setter, ir.Constant(I64, 0))
    prev_slot = b.alloca(I32)
    b.store(ir.Constant(I32, 0), prev_slot)
    with b.if_then(has_setter):
        b.store(b.call(b.inttoptr(setter, set_ty.as_pointer()), [ir.Constant(I32, 1)]), prev_slot)
    loop, done = body.append_basic_block("batch"), body.append_basic_block("done")
    start = b.block
    b.cbranch(b.icmp_signed(">", count, ir.Constant(I64, 0)), loop, done)
    b.position_at_end(loop)
    i = b.phi(I64)
    i.add_incoming(ir.Constant(I64, 0), start)
    ptrs = [b.bitcast(b.gep(base, [b.mul(b.mul(i, st), ir.Constant(I64, size))]), ep)
            for base, st in zip(bases, steps)]
    one, zero = ir.Constant(elem, 1.0), ir.Constant(elem, 0.0)
    enums = [b.trunc(v, I32) for v in ints[:3 if gemm else 2]]
    if gemm:
        mm, nn, kk, lda, ldb, ldc = ints[3:]
        b.call(fn, [*enums, mm, nn, kk, one, ptrs[0], lda, ptrs[1], ldb, zero, ptrs[2], ldc])
    else:
        mm, nn, lda, incx, incy = ints[2:]
        b.call(fn, [*enums, mm, nn, one, ptrs[0], lda, ptrs[1], incx, zero, ptrs[2], incy])
    nxt = b.add(i, ir.Constant(I64, 1))
    i.add_incoming(nxt, b.block)
    b.cbranch(b.icmp_signed("<", nxt, count), loop, done)
    b.position_at_end(done)
    with b.if_then(has_setter):
        b.call(b.inttoptr(setter, set_ty.as_pointer()), [b.load(prev_slot)])
    b.ret(ir.Constant(I32, 0))
    fp_flags_wrapper(module, body, launcher_name(routine))


def launchers_ir() -> str:
    """One module holding every routine's launcher."""
    module = ir.Module(name="lowering_blas")
    for r in ROUTINES:
        _launcher(module, r)
    return str(module)
