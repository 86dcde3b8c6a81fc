"""A point-wise numpy routine (a ufunc on complex values) writes its result
over an operand nothing else reads (numpy's `X *= g`), and the routines that
can write into a given array (`lowering.routines.into`: FFTs, ufuncs) write
straight into their output buffers, with the values numpy's own call makes.
A concatenation's pieces are computed in its kernels, not copied there."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import lowering
from lowering import routines
from lowering.dump import capture, parse_spec, print_lower_stages
from lowering.testing import TOLERANCES, assert_matches_numpy


def loop_text(fn, spec: str) -> str:
    import io

    out = io.StringIO()
    print_lower_stages(capture(fn, parse_spec(spec)), out, ("loop",))
    return out.getvalue()


def low_pass(x, cutoff):
    n = x.shape[-1]
    X = np.fft.rfft(x, axis=-1)
    X *= 1.0 / (1.0 + (np.fft.rfftfreq(n) / cutoff) ** 8)
    return np.fft.irfft(X, n=n, axis=-1)


def reread(x, g):
    X = np.fft.rfft(x)
    Y = X * g
    return np.fft.irfft(Y, n=x.shape[-1]), np.abs(X)  # X read after the product


def extern_lines(text: str) -> list[str]:
    return [ln.strip() for ln in text.splitlines() if ln.strip().startswith("loop.extern")]


def test_product_writes_over_the_spectrum():
    lines = extern_lines(loop_text(low_pass, "f64[4,64] float:0.05"))
    prod = next(ln for ln in lines if "np.ufunc" in ln)
    a, _, out = prod[prod.index("(") + 1:prod.index(")")].split(", ")
    assert a == out, prod  # its first operand's buffer
    x = np.random.default_rng(0).standard_normal((4, 64))
    assert_matches_numpy(low_pass, x, 0.05, calls=2)


def test_operand_read_later_keeps_its_buffer():
    lines = extern_lines(loop_text(reread, "f64[3,32] f64[17]"))
    prod = next(ln for ln in lines if "multiply" in ln or ln.count(",") == 2)
    bufs = prod[prod.index("(") + 1:prod.index(")")].split(", ")
    assert len(set(bufs)) == len(bufs), prod
    g = np.random.default_rng(1)
    assert_matches_numpy(reread, g.standard_normal((3, 32)), g.standard_normal(17), calls=2)


def test_special_values_through_the_in_place_product():
    x = np.random.default_rng(2).standard_normal((2, 16))
    x[0, 3], x[1, 5] = np.inf, np.nan
    assert_matches_numpy(low_pass, x, 0.05, calls=2)
    assert_matches_numpy(low_pass, -np.zeros((2, 16)), 0.05, calls=2)


FFTS = {"np.fft.fft": False, "np.fft.ifft": False, "np.fft.rfft": False, "np.fft.irfft": True}


@settings(max_examples=40, deadline=None)
@given(name=st.sampled_from(sorted(FFTS)), n=st.integers(1, 33), rows=st.integers(1, 3),
       dtype=st.sampled_from(["float32", "float64", "complex64", "complex128", "int64"]),
       norm=st.sampled_from([None, "ortho", "forward"]), seed=st.integers(0, 999))
def test_transform_into_matches_numpy(name, n, rows, dtype, norm, seed):
    g = np.random.default_rng(seed)
    x = (g.standard_normal((rows, n)) * 4).astype(np.complex128 if "complex" in dtype else float)
    if "complex" in dtype:
        x += 1j * g.standard_normal((rows, n))
    if name == "np.fft.rfft" and "complex" in dtype:  # (numpy's rfft takes real input only)
        x, dtype = x.real, dtype.replace("complex64", "float32").replace("complex128", "float64")
    x = x.astype(dtype)
    fn = routines.ROUTINES[name]
    config = {"axis": -1, "norm": norm}
    if name == "np.fft.irfft" and n < 2:
        config["n"] = 2
    want = fn(x, **config)
    call = routines.into(name, [x.dtype], config, want.dtype)
    assert call is not None
    out = np.full(want.shape, np.nan, want.dtype)
    call(x, out)
    np.testing.assert_array_equal(out, want, strict=True)
    other = np.complex64 if want.dtype != np.complex64 else np.complex128
    assert routines.into(name, [x.dtype], config, np.dtype(other)) is None


@settings(max_examples=40, deadline=None)
@given(uf=st.sampled_from(["multiply", "add", "subtract", "divide", "absolute", "conjugate"]),
       big=st.sampled_from(["complex64", "complex128"]),
       small=st.sampled_from(["float32", "float64", "complex128", "int32"]),
       shape=st.sampled_from([(5, 8), (3, 1), (16,), ()]), seed=st.integers(0, 999))
def test_ufunc_into_matches_numpy(uf, big, small, shape, seed):
    """Into the result's dtype, a small operand cast first: numpy's bits,
    special values included."""
    g = np.random.default_rng(seed)
    a = (g.standard_normal(shape) + 1j * g.standard_normal(shape)).astype(big)
    if a.size:
        a.flat[0] = complex(np.inf, -0.0)
    row = shape[-1:] if shape else ()
    b = g.standard_normal(row).astype(small) if "int" not in small else g.integers(-3, 3, row).astype(small)
    if b.size and b.dtype.kind == "f":
        b.flat[0] = -0.0
    unary = uf in ("absolute", "conjugate")
    arrays = [a] if unary else [a, b]
    config = {"ufunc": uf, "args": ("@",) * len(arrays)}
    with np.errstate(all="ignore"):
        want = getattr(np, uf)(*arrays)
        call = routines.into("np.ufunc", [v.dtype for v in arrays], config, want.dtype)
        assert call is not None
        out = np.empty(want.shape, want.dtype)
        call(*arrays, out)
    np.testing.assert_array_equal(out, want, strict=True)


def stacked(a, b):
    return np.stack([a - a.mean(), b * 3])


def test_concatenation_pieces_are_computed_in_its_kernels():
    text = loop_text(stacked, "f64[6] f64[6]")
    assert text.count("loop.kernel") == 2 and text.count("memref.alloc") == 1, text
    # small integers: the mean's sum is exact in any order (a vector-lane
    # order that differs from numpy's sequential one would move `a - mean`
    # by an ULP of the mean, which cancellation makes many ULPs of the result)
    g = np.random.default_rng(3)
    def ints():
        return g.integers(-9, 10, 6).astype(np.float64)
    assert_matches_numpy(stacked, ints(), ints(), calls=2)
    cf = lowering.compile(stacked)
    assert_matches_numpy(stacked, ints(), ints(), compiled=cf)


def rolled(h):
    g = np.exp(h) * 2.0
    return np.roll(g, 1) + np.roll(g, -1) + g


def test_a_value_read_by_several_pieces_is_computed_once():
    """np.roll's pieces are slices of one value: computed in each piece's
    kernel, its every other slice and use would compute it again (a 2-D
    shallow-water step ran 2x slower), so a value read more than once is
    realized and the pieces read it where it lies."""
    text = loop_text(rolled, "f64[64]")
    assert text.count("math.exp") == 1, text
    g = np.random.default_rng(5)
    # (exp is a few ULPs from numpy's; three positive terms summed)
    assert_matches_numpy(rolled, g.standard_normal(64), calls=2,
                         rtol=TOLERANCES.rtol(np.float64, "reduction", 3))


@settings(max_examples=60, deadline=None)
@given(dtype=st.sampled_from(["float64", "float32", "int64", "int16", "bool"]),
       shape=st.sampled_from([(0,), (1,), (7,), (4, 9), (3, 1, 5)]),
       axis=st.integers(-3, 2), kind=st.sampled_from([None, "stable", "heapsort"]),
       seed=st.integers(0, 999), flat=st.booleans())
def test_sort_into_is_numpys_sort(dtype, shape, axis, kind, seed, flat):
    """np.sort into a given array: numpy's copy sorted in place, so numpy's
    result bit for bit, the order of -0.0 and 0.0 and NaNs included (an
    F-ordered input too)."""
    g = np.random.default_rng(seed)
    x = g.integers(-3, 3, shape).astype(dtype)
    if x.dtype.kind == "f" and x.size:
        x.flat[::3] = -0.0
        x.flat[1::4] = np.nan
    if len(shape) > 1 and seed % 2:
        x = np.asfortranarray(x)
    if flat:
        ax = None
    elif -len(shape) <= axis < len(shape):
        ax = axis % len(shape)
    else:
        return
    want = np.sort(x, axis=ax, kind=kind)
    call = routines.into("np.sort", [x.dtype], {"axis": -1 if ax is None else ax, "kind": kind,
                                               "stable": None}, want.dtype)
    assert call is not None
    out = np.empty(want.shape, want.dtype)
    call(x.reshape(-1) if ax is None else x, out)
    np.testing.assert_array_equal(out, want, strict=True)
    if out.dtype.kind == "f":
        assert np.array_equal(np.signbit(out), np.signbit(want))
