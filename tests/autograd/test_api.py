"""The user-facing transformations: `grad`, `value_and_grad`, `vjp`,
`checkpoint`, eager and under `compile`, on both backends; the argument and
output checks; the documented subgradient choices."""

from __future__ import annotations

import numpy as np
import pytest

import lowering
from lowering.testing import TOLERANCES, assert_same_value

BACKENDS = ["numpy", "cpu"]
RTOL64 = TOLERANCES.rtol(np.float64, "reduction", 16)


def compiled(transform, backend):
    return lowering.compile(transform, backend=backend)


def close(got, want, rtol=RTOL64, what="gradient"):
    """Same type, dtype and shape as `want`; values within rtol."""
    assert_same_value(got, want, rtol, what)


X = np.array([0.5, -1.0, 2.0])


# ---------------------------------------------------------------------------
# pytrees and argnums


def mlp_loss(params, x):
    return np.sum(np.tanh(x @ params["W"] + params["b"]) ** 2)


def mlp_grads(params, x):
    """The analytic gradient of mlp_loss."""
    t = np.tanh(x @ params["W"] + params["b"])
    d = 2 * t * (1 - t * t)
    return {"W": np.outer(x, d), "b": d}


@pytest.mark.parametrize("backend", BACKENDS)
def test_pytree_params_give_a_dict_of_grads(backend):
    params = {"W": np.linspace(-1, 1, 6).reshape(3, 2), "b": np.array([0.1, -0.2])}
    g = compiled(lowering.grad(mlp_loss), backend)(params, X)
    assert isinstance(g, dict) and set(g) == {"W", "b"}
    want = mlp_grads(params, X)
    for k in ("W", "b"):
        assert g[k].shape == params[k].shape
        close(g[k], want[k], what=k)


def test_nested_pytree_keeps_its_structure():
    p = {"a": (X, X + 1.0), "s": 2.0}
    g = lowering.grad(lambda p: np.sum(p["a"][0] * p["a"][1]) + p["s"] ** 2)(p)
    assert set(g) == {"a", "s"} and isinstance(g["a"], tuple) and len(g["a"]) == 2
    close(g["a"][0], X + 1.0)
    close(g["a"][1], X)
    close(g["s"], 4.0)


def f3(a, b, c):
    return np.sum(a * b * b) + np.sum(np.sin(c) * a)


@pytest.mark.parametrize("argnums,want", [
    (0, lambda a, b, c: b * b + np.sin(c)),
    (1, lambda a, b, c: 2 * a * b),
    (-1, lambda a, b, c: np.cos(c) * a),
    (-3, lambda a, b, c: b * b + np.sin(c)),
    ((0, 2), lambda a, b, c: (b * b + np.sin(c), np.cos(c) * a)),
    ((2, -2), lambda a, b, c: (np.cos(c) * a, 2 * a * b)),
])
def test_argnums_int_tuple_negative(argnums, want):
    args = (X, X + 1.0, X * 2.0)
    got = lowering.grad(f3, argnums=argnums)(*args)
    w = want(*args)
    if isinstance(argnums, tuple):
        assert isinstance(got, tuple) and len(got) == len(argnums)
        for g, ww in zip(got, w):
            close(g, ww)
    else:
        close(got, w)


def test_argnums_out_of_range_raises():
    with pytest.raises(ValueError, match="out of range"):
        lowering.grad(f3, argnums=3)(X, X, X)


@pytest.mark.parametrize("backend", BACKENDS)
def test_has_aux(backend):
    def f(a):
        return np.sum(a ** 2), {"scaled": a * 3, "mean": np.mean(a)}

    g, aux = compiled(lowering.grad(f, has_aux=True), backend)(X)
    close(g, 2 * X)
    close(aux["scaled"], X * 3)
    close(aux["mean"], np.mean(X))
    (v, aux2), g2 = compiled(lowering.value_and_grad(f, has_aux=True), backend)(X)
    close(v, np.sum(X ** 2), what="value")
    close(aux2["scaled"], X * 3)
    close(g2, 2 * X)


