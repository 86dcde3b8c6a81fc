"""LOWERING_LOGS switches log channels on through the logging module."""

import os
import subprocess
import sys
import tempfile
import textwrap

PROGRAM = textwrap.dedent(
    """
    import numpy as np, lowering
    f = lowering.compile(lambda x: x + 1)
    f(np.ones(3))
    f(np.ones(4))
    g = lowering.compile(lambda x: x * 2 if x.sum() > 0 else x)
    g(np.ones(2))
    """
)


def run(logs: str) -> str:
    """The program's log, its segments compiled afresh (an empty compile cache)."""
    with tempfile.TemporaryDirectory(prefix="lowering-test-cache-") as cache:
        env = dict(os.environ, LOWERING_LOGS=logs, LOWERING_CACHE_DIR=cache)
        p = subprocess.run([sys.executable, "-c", PROGRAM], env=env, capture_output=True,
                           text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return p.stderr


def test_recompiles_channel_names_the_failing_guard():
    err = run("recompiles")
    assert "[lowering.recompiles]" in err
    assert "size mismatch at index 0: expected 3, got 4" in err
    assert "[lowering.graph]" not in err


def test_graph_and_graph_breaks_channels():
    err = run("graph,graph_breaks")
    assert "[lowering.graph] captured graph" in err and "func.func @main" in err
    assert "[lowering.graph_breaks] graph break" in err and "bool()" in err


def test_unknown_channel_is_a_clear_error():
    env = dict(os.environ, LOWERING_LOGS="nonsense")
    p = subprocess.run([sys.executable, "-c", "import lowering"], env=env, capture_output=True,
                       text=True, timeout=120)
    assert p.returncode != 0 and "unknown channel 'nonsense'" in p.stderr


def test_perf_channel_times_every_stage_of_each_compile():
    """One line per pass of the pipeline, one per emitter stage, one per
    compile, for every segment compiled (the CPU backend: LLVM included)."""
    import re

    from lowering.pipeline import EMITTERS, pipeline

    err = run("perf")
    lines = [ln for ln in err.splitlines() if ln.startswith("[lowering.perf]")]
    stages = re.findall(r"^\[lowering\.perf\] stage (\S+): \d+\.\d+ ms$", "\n".join(lines), re.M)
    per_compile = [p.name for p in pipeline("cpu")] + [n for n, _ in EMITTERS["cpu"]]
    compiles = [ln for ln in lines if re.match(r"\[lowering\.perf\] compile \(cpu\): \d", ln)]
    assert len(compiles) >= 3  # x + 1 at two sizes, the branch's first graph (and its second)
    assert stages == per_compile * len(compiles)
