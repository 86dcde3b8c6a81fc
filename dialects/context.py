"""The xDSL context that knows every dialect the IR uses, at every level:
upstream builtin, func, arith, math, affine, memref, and this package's
array (tensor level), loop and kernel."""

from __future__ import annotations

from xdsl.context import Context
from xdsl.dialects import affine, arith, builtin, func, math, memref

from . import array, kernel, loop

# (modules, not Dialect objects, are imported here: `lowering.universe`
# registers the Dialect objects a module of this package defines)


def context() -> Context:
    ctx = Context()
    for d in (builtin.Builtin, func.Func, arith.Arith, math.Math, affine.Affine, memref.MemRef,
              array.Array, loop.Loop, kernel.Kernel):
        ctx.load_dialect(d)
    return ctx
