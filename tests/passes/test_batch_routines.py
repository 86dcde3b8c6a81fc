"""`batch-routines`: independent calls of one numpy routine become one call
on their stack (a loop's rfft per segment: one rfft of the segments), their
results rows of its result; dependent calls stay apart. Checked against
numpy on the compiled program, and bit for bit on the reference backend
before and after the pass (numpy's FFT of a row alone is the row of its
batched transform)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from dialects import array as A
from lowering.backends.numpy_backend import compile_module
from lowering.dump import capture, parse_spec
from lowering.pipeline import context
from lowering.testing import assert_matches_numpy, assert_same_value
from passes.batch_routines import BatchRoutines


def welch(x, nperseg):
    step = nperseg // 2
    win = np.hanning(nperseg)
    nseg = (x.shape[0] - nperseg) // step + 1
    P = np.zeros(nperseg // 2 + 1)
    for s in range(nseg):
        seg = x[s * step: s * step + nperseg]
        P += np.abs(np.fft.rfft((seg - seg.mean()) * win)) ** 2
    return P / (nseg * (win**2).sum())


def chained(x):
    """Each transform reads the one before: nothing to batch."""
    y = x
    for _ in range(3):
        y = np.fft.irfft(np.fft.rfft(y) * 0.5, n=x.shape[0])
    return y


def spectra(a, b, c):
    """Three rows' complex spectra, each scaled by a complex constant; the
    products are returned (rows of a batched product would need copies that
    kernels do not make: complex), the spectra only read by them."""
    return [np.fft.fft(v) * (1 + 2j) for v in (a, b, c)]


def routines(fn, spec: str) -> list[A.RoutineOp]:
    module = capture(fn, parse_spec(spec)).modules[0].clone()
    BatchRoutines().apply(context(), module)
    module.verify()
    return [op for op in module.walk() if isinstance(op, A.RoutineOp)]


def test_segments_transform_in_one_call():
    ops = routines(welch, "f64[256] int:64")
    assert [op.fn.data for op in ops] == ["np.fft.rfft", "np.ufunc"], ops
    assert ops[0].inputs[0].type.get_shape() == (7, 64)  # the 7 segments stacked
    assert ops[0].kwargs()["axis"] == 1
    x = np.random.default_rng(0).standard_normal(8192)
    assert_matches_numpy(welch, x, 512, calls=2)


def test_dependent_calls_stay_apart():
    ops = routines(chained, "f64[64]")
    # rfft, the complex product (a numpy ufunc), irfft: three times, one row each
    assert len(ops) == 9 and all(len(op.inputs[0].type.get_shape()) == 1 for op in ops)
    assert_matches_numpy(chained, np.random.default_rng(1).standard_normal(64), calls=2)


def test_complex_rows_and_their_pointwise_ops():
    ops = routines(spectra, "f64[16] f64[16] f64[16]")
    assert [op.fn.data for op in ops] == ["np.fft.fft", "np.ufunc", "np.ufunc", "np.ufunc"]
    assert ops[0].inputs[0].type.get_shape() == (3, 16)
    g = np.random.default_rng(2)
    assert_matches_numpy(spectra, *(g.standard_normal(16) for _ in range(3)), calls=2)


FFTS = ("rfft", "fft", "ifft", "irfft", "ihfft", "hfft")


@settings(max_examples=25, deadline=None)
@given(fn=st.sampled_from(FFTS), n=st.integers(2, 40), rows=st.integers(1, 9),
       count=st.integers(2, 5), axis=st.sampled_from([0, -1]), seed=st.integers(0, 2**16),
       dtype=st.sampled_from(["f32", "f64"]))
def test_batched_transforms_are_bit_for_bit(fn, n, rows, count, axis, seed, dtype):
    """k transforms of k arrays (complex ones: of their fft) through the
    pass, on the reference backend: the same bits as k calls."""
    f = getattr(np.fft, fn)
    complex_in = fn in ("ifft", "irfft", "hfft")

    def prog(*xs):  # (a complex result is read by a routine: its rows where they lie)
        ys = [f(np.fft.fft(x, axis=axis) if complex_in else x * 2, axis=axis) for x in xs]
        return [np.abs(y) if fn in ("rfft", "fft", "ifft", "ihfft") else y for y in ys]

    shape = (n, rows) if axis == 0 else (rows, n)
    spec = " ".join([f"{dtype}[{shape[0]},{shape[1]}]"] * count)
    module = capture(prog, parse_spec(spec), seed=seed).modules[0].clone()
    g = np.random.default_rng(seed)
    xs = [g.standard_normal(shape).astype(dtype.replace("f", "float")) for _ in range(count)]
    before = [op for op in module.walk() if isinstance(op, A.RoutineOp) and "fft" in op.fn.data]
    want = compile_module(module)([x.copy() for x in xs])
    BatchRoutines().apply(context(), module)
    module.verify()
    after = [op for op in module.walk() if isinstance(op, A.RoutineOp) and "fft" in op.fn.data]
    if rows < 8:  # a few rows each: batched
        assert len(after) == len(before) // count, after
    else:
        assert len(after) == len(before)
    got = compile_module(module)([x.copy() for x in xs])
    assert_same_value(got, want, 0.0, "batched transforms")
