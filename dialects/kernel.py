"""The kernel level: `kernel`, scheduled kernels.

`kernel.kernel` is a `loop.kernel` whose schedule has been decided: the body
(the same `loop.reduce` / `loop.map` / `loop.load` / `loop.store` ops) plus how
to run it. The schedule is backend-neutral data that each code generator
reads: the LLVM emitter maps `vector_width` to SIMD lanes and `threads` to
CPU threads; a GPU emitter maps them to a block's lanes and programs.

Schedule properties:
  vector_width  lanes of the innermost loop of each map/reduce (1 = scalar)
  unroll        independent accumulators per reduction (latency hiding)
  split         what the launch splits across threads: "parallel" (the
                flattened parallel dims), "map" (the outermost dim of the only
                map, for kernels without parallel dims) or "none"
  work          number of items of the split domain
  threads       threads to use (1 when the work is too small to pay)
  reduction     "looped": each reduction re-reads its row, which the cost
                model expects to hit cache ("row-in-cache") or not ("streaming")

Kernel parameters: kernels that differ only in constants (the iterations of
an unrolled Python loop: the row a load or store starts at, the loop
counter in the arithmetic) share one body, which reads those constants as
`kernel.param k` values: the kernel's `params` property gives, per launch,
parameter k's value (as `loop.const` writes it). An index parameter is an
affine symbol operand of the loads and stores that use it. The code
generators compile one function per distinct body and pass the values at
launch.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import ArrayAttr, DenseArrayBase, IntegerAttr, MemRefType, StringAttr, i64
from xdsl.ir import Attribute, Dialect, Region, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    base,
    irdl_op_definition,
    opt_prop_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.traits import Pure, RecursiveMemoryEffect
from xdsl.utils.exceptions import VerifyException

from .array import i64_array, ints

SPLITS = ("parallel", "map", "none")
REDUCTIONS = ("none", "row-in-cache", "streaming")


@irdl_op_definition
class KernelOp(IRDLOperation):
    name = "kernel.kernel"
    buffers = var_operand_def(base(MemRefType))
    sym_name = prop_def(StringAttr)
    parallel = prop_def(DenseArrayBase.constr(i64))
    vector_width = prop_def(IntegerAttr)
    unroll = prop_def(IntegerAttr)
    split = prop_def(StringAttr)
    work = prop_def(IntegerAttr)
    threads = prop_def(IntegerAttr)
    reduction = prop_def(StringAttr)
    params = opt_prop_def(ArrayAttr[StringAttr])
    body = region_def("single_block")
    traits = traits_def(RecursiveMemoryEffect())
    assembly_format = (
        "$sym_name `(` $buffers `)` `parallel` $parallel `vector` $vector_width `unroll` $unroll "
        "`split` $split `work` $work `threads` $threads `reduction` $reduction "
        "(`params` $params^)? $body attr-dict `:` type($buffers)"
    )

    def __init__(self, name: str, buffers: Sequence[SSAValue], parallel: Sequence[int], *,
                 vector_width: int, unroll: int, split: str, work: int, threads: int,
                 reduction: str, body: Region):
        super().__init__(
            operands=[list(buffers)],
            properties={
                "sym_name": StringAttr(name), "parallel": i64_array(parallel),
                "vector_width": IntegerAttr(vector_width, i64), "unroll": IntegerAttr(unroll, i64),
                "split": StringAttr(split), "work": IntegerAttr(work, i64),
                "threads": IntegerAttr(threads, i64), "reduction": StringAttr(reduction),
            },
            regions=[body],
        )

    def verify_(self) -> None:
        if self.split.data not in SPLITS:
            raise VerifyException(f"kernel.kernel: split must be one of {SPLITS}")
        if self.reduction.data not in REDUCTIONS:
            raise VerifyException(f"kernel.kernel: reduction must be one of {REDUCTIONS}")
        if self.vector_width.value.data < 1 or self.threads.value.data < 1:
            raise VerifyException("kernel.kernel: vector width and threads must be >= 1")
        if len(self.body.block.args) != len(ints(self.parallel)):
            raise VerifyException("kernel.kernel: body needs one index per parallel dim")
        n = len(self.param_values())
        for op in self.body.walk():
            if isinstance(op, ParamOp) and not 0 <= op.index.value.data < n:
                raise VerifyException(f"kernel.param {op.index.value.data}: the kernel has {n} "
                                      "parameters")

    def param_values(self) -> list[str]:
        """Parameter k's value, as `loop.const` writes it."""
        return [a.data for a in self.params.data] if self.params is not None else []


@irdl_op_definition
class ParamOp(IRDLOperation):
    """Parameter `index` of the enclosing kernel (its value is the kernel's
    `params[index]`, of this op's type)."""

    name = "kernel.param"
    index = prop_def(IntegerAttr)
    result = result_def()
    traits = traits_def(Pure())
    assembly_format = "$index attr-dict `:` type($result)"

    def __init__(self, index: int, type: Attribute):
        super().__init__(properties={"index": IntegerAttr(index, i64)}, result_types=[type])


Kernel = Dialect("kernel", [KernelOp, ParamOp], [])
