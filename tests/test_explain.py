"""`lowering.explain` on the CPU backend: kernel_count is the number of
launches one call makes (kernels after the schedule's merges, plus externs),
and the row-wise examples are each one kernel."""

from __future__ import annotations

import numpy as np
import pytest

import lowering
from lowering.backends.cpu_backend import ExternStep, KernelStep
from lowering.dump import make_inputs
from lowering.examples import EXAMPLES


def launches(fn, *args):
    cf = lowering.compile(fn, backend="cpu")
    report = lowering.explain(cf)(*args)
    cf(*args)
    steps = sum(1 for prog in cf.programs_run for st in prog.steps
                if isinstance(st, (KernelStep, ExternStep)))
    return steps, report


@pytest.mark.parametrize("name", ["layernorm", "softmax", "rmsnorm", "gelu"])
def test_row_wise_examples_are_one_kernel(name):
    ex = EXAMPLES[name]
    args, kwargs = make_inputs(ex.small_args)
    steps, report = launches(ex.fn, *args)
    assert report.kernel_count == 1 == steps, report


def black_scholes(S, K, T):
    r, v = 0.02, 0.3
    sqrt_t = np.sqrt(T)
    d1 = (np.log(S / K) + (r + 0.5 * v * v) * T) / (v * sqrt_t)
    d2 = d1 - v * sqrt_t
    return S * np.exp(-d1 * d1) - K * np.exp(-r * T) * np.exp(-d2 * d2), np.tanh(d2)


def mlp(x, w1, w2):
    h = np.maximum(x @ w1, 0.0)
    z = h @ w2
    return z - z.max(axis=1, keepdims=True)


@pytest.mark.parametrize("fn,shapes", [
    (black_scholes, [(4096,), (4096,), (4096,)]),
    (mlp, [(32, 16), (16, 64), (64, 8)]),
])
def test_kernel_count_is_the_launches_of_one_call(fn, shapes):
    rng = np.random.default_rng(0)
    args = [rng.uniform(0.5, 2.0, s).astype(np.float32) for s in shapes]
    steps, report = launches(fn, *args)
    assert report.kernel_count == steps
    names = [k for graph in report.kernels for k, _ in graph]
    assert len(names) == steps
    if fn is black_scholes:  # point-wise kernels over one domain merge into one launch
        assert steps == 1 and names[0].count("+") >= 1, names
        fused = report.kernels[0][0][1]
        assert any("math.log" in o for o in fused) and any("math.tanh" in o for o in fused)


@pytest.mark.parametrize("backend", ["cpu", "numpy"])
def test_every_program_is_a_compiled_program(backend):
    """Each backend's program, and a partitioned joint function, answers the
    runtime's `Compiled` protocol (`fresh`, `report`, called on inputs) — no
    property looked up by duck typing."""
    from runtime.program import Compiled

    x = np.ones((4, 8), np.float32)
    cf = lowering.compile(lambda x: x * 2 + 1, backend=backend)
    cf(x)
    g = lowering.compile(lowering.grad(lambda x: (x * x).sum()), backend=backend)
    g(x)
    for prog in cf.programs_run + g.programs_run:
        assert isinstance(prog, Compiled), type(prog)
        assert prog.fresh is None or len(prog.fresh) >= 1
    (plain,) = cf.programs_run
    assert (plain.report is not None) == (backend == "cpu")


def _exp_plus_one(x):
    return np.exp(x) * 2.0 + 1.0


def _the_same_ops_lines_below(x):

    return np.exp(x) * 2.0 + 1.0


def _grad_loss(x, w):
    return np.sum(np.tanh(x @ w) ** 2)


def _grad_loss_lines_below(x, w):

    return np.sum(np.tanh(x @ w) ** 2)


@pytest.mark.parametrize("disk", [False, True])
def test_explain_names_each_function_s_own_lines(disk, monkeypatch, tmp_path):
    """Two functions of the same ops at other lines share one program (in
    this process, or through the disk cache from another compile): each
    one's `explain` names its own source lines, not the first compile's."""
    import inspect

    if disk:
        monkeypatch.setenv("LOWERING_CACHE_DIR", str(tmp_path))
        monkeypatch.delenv("LOWERING_CACHE", raising=False)
    else:
        monkeypatch.setenv("LOWERING_CACHE", "0")
    x = np.linspace(-1.0, 1.0, 64)
    for fn in (_exp_plus_one, _the_same_ops_lines_below):
        if disk:  # (a new process's view: nothing compiled in this one, the disk cache kept)
            from lowering import pipeline
            with pipeline._PROGRAMS_LOCK:
                pipeline._PROGRAMS.clear()
        cf = lowering.compile(fn)
        np.testing.assert_allclose(cf(x), fn(x), rtol=1e-14)
        line = inspect.getsourcelines(fn)[1] + (1 if fn is _exp_plus_one else 2)
        ops = [o for ks in lowering.explain(cf)(x).kernels for _, k in ks for o in k]
        assert ops and all(o.endswith(f"(test_explain.py:{line})") for o in ops), (line, ops)


def test_a_gradient_s_halves_name_their_own_lines(monkeypatch):
    """The forward and backward programs of a gradient (shared by two
    functions of the same ops): the report's lines are the calling one's
    (and never the other function's; the gradient's own ops are at the
    call's line)."""
    import inspect

    monkeypatch.setenv("LOWERING_CACHE", "0")
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((8, 4)), rng.standard_normal((4, 3))
    own = {fn: f"test_explain.py:{inspect.getsourcelines(fn)[1] + k}"
           for fn, k in ((_grad_loss, 1), (_grad_loss_lines_below, 2))}
    for fn in own:
        g = lowering.compile(lowering.grad(fn, argnums=1))
        g(x, w)
        ops = [o for ks in lowering.explain(g)(x, w).kernels for _, k in ks for o in k]
        lines = {o[o.rindex("(") + 1:-1] for o in ops if o.endswith(")") and ".py:" in o}
        other = next(v for f, v in own.items() if f is not fn)
        # the loss's ops in both halves (the backward recomputes tanh and the product)
        assert own[fn] in lines and other not in lines, (own[fn], ops)
        assert sum(o.startswith("math.tanh") and o.endswith(f"({own[fn]})") for o in ops) == 2
