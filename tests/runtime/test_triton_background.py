"""Triton's background work: the builds it runs in threads of their own
(`triton_launch.background`: the warm-up's driver utilities, a kernel's
launcher) finish before the interpreter exits, and a first compile waits
for the warm-up thread instead of building Triton's driver utilities beside
it."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time
import types

from lowering.backends import gpu_backend as G
from lowering.backends import triton_launch as TL

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_the_exit_waits_for_background_work(tmp_path):
    done = tmp_path / "done"
    script = textwrap.dedent(f"""
        import time
        from lowering.backends.triton_launch import background

        def build():
            time.sleep(0.5)
            open({str(done)!r}, "w").write("built")
        background(build, "a-build")
        # the script ends here, its build still running
    """)
    r = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert done.read_text() == "built"


def test_the_exit_does_not_wait_forever(tmp_path):
    script = textwrap.dedent("""
        import threading
        from lowering.backends import triton_launch as TL

        TL.EXIT_WAIT_S = 0.2
        TL.background(threading.Event().wait, "stuck")
    """)
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert time.perf_counter() - t0 < 60


def test_finished_threads_are_not_kept(monkeypatch):
    monkeypatch.setattr(TL, "_BACKGROUND", [])
    gate = threading.Event()
    first = TL.background(lambda: None, "quick")
    first.join(10)
    second = TL.background(gate.wait, "waiting")
    assert TL._BACKGROUND == [second]
    gate.set()
    second.join(10)


class _Fn:
    """A @triton.jit function's stand-in: its compile notes whether the
    warm-up thread was still running."""

    def __init__(self, warm):
        self.warm, self.seen, self.launched = warm, [], 0

    def warmup(self, *values, **kw):
        self.seen.append(self.warm.is_alive())
        return object()  # (not a CompiledKernel: the JIT launches)

    def __getitem__(self, grid):
        def launch(*values, **kw):
            self.launched += 1
        return launch


def test_a_first_compile_waits_for_the_warm_up(monkeypatch):
    finished = []

    def warm_up_work():
        time.sleep(0.3)
        finished.append(True)
    warm = threading.Thread(target=warm_up_work)
    monkeypatch.setattr(TL, "_WARM", [warm])
    fn = _Fn(warm)
    kernel = types.SimpleNamespace(constexprs={}, options={})
    st = types.SimpleNamespace(kernel=kernel, runners={}, grid=1, num_warps=4,
                               constexpr_values=(), tuned=None)
    prog = types.SimpleNamespace(tune=False, _kernel_fn=lambda st, dev: fn,
                                 _launch_values=lambda st, bufs, dev: [])
    warm.start()
    G.GpuProgram._run_kernel(prog, st, [], types.SimpleNamespace(interpreted=False))
    assert fn.seen == [False] and finished == [True] and fn.launched == 1


def test_waiting_for_no_warm_up_returns(monkeypatch):
    monkeypatch.setattr(TL, "_WARM", [])
    TL.wait_for_warm_up()
    monkeypatch.setattr(TL, "_WARM", [threading.current_thread()])
    TL.wait_for_warm_up()  # (never waits for itself)


def test_several_background_builds_all_finish_before_exit(tmp_path):
    n = 3
    script = textwrap.dedent(f"""
        import time
        from lowering.backends.triton_launch import background

        for i in range({n}):
            background(lambda i=i: (time.sleep(0.2 * (i + 1)),
                                    open({str(tmp_path)!r} + f"/b{{i}}", "w").close()), f"b{{i}}")
    """)
    r = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert sorted(os.listdir(tmp_path)) == [f"b{i}" for i in range(n)]
