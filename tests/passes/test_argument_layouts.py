"""Argument buffers by layout class (`AnnotateLayouts`): a C-contiguous
argument's strides follow from its shape, and so do an F-ordered one's
(1, n0, n0*n1, ...: static in its buffer type up to the first dynamic size),
so kernels address it with constant strides and BLAS reads it as it lies; a
strided argument's are read from the array."""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.dialects.builtin import NoneAttr, StridedLayoutAttr, TensorType, f64

import lowering
from dialects import array as A
from lowering.codegen.llvm import buffer_strides
from lowering.testing import TOLERANCES
from passes.lower_to_loop import memref_of


def test_an_f_ordered_buffer_has_the_strides_of_its_shape():
    t = memref_of(TensorType(f64, [3, 4, 5]), "F")
    assert isinstance(t.layout, StridedLayoutAttr)
    assert buffer_strides(t) == [1, 3, 12]
    # a size 0 dim counts as 1 (no element is addressed), a dynamic one ends what is known
    assert buffer_strides(memref_of(TensorType(f64, [0, 4]), "F")) == [1, 1]
    assert buffer_strides(memref_of(TensorType(f64, [3, A.DYN, 5, 2]), "F")) == [1, 3, None, None]
    assert buffer_strides(memref_of(TensorType(f64, [3, 4]), "strided")) == [None, None]
    assert buffer_strides(memref_of(TensorType(f64, [3, 4]), "C")) == [4, 1]
    assert isinstance(memref_of(TensorType(f64, [3, 4]), "C").layout, NoneAttr)


def _f_ordered_with_free_unit_strides(shape, rng):
    """An F-ordered array whose size-1 dims have strides numpy leaves free
    (it is F-contiguous whatever they are)."""
    a = np.asfortranarray(rng.standard_normal(shape))
    strides = [s if n != 1 else 8 * 977 for s, n in zip(a.strides, shape)]
    b = np.lib.stride_tricks.as_strided(a, shape, strides)
    assert b.flags.f_contiguous and (b.flags.c_contiguous or not any(
        n == 1 for n in shape) or b.strides != a.strides)
    return b


@pytest.mark.parametrize("shape", [(5, 1, 3), (1, 4, 6), (7, 3, 1), (4, 6), (6, 1), (3, 2, 1, 5)])
def test_f_ordered_arguments_with_free_unit_strides_match_numpy(shape):
    rng = np.random.default_rng(0)
    x = _f_ordered_with_free_unit_strides(shape, rng)
    y = np.asfortranarray(rng.standard_normal(shape))

    def f(x, y):
        return x * y + 1.0, (x - y).sum(axis=0), np.exp(x).sum()

    cf = lowering.compile(f, backend="cpu")
    for _ in range(2):
        for got, want in zip(cf(x, y), f(x, y)):
            assert got.shape == want.shape and got.dtype == want.dtype
            np.testing.assert_allclose(got, want, rtol=TOLERANCES.rtol(np.float64, "reduction",
                                                                       x.size))
