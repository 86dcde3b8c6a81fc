"""bfloat16 (and float16) kernels of the Triton emitter, without a GPU: the
GPU pipeline's kernels compute them (in float32, rounded once to the result
type; casts rounded once, float64 and integers through a round-to-odd
float32), every such kernel compiles for sm_90, and Triton's interpreter
(its bfloat16 conversions made exact: lowering/backends/triton_launch.py)
computes ml_dtypes' values: each ufunc and cast bit for bit on edge values,
reductions and a LayerNorm bit for bit against the CPU backend (ml_dtypes'
ops, float32 sums), hypothesis inputs with NaN, ±Inf, -0.0, empty and
size-1 dims. The same programs on the stand-in device (Box arrays), a
bfloat16 MLP training step included."""

from __future__ import annotations

import functools
import os
import tempfile
import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from xdsl.parser import Parser

os.environ.setdefault("TRITON_CACHE_DIR", tempfile.mkdtemp(prefix="lowering-test-triton-"))

import triton  # noqa: E402,F401

import lowering  # noqa: E402
from dialects.dtypes import BFLOAT16  # noqa: E402
from lowering.backends import triton_launch as TL  # noqa: E402
from lowering.codegen import triton_kernel as TK  # noqa: E402
from lowering.explain import explain  # noqa: E402
from lowering.pipeline import context, lower  # noqa: E402
from lowering.testing import (  # noqa: E402
    TOLERANCES,
    arrays,
    assert_same_value,
    bf16_reference,
    edge_values,
    examples,
    ufunc_class,
)

BF = BFLOAT16
F16 = np.dtype(np.float16)


def gpu_kernel_level(fn, args):
    """fn's kernel level as the GPU pipeline leaves it (C-contiguous inputs)."""
    report = explain(lowering.compile(fn, backend="numpy"))(*args)
    (graph,) = report.graphs
    module = Parser(context(), graph).parse_module()
    return lower(module, "gpu", ["C"] * len(args))[0]


def interpreted(fn, args) -> list[np.ndarray]:
    args = [np.ascontiguousarray(a) for a in args]
    return TL.run_module(gpu_kernel_level(fn, args), args)


def eager(fn, args):
    with np.errstate(all="ignore"):
        out = fn(*[a.copy() for a in args])
    return [np.asarray(o) for o in (out if isinstance(out, tuple) else (out,))]


