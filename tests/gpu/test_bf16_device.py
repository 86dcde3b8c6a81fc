"""bfloat16 on a CUDA device: torch.bfloat16 tensors in and out (ml_dtypes'
bfloat16 on the host copies), a LayerNorm and the bfloat16 MLP training
step (bench/gpu.py's W5 bf16), in both modes, against the CPU backend
(ml_dtypes' ops, float32 sums) and a float64 reference.

Marked `gpu`: skipped without torch and a CUDA device."""

from __future__ import annotations

import numpy as np
import pytest

from tests.gpu.marks import GPU  # noqa: E402

pytestmark = GPU

import lowering  # noqa: E402
from dialects.dtypes import BFLOAT16 as BF  # noqa: E402
from lowering.testing import TOLERANCES, bf16_reference  # noqa: E402


@pytest.fixture(autouse=True)
def on_device(monkeypatch):
    monkeypatch.delenv("LOWERING_GPU", raising=False)


def to_torch(a):
    import torch

    return torch.from_numpy(np.ascontiguousarray(a).view(np.int16)).cuda().view(torch.bfloat16)


def to_numpy(t):
    import torch

    return t.cpu().view(torch.int16).numpy().view(BF)


def layernorm(x, w, b):
    xc = x - x.mean(-1, keepdims=True)
    return xc / np.sqrt((xc * xc).mean(-1, keepdims=True) + 1e-5) * w + b


@pytest.mark.parametrize("mode", ["default", "reduce-overhead"])
@pytest.mark.parametrize("shape", [(64, 512), (3, 4096), (16384, 4096)])
def test_layernorm_on_bf16_tensors(shape, mode):
    import torch

    rng = np.random.default_rng(0)
    x = (rng.standard_normal(shape) * 2 + 0.5).astype(BF)
    w = (1 + 0.1 * rng.standard_normal(shape[1])).astype(BF)
    b = (0.1 * rng.standard_normal(shape[1])).astype(BF)
    x[0, :3] = [np.nan, np.inf, -0.0]
    f = lowering.compile(layernorm, backend="gpu", mode=mode)
    tx, tw, tb = to_torch(x), to_torch(w), to_torch(b)
    want = lowering.compile(layernorm)(x, w, b)  # the CPU backend: ml_dtypes' ops
    # (numpy's result dtype: bfloat16, or float32 where this numpy and ml_dtypes
    # promote bfloat16 with a Python float to float32)
    assert want.dtype == layernorm(x, w, b).dtype
    want_dtype = torch.bfloat16 if want.dtype == BF else torch.float32
    ref = bf16_reference(layernorm)(x, w, b).astype(np.float64)
    for _ in range(3):  # host copies once, then the device entry
        got = f(tx, tw, tb)
        assert isinstance(got, torch.Tensor) and got.dtype == want_dtype and got.is_cuda
        g = to_numpy(got) if got.dtype == torch.bfloat16 else got.cpu().numpy()
        assert np.array_equal(np.isnan(g), np.isnan(want))
        ok = ~np.isnan(want)
        # the device's libdevice rsqrt-free sqrt and division are IEEE: the CPU
        # backend's values but where a row's float32 sum (another order) rounds
        # the other way
        tol = TOLERANCES.rtol(BF, "reduction", shape[1]) * 4
        scale = np.abs(ref[ok]).max()
        assert np.abs(g[ok].astype(np.float64) - want[ok].astype(np.float64)).max() \
            <= tol * scale
    assert f.stats["eager_fallbacks"] == 0 and f.stats["cache_hits"] == 2


def mlp_loss_bf16(X, W1, b1, W2, b2, Y):
    h = (X @ W1).astype(BF) + b1
    g = 0.5 * h * (1.0 + np.tanh(0.7978845608028654 * (h + 0.044715 * h ** 3)))
    out = (g @ W2).astype(BF) + b2
    return ((out - Y) ** 2).mean()


@pytest.mark.parametrize("mode", ["default", "reduce-overhead"])
@pytest.mark.parametrize("sizes", [(64, 32, 128), (4096, 1024, 4096)])
def test_bf16_mlp_training_step(sizes, mode):
    """value_and_grad of the bfloat16 W5 on torch.bfloat16 tensors: the value
    and the four gradients in bfloat16 on the device, within bfloat16's
    gradient tolerance of the float64 gradient of the same bfloat16 inputs."""
    import torch

    n, d, hd = sizes
    rng = np.random.default_rng(5)
    host = [rng.standard_normal((n, d)), rng.standard_normal((d, hd)) / np.sqrt(d),
            0.1 * rng.standard_normal(hd), rng.standard_normal((hd, d)) / np.sqrt(hd),
            0.1 * rng.standard_normal(d), rng.standard_normal((n, d))]
    hb = [a.astype(BF) for a in host]
    ref_v, ref_g = lowering.compile(lowering.value_and_grad(mlp_loss_bf16, argnums=(1, 2, 3, 4)),
                                    backend="numpy")(*[a.astype(np.float64) for a in hb])
    step = lowering.compile(lowering.value_and_grad(mlp_loss_bf16, argnums=(1, 2, 3, 4)),
                            backend="gpu", mode=mode)
    t_in = [to_torch(a) for a in hb]
    rtol = TOLERANCES.rtol(BF, "gradient", 24)  # bfloat16 roundings along both passes
    for _ in range(3):
        v, g = step(*t_in)
        v = float(v.float().cpu()) if isinstance(v, torch.Tensor) else float(v)
        assert abs(v - ref_v) <= rtol * abs(ref_v)
        for gi, ri in zip(g, ref_g):
            assert isinstance(gi, torch.Tensor) and gi.dtype == torch.bfloat16 and gi.is_cuda
            assert np.abs(to_numpy(gi).astype(np.float64) - ri).max() <= rtol * np.abs(ri).max()
    assert step.stats["eager_fallbacks"] == 0