def test_has_aux_without_a_pair_raises():
    with pytest.raises(TypeError, match="pair"):
        lowering.grad(lambda a: np.sum(a), has_aux=True)(X)


def loss(a):
    return np.sum(np.sin(a) * a) + np.mean(np.exp(a))


def dloss(a):
    return np.cos(a) * a + np.sin(a) + np.exp(a) / a.size


@pytest.mark.parametrize("backend", BACKENDS)
def test_value_and_grad_value_equals_f(backend):
    v, g = compiled(lowering.value_and_grad(loss), backend)(X)
    close(v, loss(X), what="value")
    close(g, dloss(X))
    v, g = lowering.value_and_grad(loss)(X)  # eager
    close(v, loss(X), what="value")
    close(g, dloss(X))


@pytest.mark.parametrize("backend", BACKENDS)
def test_compile_of_value_and_grad_and_value_and_grad_of_compile(backend):
    a = compiled(lowering.value_and_grad(loss), backend)(X)
    b = lowering.value_and_grad(lowering.compile(loss, backend=backend))(X)
    c = compiled(lowering.value_and_grad(lowering.compile(loss, backend=backend)), backend)(X)
    for v, g in (a, b, c):
        close(v, loss(X), what="value")
        close(g, dloss(X))
    # one graph: the forward and the backward of the outer transformation
    rep = lowering.explain(lowering.compile(lowering.value_and_grad(loss), backend=backend))(X)
    assert rep.graph_count == 1 and len(rep.partitions) == 1


# ---------------------------------------------------------------------------
# higher order