def cpu(fn, args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = lowering.compile(fn)(*[a.copy() for a in args])
    return [np.asarray(o) for o in (out if isinstance(out, tuple) else (out,))]


def _edges(dt) -> np.ndarray:
    return np.array(edge_values(dt) + [0.1, -7.25, 1e-3, 40.0, 127.5, -129.0, 300.0],
                    np.float32).astype(dt)


UNARY = ["negative", "absolute", "sqrt", "exp", "exp2", "log", "tanh", "sin", "cos", "floor",
         "ceil", "trunc", "rint", "sign", "square", "reciprocal", "expm1", "log1p", "isnan",
         "isinf", "isfinite", "signbit", "cbrt", "arctan", "sinh", "deg2rad"]
BINARY = ["add", "subtract", "multiply", "divide", "maximum", "minimum", "fmax", "fmin",
          "power", "arctan2", "hypot", "copysign", "floor_divide", "remainder", "fmod",
          "less", "less_equal", "equal", "not_equal", "greater", "logaddexp", "heaviside"]


@functools.lru_cache(maxsize=None)
def _ufunc_fn(name: str):
    uf = getattr(np, name)
    return (lambda x: uf(x)) if uf.nin == 1 else (lambda x, y: uf(x, y))


@pytest.mark.parametrize("dt", [BF, F16], ids=["bf16", "f16"])
@pytest.mark.parametrize("name", UNARY + BINARY)
def test_every_ufunc_matches_numpy_on_edge_values(name, dt):
    v = _edges(dt)
    uf = getattr(np, name)
    args = [v] if uf.nin == 1 else [a.ravel() for a in np.meshgrid(v, v)]
    (want,) = eager(_ufunc_fn(name), args)
    (got,) = interpreted(_ufunc_fn(name), args)
    # the interpreter's libdevice is numpy's float32 functions, rounded once, as
    # ml_dtypes' loops compute (numpy's float16 sin/cos/tanh/...: its own SIMD
    # code, within a ULP)
    rtol = 0.0 if dt == BF or ufunc_class(name) == "exact" else None
    assert_same_value(got, want, rtol=rtol, what=f"np.{name} on {dt}")


def casts(x, d):
    return (x.astype(np.float32), x.astype(np.float64), x.astype(np.int8),
            x.astype(np.int32), x.astype(np.int64), x.astype(np.uint8), x.astype(np.uint32),
            x.astype(np.bool_), x.astype(F16 if x.dtype == BF else BF),
            (d * 1.0000001).astype(x.dtype), d.astype(np.float32).astype(x.dtype),
            (d * 1e6).astype(np.int64).astype(x.dtype),
            (d * 1e6).astype(np.int32).astype(x.dtype))


@pytest.mark.parametrize("dt", [BF, F16], ids=["bf16", "f16"])
def test_casts_match_numpy_bit_for_bit(dt):
    v = _edges(dt)
    # float64 values next to rounding ties of the narrow type, and past them
    ties = np.array([1 + 2.0**-8 + 2.0**-30, -(1 + 2.0**-8 + 2.0**-30), 1 + 2.0**-8,
                     1 + 2.0**-11 + 2.0**-40, 3.4e38, 1e300, -1e300, 2.0**-133 * 1.5,
                     65520.0, 65519.99, 16777217.0, 2.0**40 + 2.0**32 + 1])
    d = np.concatenate([v.astype(np.float64), ties])
    x = np.resize(v, d.shape)
    want = eager(casts, [x, d])
    got = interpreted(casts, [x, d])
    for i, (g, w) in enumerate(zip(got, want)):
        assert_same_value(g, w, rtol=0.0, what=f"cast {i} of {dt}")


def reductions(x):
    return (x.sum(1), x.sum(0), x.max(1), x.min(0), np.argmax(x, 1), np.argmin(x, 0),
            x.mean(1), x.var(0), x.prod(1))


@given(x=arrays(BF, st.tuples(st.integers(1, 6), st.integers(1, 40)), layout="C"))
@examples(0.5)
def test_reductions_match_numpy(x):
    """Sums, means and products accumulated in float32: against numpy on
    the float32 upcast (`bf16_reference`) within bfloat16's reduction
    tolerance; var: against numpy's own (`_assert_var_close`); max, min,
    argmax, argmin: numpy's, bit for bit."""
    got = interpreted(reductions, [x])
    ref = bf16_reference(reductions)(x)
    exact = eager(reductions, [x])
    for i, (g, r, e) in enumerate(zip(got, ref, exact)):
        assert g.dtype == e.dtype
        if i in (2, 3, 4, 5):
            assert_same_value(g, e, rtol=0.0, what=f"reduction {i}")
        elif i == 7:
            _assert_var_close(g, e, x)
        else:
            assert_same_value(g, np.asarray(r), rtol=TOLERANCES.rtol(BF, "reduction", x.size),
                              what=f"reduction {i}")


def _assert_var_close(got, want, x):
    """x.var(0) against numpy's own bfloat16 var (not the float32 upcast's:
    numpy rounds the mean's sum, the mean, `x - mean` and its square to
    bfloat16, and so does the kernel). The kernel sums in float32 where numpy
    adds row by row in bfloat16, so its mean may be one bfloat16 rounding
    away from numpy's: that moves every `x - mean` by up to u|x| (u the unit
    roundoff), and the variance by up to 2u|x|(sqrt(var) + u|x|), besides
    the sums' own reduction tolerance."""
    g, w = got.astype(np.float64), want.astype(np.float64)
    assert np.array_equal(np.isnan(g), np.isnan(w)), f"var: NaN positions differ {g} {w}"
    fin = np.isfinite(w)
    assert np.array_equal(g[~fin & ~np.isnan(w)], w[~fin & ~np.isnan(w)]), f"var: infinities {g} {w}"
    u = 2.0 ** -8
    with np.errstate(all="ignore"):
        m = np.abs(x.astype(np.float64)).max(0)
        atol = 2 * u * m * (np.sqrt(np.abs(w)) + u * m)
    tol = TOLERANCES.rtol(BF, "reduction", x.size) * np.abs(w) + atol
    ok = np.abs(g - w)[fin] <= tol[fin]
    assert np.all(ok), f"var: values differ beyond the bound\n got={got}\nwant={want}\nbound={tol}"


def layernorm(x, w, b):
    xc = x - x.mean(-1, keepdims=True)
    return xc / np.sqrt((xc * xc).mean(-1, keepdims=True) + 1e-5) * w + b


@given(rows=st.integers(1, 6), cols=st.sampled_from([1, 7, 64, 300]),
       seed=st.integers(0, 2**16))
@examples(0.3)
def test_layernorm_matches_the_cpu_backend(rows, cols, seed):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((rows, cols)) * 3 + 1).astype(BF)
    w = (1 + 0.1 * rng.standard_normal(cols)).astype(BF)
    b = (0.1 * rng.standard_normal(cols)).astype(BF)
    (got,), (want,) = interpreted(layernorm, [x, w, b]), cpu(layernorm, [x, w, b])
    assert got.dtype == BF
    assert_same_value(got, want, rtol=TOLERANCES.rtol(BF, "reduction", cols) * 4)
    kernels = TK.emit_module(gpu_kernel_level(layernorm, [x, w, b]))
    # (one row, or rows of one element: the reductions are split or vanish)
    assert rows == 1 or cols == 1 or len(kernels) == 1, "a bfloat16 LayerNorm is one kernel"


