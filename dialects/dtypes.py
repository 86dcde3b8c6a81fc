"""numpy dtype <-> IR element type. numpy stays the oracle for promotion.

Two classes of dtype: the `supported` ones, which every op and generated
kernel handles, and the extern-only ones (complex64, complex128: `complex<f32>`,
`complex<f64>`), which only `array.routine` ops make and read (numpy runs
them: the FFTs, and ufuncs on complex values); buffers (memref) hold them,
generated kernels never see them. `prims` refuses any other op on them
(`ExternOnlyError`: capture turns it into a graph break)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
from xdsl.dialects.builtin import (
    BFloat16Type,
    ComplexType,
    Float16Type,
    Float32Type,
    Float64Type,
    IntegerType,
    Signedness,
    TensorType,
)
from xdsl.ir import Attribute

_TO_IR: dict[np.dtype, Attribute] = {
    np.dtype(np.bool_): IntegerType(1),
    np.dtype(np.int8): IntegerType(8),
    np.dtype(np.int16): IntegerType(16),
    np.dtype(np.int32): IntegerType(32),
    np.dtype(np.int64): IntegerType(64),
    np.dtype(np.uint8): IntegerType(8, Signedness.UNSIGNED),
    np.dtype(np.uint16): IntegerType(16, Signedness.UNSIGNED),
    np.dtype(np.uint32): IntegerType(32, Signedness.UNSIGNED),
    np.dtype(np.uint64): IntegerType(64, Signedness.UNSIGNED),
    np.dtype(np.float16): Float16Type(),
    np.dtype(ml_dtypes.bfloat16): BFloat16Type(),
    np.dtype(np.float32): Float32Type(),
    np.dtype(np.float64): Float64Type(),
}
SUPPORTED = frozenset(_TO_IR)
EXTERN_ONLY = frozenset({np.dtype(np.complex64), np.dtype(np.complex128)})
_TO_IR[np.dtype(np.complex64)] = ComplexType(Float32Type())
_TO_IR[np.dtype(np.complex128)] = ComplexType(Float64Type())
_FROM_IR = {v: k for k, v in _TO_IR.items()}


BFLOAT16 = np.dtype(ml_dtypes.bfloat16)


def finfo(dtype):
    """np.finfo, bfloat16 included (numpy's own refuses ml_dtypes' types
    with some numpy and ml_dtypes versions; ml_dtypes.finfo takes both)."""
    return ml_dtypes.finfo(dtype)
"""bfloat16: numpy has none; ml_dtypes' (the one JAX uses) is the numpy dtype of
torch.bfloat16 tensors and of bf16 IR values. Its ufunc loops compute in
float32 and round once, as numpy's float16 loops do; numpy's promotion rules
apply to it unchanged (bf16 with float32: float32; with a Python float: bf16).
Its `dtype.kind` is "V" (a user dtype): `kind()` says "f"."""


def kind(dtype: np.dtype) -> str:
    """numpy's `dtype.kind`, "f" for bfloat16 too."""
    dt = np.dtype(dtype)
    return "f" if dt == BFLOAT16 else dt.kind


def to_text(dtype: np.dtype) -> str:
    """The dtype as text that `np.dtype(text)` reads back: numpy's `.str`,
    bfloat16's name (its `.str` is "<V2": a void dtype)."""
    dt = np.dtype(dtype)
    return "bfloat16" if dt == BFLOAT16 else dt.str


def is_float(dtype: np.dtype) -> bool:
    """A real floating-point dtype (float16, bfloat16, float32, float64)."""
    return kind(dtype) == "f"


class ExternOnlyError(Exception):
    """An op other than a numpy routine on an extern-only (complex) value."""


def supported(dtype: np.dtype) -> bool:
    """A dtype every op and kernel handles."""
    return dtype in SUPPORTED


def extern_only(dtype: np.dtype) -> bool:
    """A dtype only numpy routines compute (complex)."""
    return dtype in EXTERN_ONLY


def representable(dtype: np.dtype) -> bool:
    """A dtype a value of the graph may have: supported or extern-only."""
    return dtype in SUPPORTED or dtype in EXTERN_ONLY


def is_extern_only_type(t: Attribute) -> bool:
    """An IR type (a tensor, memref or element type) of an extern-only dtype."""
    el = getattr(t, "element_type", t)
    return isinstance(el, ComplexType)


def to_ir(dtype: np.dtype) -> Attribute:
    try:
        return _TO_IR[np.dtype(dtype)]
    except KeyError:
        raise TypeError(f"dtype {dtype} is not supported by the compiler") from None


def from_ir(t: Attribute) -> np.dtype:
    d = _FROM_IR.get(t)
    if d is None:
        raise TypeError(f"element type {t} has no numpy dtype here")
    return d


def tensor_type(shape: tuple[int, ...], dtype: np.dtype) -> TensorType:
    return TensorType(to_ir(dtype), shape)


def numpy_of(t: TensorType) -> tuple[tuple[int, ...], np.dtype]:
    return t.get_shape(), from_ir(t.element_type)
