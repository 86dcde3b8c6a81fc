"""Partitioning the joint forward+backward function (`passes/remat.py`):
every strategy computes the same gradients; min_cut saves no more than
save_all, and much less on an MLP and a transformer block; memory budgets are
met or explained; checkpoint regions are recomputed, never saved."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given

import lowering
from lowering import pytree
from lowering.testing import TOLERANCES, examples

from .programs import GradProgram, assert_grads_close, grad_programs

STRATEGIES = {
    "save_all": {"partition": "save_all"},
    "min_cut": {"partition": "min_cut"},
    "budget0.0": {"memory_budget": 0.0},
    "budget0.3": {"memory_budget": 0.3},
    "budget1.0": {"memory_budget": 1.0},
}
BUDGETS = {"budget0.0": 0.0, "budget0.3": 0.3, "budget1.0": 1.0}


def run_all(fn, args, backend, argnums=0, strategies=STRATEGIES):
    """{strategy: ((value, grads), partition)} for compile(value_and_grad(fn))."""
    out = {}
    for name, opts in strategies.items():
        cf = lowering.compile(lowering.value_and_grad(fn, argnums=argnums), backend=backend,
                              **opts)
        res = cf(*args)
        rep = lowering.explain(cf)(*args)
        assert len(rep.partitions) <= 1, f"{name}: {len(rep.partitions)} partitioned graphs"
        out[name] = (res, rep.partitions[0] if rep.partitions else None)
    return out


def check_strategies(results, backend, rtol, context=""):
    """Same value and gradients under every strategy (bitwise on the numpy
    reference backend) and the byte accounting of each partition."""
    (v0, g0), p0 = results["save_all"]
    leaves0, tree0 = pytree.flatten(g0)
    if p0 is None:  # no backward ops: the loss does not depend on the inputs
        assert all(not np.any(g) for g in leaves0), f"no backward, yet gradients\n{context}"
        assert all(p is None for _, p in results.values())
    else:
        assert p0.strategy == "save_all" and p0.saved_bytes == p0.saved_bytes_save_all
    for name, ((v, g), p) in results.items():
        leaves, tree = pytree.flatten(g)
        assert tree == tree0, f"{name}: gradient structure {tree} != {tree0}"
        if backend == "numpy":
            assert np.array_equal(v, v0), f"{name}: value {v!r} != save_all's {v0!r}\n{context}"
            for k, (a, b) in enumerate(zip(leaves, leaves0)):
                assert a.dtype == b.dtype and np.array_equal(a, b), \
                    f"{name}: gradient {k} differs from save_all's\n{a!r}\n{b!r}\n{context}"
        else:
            assert_grads_close([np.asarray(v)], [np.asarray(v0)], rtol, f"{name} value", context)
            assert_grads_close(leaves, leaves0, rtol, f"{name} gradient", context)
        if p is None:
            continue
        # every partition knows the same reference figures
        assert p.saved_bytes_save_all == p0.saved_bytes_save_all, name
        assert p.saved_bytes_min_cut == p0.saved_bytes_min_cut, name
        assert p.saved_bytes == sum(s[3] for s in p.saved), f"{name}: saved list vs bytes"
        assert p.saved_bytes_min_cut <= p.saved_bytes_save_all, \
            f"min_cut saves {p.saved_bytes_min_cut} > save_all {p.saved_bytes_save_all}\n{context}"
        if name == "min_cut":
            assert p.strategy == "min_cut" and p.saved_bytes == p.saved_bytes_min_cut
        if name in BUDGETS:
            limit = BUDGETS[name] * p.saved_bytes_save_all
            if p.note:
                assert "not met" in p.note and p.saved_bytes > limit, (name, p.note)
            else:
                assert p.saved_bytes <= limit, \
                    f"{name}: saved {p.saved_bytes} > {limit} with no note\n{context}"


# ---------------------------------------------------------------------------
# random programs


@pytest.mark.parametrize("backend", ["numpy", "cpu"])
@examples(0.6)
@given(prog=grad_programs())
def test_random_programs_every_strategy_agrees(prog: GradProgram, backend):
    results = run_all(prog.fn(np), prog.args, backend, argnums=tuple(range(prog.n_inputs)))
    check_strategies(results, backend, prog.rtol(), repr(prog))


# ---------------------------------------------------------------------------
# an MLP and a transformer block, float32


F32 = np.float32


def gelu(x):
    """tanh-GELU."""
    return F32(0.5) * x * (F32(1.0) + np.tanh(F32(0.7978845608) * (x + F32(0.044715) * x * x * x)))


def mlp_loss(params, x, y):
    h = x
    for i, (w, b) in enumerate(params):
        h = h @ w + b
        if i < len(params) - 1:
            h = gelu(h)
    return np.mean((h - y) ** 2)


def layernorm(x, g, b):
    mu = np.mean(x, axis=-1, keepdims=True)
    var = np.mean((x - mu) ** 2, axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + F32(1e-5)) * g + b


def block_loss(p, x):
    h = layernorm(x, p["g1"], p["b1"])
    q, k, v = h @ p["wq"], h @ p["wk"], h @ p["wv"]
    s = q @ k.T * F32(1.0 / np.sqrt(q.shape[-1]))
    s = s - np.max(s, axis=-1, keepdims=True)
    e = np.exp(s)
    a = e / np.sum(e, axis=-1, keepdims=True)
    x = x + (a @ v) @ p["wo"]
    h = layernorm(x, p["g2"], p["b2"])
    x = x + gelu(h @ p["w1"]) @ p["w2"]
    return np.mean(x * x)


N, D = 64, 128


def _normal(rng, *shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(F32)


def mlp_args():
    rng = np.random.default_rng(0)
    dims = [D, 256, 256, D]
    params = [(_normal(rng, a, b, scale=a ** -0.5), _normal(rng, b, scale=0.1))
              for a, b in itertools.pairwise(dims)]
    return params, _normal(rng, N, D), _normal(rng, N, D)


def block_args():
    rng = np.random.default_rng(1)
    p = {"g1": 1 + _normal(rng, D, scale=0.1), "b1": _normal(rng, D, scale=0.1),
         "g2": 1 + _normal(rng, D, scale=0.1), "b2": _normal(rng, D, scale=0.1),
         "w1": _normal(rng, D, 4 * D, scale=D ** -0.5),
         "w2": _normal(rng, 4 * D, D, scale=(4 * D) ** -0.5)}
    for w in ("wq", "wk", "wv", "wo"):
        p[w] = _normal(rng, D, D, scale=D ** -0.5)
    return p, _normal(rng, N, D)


# the op budgets of the "gradient" tolerance: matmul contractions and
# reductions along the forward, and the batch sums of the weight gradients,
# forward and backward
MLP_BUDGET = 2 * (D + 256 + 256 + 3 * N)
BLOCK_BUDGET = 2 * (3 * D + D + N + D + D + 4 * D + 4 * D + N + 7 * N)

MODELS = {
    "mlp": (mlp_loss, mlp_args, MLP_BUDGET),
    "transformer_block": (block_loss, block_args, BLOCK_BUDGET),
}


@pytest.mark.parametrize("backend", ["numpy", "cpu"])
@pytest.mark.parametrize("model", list(MODELS))
def test_models_every_strategy_agrees_and_min_cut_saves_much_less(model, backend):
    fn, make_args, budget = MODELS[model]
    args = make_args()
    results = run_all(fn, args, backend)
    check_strategies(results, backend, TOLERANCES.rtol(F32, "gradient", budget), model)
    (_, g), p = results["min_cut"]
    assert isinstance(g, type(args[0])) and pytree.flatten(g)[1] == pytree.flatten(args[0])[1]
    for gl, pl in zip(pytree.flatten(g)[0], pytree.flatten(args[0])[0]):
        assert gl.shape == pl.shape and gl.dtype == F32
    frac = p.saved_bytes_min_cut / p.saved_bytes_save_all
    print(f"\n{model} ({backend}): save_all saves {p.saved_bytes_save_all} bytes, min_cut "
          f"{p.saved_bytes_min_cut} bytes ({100 * frac:.1f}%)\n{p.describe()}")
    assert frac <= 0.6, f"{model}: min_cut saves {100 * frac:.1f}% of save_all's bytes"
    # a budget of 0 recomputes everything from the inputs
    assert results["budget0.0"][1].saved_bytes == 0


def test_model_gradients_match_hips_autograd():
    """The MLP's gradient (float64 here) against HIPS autograd, so the
    strategies above agree on the right answer."""
    import autograd
    import autograd.numpy as anp

    def loss(params, x, y, xp):
        h = x
        for i, (w, b) in enumerate(params):
            h = xp.matmul(h, w) + b
            if i < len(params) - 1:
                h = 0.5 * h * (1.0 + xp.tanh(0.7978845608 * (h + 0.044715 * h * h * h)))
        return xp.mean((h - y) ** 2)

    params, x, y = mlp_args()
    params = [(w.astype(np.float64), b.astype(np.float64)) for w, b in params]
    x, y = x.astype(np.float64), y.astype(np.float64)
    want = autograd.grad(lambda p: loss(p, x, y, anp))(params)
    got = lowering.compile(lowering.grad(lambda p, x, y: loss(p, x, y, np)), backend="numpy",
                           partition="min_cut")(params, x, y)
    assert_grads_close(pytree.flatten(got)[0], [np.asarray(w) for w in pytree.flatten(want)[0]],
                       TOLERANCES.rtol(np.float64, "gradient", MLP_BUDGET))


# ---------------------------------------------------------------------------
# memory budgets


def test_unmet_budget_leaves_a_note(monkeypatch):
    """When no candidate partition fits the budget, the smallest is used and
    the note says the budget was not met. (Every budget is met by recomputing
    from the inputs, so the min-cut is forced here to save what the backward
    reads.)"""
    from passes import remat

    monkeypatch.setattr(remat, "_min_cut", lambda fwd, crossing, *a, **k: list(crossing))
    params, x, y = mlp_args()
    # a budget no other test uses: compiled programs are cached by partition options
    cf = lowering.compile(lowering.value_and_grad(mlp_loss), backend="numpy", memory_budget=0.25)
    v, g = cf(params, x, y)
    p = lowering.explain(cf)(params, x, y).partitions[0]
    assert p.saved_bytes > 0.25 * p.saved_bytes_save_all
    assert "memory_budget 0.25" in p.note and "not met" in p.note
    assert p.saved_bytes == min(p.saved_bytes_save_all, p.saved_bytes_min_cut)
    monkeypatch.undo()
    v2, g2 = lowering.compile(lowering.value_and_grad(mlp_loss), backend="numpy",
                              partition="save_all")(params, x, y)
    assert v == v2
    for a, b in zip(pytree.flatten(g)[0], pytree.flatten(g2)[0]):
        assert np.array_equal(a, b)


@pytest.mark.parametrize("backend", ["numpy", "cpu"])
@pytest.mark.parametrize("strategy", ["save_all", "min_cut", "budget0.0"])
def test_recomputation_reads_the_inputs_before_mutation(strategy, backend):
    """The backward recomputes from the arguments as they were on entry, not
    as the forward left them."""
    def f(a, buf):
        buf *= 2.0
        return np.sum(np.sin(a * buf) * np.exp(a))

    a = np.array([0.3, -0.7, 1.1])
    buf = np.array([1.0, 2.0, 3.0])
    g = lowering.compile(lowering.grad(f), backend=backend, **STRATEGIES[strategy])(a, buf)
    assert np.array_equal(buf, [2.0, 4.0, 6.0])
    want = (np.cos(a * buf) * buf + np.sin(a * buf)) * np.exp(a)
    assert_grads_close([g], [want], TOLERANCES.rtol(np.float64, "gradient", 8))
    rep = lowering.explain(lowering.compile(lowering.grad(f), backend=backend,
                                            **STRATEGIES[strategy]))(a, np.array([1.0, 2.0, 3.0]))
    if strategy != "save_all":
        assert "array.ufunc sin" in rep.recomputed


# ---------------------------------------------------------------------------
# checkpoint


CK_N = 32


def ck_region(h):
    """Shrinks h (N, 64) to (N, 16): min_cut would rather save its result
    than h; exp's derivative reads only that result."""
    return np.exp(np.sum(np.reshape(h, (CK_N, 16, 4)), axis=-1) * F32(0.25))