PROGRAMS = {
    "layernorm": (layernorm, lambda: [np.ones((8, 64), BF), np.ones(64, BF), np.ones(64, BF)]),
    "reductions": (reductions, lambda: [np.ones((6, 20), BF)]),
    "casts-bf16": (casts, lambda: [np.ones(16, BF), np.ones(16)]),
    "casts-f16": (casts, lambda: [np.ones(16, F16), np.ones(16)]),
    "ufuncs-bf16": (lambda x, y: tuple(_ufunc_fn(n)(x) for n in UNARY)
                    + tuple(_ufunc_fn(n)(x, y) for n in BINARY),
                    lambda: [np.ones(16, BF), np.ones(16, BF)]),
}


@pytest.mark.parametrize("name", PROGRAMS)
def test_every_bf16_kernel_compiles_for_sm90(name):
    fn, make = PROGRAMS[name]
    kernels = TK.emit_module(gpu_kernel_level(fn, make()))
    assert kernels
    halves = 0
    for tk in kernels:
        ck = TL.compile_for(tk)
        assert ck.asm["cubin"] and ".target sm_90" in ck.asm["ptx"]
        halves += ("bf16" in tk.source) or ("float16" in tk.source)
    assert halves, f"{name}: no kernel computes half values"


# ---- on the stand-in device ---------------------------------------------------------

@pytest.fixture
def box_device(monkeypatch):
    from tests.stand_in_device import install

    monkeypatch.setenv("LOWERING_GPU", "interpret")
    return install(monkeypatch)


def mlp_loss_bf16(X, W1, b1, W2, b2, Y):
    """bench/gpu.py's bfloat16 W5: torch's bf16 matmul rounds its output to
    bfloat16; numpy's bf16 @ bf16 is float32, rounded here."""
    h = (X @ W1).astype(BF) + b1
    g = 0.5 * h * (1.0 + np.tanh(0.7978845608028654 * (h + 0.044715 * h ** 3)))
    out = (g @ W2).astype(BF) + b2
    return ((out - Y) ** 2).mean()


