"""Every Tier 1 ufunc of OPS.md against numpy itself, in call form: mixed
dtypes, broadcasting, 0-size and size-1 dims, every layout, edge values; Python
and numpy scalar operands (NEP 50 weak promotion, out-of-range Python ints);
`out=` (other dtypes, aliasing an input, casting rules) and `dtype=`.

`assert_matches_numpy` checks type (numpy scalar vs array), dtype, shape,
values within `TOLERANCES` for the ufunc's op class, NaN/±Inf/-0.0, effects on
the arguments, and numpy's exception type where numpy raises."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import lowering
from lowering.testing import (
    TIER1_DTYPES,
    TIER1_UFUNCS,
    TOLERANCES,
    arrays,
    assert_matches_numpy,
    broadcastable_shapes,
    dtypes,
    edge_values,
    examples,
    python_scalars,
    ufunc_class,
)

# OPS.md, Tier 1, "Ufuncs" (aliases such as true_divide and mod included)
OPS_MD = """add subtract multiply divide true_divide floor_divide remainder mod fmod power
float_power negative positive absolute fabs sign reciprocal square sqrt cbrt exp exp2 expm1
log log2 log10 log1p logaddexp sin cos tan arcsin arccos arctan arctan2 sinh cosh tanh
arcsinh arccosh arctanh hypot maximum minimum fmax fmin floor ceil trunc rint copysign
greater greater_equal less less_equal equal not_equal logical_and logical_or logical_not
logical_xor isnan isinf isfinite signbit bitwise_and bitwise_or bitwise_xor invert
left_shift right_shift""".split()
UNARY = [n for n in OPS_MD if getattr(np, n).nin == 1]
BINARY = [n for n in OPS_MD if getattr(np, n).nin == 2]


def test_the_table_is_ops_md():
    assert set(OPS_MD) == set(TIER1_UFUNCS)
    assert len(UNARY) + len(BINARY) == len(OPS_MD) == 71


def rtol_for(name: str, *kinds) -> float:
    """The TOLERANCES entry for this ufunc's op class and numpy's output dtype."""
    uf = getattr(np, name)
    try:
        out = uf.resolve_dtypes(tuple(kinds) + (None,))[-1]
    except TypeError:  # numpy rejects it: only the exception is compared
        return 0.0
    return TOLERANCES.rtol(out, ufunc_class(name))


def call(name: str):
    uf = getattr(np, name)
    return lambda *xs: uf(*xs)


@st.composite
def operands(draw, n: int):
    shapes = draw(broadcastable_shapes(n))
    return [draw(arrays(dtypes(), s)) for s in shapes]


# ---- call form --------------------------------------------------------------

@pytest.mark.parametrize("name", UNARY)
@examples(0.6)
@given(data=st.data())
def test_unary(name, data):
    (x,) = data.draw(operands(1))
    assert_matches_numpy(call(name), x, rtol=rtol_for(name, x.dtype), calls=2)


@pytest.mark.parametrize("name", BINARY)
@examples(0.6)
@given(data=st.data())
def test_binary(name, data):
    x, y = data.draw(operands(2))
    assert_matches_numpy(call(name), x, y, rtol=rtol_for(name, x.dtype, y.dtype), calls=2)


@pytest.mark.parametrize("name", UNARY)
def test_unary_edge_values(name):
    """Every edge value of every Tier 1 dtype, as one array per dtype."""
    for dt in TIER1_DTYPES:
        x = np.array(edge_values(dt), dtype=dt)
        assert_matches_numpy(call(name), x, rtol=rtol_for(name, dt))


@pytest.mark.parametrize("name", BINARY)
@examples(0.2)
@given(data=st.data())
def test_binary_edge_values(name, data):
    """All pairs of edge values of two dtypes (an outer broadcast)."""
    dx, dy = data.draw(dtypes()), data.draw(dtypes())
    x = np.array(edge_values(dx), dtype=dx)[:, None]
    y = np.array(edge_values(dy), dtype=dy)[None, :]
    assert_matches_numpy(call(name), x, y, rtol=rtol_for(name, dx, dy))


# ---- scalar operands: NEP 50 ------------------------------------------------

@pytest.mark.parametrize("name", BINARY)
@examples(0.6)
@given(data=st.data())
def test_python_scalar_operand(name, data):
    """A Python bool/int/float literal on either side is weak (NEP 50): the
    array's dtype wins within a kind; an int literal out of the array dtype's
    range raises OverflowError as in numpy."""
    x = data.draw(arrays(dtypes()))
    s = data.draw(python_scalars())
    uf = getattr(np, name)
    left = data.draw(st.booleans())
    fn = (lambda a: uf(s, a)) if left else (lambda a: uf(a, s))
    kinds = (type(s) if type(s) is not bool else np.dtype(bool), x.dtype)
    assert_matches_numpy(fn, x, rtol=rtol_for(name, *(kinds if left else kinds[::-1])))


@pytest.mark.parametrize("name", BINARY)
@examples(0.3)
@given(data=st.data())
def test_numpy_scalar_operand(name, data):
    """A numpy scalar is strong: np.float64(2) * f32 array is float64."""
    x = data.draw(arrays(dtypes()))
    dt = data.draw(dtypes())
    s = dt.type(data.draw(st.sampled_from(edge_values(dt))))
    uf = getattr(np, name)
    left = data.draw(st.booleans())
    fn = (lambda a: uf(s, a)) if left else (lambda a: uf(a, s))
    kinds = (dt, x.dtype) if left else (x.dtype, dt)
    assert_matches_numpy(fn, x, rtol=rtol_for(name, *kinds))


@pytest.mark.parametrize("name", BINARY)
@examples(0.3)
@given(data=st.data())
def test_python_float_argument_is_weak(name, data):
    """A Python float passed to the compiled function is a graph input that
    keeps NEP 50 weak promotion (f32 array * s stays float32)."""
    x = data.draw(arrays(dtypes("fi")))
    s = data.draw(st.sampled_from([0.5, -2.0, 3.0, float("nan"), float("inf"), -0.0, 1e300]))
    uf = getattr(np, name)
    assert_matches_numpy(lambda a, t: uf(a, t), x, s, rtol=rtol_for(name, x.dtype, float),
                         calls=2)


def test_nep50_examples():
    f32 = np.ones(3, np.float32)
    i32 = np.arange(3, dtype=np.int32)
    for fn, args, dt in [
        (lambda a: a * 2.0, (f32,), np.float32),
        (lambda a: np.multiply(a, 2.0), (f32,), np.float32),
        (lambda a: a + 1, (i32,), np.int32),
        (lambda a: a + 1.5, (i32,), np.float64),
        (lambda a: a * np.float64(2.0), (f32,), np.float64),
        (lambda a, s: a * s, (f32, 2.5), np.float32),
        (lambda a: np.add(a, True), (i32,), np.int32),
    ]:
        r = assert_matches_numpy(fn, *args)
        assert r.dtype == dt


def test_out_of_range_python_int():
    i32 = np.arange(3, dtype=np.int32)
    for fn in (lambda a: a + 2**40, lambda a: np.multiply(2**31, a), lambda a: a - 2**70):
        with pytest.raises(OverflowError):
            fn(i32)
        with pytest.raises(OverflowError):
            lowering.compile(fn)(i32)
        assert_matches_numpy(fn, i32)
    # comparisons do not convert: every int32 compares alike with 2**40
    for fn in (lambda a: a == 2**40, lambda a: a < 2**70, lambda a: np.greater_equal(a, -2**63 - 1)):
        r = assert_matches_numpy(fn, i32, calls=2)
        assert r.dtype == np.bool_


# ---- out= and dtype= ----------------------------------------------------------

@pytest.mark.parametrize("name", OPS_MD)
@examples(0.5)
@given(data=st.data())
def test_out(name, data):
    """out= an array of any Tier 1 dtype and the result's shape (or one the
    result broadcasts to), as an array or a 1-tuple, with a casting rule: the
    caller's out array is written like numpy does, or numpy's error is raised."""
    uf = getattr(np, name)
    xs = data.draw(operands(uf.nin))
    shape = np.broadcast_shapes(*[x.shape for x in xs])
    if data.draw(st.booleans()):
        shape = (data.draw(st.integers(1, 2)),) + shape
    out = data.draw(arrays(dtypes(), shape, layout=data.draw(st.sampled_from(["C", "strided",
                                                                                "transposed"]))))
    casting = data.draw(st.sampled_from(["same_kind", "unsafe", "safe", "no"]))
    as_tuple = data.draw(st.booleans())

    def fn(o, *a):
        return uf(*a, out=(o,) if as_tuple else o, casting=casting)

    assert_matches_numpy(fn, out, *xs, rtol=rtol_for(name, *[x.dtype for x in xs]), calls=2)


@pytest.mark.parametrize("name", OPS_MD)
@examples(0.3)
@given(data=st.data())
def test_out_aliases_an_input(name, data):
    """np.add(a, b, out=a): numpy reads all of a before writing (overlap is
    handled as if by a copy); the caller's a is updated."""
    uf = getattr(np, name)
    xs = data.draw(operands(uf.nin))
    which = data.draw(st.integers(0, uf.nin - 1))

    def fn(*a):
        return uf(*a, out=a[which])

    assert_matches_numpy(fn, *xs, rtol=rtol_for(name, *[x.dtype for x in xs]))


