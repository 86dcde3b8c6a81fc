"""A compiled program's 1-D transform calls the gufunc numpy's own wrapper
calls (`routines._transform`: no dispatch, no checks, 3-4 us less a call),
with the arguments the wrapper gives it: numpy's values bit for bit for every
kind, length, axis, norm and dtype, and numpy's error where the wrapper
raises one."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lowering
from lowering import routines

KINDS = ["np.fft.fft", "np.fft.ifft", "np.fft.rfft", "np.fft.irfft"]


def _numpy(name):
    return getattr(np.fft, name.rsplit(".", 1)[1])


@settings(max_examples=120, deadline=None)
@given(kind=st.sampled_from(KINDS), rows=st.integers(1, 3), length=st.integers(1, 17),
       n=st.one_of(st.none(), st.integers(1, 20)), axis=st.sampled_from([0, 1, -1, -2]),
       norm=st.sampled_from([None, "backward", "ortho", "forward"]),
       dtype=st.sampled_from([np.float32, np.float64, np.complex64, np.complex128]),
       seed=st.integers(0, 2**16))
def test_each_transform_is_numpys_bit_for_bit(kind, rows, length, n, axis, norm, dtype, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, length))
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal((rows, length))
    x = x.astype(dtype)
    x.flat[0] = -0.0 if length > 1 else x.flat[0]
    config = {"n": n, "axis": axis, "norm": norm}
    fn = _numpy(kind)
    try:
        want = fn(x, **config)
    except (ValueError, TypeError):  # (irfft to n = 0, rfft of complex values: numpy's
        return  # error at capture, never a program)
    call = routines.into(kind, [x.dtype], config, want.dtype)
    assert call is not None
    got = np.full_like(want, np.nan)
    call(x, got)
    np.testing.assert_array_equal(got, want)
    assert np.array_equal(np.signbit(got.real), np.signbit(want.real))


def test_the_direct_call_is_the_gufunc(monkeypatch):
    """The wrapper is not called on the direct path (where numpy has the
    gufuncs), and is where the config holds what the direct call does not
    take."""
    assert routines._pocketfft is not None  # (numpy >= 2, the project's floor)
    calls = []
    rfft = np.fft.rfft
    monkeypatch.setitem(routines.ROUTINES, "np.fft.rfft",
                        lambda *a, **k: calls.append(1) or rfft(*a, **k))
    x = np.random.default_rng(0).standard_normal((3, 16))
    out = np.empty((3, 9), complex)
    routines.into("np.fft.rfft", [x.dtype], {"axis": -1}, out.dtype)(x, out)
    assert calls == []
    np.testing.assert_array_equal(out, rfft(x))
    routines.into("np.fft.rfft", [x.dtype], {"axis": -1, "extra": 1}, out.dtype)
    odd = routines._transform("np.fft.rfft", x.dtype, {"axis": -1, "extra": 1})
    with pytest.raises(TypeError):  # (the wrapper, handed what it does not take)
        odd(x, out)
    assert calls == [1]


def filtered(x, cutoff):
    n = x.shape[-1]
    X = np.fft.rfft(x, axis=-1, norm="ortho")
    X *= 1.0 / (1.0 + (np.fft.rfftfreq(n) / cutoff) ** 8)
    return np.fft.irfft(X, n=n, axis=-1, norm="ortho"), np.fft.ifft(np.fft.fft(x, n=7, axis=0))


@pytest.mark.parametrize("shape", [(4, 64), (3, 33)])
def test_a_compiled_filter_is_numpys(shape):
    x = np.random.default_rng(2).standard_normal(shape)
    f = lowering.compile(filtered)
    for cutoff in (0.1, 0.3):
        for got, want in zip(f(x, cutoff), filtered(x, cutoff)):
            np.testing.assert_array_equal(got, want)
    assert f.stats["graph_breaks"] == 0 and f.stats["eager_fallbacks"] == 0
