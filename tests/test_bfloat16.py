"""bfloat16 (ml_dtypes' dtype, torch.bfloat16's numpy twin) through capture
and the CPU backend, against numpy with ml_dtypes: numpy's promotion rules,
ml_dtypes' values bit for bit for every op it computes in float32 and rounds
once (the CPU runs bfloat16 ops through numpy, as externs), sums and
products accumulated in float32 (compared with `bf16_reference`, see
lowering/testing.py "bfloat16 reductions"), matmul as numpy's float32
matmul, a LayerNorm; edge values (NaN, ±Inf, -0.0, subnormals, the largest
finite), empty and size-1 dims, every layout `arrays` draws."""

from __future__ import annotations

import warnings

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import lowering
from dialects.dtypes import BFLOAT16, is_float, kind, to_ir, to_text
from lowering.testing import (
    TOLERANCES,
    array_shapes,
    arrays,
    assert_matches_numpy,
    assert_same_value,
    bf16_reference,
    broadcastable_shapes,
    edge_values,
    examples,
)

BF = BFLOAT16
F32 = np.dtype(np.float32)


def test_the_dtype_maps_to_bf16_both_ways():
    from xdsl.dialects.builtin import BFloat16Type

    from dialects.dtypes import from_ir

    assert BF == np.dtype(ml_dtypes.bfloat16)
    assert to_ir(BF) == BFloat16Type()
    assert from_ir(BFloat16Type()) == BF
    assert kind(BF) == "f" and is_float(BF) and BF.kind == "V"  # (a user dtype to numpy)
    assert np.dtype(to_text(BF)) == BF  # (its .str is "<V2": a void dtype)


@pytest.mark.parametrize("other,want", [
    (BF, BF), (F32, F32), (np.dtype(np.float16), F32), (np.dtype(np.float64), np.float64),
    (np.dtype(np.int8), BF), (np.dtype(np.uint8), BF), (np.dtype(np.bool_), BF),
    (np.dtype(np.int32), np.float64), (np.dtype(np.int64), np.float64)])
def test_promotion_is_numpy_s(other, want):
    x = np.array([1.5, -2.0, 3.0], BF)
    y = np.array([2, 1, 0], other)

    def f(a, b):
        return a * b, a + 1.5, a * np.float32(2), a > b

    got = lowering.compile(f, fullgraph=True)(x, y)
    assert got[0].dtype == np.dtype(want) == (x * y).dtype
    assert got[1].dtype == BF  # a Python float is weak
    assert got[2].dtype == F32
    assert_same_value(got, f(x, y), rtol=0.0)


UNARY = ["negative", "absolute", "sqrt", "exp", "log", "tanh", "sin", "floor", "rint", "sign",
         "square", "reciprocal", "expm1", "log1p", "isnan", "isinf", "signbit", "cbrt"]
BINARY = ["add", "subtract", "multiply", "divide", "maximum", "minimum", "fmax", "fmin",
          "power", "arctan2", "hypot", "copysign", "floor_divide", "remainder", "fmod",
          "less", "equal", "greater_equal", "not_equal", "logaddexp"]


def _ufunc(name):
    uf = getattr(np, name)
    return (lambda x: uf(x)) if uf.nin == 1 else (lambda x, y: uf(x, y))


@pytest.mark.parametrize("name", UNARY + BINARY)
def test_every_ufunc_is_ml_dtypes_bit_for_bit_on_edge_values(name):
    v = np.array(edge_values(BF) + [0.1, -7.25, 1e-3, 40.0], np.float32).astype(BF)
    uf = getattr(np, name)
    args = [v] if uf.nin == 1 else [a.ravel() for a in np.meshgrid(v, v)]
    got = assert_matches_numpy(_ufunc(name), *args, rtol=0.0)
    with np.errstate(all="ignore"):
        assert got.dtype == uf(*args).dtype


@given(data=st.data())
@examples(0.5)
def test_pointwise_programs_match_ml_dtypes(data):
    s1, s2, s3 = data.draw(broadcastable_shapes(3))
    x, y = data.draw(arrays(BF, s1)), data.draw(arrays(BF, s2))
    z = data.draw(arrays(data.draw(st.sampled_from([BF, F32, np.dtype(np.uint8)])), s3))

    def f(x, y, z):
        a = np.maximum(x * y - 0.5, z) / (np.abs(y) + 1.0)
        return a, np.where(x < y, np.exp(x), -y), (x + z).astype(np.float64), x.astype(np.int32)

    assert_matches_numpy(f, x, y, z, rtol=0.0)


