"""Signal processing: filtering in the frequency domain (rfft, a gain,
irfft), Welch's averaged periodogram (a loop over overlapping segments), a
moving average by cumsum and an FIR filter as a loop over its taps."""

from __future__ import annotations

import numpy as np

from .base import Program, rng

NO_FFT = "numba has no np.fft"


def fft_filter(x, cutoff):
    """Low-pass each row of x: an order-8 Butterworth-shaped gain on its rfft."""
    n = x.shape[-1]
    X = np.fft.rfft(x, axis=-1)
    X *= 1.0 / (1.0 + (np.fft.rfftfreq(n) / cutoff) ** 8)
    return np.fft.irfft(X, n=n, axis=-1)


def welch(x, nperseg):
    """Welch's power spectral density: Hann-windowed, half-overlapping,
    mean-removed segments."""
    step = nperseg // 2
    win = np.hanning(nperseg)
    nseg = (x.shape[0] - nperseg) // step + 1
    P = np.zeros(nperseg // 2 + 1)
    for s in range(nseg):
        seg = x[s * step : s * step + nperseg]
        P += np.abs(np.fft.rfft((seg - seg.mean()) * win)) ** 2
    return P / (nseg * (win**2).sum())


def moving_average(x, w):
    """The mean of each window of w samples (the cumsum formulation)."""
    ret = np.cumsum(x)
    ret[w:] = ret[w:] - ret[:-w]
    return ret[w - 1 :] / w


def fir(x, h):
    """y[n] = sum_k h[k] x[n-k], one shifted multiply-add per tap."""
    y = np.zeros_like(x)
    n = x.shape[0]
    for k in range(h.shape[0]):
        y[k:] += h[k] * x[: n - k]
    return y


def _signals(rows: int, n: int) -> tuple:
    t = np.arange(n)
    x = np.sin(0.01 * t) + 0.5 * rng(50).standard_normal((rows, n))
    return x, 0.05


def _long(n: int, nperseg: int) -> tuple:
    t = np.arange(n)
    return np.sin(0.3 * t) + rng(51).standard_normal(n), nperseg


def _average(n: int, w: int) -> tuple:
    return rng(52).standard_normal(n).cumsum(), w


def _fir(n: int, taps: int) -> tuple:
    g = rng(53)
    return g.standard_normal(n), np.hanning(taps) / taps


def jax_variants() -> dict:
    import jax.numpy as jnp
    from jax import lax

    def fft_filter_j(x, cutoff):
        n = x.shape[-1]
        X = jnp.fft.rfft(x, axis=-1)
        X = X * (1.0 / (1.0 + (jnp.fft.rfftfreq(n) / cutoff) ** 8))
        return jnp.fft.irfft(X, n=n, axis=-1)

    def welch_j(x, nperseg):
        step = nperseg // 2
        win = jnp.hanning(nperseg)
        nseg = (x.shape[0] - nperseg) // step + 1

        def body(s, P):
            seg = lax.dynamic_slice_in_dim(x, s * step, nperseg)
            return P + jnp.abs(jnp.fft.rfft((seg - seg.mean()) * win)) ** 2

        P = lax.fori_loop(0, nseg, body, jnp.zeros(nperseg // 2 + 1))
        return P / (nseg * (win**2).sum())

    def moving_average_j(x, w):
        ret = jnp.cumsum(x)
        ret = ret.at[w:].set(ret[w:] - ret[:-w])
        return ret[w - 1 :] / w

    def fir_j(x, h):
        n = x.shape[0]
        y = jnp.zeros_like(x)
        for k in range(h.shape[0]):  # unrolled: the taps are few
            y = y.at[k:].add(h[k] * x[: n - k])
        return y

    return {
        "fft_filter": fft_filter_j,
        "welch": welch_j,
        "moving_average": moving_average_j,
        "fir": fir_j,
    }


PROGRAMS = [
    Program("fft_filter", "rfft · low-pass gain · irfft, per row", fft_filter, _signals,
            {"T": (2, 64), "S": (4, 4096), "M": (64, 32768)},
            not_expressible={"numba": NO_FFT}),
    Program("welch", "Welch PSD, loop over segments", welch, _long,
            {"T": (256, 64), "S": (8192, 512), "M": (200_000, 4096)},
            not_expressible={"numba": NO_FFT}),
    Program("moving_average", "windowed mean by cumsum", moving_average, _average,
            {"T": (64, 5), "S": (50_000, 50), "M": (4_000_000, 100)}),
    Program("fir", "FIR filter, loop over taps", fir, _fir,
            {"T": (64, 4), "S": (20_000, 32), "M": (500_000, 32)}),
]
