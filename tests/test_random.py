"""Random draws happen on every call, from numpy's own generator, in program
order: with the same seed a compiled function returns numpy's values and
leaves the generator in numpy's state."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lowering


def _dropout(rng, x, p):
    keep = rng.random(x.shape) >= p
    return x * keep / (1 - p)


@settings(deadline=None, max_examples=20)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(0, 9), calls=st.integers(1, 3))
def test_generator_argument_draws_numpys_values(seed, n, calls):
    f = lowering.compile(_dropout)
    x = np.linspace(-2.0, 2.0, n)
    r1, r2 = np.random.default_rng(seed), np.random.default_rng(seed)
    for _ in range(calls):
        np.testing.assert_array_equal(f(r1, x, 0.5), _dropout(r2, x, 0.5))
    assert r1.bit_generator.state == r2.bit_generator.state
    assert f.stats["compiles"] == 1


RNG = np.random.default_rng(0)


def _global_generator(x):
    a = RNG.standard_normal(x.shape, dtype=np.float32)
    b = RNG.integers(0, 10, size=3)
    c = RNG.uniform()  # a Python float
    return x + a, b, c


def test_global_generator_in_program_order():
    global RNG
    f = lowering.compile(_global_generator)
    x = np.zeros(4, np.float32)
    RNG = np.random.default_rng(7)
    got = [f(x) for _ in range(3)]
    RNG = np.random.default_rng(7)
    want = [_global_generator(x) for _ in range(3)]
    for g, w in zip(got, want):
        for a, b in zip(g, w):
            np.testing.assert_array_equal(a, b)
            assert type(a) is type(b)
            if isinstance(a, np.ndarray):
                assert a.dtype == b.dtype
    RNG = np.random.default_rng(7)  # a new generator object: read through the global
    np.testing.assert_array_equal(f(x)[0], want[0][0])


def _legacy(x):
    return x * np.random.rand(*x.shape) + np.random.normal(0.0, 1.0, size=x.shape), np.random.rand()


def test_legacy_functions_use_the_global_state():
    f = lowering.compile(_legacy)
    x = np.ones((2, 3))
    np.random.seed(3)
    got = [f(x) for _ in range(3)]
    after = np.random.get_state()
    np.random.seed(3)
    want = [_legacy(x) for _ in range(3)]
    for (ga, gb), (wa, wb) in zip(got, want):
        np.testing.assert_array_equal(ga, wa)
        assert ga.dtype == wa.dtype and type(gb) is float and gb == wb
    state = np.random.get_state()
    assert after[0] == state[0] and np.array_equal(after[1], state[1]) and after[2:] == state[2:]


class Dropout:
    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)

    def __call__(self, x):
        return _dropout(self.rng, x, 0.25)


def test_generator_attribute_and_traced_arguments():
    m1, m2 = Dropout(5), Dropout(5)
    f = lowering.compile(m1)
    x = np.arange(8.0)
    for _ in range(3):
        np.testing.assert_array_equal(f(x), m2(x))

    def noisy(rng, mu):
        return rng.normal(mu, 1.0)  # traced loc: drawn eagerly, in order

    g = lowering.compile(noisy)
    r1, r2 = np.random.default_rng(1), np.random.default_rng(1)
    mu = np.arange(3.0)
    for _ in range(2):
        np.testing.assert_array_equal(g(r1, mu), noisy(r2, mu))
    assert r1.bit_generator.state == r2.bit_generator.state


def test_draws_are_constants_to_grad():
    def loss(w, rng):
        noise = rng.standard_normal(w.shape)
        return ((w + noise) ** 2).sum()

    g = lowering.grad(loss)
    r1, r2 = np.random.default_rng(2), np.random.default_rng(2)
    w = np.arange(3.0)
    got = g(w, r1)
    np.testing.assert_allclose(got, 2 * (w + r2.standard_normal(3)), rtol=1e-15)
    assert r1.bit_generator.state == r2.bit_generator.state


def test_failed_call_does_not_advance_the_generator():
    def fn(rng, x, i):
        return x[i] + rng.random()

    f = lowering.compile(fn)
    r1, r2 = np.random.default_rng(4), np.random.default_rng(4)
    x = np.arange(3.0)
    assert f(r1, x, np.array(1)) == fn(r2, x, np.array(1))
    with pytest.raises(IndexError):
        f(r1, x, np.array(9))
    with pytest.raises(IndexError):
        fn(r2, x, np.array(9))
    assert r1.bit_generator.state == r2.bit_generator.state


def test_reseeding_inside_the_function_happens_on_every_call():
    def f(x):
        np.random.seed(0)
        return x + np.random.normal(size=3)

    cf = lowering.compile(f)
    x = np.zeros(3)
    for i in range(3):
        np.random.seed(100 + i)
        want = f(x)
        np.random.seed(100 + i)
        np.testing.assert_array_equal(cf(x), want)
