"""Every Tier 1 operator against numpy: `+ - * / // % ** @ & | ^ << >>`, unary
`- + ~ abs()`, comparisons, `divmod`, with arrays, Python and numpy scalars on
either side (reflected forms), and the in-place forms on the caller's arrays:
`a += b` must mutate the caller's array exactly as numpy does (also through a
view), and raise numpy's casting error where numpy does (`a += 1.5` on ints).
"""

from __future__ import annotations

import operator

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import lowering
from lowering.testing import (
    TOLERANCES,
    arrays,
    assert_matches_numpy,
    broadcastable_shapes,
    dtypes,
    examples,
    python_scalars,
)

BINARY = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
    "//": operator.floordiv, "%": operator.mod, "**": operator.pow, "&": operator.and_,
    "|": operator.or_, "^": operator.xor, "<<": operator.lshift, ">>": operator.rshift,
}
COMPARE = {"==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le,
           ">": operator.gt, ">=": operator.ge}
INPLACE = {
    "+=": operator.iadd, "-=": operator.isub, "*=": operator.imul, "/=": operator.itruediv,
    "//=": operator.ifloordiv, "%=": operator.imod, "**=": operator.ipow, "&=": operator.iand,
    "|=": operator.ior, "^=": operator.ixor, "<<=": operator.ilshift, ">>=": operator.irshift,
}
UNARY = {"-": operator.neg, "+": operator.pos, "~": operator.invert, "abs": abs}
# `**` is a libm-class op (TOLERANCES "pointwise"); everything else is exact
POINTWISE = {"**", "**="}


def rtol(op: str) -> float | None:
    return None if op in POINTWISE else 0.0


@st.composite
def two_arrays(draw):
    sa, sb = draw(broadcastable_shapes(2))
    return draw(arrays(dtypes(), sa)), draw(arrays(dtypes(), sb))


@pytest.mark.parametrize("op", list(BINARY) + list(COMPARE))
@examples(0.6)
@given(ab=two_arrays())
def test_binary_operator(op, ab):
    f = {**BINARY, **COMPARE}[op]
    assert_matches_numpy(lambda a, b: f(a, b), *ab, rtol=rtol(op), calls=2)


@pytest.mark.parametrize("op", list(BINARY) + list(COMPARE))
@examples(0.6)
@given(a=arrays(dtypes()), s=python_scalars(), data=st.data())
def test_python_scalar_on_either_side(op, a, s, data):
    """`s OP a` runs a's reflected method (`__radd__`, ...; comparisons swap);
    the literal is weak (NEP 50) and must fit the array's integer dtype."""
    f = {**BINARY, **COMPARE}[op]
    if data.draw(st.booleans()):
        assert_matches_numpy(lambda x: f(s, x), a, rtol=rtol(op))
    else:
        assert_matches_numpy(lambda x: f(x, s), a, rtol=rtol(op))


@pytest.mark.parametrize("op", list(BINARY))
@examples(0.4)
@given(a=arrays(dtypes()), dt=dtypes(), data=st.data())
def test_numpy_scalar_on_the_left(op, a, dt, data):
    """np.float32(2) OP traced: numpy's scalar defers to the traced array."""
    s = dt.type(data.draw(st.sampled_from([0, 1, 2, 3, -1] if dt.kind != "b" else [True])))
    f = BINARY[op]
    assert_matches_numpy(lambda x: (f(s, x), f(x, s)), a, rtol=rtol(op))


@pytest.mark.parametrize("op", list(BINARY) + list(COMPARE))
@examples(0.4)
@given(a=arrays(dtypes("fi")), s=st.sampled_from([0.5, -2.0, 3.0, -0.0, float("inf")]))
def test_python_float_argument(op, a, s):
    """A float argument is a traced 0-d input that keeps weak promotion."""
    f = {**BINARY, **COMPARE}[op]
    assert_matches_numpy(lambda x, t: (f(x, t), f(t, x)), a, s, rtol=rtol(op), calls=2)


