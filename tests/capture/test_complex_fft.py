"""Complex values as an extern-only dtype (dialects/dtypes.py): the FFTs with
complex results, ufuncs on complex values, `.real`/`.imag` and basic slicing
of complex arrays are numpy routines inside the graph; generated kernels never
see complex values, the real results fuse as usual. Anything else on a
complex value is a graph break (or, for a write through `.real`, an eager
run): never a wrong answer. Both backends, against numpy."""

import warnings

import numpy as np
import pytest

import lowering

BACKENDS = ["cpu", "numpy"]
rng = np.random.default_rng(0)


def fft_filter(x, H, n):
    return np.fft.irfft(np.fft.rfft(x) * H, n)


def welch(seg, win):
    return np.abs(np.fft.rfft(seg * win)) ** 2


def spectrum(x):
    X = np.fft.fft(x)
    return X.real * 2 + X.imag, np.conj(X), X, np.abs(X[1:-1]) ** 2, X[0]


def two_d(x):
    Z = np.fft.rfft2(x)
    return np.fft.irfft2(Z * (1 + 0.5j), x.shape), np.real(Z) + np.imag(Z), np.fft.ifftn(Z)


def complex_input(z, w):
    return z * w + 1, (z * z).real * 2.0, np.fft.ifft(z)


def _same(got, want):
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert type(g) is type(w)
        assert np.asarray(g).dtype == np.asarray(w).dtype
        assert np.shape(g) == np.shape(w)
        lo = np.asarray(w).dtype in (np.float32, np.complex64)
        np.testing.assert_allclose(g, w, rtol=2e-5 if lo else 1e-12, atol=1e-5 if lo else 1e-12)


CASES = [
    ("filter-real-H", fft_filter, lambda: (rng.standard_normal(64), np.exp(-np.arange(33) / 9.0), 64)),
    ("filter-complex-H", fft_filter,
     lambda: (rng.standard_normal(64), np.exp(-np.arange(33) / 9.0) * (1 + 0.3j), 64)),
    ("welch", welch, lambda: (rng.standard_normal(64), np.hanning(64))),
    ("welch-f32", welch, lambda: (rng.standard_normal(64).astype(np.float32),
                                  np.hanning(64).astype(np.float32))),
    ("spectrum", spectrum, lambda: (rng.standard_normal(50),)),
    ("2d", two_d, lambda: (rng.standard_normal((8, 6)),)),
    ("complex-in-out", complex_input,
     lambda: (rng.standard_normal(16) + 1j * rng.standard_normal(16),
              (rng.standard_normal(16) + 1j).astype(np.complex64))),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_complex_programs_compile_whole_and_match_numpy(case, backend):
    _, fn, make = case
    args = make()
    f = lowering.compile(fn, backend=backend)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no fallback warning
        for _ in range(3):
            _same(f(*args), fn(*args))
    assert f.stats["graph_breaks"] == 0 and f.stats["eager_fallbacks"] == 0, f.stats
    assert f.stats["compiles"] == 1
    assert "Graph break count: 0" in str(lowering.explain(fn)(*args))


def test_fused_real_parts_are_generated_kernels():
    # the kernel level is the CPU backend's (make test runs this suite again
    # with LOWERING_BACKEND=numpy, whose programs have no kernels)
    f = lowering.compile(welch, backend="cpu")
    text = str(lowering.explain(f)(rng.standard_normal(64), np.hanning(64)))
    assert "extern numpy:np.fft.rfft" in text and "arith.mulf" in text


def _sum(x):
    return np.sum(np.fft.fft(x)) * 2


def _reshape(x):
    return np.fft.fft(x).reshape(-1, 2)


def _write_real(x):
    X = np.fft.fft(x)
    r = X.real
    r[0] = 5.0
    return X


def _fancy(x):
    X = np.fft.fft(x)
    return X[np.array([0, 2, 3])]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [_sum, _reshape, _write_real, _fancy])
def test_other_ops_on_complex_values_fall_back_to_numpy(fn, backend):
    """An op other than a routine on a complex value: a graph break (sum,
    fancy indexing), an eager run (a view numpy makes, a write through
    .real) — numpy's answer either way."""
    x = rng.standard_normal(16)
    f = lowering.compile(fn, backend=backend)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(2):
            _same(f(x), fn(x))


def test_sum_of_complex_is_a_graph_break_with_a_reason():
    text = str(lowering.explain(_sum)(rng.standard_normal(16)))
    assert "Graph break count: 1" in text and "complex" in text


@pytest.mark.parametrize("backend", BACKENDS)
def test_complex_ufunc_errors_are_numpys(backend):
    def floor_of(x):
        return np.floor(np.fft.fft(x))

    f = lowering.compile(floor_of, backend=backend)
    with pytest.raises(TypeError) as ours:
        f(rng.standard_normal(8))
    with pytest.raises(TypeError) as theirs:
        floor_of(rng.standard_normal(8))
    assert str(ours.value) == str(theirs.value)