def test_out_is_returned_and_written():
    a, b = np.arange(4.0), np.full(4, 2.0)

    def fn(a, b, o):
        r = np.multiply(a, b, out=o)
        return r, o

    o = np.zeros(4)
    r, o2 = lowering.compile(fn)(a, b, o)
    np.testing.assert_array_equal(o, [0, 2, 4, 6])
    assert r is o and o2 is o
    assert_matches_numpy(fn, a, b, np.zeros(4, np.float32))
    assert_matches_numpy(fn, a, b, np.zeros(4, np.int64))  # same_kind: numpy raises


@pytest.mark.parametrize("name", OPS_MD)
@examples(0.4)
@given(data=st.data())
def test_dtype(name, data):
    """dtype= picks numpy's loop by its output dtype (numpy raises where no loop
    or casting fits, and so must we)."""
    uf = getattr(np, name)
    xs = data.draw(operands(uf.nin))
    dt = data.draw(st.sampled_from(TIER1_DTYPES))
    casting = data.draw(st.sampled_from(["same_kind", "unsafe"]))

    def fn(*a):
        return uf(*a, dtype=dt, casting=casting)

    assert_matches_numpy(fn, *xs, rtol=TOLERANCES.rtol(dt, ufunc_class(name)), calls=2)


def test_positional_out():
    def fn(a, b, o):
        np.add(a, b, o)
        return o

    assert_matches_numpy(fn, np.arange(3.0), np.ones(3), np.zeros(3))
    assert_matches_numpy(fn, np.arange(3.0), np.ones(3), np.zeros(3, np.int32))


