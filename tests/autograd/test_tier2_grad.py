"""Gradients through the Tier 2 routines (`array.routine`): np.linalg.norm
(2-norm, Frobenius), solve, inv, det, slogdet, cholesky (lower and upper) and
sort, against central finite differences and against HIPS autograd running
the same function on `autograd.numpy`, on both backends.

Matrices are well conditioned (A + n·I, or B Bᵀ + n·I where the routine needs
symmetric positive definite input: built inside the function, so the
perturbations of finite differences stay symmetric); sorted values are
distinct (ties are kinks)."""

from __future__ import annotations

import warnings

import autograd
import autograd.numpy as anp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import lowering
from dialects import array as A
from lowering.testing import TOLERANCES, examples
from passes.autograd import NotDifferentiable

from .programs import assert_grads_close

FD_STEP = 1e-4
FD_RTOL = 1e-7  # relative to the gradient's largest component (see test_grad_random)
STENCIL = ((-2, 1.0), (-1, -8.0), (1, 8.0), (2, -1.0))


def finite_differences(f, args: list[np.ndarray]) -> list[np.ndarray]:
    out = []
    for k, a in enumerate(args):
        g = np.empty(a.shape)
        for idx in np.ndindex(a.shape):
            total = 0.0
            for s, w in STENCIL:
                xs = [np.array(x) for x in args]
                xs[k][idx] += s * FD_STEP
                total += w * float(f(*xs))
            g[idx] = total / (12 * FD_STEP)
        out.append(g)
    return out


def _w(shape):
    """Fixed weights of a shape (plain numpy on constants: made while tracing)."""
    n = int(np.prod(shape, dtype=np.int64))
    return np.cos(np.arange(n) * 1.3 + 0.2).reshape(shape)


# name -> (f(xp, *args), argument maker(rng, n, batch)); xp is numpy or autograd.numpy.
# HIPS autograd is the second reference where it has the rule: its sort gradient
# is 1-D only, and its solve and keepdims-norm gradients do not sum broadcast
# dims back (names in FD_ONLY: finite differences alone there).
CASES = {
    "norm": (lambda xp, x: xp.linalg.norm(x) * xp.sum(xp.sin(x)),
             lambda r, n, b: [r.standard_normal((*b, n))]),
    "norm_2_axis": (lambda xp, x: xp.sum(xp.linalg.norm(x, ord=2, axis=-1) * _w(x.shape[:-1])),
                    lambda r, n, b: [r.standard_normal((*b, 3, n))]),
    # (positive axes: HIPS autograd's norm gradient mishandles a negative axis pair)
    "norm_fro": (lambda xp, x: xp.sum(xp.linalg.norm(x, "fro", axis=(x.ndim - 2, x.ndim - 1)) * _w(x.shape[:-2])),
                 lambda r, n, b: [r.standard_normal((*b, n, 2))]),
    "norm_keepdims": (lambda xp, x: xp.sum(xp.linalg.norm(x, axis=0, keepdims=True) * x),
                      lambda r, n, b: [r.standard_normal((n, *b, 2))]),
    "solve_vector": (lambda xp, a, y: xp.sum(xp.linalg.solve(a, y) * _w(y.shape)),
                     lambda r, n, b: [r.standard_normal((n, n)) + n * np.eye(n), r.standard_normal(n)]),
    "solve_matrix": (lambda xp, a, y: xp.sum(xp.linalg.solve(a, y) * _w((*a.shape[:-2], n_of(a), 2))),
                     lambda r, n, b: [r.standard_normal((*b, n, n)) + n * np.eye(n),
                                      r.standard_normal((n, 2))]),
    "inv": (lambda xp, a: xp.sum(xp.linalg.inv(a) * _w(a.shape)),
            lambda r, n, b: [r.standard_normal((*b, n, n)) + n * np.eye(n)]),
    "det": (lambda xp, a: xp.sum(xp.linalg.det(a) * _w(a.shape[:-2])),
            lambda r, n, b: [r.standard_normal((*b, n, n)) + n * np.eye(n)]),
    "slogdet": (lambda xp, a: xp.sum(xp.linalg.slogdet(a)[1] * _w(a.shape[:-2])),
                lambda r, n, b: [r.standard_normal((*b, n, n)) + n * np.eye(n)]),
    "cholesky": (lambda xp, c: xp.sum(xp.linalg.cholesky(spd(xp, c)) * _w(c.shape)),
                 lambda r, n, b: [r.standard_normal((*b, n, n))]),
    "sort": (lambda xp, x: xp.sum(xp.sort(x) * _w(x.shape)),
             lambda r, n, b: [r.standard_normal((*b, n))]),
    "sort_axis0": (lambda xp, x: xp.sum(xp.sort(x, axis=0) ** 2 * _w(x.shape)),
                   lambda r, n, b: [r.standard_normal((n, 3))]),
}


def fd_only(name: str, args: list[np.ndarray]) -> bool:
    if name.startswith("sort"):
        return args[0].ndim > 1
    if name == "norm_keepdims":
        return True
    return name == "solve_matrix" and args[0].ndim > 2


def n_of(a):
    return a.shape[-1]


def spd(xp, c):
    n = c.shape[-1]
    return xp.matmul(c, xp.swapaxes(c, -1, -2)) + n * np.eye(n)


