"""numpy dtype <-> IR element type. numpy stays the oracle for promotion."""

from __future__ import annotations

import numpy as np
from xdsl.dialects.builtin import (
    BFloat16Type,
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
    np.dtype(np.float32): Float32Type(),
    np.dtype(np.float64): Float64Type(),
}
_FROM_IR = {v: k for k, v in _TO_IR.items()}
_FROM_IR[BFloat16Type()] = None  # type: ignore[assignment]  # needs ml_dtypes

SUPPORTED = frozenset(_TO_IR)


def supported(dtype: np.dtype) -> bool:
    return dtype in SUPPORTED


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
