"""`np.linalg.norm` captured as numpy computes it where numpy's own steps
are ufuncs and reductions (the 2-norm as a sum of squares, the 1-, max-,
0- and p-norms, the Frobenius and induced 1/inf matrix norms): one fused
kernel, no call out. The SVD norms (2/-2/'nuc' of matrices), complex and
float16 inputs and any differentiated norm stay numpy's routine. Checked
against numpy over dtypes, layouts, special values (overflowing squares
included), empty and size-1 dims, every order, axis and keepdims, and
numpy's errors."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lowering
from lowering.config import patch
from lowering.testing import TOLERANCES, array_shapes, arrays, assert_matches_numpy

VECTOR_ORDS = [None, 2, 1, 0, -1, -2, 3, 0.5, np.inf, -np.inf, 2.0, True]
MATRIX_ORDS = [None, "fro", "f", 1, -1, np.inf, -np.inf, 2, "nuc"]
LAYOUTS = ["C", "F", "strided", "transposed", "broadcast"]


def rtol(x: np.ndarray, ord_) -> float:
    dt = np.result_type(x.dtype, np.float32) if x.dtype.kind == "f" else np.dtype(np.float64)
    r = TOLERANCES.rtol(dt, "reduction", max(x.size, 1))
    # a p-norm's root and power, an SVD: a few more roundings than a sum's
    return r * (100 if ord_ in (2, -2, "nuc") or not isinstance(ord_, (type(None), str))
                and ord_ not in (0, 1, np.inf, -np.inf) else 1)


def check(fn, x, ord_):
    cf = lowering.compile(fn, fullgraph=True)
    with patch(verify_each_pass=True):
        assert_matches_numpy(fn, x, compiled=cf, calls=2, rtol=rtol(x, ord_))


@settings(deadline=None, max_examples=60)
@given(data=st.data())
def test_vector_norms_match_numpy(data):
    dt = data.draw(st.sampled_from([np.float64, np.float32, np.int64, np.int32, np.bool_]))
    x = data.draw(arrays(dt, array_shapes(min_dims=1, max_dims=3),
                         layout=data.draw(st.sampled_from(LAYOUTS))))
    ord_ = data.draw(st.sampled_from(VECTOR_ORDS))
    axis = data.draw(st.sampled_from([None, *range(-x.ndim, x.ndim)]))
    if axis is None and x.ndim > 1 and ord_ is not None:
        axis = -1  # (axis None with an order: a matrix norm, or numpy's error)
    keepdims = data.draw(st.booleans())
    check(lambda a: np.linalg.norm(a, ord=ord_, axis=axis, keepdims=keepdims), x, ord_)


@settings(deadline=None, max_examples=60)
@given(data=st.data())
def test_matrix_norms_match_numpy(data):
    dt = data.draw(st.sampled_from([np.float64, np.float32, np.int64]))
    x = data.draw(arrays(dt, array_shapes(min_dims=2, max_dims=3, min_side=1),
                         layout=data.draw(st.sampled_from(LAYOUTS))))
    ord_ = data.draw(st.sampled_from(MATRIX_ORDS))
    if ord_ in (2, -2, "nuc"):  # (an SVD of special values: LAPACK's, not ours)
        x = np.nan_to_num(x, nan=0.5, posinf=3.0, neginf=-2.0).clip(-1e3, 1e3)
    axes = data.draw(st.permutations(range(x.ndim)).map(lambda p: tuple(p[:2])))
    if data.draw(st.booleans()):
        axes = tuple(a - x.ndim for a in axes)
    keepdims = data.draw(st.booleans())
    check(lambda a: np.linalg.norm(a, ord=ord_, axis=axes, keepdims=keepdims), x, ord_)


@pytest.mark.parametrize("x", [
    np.array([1e200, 1.0]), np.array([3e38, 1.0], np.float32), np.array([np.nan, np.inf]),
    np.array([-0.0, 0.0]), np.array([5e-324, -5e-324]), np.zeros((0, 3)), np.array(3.0),
    np.ones((1, 1)), np.arange(-4, 8).reshape(3, 4), np.array([True, False, True])])
@pytest.mark.parametrize("ord_", [None, 2, 1, 0, -1, np.inf, -np.inf, 3])
def test_special_inputs(x, ord_):
    if x.ndim != 1 and ord_ is not None:
        check(lambda a: np.linalg.norm(a, ord=ord_, axis=0), x, ord_)
    else:
        check(lambda a: np.linalg.norm(a, ord=ord_), x, ord_)
    check(lambda a: np.linalg.norm(a, keepdims=True), x, None)


@pytest.mark.parametrize("fn", [
    lambda a: np.linalg.norm(a, ord="fro", axis=0),  # a matrix order on a vector axis
    lambda a: np.linalg.norm(a, ord=3, axis=(0, 1)),  # no such matrix norm
    lambda a: np.linalg.norm(a, axis=(0, 0)),  # duplicate axes
    lambda a: np.linalg.norm(a, axis=2),  # out of range
    lambda a: np.linalg.norm(a, axis=[0, 1]),  # a list
    lambda a: np.linalg.norm(a[None], ord=1),  # 3-d, axis None, an order
])
def test_errors_are_numpys(fn):
    check(fn, np.arange(12.0).reshape(3, 4), None)


def routines(fn, *args) -> list[str]:
    report = lowering.explain(lowering.compile(fn, backend="cpu"))(*args)
    assert report.graph_break_count == 0
    return [r for r in ("np.linalg.norm",) if r in str(report)]


def test_sum_of_squares_is_one_kernel_not_a_call():
    x = np.random.default_rng(0).standard_normal((30, 40))
    for fn in (lambda a: np.linalg.norm(a), lambda a: a / np.linalg.norm(a, axis=1, keepdims=True),
               lambda a: np.linalg.norm(a, ord=np.inf, axis=(0, 1))):
        assert routines(fn, x) == []
    report = lowering.explain(lowering.compile(lambda a: np.linalg.norm(a), backend="cpu"))(x)
    assert [len(k) for k in report.kernels] == [1]


def test_a_big_arrays_2_norm_is_numpys_blas_dot():
    from lowering.capture.rules.tier2 import NORM_BLAS_SIZE

    x = np.random.default_rng(2).standard_normal(NORM_BLAS_SIZE)
    assert routines(lambda a: np.linalg.norm(a), x) == ["np.linalg.norm"]
    assert routines(lambda a: np.linalg.norm(a), x[:-1]) == []
    assert routines(lambda a: np.linalg.norm(a, 1), x) == []  # (a sum: ours)
    check(lambda a: np.linalg.norm(a), x, None)


def test_svd_norms_complex_and_half_stay_numpys_routine():
    x = np.random.default_rng(1).standard_normal((5, 4))
    assert routines(lambda a: np.linalg.norm(a, 2), x) == ["np.linalg.norm"]
    assert routines(lambda a: np.linalg.norm(a, "nuc"), x) == ["np.linalg.norm"]
    assert routines(lambda a: np.linalg.norm(a), x.astype(np.float16)) == ["np.linalg.norm"]


def test_a_differentiated_norm_keeps_the_routines_derivative():
    g = lowering.grad(lambda x: np.linalg.norm(x))(np.zeros(3))
    np.testing.assert_array_equal(g, np.zeros(3))  # (a sum of squares' sqrt: NaN at 0)
    x = np.array([3.0, -4.0])
    np.testing.assert_allclose(lowering.grad(lambda v: np.linalg.norm(v))(x), x / 5.0)