def ck_loss(ck):
    region = lowering.checkpoint(ck_region) if ck else ck_region

    def f(x, w1, w2):
        return np.mean((region(x @ w1) @ w2) ** 2)

    return f


def ck_args():
    rng = np.random.default_rng(2)
    return _normal(rng, CK_N, 32), _normal(rng, 32, 64, scale=1 / 6), _normal(rng, 16, 8,
                                                                                scale=1 / 7)


REGION_SHAPE = (CK_N, 16)  # only the region computes values of this shape
CK_STRATEGIES = {k: STRATEGIES[k] for k in ("min_cut", "budget0.0", "budget0.3")}


@pytest.mark.parametrize("backend", ["numpy", "cpu"])
def test_checkpoint_regions_are_recomputed_not_saved(backend):
    args = ck_args()
    plain = run_all(ck_loss(False), args, backend, (0, 1, 2), CK_STRATEGIES)
    ck = run_all(ck_loss(True), args, backend, (0, 1, 2), CK_STRATEGIES)
    # without checkpoint, min_cut saves the region's small result ...
    assert REGION_SHAPE in [s[1] for s in plain["min_cut"][1].saved]
    for name, ((v, g), p) in ck.items():
        # ... with it, no strategy saves a region value, and the region's ops rerun
        assert REGION_SHAPE not in [s[1] for s in p.saved], f"{name}: {p.describe()}"
        for op in ("array.reduce", "array.ufunc exp"):
            assert op in p.recomputed, f"{name}: {op} not recomputed\n{p.describe()}"
        (v0, g0), _ = plain[name]
        if backend == "numpy":
            assert v == v0 and all(np.array_equal(a, b) for a, b in zip(g, g0)), name
        else:
            assert_grads_close(list(g), list(g0), TOLERANCES.rtol(F32, "gradient", 2 * (32 + 64)),
                               name)
