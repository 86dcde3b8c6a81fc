"""`np.errstate` through `lowering.compile`: a compiled call warns, raises or
stays silent exactly as the eager call does (the program reports its IEEE
flags, and the call is re-run eagerly from the pristine inputs where a
category the errstate does not ignore fired), on the first call and on
cached ones, on both backends."""

import warnings

import numpy as np
import pytest

import lowering

BACKENDS = ["cpu", "numpy"]


def log_twice(x):
    return np.log(x) * 2.0


def scaled_ratio(x, y):
    return (x / y) * 3.0


def record(fn, *args):
    """fn(*args): its result (or exception type and message) and warnings."""
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        try:
            out = ("ok", fn(*args))
        except FloatingPointError as e:
            out = ("raise", str(e))
    return out, [(type(m.message), str(m.message)) for m in w]


def same_as_eager(f, fn, *args):
    want, want_w = record(fn, *args)
    got, got_w = record(f, *args)
    assert got_w == want_w
    assert got[0] == want[0]
    if want[0] == "ok":
        np.testing.assert_array_equal(got[1], want[1])
    else:
        assert got[1] == want[1]


@pytest.mark.parametrize("backend", BACKENDS)
def test_default_warns_like_numpy_on_first_and_cached_calls(backend):
    f = lowering.compile(log_twice, backend=backend)
    x = np.zeros(37)
    same_as_eager(f, log_twice, x)  # first call: traced, compiled, re-run
    same_as_eager(f, log_twice, x)  # cached call
    same_as_eager(f, log_twice, np.ones(37))  # no warning at all
    assert f.stats["compiles"] == 1


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mode", ["ignore", "warn", "raise"])
def test_errstate_modes(backend, mode):
    f = lowering.compile(log_twice, backend=backend)
    f(np.ones(37))
    for x in (np.zeros(37), -np.ones(37)):
        with np.errstate(divide=mode, invalid=mode):
            same_as_eager(f, log_twice, x)


@pytest.mark.parametrize("backend", BACKENDS)
def test_divide_raise(backend):
    f = lowering.compile(scaled_ratio, backend=backend)
    x, y = np.ones(37), np.ones(37)
    f(x, y)
    y[5] = 0.0
    with np.errstate(divide="raise"), pytest.raises(FloatingPointError, match="divide by zero"):
        f(x, y)
    with np.errstate(divide="ignore"):
        r = f(x, y)
    assert np.isinf(r[5]) and r[0] == 3.0


@pytest.mark.parametrize("backend", BACKENDS)
def test_overflow_and_underflow(backend):
    f = lowering.compile(np.exp, backend=backend)
    f(np.ones(37))
    same_as_eager(f, np.exp, np.full(37, 1000.0))
    same_as_eager(f, np.exp, np.full(37, -1000.0))  # under='ignore': silent
    with np.errstate(under="raise"):
        same_as_eager(f, np.exp, np.full(37, -1000.0))


@pytest.mark.parametrize("backend", BACKENDS)
def test_quiet_nan_is_silent(backend):
    def relu_less(x):
        return np.maximum(x, 0.0) + (x < 1.0)

    f = lowering.compile(relu_less, backend=backend)
    x = np.ones(37)
    f(x)
    x[3] = np.nan
    with np.errstate(all="raise"):
        same_as_eager(f, relu_less, x)


@pytest.mark.parametrize("backend", BACKENDS)
def test_inplace_update_is_numpy_s_when_it_raises(backend):
    def update(a, b):
        a += 1.0 / b
        return a

    f = lowering.compile(update, backend=backend)
    f(np.ones(8), np.ones(8))
    a, b = np.ones(8), np.ones(8)
    b[2] = 0.0
    a2 = a.copy()
    with np.errstate(divide="raise"):
        with pytest.raises(FloatingPointError):
            f(a, b)
        with pytest.raises(FloatingPointError):
            update(a2, b)
    np.testing.assert_array_equal(a, a2)  # numpy's own partial effect: none here
