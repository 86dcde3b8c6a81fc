"""A big batch of 1-D transforms (`np.fft.rfft(x, axis=-1)` of 64 rows of
32 Ki) runs in row chunks, one per CPU thread (numpy's transforms release
the GIL): the same transform of each row, so numpy's values bit for bit;
the floating-point errors numpy reports in any chunk are the program's, as
if numpy had run the whole batch. Small batches, one thread: one call."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import lowering
from runtime import cpu


def fft_filter(x, cutoff):
    n = x.shape[-1]
    X = np.fft.rfft(x, axis=-1)
    X *= 1.0 / (1.0 + (np.fft.rfftfreq(n) / cutoff) ** 8)
    return np.fft.irfft(X, n=n, axis=-1)


def spectrum(x):
    return np.fft.ifft(np.fft.fft(x, axis=1) * 2.0, axis=1)


@pytest.fixture
def splits(monkeypatch):
    """How many calls ran in chunks (the real chunked run, counted)."""
    count = [0]
    run = cpu.run_chunks

    def counted(calls):
        count[0] += 1
        run(calls)
    monkeypatch.setattr(cpu, "run_chunks", counted)
    monkeypatch.setattr(cpu, "THREADS", 2)
    return count


def test_a_big_batch_runs_in_chunks_with_numpys_values(splits):
    x = np.random.default_rng(0).standard_normal((64, 8192))
    f = lowering.compile(fft_filter)
    got = f(x, 0.05)
    assert splits[0] == 2  # rfft and irfft
    np.testing.assert_array_equal(got, fft_filter(x, 0.05))
    z = x[:, :4096] + 1j * x[:, 4096:]
    np.testing.assert_array_equal(lowering.compile(spectrum)(z), spectrum(z))
    assert splits[0] == 4


def test_a_small_batch_is_one_call(splits):
    x = np.random.default_rng(1).standard_normal((4, 4096))
    np.testing.assert_array_equal(lowering.compile(fft_filter)(x, 0.1), fft_filter(x, 0.1))
    assert splits[0] == 0


@pytest.mark.parametrize("row", [0, 63])
def test_the_errors_of_any_chunk_are_numpys(splits, row):
    """An overflow in the first or the last row (the first or the second
    chunk): raised under `over="raise"`, one warning under "warn"."""
    x = np.random.default_rng(2).standard_normal((64, 8192))
    x[row, :4] = [1e308, 1e308, 1e308, np.inf]
    f = lowering.compile(lambda a: np.fft.rfft(a, axis=-1))
    with np.errstate(over="raise", invalid="ignore"):
        with pytest.raises(FloatingPointError):
            np.fft.rfft(x, axis=-1)
        with pytest.raises(FloatingPointError):
            f(x)
    with np.errstate(all="warn"):
        with warnings.catch_warnings(record=True) as want:
            warnings.simplefilter("always")
            ref = np.fft.rfft(x, axis=-1)
        with warnings.catch_warnings(record=True) as got:
            warnings.simplefilter("always")
            out = f(x)
    assert sorted(str(w.category) for w in got) == sorted(str(w.category) for w in want), (
        [str(w.message) for w in got], [str(w.message) for w in want])
    np.testing.assert_array_equal(out, ref)
    assert splits[0] >= 1