@pytest.mark.parametrize("op", list(UNARY))
@examples(0.6)
@given(a=arrays(dtypes()))
def test_unary_operator(op, a):
    f = UNARY[op]
    assert_matches_numpy(lambda x: f(x), a, rtol=0.0, calls=2)


@examples(0.6)
@given(ab=two_arrays(), s=python_scalars("if", big_ints=False))
def test_divmod(ab, s):
    assert_matches_numpy(lambda a, b: (divmod(a, b), divmod(a, s), divmod(s, b)), *ab,
                         rtol=0.0, calls=2)


# ---- in place ---------------------------------------------------------------

@pytest.mark.parametrize("op", list(INPLACE))
@given(ab=two_arrays())
def test_inplace_on_an_argument(op, ab):
    """`a OP= b` writes the caller's `a` (or raises numpy's error: a casting
    error for float results into ints, a broadcast error when b is bigger,
    "read-only" for a broadcast input)."""
    f = INPLACE[op]

    def fn(a, b):
        a = f(a, b)
        return a

    assert_matches_numpy(fn, *ab, rtol=rtol(op), calls=2)


@pytest.mark.parametrize("op", list(INPLACE))
@examples(0.6)
@given(a=arrays(dtypes()), s=python_scalars())
def test_inplace_with_a_python_scalar(op, a, s):
    f = INPLACE[op]

    def fn(x):
        x = f(x, s)
        return x

    assert_matches_numpy(fn, a, rtol=rtol(op))


@pytest.mark.parametrize("op", ["+=", "*=", "-=", "//=", "|="])
@examples(0.6)
@given(ab=two_arrays())
def test_inplace_through_a_view(op, ab):
    """Writing through a transposed view of an argument reaches the argument."""
    f = INPLACE[op]

    def fn(a, b):
        v = a.T
        v = f(v, b.T)
        return v

    assert_matches_numpy(fn, *ab, rtol=rtol(op))


@pytest.mark.parametrize("op", ["+=", "*=", "**="])
def test_inplace_on_a_numpy_scalar_rebinds(op):
    """numpy scalars are immutable: `s += 1` makes a new one (maybe of another
    dtype), it never writes anything."""
    f = INPLACE[op]

    def fn(a):
        s = a.sum()  # a numpy scalar
        s = f(s, 1.5)
        return s, a

    assert_matches_numpy(fn, np.arange(3, dtype=np.int32), calls=2)
    assert_matches_numpy(fn, np.arange(3.0, dtype=np.float32), calls=2)


def test_int_plus_equal_float_raises_numpy_casting_error():
    a = np.arange(3, dtype=np.int64)

    def fn(x):
        x += 1.5
        return x

    with pytest.raises(np._core._exceptions._UFuncOutputCastingError) as want:
        fn(a.copy())
    with pytest.raises(np._core._exceptions._UFuncOutputCastingError) as got:
        lowering.compile(fn)(a)
    assert str(got.value) == str(want.value)
    np.testing.assert_array_equal(a, [0, 1, 2])  # untouched
    assert_matches_numpy(fn, a)


def test_inplace_mutates_the_callers_array():
    def fn(a, b):
        a += b
        a *= 2
        return None

    a, b = np.arange(4.0), np.ones(4)
    assert lowering.compile(fn)(a, b) is None
    np.testing.assert_array_equal(a, [2, 4, 6, 8])
    a32 = np.arange(4, dtype=np.int32)
    lowering.compile(fn)(a32, np.ones(4, np.int64))  # int64 -> int32 is same_kind
    np.testing.assert_array_equal(a32, [2, 4, 6, 8])
    assert a32.dtype == np.int32


def test_inplace_with_overlapping_operand():
    """numpy computes `a += a[::-1]` as if from a copy of a[::-1]."""
    def fn(a):
        a += a[::-1]
        a[1:] += a[:-1]
        return a

    assert_matches_numpy(fn, np.arange(5.0))


