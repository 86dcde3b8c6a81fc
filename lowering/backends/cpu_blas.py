"""Matmul externs as BLAS launches: a `loop.extern "matmul"` whose operands
BLAS can read where they lie (its input buffers, through the extern's views:
a transpose, a slice, a stride-0 broadcast of a shared matrix, a reshape of a
contiguous one) becomes a `BlasPlan` step: one gemm or gemv per batch (a
batch of products with one shared B, one gemm over all the rows), launched as
a kernel (`lowering/codegen/blas_launch.py`) that calls numpy's own BLAS by
address. What BLAS cannot read as it lies stays a numpy extern
(`runtime.blas.matmul`), as does everything when numpy's BLAS is not
OpenBLAS with CBLAS symbols."""

from __future__ import annotations

import threading

import numpy as np
from xdsl.dialects.builtin import MemRefType, NoneAttr

from dialects import array as A
from dialects import loop as L
from dialects.dtypes import from_ir
from dialects.symbols import symbols_of
from runtime import blas, cpu

from ..codegen.blas_launch import ROUTINES, launcher_name, launchers_ir
from ..codegen.llvm import buffer_strides

Strided = blas.Strided


def _c_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    out, acc = [], 1
    for n in reversed(shape):
        out.append(acc)
        acc *= max(n, 1)
    return tuple(reversed(out))


def _view(op, x: Strided) -> Strided | None:
    """The layout of a view op's result from its operand's, or None where
    numpy would copy (a reshape of a non-contiguous layout)."""
    shape, strides, off = x
    out = tuple(op.results[0].type.get_shape())
    if isinstance(op, A.BroadcastOp):  # numpy's: new dims in front, size-1 dims stretched
        lead = len(out) - len(shape)
        st = [0] * lead + [0 if n == 1 and m != 1 else s
                           for n, m, s in zip(shape, out[lead:], strides)]
        return out, tuple(st), off
    if isinstance(op, A.TransposeOp):
        perm = A.ints(op.permutation)
        return out, tuple(strides[p] for p in perm), off
    if isinstance(op, A.SliceOp):
        start, step = A.ints(op.start), A.ints(op.step)
        return (out, tuple(s * t for s, t in zip(strides, step)),
                off + sum(b * s for b, s in zip(start, strides)))
    if isinstance(op, A.ReshapeOp):
        st = _reshaped(shape, strides, out)
        return None if st is None else (out, st, off)
    return None


def _reshaped(shape: tuple[int, ...], strides: tuple[int, ...],
              new: tuple[int, ...]) -> tuple[int, ...] | None:
    """The strides of a reshape that numpy makes without a copy (its rule:
    each group of old dims that multiplies to a group of new dims must be
    contiguous within itself), or None where numpy copies."""
    if 0 in shape:
        return None
    old = [(n, s) for n, s in zip(shape, strides) if n != 1]
    out = [0] * len(new)
    oi = ni = 0
    while oi < len(old) and ni < len(new):
        oj, nj = oi + 1, ni + 1
        po, pn = old[oi][0], new[ni]
        while po != pn:
            if pn < po:
                pn *= new[nj]
                nj += 1
            else:
                po *= old[oj][0]
                oj += 1
        if any(old[k][1] != old[k + 1][0] * old[k + 1][1] for k in range(oi, oj - 1)):
            return None
        out[nj - 1] = old[oj - 1][1]
        for k in range(nj - 1, ni, -1):
            out[k - 1] = out[k] * new[k]
        oi, ni = oj, nj
    return tuple(out)


def _buffer(t: MemRefType) -> Strided | None:
    """A buffer's layout: C-contiguous, or the static strides of its layout
    (an F-ordered argument); None where they are known only at run time (a
    strided argument: numpy's matmul reads it)."""
    shape = tuple(t.get_shape())
    if isinstance(t.layout, NoneAttr):
        return shape, _c_strides(shape), 0
    strides = buffer_strides(t)
    if strides is None or None in strides or A.DYN in shape:
        return None
    return shape, tuple(strides), 0


def operands(op: L.ExternOp) -> tuple[Strided, Strided, Strided] | None:
    """The layouts of a matmul extern's operands and output, relative to its
    buffers' data, or None."""
    n = op.num_inputs.value.data
    bufs = [_buffer(b.type) for b in op.buffers]
    if any(b is None for b in bufs) or n != 2 or len(bufs) != 3:
        return None
    if op.body is None:  # "matmul_tn": the lhs read transposed
        flags = op.fn.data[7:] or "nn"
        ins = []
        for (shape, strides, off), t in zip(bufs[:2], flags):
            if t == "t":
                shape = (*shape[:-2], shape[-1], shape[-2])
                strides = (*strides[:-2], strides[-1], strides[-2])
            ins.append((shape, strides, off))
        return ins[0], ins[1], bufs[2]
    block = op.body.block
    known = dict(zip(block.args, bufs[:2]))
    for v in op.views():
        x = _view(v, known[v.operands[0]])
        if x is None:
            return None
        known[v.results[0]] = x
    dot = op.computed()
    return known[dot.lhs], known[dot.rhs], bufs[2]


def plan(op: L.ExternOp) -> tuple[str, tuple[int, ...], tuple[int, int, int]] | None:
    """(routine, words, buffer order) of a matmul extern BLAS runs as it
    lies (`runtime.blas.call`), or None."""
    if symbols_of([b.type for b in op.buffers]) or (op.body is not None and any(
            symbols_of([o.properties, [r.type for r in o.results]]) for o in op.body.walk())):
        return None
    dt = from_ir(op.buffers[-1].type.element_type)
    if dt not in (np.float32, np.float64) or any(
            from_ir(b.type.element_type) != dt for b in op.buffers):
        return None
    lay = operands(op)
    if lay is None:
        return None
    return blas.call("s" if dt == np.float32 else "d", *lay)


_launchers: dict[str, int] = {}
_lock = threading.Lock()


def launcher(routine: str) -> int | None:
    """The address of `routine`'s launcher (all of them compiled at the first
    request, once per process), or None without numpy's CBLAS."""
    if blas.routines() is None:
        return None
    with _lock:
        if not _launchers:
            names = [launcher_name(r) for r in ROUTINES]
            addrs = cpu.jit(launchers_ir(), names, "blas_modules")
            _launchers.update({r: addrs[launcher_name(r)] for r in ROUTINES})
    return _launchers[routine]