SECOND = [  # f(t), f''(t) for scalar t: pointwise ops and reductions of arrays built from t
    (lambda t: np.sin(t) * t ** 3,
     lambda t: -np.sin(t) * t ** 3 + 6 * t ** 2 * np.cos(t) + 6 * t * np.sin(t)),
    (lambda t: np.sum(np.sin(t * np.arange(4.0))),
     lambda t: -np.sum(np.arange(4.0) ** 2 * np.sin(t * np.arange(4.0)))),
    (lambda t: np.mean(np.exp(t * np.array([1.0, -2.0, 0.5]))),
     lambda t: np.mean(np.array([1.0, 4.0, 0.25]) * np.exp(t * np.array([1.0, -2.0, 0.5])))),
    (lambda t: np.tanh(t) + np.log(t * t + 1.0),
     lambda t: -2 * np.tanh(t) * (1 - np.tanh(t) ** 2) + (2 - 2 * t * t) / (t * t + 1) ** 2),
    (lambda t: np.max(np.array([1.0, 2.0, -1.0]) * t ** 2),  # 2 t^2 for t != 0
     lambda t: 4.0),
    (lambda t: np.sum(np.cumsum(np.array([t, t * t, t ** 3]))),  # 3t + 2t^2 + t^3
     lambda t: 4.0 + 6 * t),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", range(len(SECOND)))
def test_grad_of_grad_is_the_second_derivative(backend, case):
    f, f2 = SECOND[case]
    gg = compiled(lowering.grad(lowering.grad(f)), backend)
    for t in (0.7, -1.3):
        got = gg(t)
        assert type(got) is float
        assert abs(got - f2(t)) <= 1e-12 * max(1.0, abs(f2(t))), (t, got, f2(t))


def test_grad_of_grad_matches_hips_autograd():
    import autograd
    import autograd.numpy as anp

    def f(t, xp):
        return xp.sqrt(t * t + 1.0) / (t * t + 0.5) + xp.sum(xp.sin(t * xp.arange(3.0)) ** 2)

    want = autograd.grad(autograd.grad(lambda t: f(t, anp)))(0.9)
    got = lowering.grad(lowering.grad(lambda t: f(t, np)))(0.9)
    assert abs(got - want) <= 1e-13 * abs(want)


def test_grad_of_grad_of_array_function():
    """grad(lambda x: sum(grad(f)(x))) is the diagonal of the Hessian of a
    separable f."""
    def f(a):
        return np.sum(np.exp(a) * a)

    h = lowering.grad(lambda a: np.sum(lowering.grad(f)(a)))(X)
    close(h, np.exp(X) * (X + 2))


# ---------------------------------------------------------------------------
# dtypes and argument checks


@pytest.mark.parametrize("backend", BACKENDS)
def test_float32_inputs_give_float32_grads(backend):
    x32 = X.astype(np.float32)
    g = compiled(lowering.grad(lambda a: np.sum(np.tanh(a) * a)), backend)(x32)
    assert g.dtype == np.float32
    want = (np.tanh(X) + X * (1 - np.tanh(X) ** 2)).astype(np.float32)
    close(g, want, rtol=TOLERANCES.rtol(np.float32, "pointwise") * 4)
    gg = lowering.grad(lowering.grad(lambda a: np.sin(a) * a))(np.float32(0.7))
    assert isinstance(gg, np.float32)


@pytest.mark.parametrize("bad,kind", [
    (np.arange(3), "dtype int64"),
    (np.ones(3, dtype=bool), "dtype bool"),
    (np.arange(3, dtype=np.int32), "dtype int32"),
    (3, "dtype int64"),
    (True, "is a bool"),
])
def test_integer_or_bool_argument_in_argnums_raises(bad, kind):
    def f(a, count):
        return np.sum(a * count)

    with pytest.raises(TypeError, match=f"'count'.*{kind}|{kind}.*'count'"):
        lowering.grad(f, argnums=1)(X, bad)
    # the same argument outside argnums is fine: a constant to the derivative
    close(lowering.grad(f, argnums=0)(X, bad), np.broadcast_to(np.asarray(bad, float), X.shape) * 1.0)


def test_integer_leaf_of_a_pytree_raises_naming_it():
    with pytest.raises(TypeError, match="steps"):
        lowering.grad(lambda p: np.sum(p["w"]) * p["steps"])({"w": X, "steps": np.arange(2)})


@pytest.mark.parametrize("out", [
    lambda a: a * 2.0,
    lambda a: np.reshape(np.sum(a), (1,)),
])
def test_non_scalar_output_raises(out):
    with pytest.raises(TypeError, match="scalar"):
        lowering.grad(out)(X)


def test_integer_output_raises():
    with pytest.raises(TypeError, match="floating-point"):
        lowering.grad(lambda a: np.sum(a > 0))(X)


def test_python_float_argument_gets_a_float_gradient():
    g = lowering.grad(lambda a, s: np.sum(a) * s * s, argnums=1)(X, 1.5)
    assert type(g) is float and g == pytest.approx(2 * 1.5 * np.sum(X), rel=1e-15)
    g = lowering.grad(lambda s: s ** 3)(2.0)
    assert type(g) is float and g == 12.0


@pytest.mark.parametrize("backend", BACKENDS)
def test_same_array_in_two_argnums_gets_each_partial(backend):
    def f(a, b):
        return np.sum(a * a * b)

    ga, gb = compiled(lowering.grad(f, argnums=(0, 1)), backend)(X, X)
    close(ga, 2 * X * X)  # d/da at a = b = X
    close(gb, X * X)
    p = {"u": X, "v": X}
    g = lowering.grad(lambda p: np.sum(p["u"] * np.sin(p["v"])))(p)
    close(g["u"], np.sin(X))
    close(g["v"], X * np.cos(X))


@pytest.mark.parametrize("backend", BACKENDS)
def test_mutation_of_a_non_differentiated_argument_is_written_back(backend):
    def f(a, buf):
        buf += 1.0
        buf[0] = 7.0
        return np.sum(a * buf)

    buf = np.array([0.5, 0.0, 2.0])
    g = compiled(lowering.grad(f), backend)(X, buf)
    assert np.array_equal(buf, [7.0, 1.0, 3.0])
    close(g, np.array([7.0, 1.0, 3.0]))
    buf2 = np.array([0.5, 0.0, 2.0])
    v, g = lowering.value_and_grad(f)(X, buf2)  # eager
    assert np.array_equal(buf2, [7.0, 1.0, 3.0])
    close(v, np.sum(X * buf2), what="value")


# ---------------------------------------------------------------------------
# vjp


def outer_fn(a, b):
    return a[:, None] * b[None, :] + np.sin(a)[:, None]


def outer_vjp(a, b, ct):
    return ct @ b + np.cos(a) * ct.sum(axis=1), a @ ct


def test_vjp_non_scalar_output_with_a_cotangent():
    a, b = X, np.array([1.0, -2.0, 0.25, 3.0])
    ct = np.arange(12.0).reshape(3, 4) / 7.0
    out, vjp_fn = lowering.vjp(outer_fn, a, b)
    close(out, outer_fn(a, b), what="output")
    ga, gb = vjp_fn(ct)
    wa, wb = outer_vjp(a, b, ct)
    close(ga, wa)
    close(gb, wb)
    # a second cotangent reuses the pullback
    ga2, _ = vjp_fn(2 * ct)
    close(ga2, 2 * wa)


@pytest.mark.parametrize("backend", BACKENDS)
def test_vjp_inside_compile(backend):
    def f(a, b, ct):
        _, pull = lowering.vjp(outer_fn, a, b)
        return pull(ct)

    a, b = X, np.array([1.0, -2.0, 0.25, 3.0])
    ct = np.linspace(-1, 1, 12).reshape(3, 4)
    ga, gb = lowering.compile(f, backend=backend)(a, b, ct)
    wa, wb = outer_vjp(a, b, ct)
    close(ga, wa)
    close(gb, wb)


def test_vjp_pytree_output():
    out, vjp_fn = lowering.vjp(lambda a, b: (a * b, np.sum(a)), X, X + 1.0)
    assert isinstance(out, tuple) and len(out) == 2
    ga, gb = vjp_fn((np.full(3, 2.0), np.float64(1.0)))
    close(ga, 2 * (X + 1.0) + 1.0)
    close(gb, 2 * X)


def test_vjp_wrong_cotangent_shape_raises():
    _, vjp_fn = lowering.vjp(lambda a: a * a, X)
    with pytest.raises(ValueError, match="shape"):
        vjp_fn(np.ones(4))


# ---------------------------------------------------------------------------
# graph breaks, subgradients, indexing, checkpoint


def branchy(a):
    if float(a.sum()) > 0:  # a graph break: the branch is taken in Python
        return np.sum(np.sin(a) * a)
    return np.sum(a ** 3)


@pytest.mark.parametrize("backend", BACKENDS)
def test_graph_break_inside_the_differentiated_function(backend):
    g = compiled(lowering.grad(branchy), backend)
    close(g(X), np.cos(X) * X + np.sin(X))
    close(g(-X), 3 * X ** 2)
    rep = lowering.explain(lowering.compile(lowering.grad(branchy), backend=backend))(X)
    assert rep.graph_break_count >= 1


def test_graph_break_between_two_differentiated_segments():
    def f(a):
        b = np.exp(a) * a
        s = float(b.max())  # break: no gradient through s
        return np.sum(b * s + np.tanh(b))

    b = np.exp(X) * X
    s = b.max()
    db = np.exp(X) * (X + 1)
    close(lowering.grad(f)(X), (s + 1 - np.tanh(b) ** 2) * db)


@pytest.mark.parametrize("backend", BACKENDS)
def test_relu_at_zero_is_one_half(backend):
    x = np.array([0.0, -0.0, 1.0, -1.0])
    g = compiled(lowering.grad(lambda a: np.sum(np.maximum(a, 0))), backend)(x)
    assert np.array_equal(g, [0.5, 0.5, 1.0, 0.0])
    g = compiled(lowering.grad(lambda a: np.sum(np.minimum(a, 0.0))), backend)(x)
    assert np.array_equal(g, [0.5, 0.5, 0.0, 1.0])
    ga, gb = compiled(lowering.grad(lambda a, b: np.sum(np.maximum(a, b) * 3.0),
                                    argnums=(0, 1)), backend)(x, np.zeros(4))
    assert np.array_equal(ga, [1.5, 1.5, 3.0, 0.0]) and np.array_equal(gb, [1.5, 1.5, 0.0, 3.0])


@pytest.mark.parametrize("backend", BACKENDS)
def test_abs_at_zero_and_max_ties(backend):
    g = compiled(lowering.grad(lambda a: np.sum(np.abs(a))), backend)(np.array([0.0, -0.0, 2.0, -2.0]))
    assert np.array_equal(g, [0.0, 0.0, 1.0, -1.0])
    g = compiled(lowering.grad(lambda a: np.max(a) * 3.0), backend)(np.array([1.0, 3.0, 3.0, 3.0]))
    assert np.array_equal(g, [0.0, 1.0, 1.0, 1.0])
    g = compiled(lowering.grad(lambda a: np.sum(np.min(a, axis=1))), backend)(
        np.array([[1.0, 1.0], [2.0, 0.0]]))
    assert np.array_equal(g, [[0.5, 0.5], [0.0, 1.0]])


@pytest.mark.parametrize("backend", BACKENDS)
def test_gradient_through_a_fancy_indexing_write(backend):
    idx = np.array([0, 2])

    def f(a, v):
        y = a.copy()
        y[idx] = v * a[1]
        return np.sum(y * y)

    a, v = X, np.array([3.0, -0.5])
    ga, gv = compiled(lowering.grad(f, argnums=(0, 1)), backend)(a, v)
    y = a.copy()
    y[idx] = v * a[1]
    # written positions take no gradient back to a; a[1] feeds the update
    close(ga, np.array([0.0, 2 * y[1] + np.sum(2 * y[idx] * v), 0.0]))
    close(gv, 2 * y[idx] * a[1])


@pytest.mark.parametrize("backend", BACKENDS)
def test_fancy_write_with_duplicate_indices_gives_the_last_write_the_gradient(backend):
    idx = np.array([1, 1, 0])

    def f(a, v):
        y = a.copy()
        y[idx] = v  # numpy: the last write to position 1 wins
        return np.sum(y * np.array([1.0, 10.0, 100.0]))

    ga, gv = compiled(lowering.grad(f, argnums=(0, 1)), backend)(X, np.array([4.0, 5.0, 6.0]))
    assert np.array_equal(ga, [0.0, 0.0, 100.0])
    assert np.array_equal(gv, [0.0, 10.0, 1.0])


@pytest.mark.parametrize("backend", BACKENDS)
def test_gather_with_duplicate_indices_accumulates(backend):
    idx = np.array([0, 2, 0, 0])
    g = compiled(lowering.grad(lambda a: np.sum(a[idx] * np.array([1.0, 2.0, 3.0, 4.0]))),
                 backend)(X)
    assert np.array_equal(g, [8.0, 0.0, 2.0])
    g = compiled(lowering.grad(lambda a: np.sum(a[idx] ** 2)), backend)(X)
    close(g, np.array([6 * X[0], 0.0, 2 * X[2]]))
    m = np.arange(6.0).reshape(2, 3)
    g = compiled(lowering.grad(lambda a: np.sum(a[:, np.array([2, 2, 1])])), backend)(m)
    assert np.array_equal(g, [[0.0, 1.0, 2.0], [0.0, 1.0, 2.0]])


@pytest.mark.parametrize("backend", BACKENDS)
def test_checkpoint_gives_identical_gradients(backend):
    def block(h, w):
        z = h @ w
        return np.tanh(z) * np.exp(-z * z)

    def f(ck, x, w1, w2):
        b = lowering.checkpoint(block) if ck else block
        return np.sum(b(b(x, w1), w2) ** 2)

    rng = np.random.default_rng(0)
    x, w1, w2 = rng.normal(size=(4, 5)), rng.normal(size=(5, 5)) / 3, rng.normal(size=(5, 3)) / 3
    plain = compiled(lowering.grad(lambda *a: f(False, *a), argnums=(0, 1, 2)), backend)(x, w1, w2)
    ck = compiled(lowering.grad(lambda *a: f(True, *a), argnums=(0, 1, 2)), backend)(x, w1, w2)
    for a, b in zip(plain, ck):
        if backend == "numpy":
            assert np.array_equal(a, b)
        else:
            close(a, b)
    # outside a differentiated trace, checkpoint is the function itself
    close(lowering.checkpoint(block)(x, w1), block(x, w1), what="value")