# ---- matmul --------------------------------------------------------------------

@st.composite
def matmul_operands(draw):
    """1-D, 2-D and batched operands whose core dims fit, with broadcasting
    batch dims (and sometimes ones that do not fit: numpy's error)."""
    m, k, n = (draw(st.integers(0, 4)) for _ in range(3))
    batch_a, batch_b = draw(broadcastable_shapes(2, max_dims=2, max_side=3))
    shape_a = draw(st.sampled_from([(k,), batch_a + (m, k)]))
    shape_b = draw(st.sampled_from([(k,), batch_b + (k, n)]))
    if draw(st.integers(0, 9)) == 0:
        shape_b = shape_b[:-2] + (k + 1,) + shape_b[-1:] if len(shape_b) > 1 else (k + 1,)
    dt = dtypes("fi")
    return draw(arrays(dt, shape_a)), draw(arrays(dt, shape_b))


@examples(1.0)
@given(ab=matmul_operands())
def test_matmul_operator(ab):
    a, b = ab
    k = a.shape[-1] if a.ndim else 1
    tol = TOLERANCES.rtol(np.result_type(a, b), "reduction", k)
    assert_matches_numpy(lambda x, y: (x @ y, np.matmul(x, y)), a, b, rtol=tol, calls=2)


@examples(0.6)
@given(ab=matmul_operands())
def test_matmul_inplace(ab):
    """`a @= b` is matmul(a, b, out=a): fine while the result keeps a's shape."""
    a, b = ab

    def fn(x, y):
        x @= y
        return x

    k = a.shape[-1] if a.ndim else 1
    assert_matches_numpy(fn, a, b, rtol=TOLERANCES.rtol(np.result_type(a, b), "reduction", k))


@pytest.mark.parametrize("x_dtype,y_dtype", [(np.int32, np.float32), (np.int32, np.int32)])
def test_matmul_inplace_into_a_read_only_array_raises_like_numpy(x_dtype, y_dtype):
    """numpy reports the read-only output before the output cast."""
    x = np.ones((2, 2), x_dtype)
    x.flags.writeable = False

    def fn(x, y):
        x @= y
        return x

    assert_matches_numpy(fn, x, np.ones((2, 2), y_dtype))


@pytest.mark.parametrize("src", ["~(2.0 < t)", "+(2.0 < t)", "-(t > 0.0)", "abs(t < 1.0)",
                                 "~(t < 1.0) + 1", "(~(t < 1.0)) * t", "-(t > 0.0) / 2",
                                 "~(t < 1.0) & 3", "(~(t < 1.0)) < 0.5"])
@pytest.mark.parametrize("s", [0.5, 3.0, float("nan")])
def test_unary_operators_on_a_python_bool(src, s):
    """A comparison of a Python float argument is a Python bool in the eager
    program; `~`, `-`, `+`, `abs` on it are Python int arithmetic (~True is -2),
    not numpy's bool ops, and the results come back as Python ints."""
    fn = eval(f"lambda x, t: ({src}, x * 2)")  # noqa: S307 - test source
    assert_matches_numpy(fn, np.ones(3, np.float32), s, rtol=0.0, calls=2)


def test_python_float_power_is_pythons():
    # numpy's power takes sqrt for x**0.5 (-0.0 ** 0.5 is -0.0 there); between
    # Python floats it is Python's pow: 0.0, and inf for -inf ** 0.5
    g = lowering.compile(lambda s, t: (s ** 0.5, 2.0 ** s, s ** t, t ** 2))
    for s, t in [(-0.0, 3), (float("-inf"), 2), (4.0, -1), (0.25, 0)]:
        got, want = g(s, t), (s ** 0.5, 2.0 ** s, s ** t, t ** 2)
        for a, b in zip(got, want):
            assert type(a) is type(b) and repr(a) == repr(b)
