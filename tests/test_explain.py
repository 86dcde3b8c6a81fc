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