# ---- numpy's integer rules ------------------------------------------------------

INTS = [np.dtype(np.int32), np.dtype(np.int64)]


@pytest.mark.parametrize("dt", INTS)
def test_integer_division_and_modulo_by_zero(dt):
    a = np.array([7, -7, 0, np.iinfo(dt).min, np.iinfo(dt).max], dt)
    z = np.zeros_like(a)
    for name in ("floor_divide", "remainder", "fmod", "divide"):
        r = assert_matches_numpy(call(name), a, z, calls=2)
        assert r.dtype == getattr(np, name)(a, z).dtype
    r = assert_matches_numpy(lambda x, y: x // y, a, z)
    np.testing.assert_array_equal(r, np.zeros(5, dt))  # numpy: 0, with a warning
    assert_matches_numpy(lambda x: (x // 0, x % 0, divmod(x, 0)), a)
    # min // -1 overflows: numpy wraps to min
    m1 = np.full_like(a, -1)
    assert_matches_numpy(lambda x, y: (x // y, x % y), a, m1)


@pytest.mark.parametrize("dt", INTS)
def test_shifts_by_bit_width_and_more(dt):
    bits = dt.itemsize * 8
    a = np.array([1, -1, 5, np.iinfo(dt).min, np.iinfo(dt).max], dt)
    s = np.array([0, bits - 1, bits, bits + 1, 2 * bits], dt)
    r = assert_matches_numpy(lambda x, y: (x << y, x >> y), a[:, None], s[None, :], calls=2)
    np.testing.assert_array_equal(r[0][:, 2:], 0)  # numpy: shifting out everything gives 0
    np.testing.assert_array_equal(r[1][1, 2:], -1)  # ...and the sign for >> of negatives
    assert_matches_numpy(lambda x: (x << bits, x >> bits, x << -1), a)


@pytest.mark.parametrize("dt", INTS)
def test_negative_integer_power_raises(dt):
    a = np.array([2, 3], dt)
    with pytest.raises(ValueError):
        lowering.compile(lambda x, y: x ** y)(a, np.array([1, -1], dt))
    assert_matches_numpy(lambda x: x ** -1, a)
    assert_matches_numpy(lambda x, y: np.power(x, y), a, np.array([-2, 2], dt))
    assert_matches_numpy(lambda x, y: np.power(x, y), a, np.array([0, 2], dt))
    # an empty array has no element to complain about
    assert_matches_numpy(lambda x: x ** -1, np.zeros(0, dt))


def test_integer_overflow_wraps_like_numpy():
    for dt in INTS:
        info = np.iinfo(dt)
        a = np.array([info.max, info.min, info.min], dt)
        b = np.array([1, -1, 1], dt)
        assert_matches_numpy(lambda x, y: (x + y, x - y, x * y, -x, abs(x), np.square(x)), a, b)


def test_bool_arithmetic():
    t = np.array([True, False, True, False])
    f = np.array([True, True, False, False])
    assert_matches_numpy(lambda x, y: (x + y, x * y, x & y, x | y, x ^ y, ~x, np.maximum(x, y),
                                       np.minimum(x, y), x ** y, abs(x)), t, f, calls=2)
    for bad in (lambda x, y: x - y, lambda x: -x):  # numpy refuses these for bool
        with pytest.raises(TypeError):
            bad(t, f) if bad.__code__.co_argcount == 2 else bad(t)
        assert_matches_numpy(bad, *((t, f) if bad.__code__.co_argcount == 2 else (t,)))


# ---- numpy quirks the compiler must keep --------------------------------------

@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_power_with_a_broadcast_half_is_sqrt(dt):
    """numpy's float power loop computes sqrt for an exponent 0.5 it sees with
    stride 0 (a scalar or a broadcast size-1 array): (-inf) ** 0.5 is nan and
    (-0.0) ** 0.5 is -0.0 there, +inf and +0.0 with pow."""
    x = np.array([-np.inf, -0.0, 0.0, 4.0, -1.0, np.nan], dt)
    cases = [
        (lambda a: a ** 0.5, (x,)),
        (lambda a: np.power(a, 0.5), (x,)),
        (lambda a, e: np.power(a, e), (x, np.array(0.5, dt))),
        (lambda a, e: np.power(a, e), (x, np.array([0.5], dt))),
        (lambda a, e: a ** e, (x, 0.5)),  # a traced Python float: decided at run time
        (lambda a, e: a ** e, (x, 2.0)),
        (lambda a, e: np.power(a, e), (x[:1], np.array([0.5], dt))),  # same shape: pow
        (lambda a, e: np.power(a, e), (x.reshape(2, 3), np.full((2, 1), 0.5, dt))),  # pow
        (lambda a: (a ** 2, a ** -1, a ** 1, a ** 0, a ** 3), (x,)),
    ]
    for fn, args in cases:
        assert_matches_numpy(fn, *args, rtol=0.0, calls=2)


def test_maximum_minimum_nan_and_signed_zero():
    a = np.array([-0.0, 0.0, np.nan, 1.0, np.nan, -np.inf])
    b = np.array([0.0, -0.0, 1.0, np.nan, np.nan, np.inf])
    assert_matches_numpy(lambda x, y: (np.maximum(x, y), np.minimum(x, y)), a, b, rtol=0.0, calls=2)
    # fmax/fmin of two zeros of opposite sign: IEEE maxNum leaves the sign open
    # and numpy's own AVX-512 loops return the first operand in a short array's
    # tail and the second in its vector body; we return the second (as
    # np.maximum does). Every other lane is bitwise numpy's.
    assert_matches_numpy(lambda x, y: (np.fmax(x, y), np.fmin(x, y)), a[2:], b[2:], rtol=0.0,
                         calls=2)
    got = lowering.compile(lambda x, y: (np.fmax(x, y), np.fmin(x, y)))(a, b)
    for r in got:
        assert r[0] == 0.0 and r[1] == 0.0
        assert np.signbit(r[:2]).tolist() == [False, True]
