"""Random draws made on the device (lowering/device_random.py) without a
GPU: the Philox kernel in Triton's interpreter against a reference written
from the algorithm's definition and its published answers, the
distributions' moments, and device entries of functions that draw (both
modes) on the stand-in device of tests/stand_in_device.py."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("triton")

import lowering  # noqa: E402
from lowering import device_random  # noqa: E402
from lowering.capture.tracer import Draw  # noqa: E402
from runtime import gpu  # noqa: E402
from tests.stand_in_device import Box, install  # noqa: E402

M32 = 0xFFFFFFFF


def philox_ref(ctr, key):
    """Philox4x32-10 as Salmon et al. define it (Random123)."""
    c, k = list(ctr), list(key)
    for _ in range(10):
        p0, p1 = 0xD2511F53 * c[0], 0xCD9E8D57 * c[2]
        c = [(p1 >> 32) ^ c[1] ^ k[0], p1 & M32, (p0 >> 32) ^ c[3] ^ k[1], p0 & M32]
        k = [(k[0] + 0x9E3779B9) & M32, (k[1] + 0xBB67AE85) & M32]
    return c


def test_the_reference_gives_the_published_answers():
    assert philox_ref([0] * 4, [0, 0]) == [0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]
    assert philox_ref([M32] * 4, [M32] * 2) == [0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD]


def fill(method, n, dtype, seed, args=(), kwargs=None):
    d = device_random.DeviceDraw(Draw(None, method, args, kwargs or {}), (n,), dtype)
    out = np.full(n, np.nan, dtype)
    d.fill(gpu.HostDevice(), out, seed)
    return out


def words(i, seed):
    return philox_ref([i, 0, 0, 0], [seed & M32, seed >> 32])


@pytest.mark.parametrize("seed", [0, 1, 0x299F31D0A4093822, 2**63 - 1])
def test_uniform_values_are_philox_words(seed):
    n = 1029  # (a partial last block)
    got64 = fill("random", n, np.float64, seed)
    got32 = fill("random", n, np.float32, seed)
    for i in (0, 1, 511, 1023, 1024, n - 1):
        r = words(i, seed)
        assert got64[i] == ((r[0] >> 5) * 67108864 + (r[1] >> 6)) / 2.0**53
        assert got32[i] == np.float32((r[0] >> 8) / 2.0**24)
    assert np.all((got64 >= 0) & (got64 < 1)) and np.all((got32 >= 0) & (got32 < 1))


def test_normal_values_are_box_muller_of_the_words():
    seed, n = 12345, 300
    got = fill("normal", n, np.float64, seed, (1.5, 0.25))
    for i in (0, 7, n - 1):
        r = words(i, seed)
        u = ((r[0] >> 5) * 67108864 + (r[1] >> 6)) / 2.0**53
        v = ((r[2] >> 5) * 67108864 + (r[3] >> 6)) / 2.0**53
        z = np.sqrt(-2.0 * np.log(1.0 - u)) * np.cos(2 * np.pi * v)
        assert got[i] == pytest.approx(1.5 + 0.25 * z, rel=1e-14, abs=1e-14)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("method,args,mean,var,lo,hi", [
    ("random", (), 0.5, 1 / 12, 0.0, 1.0),
    ("uniform", (-2.0, 6.0), 2.0, 64 / 12, -2.0, 6.0),
    ("standard_normal", (), 0.0, 1.0, -np.inf, np.inf),
    ("normal", (3.0, 0.5), 3.0, 0.25, -np.inf, np.inf),
])
def test_moments(dtype, method, args, mean, var, lo, hi):
    n = 200_000
    x = fill(method, n, dtype, 987654321, args).astype(np.float64)
    assert x.dtype == np.float64 and np.all(np.isfinite(x))
    assert lo <= x.min() and x.max() < hi
    sd = np.sqrt(var)
    assert abs(x.mean() - mean) < 5 * sd / np.sqrt(n)
    # the variance's standard error: sqrt((m4 - var^2) / n), m4 <= 3 var^2 for these
    assert abs(x.var() - var) < 5 * np.sqrt(2 * var**2 / n)


def test_seeds_give_distinct_streams():
    a = fill("random", 4096, np.float64, 1)
    b = fill("random", 4096, np.float64, 2)
    assert not np.any(a == b)  # (a coincidence has probability ~4096 / 2**53)
    c = fill("random", 4096, np.float64, 1)
    np.testing.assert_array_equal(a, c)


@pytest.fixture
def box(monkeypatch):
    monkeypatch.setenv("LOWERING_GPU", "interpret")
    return install(monkeypatch)


def noisy(x, rng):
    return x + rng.standard_normal(x.shape), rng.uniform(2.0, 5.0, size=3000).astype(np.float32)


@pytest.mark.parametrize("mode", ["default", "reduce-overhead"])
def test_a_drawing_function_runs_on_the_device(box, mode):
    f = lowering.compile(noisy, backend="gpu", mode=mode)
    x = Box(np.linspace(-1, 1, 20000))
    rng = np.random.default_rng(0)
    z0, u0 = f(x, rng)  # host copies: traces and compiles, numpy's values
    want = noisy(x.a, np.random.default_rng(0))
    np.testing.assert_array_equal(z0.a, want[0])
    seen = []
    for _ in range(3):
        state = rng.bit_generator.state
        z, u = f(x, rng)
        # one 64-bit seed per draw taken from the caller's generator
        expect = np.random.default_rng()
        expect.bit_generator.state = state
        s1 = int.from_bytes(expect.bytes(8), "little") >> 1
        s2 = int.from_bytes(expect.bytes(8), "little") >> 1
        assert rng.bit_generator.state == expect.bit_generator.state
        np.testing.assert_array_equal(z.a, x.a + fill("standard_normal", 20000, np.float64, s1))
        np.testing.assert_array_equal(
            u.a, fill("uniform", 3000, np.float64, s2, (2.0, 5.0)).astype(np.float32))
        assert u.a.dtype == np.float32 and 2.0 <= u.a.min() and u.a.max() < 5.0
        seen.append(z.a.copy())
    assert f.stats["compiles"] == 1 and f.stats["cache_hits"] == 3
    assert not np.array_equal(seen[0], seen[1])
    # the same generator state gives the same values
    again = lowering.compile(noisy, backend="gpu", mode=mode)
    r2 = np.random.default_rng(0)
    again(x, r2)
    np.testing.assert_array_equal(again(x, r2)[0].a, seen[0])


def test_numpys_global_generator_on_the_device(box):
    @lowering.compile(backend="gpu")
    def f(x):
        return x * np.random.rand(*x.shape) + np.random.randn(x.shape[0], 1)

    x = Box(np.ones((50, 40)))
    np.random.seed(3)
    f(x)
    np.random.seed(3)
    a = f(x).a
    np.random.seed(3)
    b = f(x).a
    np.testing.assert_array_equal(a, b)
    assert f.stats["cache_hits"] == 2
    np.random.seed(4)
    assert not np.array_equal(f(x).a, a)


def test_draws_without_a_device_generator_keep_numpys_values(box):
    def f(x, rng):
        return x + rng.exponential(2.0, size=x.shape) + rng.integers(0, 10, size=x.shape)

    g = lowering.compile(f, backend="gpu")
    x = Box(np.zeros(64))
    for seed in range(3):
        got = g(x, np.random.default_rng(seed)).a
        np.testing.assert_array_equal(got, f(x.a, np.random.default_rng(seed)))
    assert not g.__dict__.get("_device_entries")  # every call on host copies
