"""`x ** y` by an exponent strength-reduce leaves is the cost model's
`power` class: where the table says numpy's own loop is faster (its float
loops are SIMD pow on AVX-512 builds: 1.5-3x the generated pow's speed per
element), numpy computes it — into the program's buffer, the kernels
before and after it fused as ever — and elsewhere (tiny arrays; float64
split over threads) the generated pow runs. numpy's loop gives numpy's
values bit for bit and raises numpy's floating-point errors; the generated
pow stays within its ULP bounds (forced here on arrays the table sends to
numpy, so both paths stay tested)."""

from __future__ import annotations

import numpy as np
import pytest

import lowering
from lowering.testing import assert_matches_numpy
from passes import cost_model as cm
from passes.lower_to_loop import power_work
from runtime import cpu


def _kernels(fn, *args) -> list[str]:
    return [n for ks in lowering.explain(lowering.compile(fn))(*args).kernels for n, _ in ks]


def gamma(x):
    return x ** 2.2


def scaled(x, y):
    return 0.5 * (x + 1.0) ** y


SIZES = (16, 256, 2048, 16384, 131072, 1 << 20)


def test_each_size_takes_the_path_the_table_predicts_faster():
    """Both paths occur over these sizes; numpy's loop gives numpy's values
    bit for bit, the generated pow numpy's within the pointwise bounds."""
    rng = np.random.default_rng(0)
    seen = set()
    with cm.use(cm.shipped()):
        for dt in (np.float32, np.float64):
            for n in SIZES:
                x = rng.uniform(0.0, 3.0, n).astype(dt)
                work = power_work(n, np.dtype(dt).itemsize, 0, False, cpu.THREADS,
                                  cpu.parallel_threshold())
                path = cm.active().choose("power", work).path
                seen.add(path)
                names = _kernels(gamma, x)
                assert any(k.startswith("extern numpy:math.powf") for k in names) == (
                    path == "library"), (dt, n, path, names)
                got = lowering.compile(gamma)(x)
                if path == "library":
                    assert np.array_equal(got, gamma(x)), (dt, n)
                else:
                    assert_matches_numpy(gamma, x, compiled=lowering.compile(gamma))
    assert seen == {"generated", "library"}


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_numpys_loop_between_kernels_gives_numpys_values(dt):
    """(x + 1) in a kernel, the power in numpy's loop into its buffer, the
    scaling in a kernel after: every step numpy's own, so bit for bit."""
    rng = np.random.default_rng(1)
    x = rng.uniform(-1.0, 3.0, 50_000).astype(dt)
    y = rng.uniform(-4.0, 4.0, 50_000).astype(dt)
    x[:4] = [np.nan, np.inf, -1.0, -0.0]
    with cm.forced({"power": "library"}):
        names = _kernels(scaled, x, y)
        assert [n.startswith("extern") for n in names] == [False, True, False], names
        with np.errstate(all="ignore"):
            got, want = lowering.compile(scaled)(x, y), scaled(x, y)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("path", ["library", "generated"])
def test_floating_point_errors_are_numpys(path):
    x = np.linspace(-2.0, 2.0, 20_000)
    with cm.forced({"power": path}):
        f = lowering.compile(gamma)
        with np.errstate(invalid="raise"):
            with pytest.raises(FloatingPointError):
                gamma(x)
            with pytest.raises(FloatingPointError):
                f(x)
        with np.errstate(invalid="ignore"):
            assert_matches_numpy(gamma, x, compiled=f)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_the_generated_pow_on_big_arrays_matches_numpy(dt):
    """The generated pow where the table would send the op to numpy:
    values from tiny to huge, both signs, and the special ones."""
    rng = np.random.default_rng(2)
    n = 1 << 16
    x = (rng.standard_normal(n) * 10.0 ** rng.integers(-30, 30, n)).astype(dt)
    y = (rng.standard_normal(n) * 4).astype(dt)
    y[::7] = np.round(y[::7])
    specials = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 2.0, 0.5], dt)
    x[:81] = np.repeat(specials, 9)
    y[:81] = np.tile(specials, 9)
    with cm.forced({"power": "generated"}):
        f = lowering.compile(lambda a, b: a ** b)
        with np.errstate(all="ignore"):
            assert not any(k.startswith("extern") for k in _kernels(lambda a, b: a ** b, x, y))
            assert_matches_numpy(lambda a, b: a ** b, x, y, compiled=f)