@given(x=arrays(BF, array_shapes(min_dims=1, max_dims=3, max_side=5)), data=st.data())
@examples(0.5)
def test_reductions_accumulate_in_float32(x, data):
    axis = data.draw(st.sampled_from([None, *range(x.ndim), -1]))
    n = max(x.size // max(x.shape[axis] if axis is not None else 1, 1), 1) \
        if axis is None else x.shape[axis]

    def sums(x):
        return x.sum(axis), x.prod(axis), x.mean(axis) if x.size else x.sum(axis)

    def extremes(x):
        if x.size == 0:
            return x.sum(axis)
        return x.max(axis), x.min(axis), np.argmax(x, axis)

    got = lowering.compile(sums)(x)
    assert [g.dtype for g in got] == [BF, BF, BF]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = bf16_reference(sums)(x)
    assert_same_value(got, want, rtol=TOLERANCES.rtol(BF, "reduction", max(x.size, n)))
    assert_matches_numpy(extremes, x, rtol=0.0)  # (exact: numpy's own values)


def test_a_long_sum_is_not_numpy_s_bfloat16_accumulation():
    x = np.ones(1000, BF)
    assert x.sum() == 256  # ml_dtypes rounds every partial sum to bfloat16
    got = lowering.compile(lambda x: (x.sum(), x.mean(), np.add.reduce(x)))(x)
    assert [type(g) for g in got] == [BF.type] * 3
    assert [float(g) for g in got] == [1000.0, 1.0, 1000.0]


def test_reduction_tolerance_is_one_rounding_plus_float32_accumulation():
    n = 4096
    rtol = TOLERANCES.rtol(BF, "reduction", n)
    assert rtol == float(np.finfo(BF).eps) + TOLERANCES.rtol(F32, "reduction", n)
    assert rtol < 0.01 < float(np.finfo(BF).eps) * n


@given(data=st.data())
@examples(0.5)
def test_matmul_is_numpy_s_float32_matmul(data):
    m, k, n = (data.draw(st.integers(0, 6)) for _ in range(3))
    a = data.draw(arrays(BF, (m, k), elements=st.floats(-4, 4, width=32)))
    b = data.draw(arrays(BF, (k, n), elements=st.floats(-4, 4, width=32)))

    def f(a, b):
        return a @ b, (a @ b).astype(BF)

    got = assert_matches_numpy(f, a, b, rtol=TOLERANCES.rtol(F32, "reduction", k))
    assert got[0].dtype == F32 and got[1].dtype == BF


def layernorm(x, w, b):
    xc = x - x.mean(-1, keepdims=True)
    return xc / np.sqrt((xc * xc).mean(-1, keepdims=True) + 1e-5) * w + b


def assert_layernorm_close(got, x, w, b):
    """Within a few bfloat16 roundings of the row's scale: each op rounds to
    bfloat16, the reference (float32 from bfloat16 inputs) once."""
    ref = bf16_reference(layernorm)(x, w, b).astype(np.float64)
    assert got.dtype == BF and got.shape == ref.shape
    g = got.astype(np.float64)
    assert np.array_equal(np.isnan(g), np.isnan(ref))
    scale = np.abs(ref).max(axis=-1, keepdims=True, initial=0.0)
    ok = np.isnan(ref) | (np.abs(g - ref) <= 4 * float(np.finfo(BF).eps) * scale)
    assert ok.all(), np.abs(g - ref).max()


@given(rows=st.integers(1, 5), cols=st.integers(1, 70), seed=st.integers(0, 2**16))
@examples(0.3)
def test_layernorm(rows, cols, seed):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((rows, cols)) * 3 + 1).astype(BF)
    w = (1 + 0.1 * rng.standard_normal(cols)).astype(BF)
    b = (0.1 * rng.standard_normal(cols)).astype(BF)
    got = lowering.compile(layernorm, fullgraph=True)(x, w, b)
    assert_layernorm_close(got, x, w, b)
    # the transposed and the strided input: the same values
    xt = np.asfortranarray(x)
    np.testing.assert_array_equal(lowering.compile(layernorm)(xt, w, b).view(np.uint16),
                                  got.view(np.uint16))


def test_a_cached_program_keeps_its_bfloat16_buffers(tmp_path, monkeypatch):
    """A program read back from the disk cache allocates bfloat16 buffers
    (their dtype was written as "<V2", a void, and every call fell back)."""
    monkeypatch.setenv("LOWERING_CACHE_DIR", str(tmp_path))
    x = np.linspace(-3, 3, 48, dtype=np.float32).reshape(6, 8).astype(BF)
    w, b = np.ones(8, BF), np.zeros(8, BF)
    want = lowering.compile(layernorm)(x, w, b)
    from lowering.pipeline import clear_programs

    clear_programs()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        f = lowering.compile(layernorm)
        got = f(x, w, b)
    assert f.stats["eager_fallbacks"] == 0
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))


def test_value_and_grad_gives_bfloat16_gradients():
    def loss(W, b, X, Y):
        h = (X @ W).astype(BF) + b
        return ((np.tanh(h) - Y) ** 2).mean()

    rng = np.random.default_rng(1)
    W, X, Y = (rng.standard_normal(s).astype(BF) for s in [(8, 4), (16, 8), (16, 4)])
    b = (0.1 * rng.standard_normal(4)).astype(BF)
    v, (gW, gb) = lowering.compile(lowering.value_and_grad(loss, argnums=(0, 1)))(W, b, X, Y)
    assert type(v) is BF.type and gW.dtype == BF and gb.dtype == BF
    ref_v, (rW, rb) = lowering.compile(lowering.value_and_grad(loss, argnums=(0, 1)),
                                       backend="numpy")(*[a.astype(np.float64)
                                                          for a in (W, b, X, Y)])
    # bfloat16 roundings along the forward and the backward (a budget of ~20 ops)
    rtol = TOLERANCES.rtol(BF, "gradient", 20)
    assert abs(float(v) - ref_v) <= rtol * abs(ref_v)
    for g, r in ((gW, rW), (gb, rb)):
        assert np.abs(g.astype(np.float64) - r).max() <= rtol * np.abs(r).max()