@pytest.mark.parametrize("mode", ["default", "reduce-overhead"])
def test_bf16_programs_on_device_arrays(box_device, mode):
    from tests.stand_in_device import Box

    rng = np.random.default_rng(3)
    x = (rng.standard_normal((8, 64)) * 2).astype(BF)
    w, b = (1 + 0.1 * rng.standard_normal(64)).astype(BF), rng.standard_normal(64).astype(BF)
    f = lowering.compile(layernorm, backend="gpu", mode=mode)
    for _ in range(3):
        got = f(Box(x.copy()), Box(w.copy()), Box(b.copy()))
        assert isinstance(got, Box) and got.dtype == BF
        np.testing.assert_array_equal(got.a.view(np.uint16), cpu(layernorm, [x, w, b])[0]
                                      .view(np.uint16))
    assert f.stats["cache_hits"] == 2 and f.stats["eager_fallbacks"] == 0

    n, d, hd = 16, 8, 32
    host = [rng.standard_normal((n, d)), rng.standard_normal((d, hd)) / np.sqrt(d),
            0.1 * rng.standard_normal(hd), rng.standard_normal((hd, d)) / np.sqrt(hd),
            0.1 * rng.standard_normal(d), rng.standard_normal((n, d))]
    hb = [a.astype(BF) for a in host]
    step = lowering.value_and_grad(mlp_loss_bf16, argnums=(1, 2, 3, 4))
    want_v, want_g = lowering.compile(step)(*[a.copy() for a in hb])
    g = lowering.compile(step, backend="gpu", mode=mode)
    for _ in range(3):
        v, grads = g(*[Box(a.copy()) for a in hb])
        assert float(v.a if isinstance(v, Box) else v) == float(want_v)
        for gi, wi in zip(grads, want_g):
            assert isinstance(gi, Box) and gi.dtype == BF
            # the same ops; a sum in another order may round the other way, and
            # the backward carries that on: the gradient class's bound, relative
            # to the largest component
            err = np.abs(gi.a.astype(np.float64) - wi.astype(np.float64)).max()
            assert err <= TOLERANCES.rtol(BF, "gradient", 24) * np.abs(wi.astype(np.float64)).max()
    assert g.stats["eager_fallbacks"] == 0 and g.stats["cache_hits"] == 2


# ---- matmuls of widened operands ----------------------------------------------

def _mm(a, b):
    """(bfloat16 @ bfloat16 is numpy's float32 matmul of the widened values;
    float16's is a float16 matmul, widened here by hand)"""
    return (a.astype(np.float32) @ b.astype(np.float32)).astype(a.dtype)


def _mm_tn(a, b):
    return a.T @ b if a.dtype == BF else a.T.astype(np.float32) @ b.astype(np.float32)


def _mm_mixed(a, b):
    return a @ b.astype(np.float32)


@pytest.mark.parametrize("dt", [BF, F16], ids=["bf16", "f16"])
@pytest.mark.parametrize("fn", [_mm, _mm_tn], ids=["nn", "tn"])
def test_matmul_of_widened_operands_reads_them_narrow(dt, fn, monkeypatch):
    """numpy's `a @ b` of two bfloat16 arrays multiplies their float32
    widenings (as does one of float16 arrays widened by hand): the device
    library is handed the narrow arrays and a float32 result (exact
    products, float32 sums), no widening kernel; where the product's one use
    rounds it back to the narrow type (`_mm`), the library writes the narrow
    result itself (`rounded_product`): no float32 result, no rounding kernel."""
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((12, 12)).astype(dt), rng.standard_normal((12, 7)).astype(dt)
    module = gpu_kernel_level(fn, [a, b])
    from dialects import loop as L
    from dialects import kernel as K
    externs = [op for op in module.walk() if isinstance(op, L.ExternOp)]
    assert [e.fn.data for e in externs] == ["matmul_tn" if fn is _mm_tn else "matmul"]
    (mm,) = externs
    narrow = str(mm.buffers[0].type.element_type)
    assert narrow in ("bf16", "f16")
    assert [str(v.type.element_type) for v in mm.buffers] == \
        [narrow] * 2 + [narrow if fn is _mm else "f32"]
    assert not [op for op in module.walk() if isinstance(op, K.KernelOp)]
    monkeypatch.setenv("LOWERING_GPU", "interpret")
    got = lowering.compile(fn, backend="gpu")(a, b)
    want = eager(fn, [a, b])[0]
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64),
                               rtol=TOLERANCES.rtol(got.dtype, "reduction", 12), atol=0)


def test_matmul_of_one_widened_operand_keeps_its_cast(monkeypatch):
    rng = np.random.default_rng(6)
    a, b = rng.standard_normal((6, 5)).astype(np.float32), rng.standard_normal((5, 3)).astype(BF)
    module = gpu_kernel_level(_mm_mixed, [a, b])
    from dialects import loop as L
    (mm,) = [op for op in module.walk() if isinstance(op, L.ExternOp)]
    assert all(str(v.type.element_type) == "f32" for v in mm.buffers)
    monkeypatch.setenv("LOWERING_GPU", "interpret")
    np.testing.assert_allclose(lowering.compile(_mm_mixed, backend="gpu")(a, b),
                               eager(_mm_mixed, [a, b])[0],
                               rtol=TOLERANCES.rtol(np.float32, "reduction", 5))
