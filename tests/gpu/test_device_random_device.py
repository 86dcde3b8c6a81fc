"""Random draws made on a CUDA device (lowering/device_random.py): the
compiled Philox kernel gives the interpreter's words bit for bit (uniforms
exactly, normals to libdevice's rounding), torch and CuPy entries of a
drawing function run on the device in both modes, and the results stay
each call's own under reduce-overhead.

Marked `gpu`: skipped without torch and a CUDA device."""

from __future__ import annotations

import numpy as np
import pytest

from tests.gpu.marks import GPU  # noqa: E402

pytestmark = GPU

import lowering  # noqa: E402
from lowering import device_random  # noqa: E402
from lowering.capture.tracer import Draw  # noqa: E402
from runtime import gpu  # noqa: E402


@pytest.fixture(autouse=True)
def on_device(monkeypatch):
    monkeypatch.delenv("LOWERING_GPU", raising=False)


def fill(dev, method, n, dtype, seed, args=()):
    d = device_random.DeviceDraw(Draw(None, method, args, {}), (n,), dtype)
    out = dev.empty((n,), dtype)
    d.fill(dev, out, seed)
    return dev.to_host(out)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_compiled_philox_matches_the_interpreter(dtype):
    import torch  # noqa: F401

    dev, host = gpu.TorchDevice(), gpu.HostDevice()
    n, seed = 5000, 0x299F31D0A4093822
    np.testing.assert_array_equal(fill(dev, "random", n, dtype, seed),
                                  fill(host, "random", n, dtype, seed))
    rtol = 1e-6 if dtype == np.float32 else 1e-13
    np.testing.assert_allclose(fill(dev, "normal", n, dtype, seed, (1.0, 2.0)),
                               fill(host, "normal", n, dtype, seed, (1.0, 2.0)),
                               rtol=rtol, atol=rtol)


@pytest.mark.parametrize("mode", ["default", "reduce-overhead"])
def test_torch_entry_draws_on_the_device(mode):
    import torch

    def mc(s0, rng):
        z = rng.standard_normal((64, s0.shape[0]))
        paths = s0 * np.exp(np.cumsum(0.01 * z - 0.5 * 0.01**2, axis=0))
        return np.maximum(paths[-1] - 1.0, 0.0).mean(), z.std()

    f = lowering.compile(mc, backend="gpu", mode=mode)
    s0 = torch.ones(100_000, dtype=torch.float64, device="cuda")
    rng = np.random.default_rng(1)
    f(s0, rng)  # host copies: traces and compiles
    got = []
    for _ in range(3):
        price, sd = f(s0, rng)
        assert isinstance(sd, torch.Tensor) and sd.is_cuda
        got.append(float(price))
        assert abs(float(sd) - 1.0) < 0.01
    assert f.stats["cache_hits"] == 3 and len(set(got)) == 3
    want = mc(np.ones(100_000), np.random.default_rng(2))[0]  # numpy's own estimate
    assert all(abs(p - want) < 0.01 for p in got)


def test_cupy_entry_draws_on_the_device():
    cp = pytest.importorskip("cupy")

    @lowering.compile(backend="gpu")
    def f(x, rng):
        return x + rng.uniform(-1.0, 1.0, size=x.shape)

    x = cp.zeros(300_000)
    rng = np.random.default_rng(3)
    f(x, rng)
    y = f(x, rng)
    assert isinstance(y, cp.ndarray) and f.stats["cache_hits"] == 1
    h = cp.asnumpy(y)
    assert -1.0 <= h.min() and h.max() < 1.0 and abs(h.mean()) < 0.01
