"""Every level below the tensor level means what the tensor level means: the
loop-level IR (after `lower-to-loop`) and the kernel-level IR (after
`schedule`) of a graph, run by the loop-level interpreter
(`lowering/backends/interpreter.py`: numpy, no LLVM), give the numpy
reference backend's results for the tensor-level graph — on the examples, on
the fusion patterns of `lower-to-loop` (row reductions, scans, scatters,
gathers, column sums, in-place fills, carried stores) and on random
programs. A fusion bug then shows as a wrong answer at the level that made
it, whatever the emitter does."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given
from xdsl.parser import Parser

import lowering
from lowering.backends import numpy_backend
from lowering.backends.interpreter import poison, run_module
from lowering.examples import EXAMPLES
from lowering.pipeline import context, lower, run_passes
from lowering.testing import TOLERANCES, Program, assert_same_value, examples, programs
from runtime.guards import layout_class


def graph_inputs(fn, args) -> tuple:
    """(the tensor-level module of fn's one graph, its inputs)."""
    rep = lowering.explain(fn)(*[a.copy() if isinstance(a, np.ndarray) else a for a in args])
    assert rep.graph_count == 1 and not rep.breaks, rep.breaks
    module = Parser(context(), rep.graphs[0]).parse_module()
    f = next(iter(module.ops))
    inputs = [np.asarray(a, np.float64) if isinstance(a, float) else a for a in args]
    if len(f.body.blocks[0].args) != len(inputs):
        return None  # the graph reads other inputs than the arguments (state, constants)
    return module, inputs


def levels(module, inputs) -> dict:
    """The loop-level and kernel-level modules the CPU pipeline makes."""
    keep = {}

    def after(p, m, dt):
        if p.name == "lower-to-loop":
            keep["loop"] = m.clone()

    lays = [layout_class(x) if isinstance(x, np.ndarray) else "C" for x in inputs]
    keep["kernel"], _ = lower(module, "cpu", lays, after)
    return keep


def reference(module, inputs) -> list:
    m = module.clone()
    run_passes(m)
    with np.errstate(all="ignore"):
        return list(numpy_backend.compile_module(m)([np.array(x) for x in inputs]))


def assert_levels_match(fn, *args, rtol=None, graph=None):
    module, inputs = graph if graph is not None else graph_inputs(fn, args)
    want = reference(module, inputs)
    for level, m in levels(module, inputs).items():
        with np.errstate(all="ignore"):
            got = run_module(m, [np.array(x) for x in inputs])
        assert len(got) == len(want)
        for i, (g, w) in enumerate(zip(got, want)):
            w = np.asarray(w)
            assert_same_value(np.asarray(g).reshape(w.shape), w, rtol, f"{level} level result {i}")


rng = np.random.default_rng(0)
X = rng.standard_normal((8, 16)).astype(np.float32)
X[1, 3], X[2, 5], X[3, 7], X[4, 0] = np.nan, np.inf, -np.inf, -0.0
R16 = TOLERANCES.rtol(np.float32, "reduction", 16)


def fill(x):
    out = np.zeros_like(x)
    for i in range(x.shape[0]):
        out[i] = np.tanh(x[i]) + i
    return out


def scatter_add(x):
    y = x.copy()
    y[np.array([1, 1, 2])] += 5.0
    return y


PATTERNS = {
    "softmax": (lambda x: np.exp(x - x.max(-1, keepdims=True))
                / np.exp(x - x.max(-1, keepdims=True)).sum(-1, keepdims=True), R16),
    "layernorm": (lambda x: (x - x.mean(-1, keepdims=True))
                  / np.sqrt(x.var(-1, keepdims=True) + 1e-5), R16 * 4),
    "row fill": (fill, None),
    "kept and summed": (lambda x: ((y := x * 2 + 1), y.sum(axis=-1)), R16),
    "cumsum": (lambda x: np.cumsum(x * 2, axis=1), 0.0),
    "column sum": (lambda x: (x * 3).sum(axis=0), TOLERANCES.rtol(np.float32, "reduction", 8)),
    "gather": (lambda x: x[np.array([3, 1, -1])] * 2, 0.0),
    "scatter add": (scatter_add, 0.0),
    "matmul": (lambda x: (x @ x.T).sum(-1), TOLERANCES.rtol(np.float32, "reduction", 256)),
    "where": (lambda x: np.where(x > 0, x, -x) + (x == x).astype(np.float32), 0.0),
    "argmax": (lambda x: (np.argmax(x, axis=1), np.argmin(x, axis=0)), 0.0),
    "integers": (lambda x: (np.nan_to_num(x) * 10).astype(np.int32) // 3, 0.0),
    "max with NaN": (lambda x: np.maximum(x, 0.5).max(axis=1), 0.0),
    "integer extremes": (lambda x: np.maximum((np.nan_to_num(x) * 10).astype(np.int64), -3)
                         - np.minimum((np.nan_to_num(x) * 7).astype(np.int64), 4), 0.0),
}


@pytest.mark.parametrize("name", list(PATTERNS))
def test_fusion_patterns_mean_what_the_tensor_level_means(name):
    fn, rtol = PATTERNS[name]
    assert_levels_match(fn, X, rtol=rtol)


@pytest.mark.parametrize("name", list(EXAMPLES))
def test_examples_mean_what_the_tensor_level_means(name):
    from lowering.dump import make_inputs

    e = EXAMPLES[name]
    args, kwargs = make_inputs(e.small_args)
    assert not kwargs
    assert_levels_match(e.fn, *args, rtol=TOLERANCES.rtol(np.float32, "reduction", 1024))


@examples(1.0)
@given(prog=programs(max_ops=12))
def test_random_programs_mean_what_the_tensor_level_means(prog: Program):
    graph = graph_inputs(prog.fn, prog.args)
    assume(graph is not None)
    assert_levels_match(prog.fn, *prog.args, rtol=prog.rtol, graph=graph)


def test_the_interpreter_sees_a_wrong_kernel():
    """A kernel whose row is shifted by one (the second iteration's kernel
    given the third's row parameter: the iterations share one body) is a
    wrong answer, and the row nothing wrote reads as poison: the check can
    fail."""
    module, inputs = graph_inputs(fill, (X,))
    kernel = levels(module, inputs)["kernel"]
    assert 'params ["1", "1.0"]' in str(kernel)
    text = str(kernel).replace('params ["1", "1.0"]', 'params ["2", "1.0"]', 1)
    bad = Parser(context(), text).parse_module()
    got = run_module(bad, [X.copy()])[0]
    want = fill(X)
    assert not np.array_equal(got[1], want[1]) and np.isnan(got[1]).all()
    assert np.isnan(poison((2,), np.dtype(np.float32))).all()
