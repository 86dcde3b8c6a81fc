"""The forward/backward cut is a pipeline stage: `remat` runs on the real
compile path (before the tensor passes), the program is built from its output
module (the halves and the attributes recorded on them, which round-trip
through MLIR text), and `lowering.dump` lists it, prints the module after it
and times it."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest
from xdsl.parser import Parser

import lowering
from lowering import pipeline
from lowering.pipeline import context, tensor_stage
from passes.remat import REPORT, RESULTS, Remat, partition, read_cut

from ..test_dump import run_main

LOSS = "import numpy as np\ndef loss(x, w):\n    h = np.tanh(x @ w)\n    return (h * h).sum()\n"


def loss(x, w):
    h = np.tanh(x @ w)
    return (h * h).sum()


def loss_args():
    rng = np.random.default_rng(0)
    return rng.standard_normal((4, 8)), rng.standard_normal((8, 3))


def joint_module():
    """The captured joint forward+backward function of value_and_grad(loss)."""
    cf = lowering.compile(lowering.value_and_grad(loss, argnums=(0, 1)), backend="numpy")
    (graph,) = lowering.explain(cf)(*loss_args()).graphs
    return Parser(context(), graph).parse_module()


def report_of(p) -> dict:
    """A partition's report fields (the halves compared as text)."""
    return {f.name: (str if f.name in ("forward", "backward") else repr)(getattr(p, f.name))
            for f in dataclasses.fields(p)}


@pytest.mark.parametrize("budget", [None, 0.3, 0.0])
@pytest.mark.parametrize("strategy", ["min_cut", "save_all"])
def test_pass_records_the_partition_and_it_round_trips_through_text(strategy, budget):
    module = joint_module()
    direct = partition(module.clone(), strategy, budget)
    cut = module.clone()
    Remat(strategy, budget).apply(context(), cut)
    names = [f.sym_name.data for f in cut.ops]  # type: ignore[attr-defined]
    assert names == ["main_forward", "main_backward"]
    fwd, bwd = cut.ops  # type: ignore[misc]
    assert RESULTS in fwd.attributes and REPORT in fwd.attributes
    assert RESULTS in bwd.attributes and REPORT not in bwd.attributes
    text = str(cut)
    parsed = Parser(context(), text).parse_module()
    parsed.verify()
    assert str(parsed) == text
    got = read_cut(parsed)
    assert got is not None and direct is not None
    assert report_of(got) == report_of(read_cut(cut))
    # what the pass recorded is what partition() decided, halves and all
    want = report_of(direct)
    assert report_of(got) == want


def test_pass_leaves_a_function_without_backward_as_it_is():
    cf = lowering.compile(lambda x: np.tanh(x) * 2.0, backend="numpy")
    (graph,) = lowering.explain(cf)(np.ones(4)).graphs
    module = Parser(context(), graph).parse_module()
    before = str(module)
    Remat().apply(context(), module)
    assert str(module) == before and read_cut(module) is None


@pytest.mark.parametrize("backend", ["numpy", "cpu"])
def test_compile_builds_the_program_from_the_remat_stage(backend, monkeypatch):
    """The remat stage runs once per compile of a joint function, with the
    compile's strategy and budget, and the program's partition is the one it
    recorded."""
    ran: list[tuple] = []
    apply = Remat.apply

    def spy(self, ctx, op):
        cut_before = read_cut(op)
        apply(self, ctx, op)
        if read_cut(op) is not None and cut_before is None:
            ran.append((self.strategy, self.memory_budget))

    monkeypatch.setattr(Remat, "apply", spy)
    pipeline.clear_programs()
    # a budget no other test uses, so that the program is compiled here
    cf = lowering.compile(lowering.value_and_grad(loss, argnums=(0, 1)), backend=backend,
                          memory_budget=0.37)
    x, w = loss_args()
    v, (gx, gw) = cf(x, w)
    assert ran == [("min_cut", 0.37)]
    (prog,) = cf.programs_run
    module = Parser(context(), lowering.explain(cf)(x, w).graphs[0]).parse_module()
    assert report_of(prog.partition) == report_of(read_cut(tensor_stage(module, ("min_cut", 0.37))))
    np.testing.assert_allclose(v, loss(x, w))
    h = np.tanh(x @ w)
    np.testing.assert_allclose(gx, (2 * h * (1 - h * h)) @ w.T, rtol=1e-12)
    np.testing.assert_allclose(gw, x.T @ (2 * h * (1 - h * h)), rtol=1e-12)


def test_dump_lists_remat_and_prints_the_halves_after_it(tmp_path):
    p = tmp_path / "loss.py"
    p.write_text(LOSS)
    code, out = run_main(f"{p}::loss", "--args", "f32[4,8] f32[8,3]", "--grad", "--passes")
    assert code == 0, out
    listed = re.findall(r"^//\s+\d+\. (\S+)", out, re.M)
    assert listed[:2] == ["keep-flags", "remat"] and listed == [
        s.name for s in pipeline.pipeline("cpu")] + \
        [n for n, _ in pipeline.EMITTERS["cpu"]]
    headers = re.findall(r"^// -----// IR after ([^(]+?) \((\d+\.\d+) ms\) //----- //$", out, re.M)
    names = [h[0] for h in headers]
    tensor = ["keep-flags", "remat"] + [s.name for s in pipeline.tensor_passes()]
    below = [s.name for s in pipeline.lower_passes("cpu")]
    assert names == tensor + [f"{n} of the forward" for n in below] + \
        [f"{n} of the backward" for n in below]
    after_remat = out.split("IR after remat")[1].split("// -----//")[0]
    assert "func.func @main_forward" in after_remat and "func.func @main_backward" in after_remat
    assert f"{RESULTS} = array<i64: 0>" in after_remat and f"{RESULTS} = array<i64: 1, 2>" in after_remat
    module = Parser(context(), after_remat[after_remat.index("builtin.module"):]).parse_module()
    cut = read_cut(module)
    assert cut is not None and cut.fwd_results == [0] and cut.bwd_results == [1, 2]
    times = re.search(r"^// stage times \(all graphs\): (.*)$", out, re.M).group(1)
    assert [t.rsplit(" ", 2)[0] for t in times.split(", ")] == \
        [s.name for s in pipeline.pipeline("cpu")] + [n for n, _ in pipeline.EMITTERS["cpu"]]


def test_perf_log_times_remat_once_and_each_half_below_the_tensor_level(caplog):
    import logging

    pipeline.clear_programs()
    cf = lowering.compile(lowering.value_and_grad(loss, argnums=(0, 1)), backend="cpu",
                          memory_budget=0.41)
    with caplog.at_level(logging.DEBUG, logger="lowering.perf"):
        cf(*loss_args())
    stages = [m.group(1) for r in caplog.records
              if (m := re.match(r"stage (\S+): ", r.getMessage()))]
    tensor = ["keep-flags", "remat"] + [s.name for s in pipeline.tensor_passes()]
    half = [s.name for s in pipeline.lower_passes("cpu")] + \
        [n for n, _ in pipeline.EMITTERS["cpu"]]
    assert stages == tensor + half + half
