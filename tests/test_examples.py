"""The built-in examples (lowering.examples) and the demo scripts (examples/):
each compiled function matches numpy, and `python -m examples` (`make demo`)
runs them all and says so."""

from __future__ import annotations

import copy
import os
import runpy
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import lowering
from lowering.dump import make_inputs
from lowering.examples import EXAMPLES
from lowering.testing import TOLERANCES, assert_matches_numpy

ROOT = Path(__file__).resolve().parent.parent
DEMOS = ["layernorm", "softmax", "stencil_inplace", "graph_break"]
ALL_DEMOS = DEMOS + ["mlp_train"]


@pytest.mark.parametrize("name", list(EXAMPLES))
def test_builtin_example_matches_numpy(name):
    """The benchmark's acceptance rule: rtol 1e-4 with an absolute floor of
    1e-6 * max|numpy's result| (GELU cancels near -inf: a pure rtol cannot hold)."""
    ex = EXAMPLES[name]
    args, kwargs = make_inputs(ex.small_args)
    want = ex.fn(*copy.deepcopy(args), **kwargs)
    cf = lowering.compile(ex.fn)
    mine = copy.deepcopy(args)
    got = cf(*mine, **kwargs)
    assert type(got) is type(want) and got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6 * float(np.abs(want).max()))
    for before, after in zip(args, mine):
        np.testing.assert_array_equal(before, after)  # inputs untouched
    assert cf.stats["compiles"] == 1 and cf.stats["graph_breaks"] == 0
    again = cf(*copy.deepcopy(args), **kwargs)
    np.testing.assert_array_equal(again, got)
    assert cf.stats["cache_hits"] == 1


@pytest.mark.parametrize("name", ["layernorm", "softmax", "rmsnorm"])
def test_builtin_example_matches_numpy_exactly_where_it_can(name):
    """No cancellation here: the tolerance table's reduction class over the row
    length (a backend may sum a row in another order than numpy does)."""
    ex = EXAMPLES[name]
    args, kwargs = make_inputs(ex.small_args)
    n = args[0].shape[-1]
    assert_matches_numpy(ex.fn, *args, rtol=TOLERANCES.rtol(args[0].dtype, "reduction", n),
                         **kwargs)


@pytest.mark.parametrize("name", DEMOS)
def test_demo_script_checks_out(name, capsys, monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "examples"))
    ns = runpy.run_path(str(ROOT / "examples" / f"{name}.py"), run_name="demo")
    assert ns["main"]() is True
    out = capsys.readouterr().out
    assert "--- captured tensor-level IR" in out and "func.func @main" in out
    assert "--- lowering.explain" in out and "Graph count:" in out
    assert "allclose(rtol=0.0001, atol=1e-05): True" in out
    assert out.rstrip().endswith("OK") or "--- the same with fullgraph=True" in out


def test_stencil_demo_shows_the_write_back(capsys, monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "examples"))
    runpy.run_path(str(ROOT / "examples" / "stencil_inplace.py"), run_name="demo")["main"]()
    out = capsys.readouterr().out
    assert "argument 0: numpy mutates it; compiled call leaves the same values" in out
    assert "array.insert_slice" in out


def test_graph_break_demo_names_its_lines(capsys, monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "examples"))
    runpy.run_path(str(ROOT / "examples" / "graph_break.py"), run_name="demo")["main"]()
    out = capsys.readouterr().out
    assert "Graph break count: 2" in out
    assert "bool() of a traced value" in out and "np.unique" in out
    assert "examples/graph_break.py:19" in out and "examples/graph_break.py:21" in out
    assert "GraphBreakError: graph break at" in out


def test_python_m_examples_runs_them_all():
    p = subprocess.run([sys.executable, "-m", "examples"], cwd=ROOT, capture_output=True,
                       text=True, timeout=600, env=dict(os.environ, PYTHONWARNINGS="ignore"))
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert p.stdout.rstrip().endswith(f"{len(ALL_DEMOS)} of {len(ALL_DEMOS)} examples match numpy")
    assert "loss curves: max relative difference" in p.stdout and "-> match" in p.stdout


def test_training_demo_matches_eager_autodiff(capsys, monkeypatch):
    """examples/mlp_train.py: the compiled Adam step's loss curve equals the
    eager numpy + HIPS autograd one, and the model learns."""
    monkeypatch.syspath_prepend(str(ROOT / "examples"))
    ns = runpy.run_path(str(ROOT / "examples" / "mlp_train.py"), run_name="demo")
    monkeypatch.setitem(ns["main"].__globals__, "STEPS", 40)
    assert ns["main"]() is True
    out = capsys.readouterr().out
    assert "-> match" in out and "steps/s: compiled" in out
    assert "saved for the backward:" in out
