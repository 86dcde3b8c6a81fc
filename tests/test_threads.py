"""The first calls of a process, made by several threads at once, see what a
single first call sees: the complete capture rule tables (no spurious graph
break), one LLVM engine, one program cache — and give numpy's answers.

The threads run in a fresh interpreter, where nothing is loaded yet: the
rules load lazily on the first call, so a test in this process (where some
other test has long since called a compiled function) could not see the race."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

THREADS = 8

SCRIPT = textwrap.dedent("""
    import json, sys, threading
    import numpy as np
    import lowering
    from lowering.capture import registry

    assert not registry._loaded, "the rules loaded before the first call"

    def fn(x, w):  # rules of several families: linalg, ufuncs, indexing, scans, selection, reductions
        y = np.tanh(x @ w) + x[:, ::-1] * 0.5
        z = np.cumsum(y, axis=1)
        return np.where(z > 0, z, -z).sum(axis=0), y.max()

    n = int(sys.argv[1])
    fs = [lowering.compile(fn) for _ in range(n)]  # one each: the first call of each runs at once
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((16, 16)), rng.standard_normal((16, 16))
    barrier = threading.Barrier(n)
    out = [None] * n

    def run(i):
        barrier.wait()
        try:
            s, m = fs[i](x, w)
            out[i] = {"sum": np.asarray(s).tolist(), "max": float(m), "stats": dict(fs[i].stats)}
        except BaseException as e:  # reported to the test, not lost in the thread
            out[i] = {"error": repr(e)}

    ts = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    s, m = fn(x, w)
    print(json.dumps({"want": {"sum": s.tolist(), "max": float(m)}, "got": out}))
""")


def test_concurrent_first_calls_in_a_fresh_process():
    import numpy as np

    root = Path(__file__).resolve().parent.parent
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(root)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    env.pop("LOWERING_LOGS", None)
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(THREADS)], cwd=root, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    want = res["want"]
    assert len(res["got"]) == THREADS
    for i, got in enumerate(res["got"]):
        assert "error" not in got, f"thread {i}: {got['error']}\n{proc.stderr}"
        st = got["stats"]
        assert st["graph_breaks"] == 0 and st["eager_fallbacks"] == 0, f"thread {i}: {st}\n{proc.stderr}"
        assert st["compiles"] == 1, f"thread {i}: {st}"
        np.testing.assert_allclose(got["sum"], want["sum"], rtol=1e-12, err_msg=f"thread {i}")
        np.testing.assert_allclose(got["max"], want["max"], rtol=1e-12, err_msg=f"thread {i}")
    # graph breaks and eager fallbacks also warn or log on stderr
    assert "graph break" not in proc.stderr.lower(), proc.stderr
