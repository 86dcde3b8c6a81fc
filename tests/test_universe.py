"""The `lowering` xDSL universe: xDSL's own tools (`xdsl-opt`) find our dialect
and passes through the `xdsl.universe` entry point, parse a dumped graph and
run our passes on it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from xdsl.passes import ModulePass
from xdsl.universe import Universe

from dialects.array import Array
from lowering.dump import main as dump_main
from lowering.pipeline import tensor_passes
from lowering.universe import LOWERING_UNIVERSE, pass_classes
from passes.canonicalize import ArrayCanonicalize
from passes.decompose import Decompose

XDSL_OPT = str(Path(sys.executable).parent / "xdsl-opt")


def xdsl_opt(*argv: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([XDSL_OPT, *argv], input=stdin, capture_output=True, text=True,
                          env=dict(os.environ, PYTHONWARNINGS="ignore"), timeout=120)


def dumped(tmp_path: Path, *argv: str) -> Path:
    import io

    out = io.StringIO()
    assert dump_main(list(argv), out=out) == 0
    f = tmp_path / "dump.mlir"
    f.write_text(out.getvalue())
    return f


def test_universe_holds_our_dialect_and_passes():
    assert LOWERING_UNIVERSE.all_dialects["array"]() is Array
    assert LOWERING_UNIVERSE.all_passes["decompose"]() is Decompose
    assert LOWERING_UNIVERSE.all_passes["array-canonicalize"]() is ArrayCanonicalize
    for name, get in LOWERING_UNIVERSE.all_passes.items():
        cls = get()
        assert issubclass(cls, ModulePass) and cls.name == name
        assert cls.__module__.startswith("passes.")


def test_every_pipeline_pass_of_ours_is_registered():
    ours = [p for p in tensor_passes() if type(p).__module__.startswith("passes.")]
    assert ours, "the pipeline has none of our passes?"
    for p in ours:
        assert pass_classes()[p.name] is type(p)


def test_entry_point_is_installed():
    multi = Universe.get_multiverse()
    assert multi.all_dialects["array"]() is Array
    assert multi.all_passes["decompose"]() is Decompose
    assert "cse" in multi.all_passes  # xDSL's own passes are still there


def test_xdsl_opt_runs_decompose_on_a_dump(tmp_path):
    f = dumped(tmp_path, "--example", "layernorm", "--args", "f32[8,16] f32[16] f32[16]")
    p = xdsl_opt("-p", "decompose", str(f))
    assert p.returncode == 0, p.stderr
    out = p.stdout
    assert "arith.subf" in out and "math.sqrt" in out and "arith.divf" in out
    assert 'array.ufunc "subtract"' not in out and 'array.ufunc "sqrt"' not in out
    assert 'array.reduce "sum"' in out  # untouched by decompose
    # and what xdsl-opt printed parses again, through the same universe
    q = xdsl_opt("-p", "array-canonicalize,cse,dce", stdin=out)
    assert q.returncode == 0, q.stderr
    assert "arith.subf" in q.stdout


def test_xdsl_opt_splits_a_dump_with_graph_breaks(tmp_path):
    src = tmp_path / "prog.py"
    src.write_text("import numpy as np\n"
                   "def f(x):\n"
                   "    y = np.exp(x)\n"
                   "    if y.sum() > 1:\n"
                   "        y = y - 1.0\n"
                   "    return y * 2.0\n")
    f = dumped(tmp_path, f"{src}::f", "--args", "f64[5]")
    p = xdsl_opt("--split-input-file", "-p", "decompose", str(f))
    assert p.returncode == 0, p.stderr
    assert p.stdout.count("func.func @main") == 2
    assert "math.exp" in p.stdout and "arith.mulf" in p.stdout


def test_xdsl_opt_reports_our_verifier_errors():
    bad = ("builtin.module {\n"
           "  func.func @f(%a: tensor<2x3xf32>) -> tensor<2xf32> {\n"
           '    %0 = array.reduce "sum" %a [0, 0] : tensor<2x3xf32> -> tensor<2xf32>\n'
           "    func.return %0 : tensor<2xf32>\n  }\n}\n")
    p = xdsl_opt(stdin=bad)
    assert p.returncode != 0
    assert "array.reduce: bad axes [0, 0] for rank 2" in p.stdout + p.stderr