def _lowering_grad(f, args, backend):
    g = lowering.compile(lowering.grad(lambda *xs: f(np, *xs), argnums=tuple(range(len(args)))),
                         backend=backend)
    return g(*args)


@pytest.mark.parametrize("backend", ["numpy", "cpu"])
@pytest.mark.parametrize("name", sorted(CASES))
@examples(0.5)
@given(n=st.integers(1, 4), batch=st.sampled_from([(), (2,)]), seed=st.integers(0, 2**16))
def test_routine_gradients_match_finite_differences_and_hips_autograd(backend, name, n, batch, seed):
    f, make = CASES[name]
    args = [np.asarray(a, np.float64) for a in make(np.random.default_rng(seed), n, batch)]
    got = _lowering_grad(f, args, backend)
    got = got if isinstance(got, tuple) else (got,)
    fd = finite_differences(lambda *xs: f(np, *xs), args)
    for k, (g, w) in enumerate(zip(got, fd)):
        assert g.shape == w.shape and g.dtype == np.float64
        err = float(np.max(np.abs(g - w), initial=0.0))
        tol = FD_RTOL * max(float(np.max(np.abs(w), initial=0.0)), 1.0)
        assert err <= tol, f"{name} gradient {k}: {err:.3e} > {tol:.3e}\n got={g!r}\nwant={w!r}"
    if fd_only(name, args):
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = autograd.grad(lambda xs: f(anp, *xs))(list(args))
    n_ops = 50 * max(a.size for a in args)
    assert_grads_close(got, want, TOLERANCES.rtol(np.float64, "gradient", n_ops), name)


@pytest.mark.parametrize("backend", ["numpy", "cpu"])
def test_upper_cholesky_gradient(backend):
    f = lambda xp, c: xp.sum(xp.swapaxes(xp.linalg.cholesky(spd(xp, c)), -1, -2) * _w(c.shape))
    c = np.random.default_rng(3).standard_normal((3, 3))
    got = lowering.compile(lowering.grad(lambda c: np.sum(
        np.linalg.cholesky(spd(np, c), upper=True) * _w(c.shape))), backend=backend)(c)
    want = autograd.grad(lambda c: f(anp, c))(c)
    assert_grads_close((got,), (want,), TOLERANCES.rtol(np.float64, "gradient", 500), "cholesky")


def test_sort_gradient_with_axis_none_empty_and_float32():
    x = np.random.default_rng(0).standard_normal((2, 3))
    w = _w(6)
    g = lowering.grad(lambda x: np.sum(np.sort(x, axis=None) * w))(x)
    want = autograd.grad(lambda x: anp.sum(anp.sort(anp.ravel(x)) * w))(x)
    np.testing.assert_array_equal(g, want)  # a permutation of w: exact
    e = lowering.grad(lambda x: np.sum(np.sort(x)))(np.ones((0, 3)))
    assert e.shape == (0, 3) and e.dtype == np.float64
    g32 = lowering.grad(lambda x: np.sum(np.sort(x) * np.arange(3, dtype=np.float32)))(
        np.array([2.0, -1.0, 0.5], np.float32))
    assert g32.dtype == np.float32
    np.testing.assert_array_equal(g32, np.array([2.0, 0.0, 1.0], np.float32))


def test_norm_gradient_at_zero_is_zero_not_nan():
    g = lowering.grad(lambda x: np.linalg.norm(x))(np.zeros(3))
    np.testing.assert_array_equal(g, np.zeros(3))


def test_routines_without_a_derivative_name_themselves():
    a = np.eye(3) + 0.1
    with pytest.raises(NotDifferentiable, match="np.linalg.svd"):
        lowering.grad(lambda m: np.sum(np.linalg.svd(m).S))(a)
    with pytest.raises(NotDifferentiable, match="ord=1"):
        lowering.grad(lambda m: np.linalg.norm(m, ord=1))(a)
    # integer results carry no gradient: argsort's indices are constants
    g = lowering.grad(lambda x: np.sum(x[np.argsort(x)] * np.arange(3.0)))(np.array([3.0, 1.0, 2.0]))
    np.testing.assert_array_equal(g, [2.0, 0.0, 1.0])


@pytest.mark.parametrize("opts,recomputed", [({}, False), ({"partition": "save_all"}, False),
                                              ({"memory_budget": 0.1}, True)])
def test_routines_are_saved_never_recomputed(opts, recomputed):
    """A routine is as expensive as a matmul: the min-cut partition saves its
    result (or what the backward needs of it) instead of running LAPACK again;
    only a memory budget that nothing else meets lifts that ban (as for matmuls)."""
    f = lowering.value_and_grad(lambda a: np.sum(np.linalg.inv(a) ** 2) + np.linalg.det(a))
    a = np.random.default_rng(1).standard_normal((3, 3)) + 3 * np.eye(3)
    cf = lowering.compile(f, **opts)
    v, g = cf(a)
    want = autograd.value_and_grad(lambda a: anp.sum(anp.linalg.inv(a) ** 2) + anp.linalg.det(a))(a)
    assert np.isclose(v, want[0])
    assert_grads_close((g,), (want[1],), TOLERANCES.rtol(np.float64, "gradient", 500), "inv+det")
    rep = lowering.explain(cf)(a)
    (part,) = rep.partitions
    assert any(name == A.RoutineOp.name for name in part.recomputed) == recomputed, \
        part.describe()
