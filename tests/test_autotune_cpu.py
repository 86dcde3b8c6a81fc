"""mode="max-autotune" on the CPU (lowering/autotune.py): candidates timed
on the first call's arguments, the fastest kept and remembered on disk."""

import numpy as np
import pytest

import lowering
from lowering import autotune, pipeline
from lowering.backends import cpu_cache


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("LOWERING_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(cpu_cache, "_suspended", False)
    return tmp_path


def _tuning(cf, *args):
    (line,) = [p for ps in lowering.explain(cf)(*args).paths for p in ps
               if p.startswith("max-autotune")]
    return line


def test_tuned_program_matches_numpy_and_explain_lists_the_candidates(fresh_cache):
    def f(A, w):
        return A.T @ np.tanh(A @ w)

    rng = np.random.default_rng(0)
    A, w = rng.standard_normal((300, 40)), rng.standard_normal(40)
    cf = lowering.compile(f, mode="max-autotune")
    np.testing.assert_allclose(cf(A, w), f(A, w), rtol=1e-12, atol=1e-12)
    line = _tuning(cf, A, w)
    names = [c.name for c in autotune.candidates()]
    assert "chosen; candidates:" in line
    for name in names:
        assert name in line  # each timed, or named as the same program as another
    assert line.split(":")[1].strip().removesuffix(" chosen; candidates") in names


def test_the_fastest_candidate_wins_and_a_warm_cache_times_nothing(fresh_cache, monkeypatch):
    calls = []
    made_up = {"shipped": 30.0, "generated kernels": 10.0, "library routines": 20.0,
               "one thread": 40.0, "256-bit vectors": 50.0, "128-bit vectors": 60.0,
               "64-bit vectors": 70.0}
    real_build = pipeline._candidate

    def build(tensor, backend, layouts, c):
        text, prog = real_build(tensor, backend, layouts, c)
        prog.candidate = c.name
        return c.name + text, prog  # (every candidate its own program: each timed)

    def timed(prog, inputs):
        calls.append(prog.candidate)
        return made_up[prog.candidate]

    monkeypatch.setattr(pipeline, "_candidate", build)
    monkeypatch.setattr(autotune, "time_program", timed)

    def f(x):
        return np.sum(np.exp(x) * 2.0 - x)  # (a program no other test compiles)

    x = np.linspace(-1, 1, 1001)
    cf = lowering.compile(f, mode="max-autotune")
    np.testing.assert_allclose(cf(x), f(x))
    assert calls == [c.name for c in autotune.candidates()]
    assert _tuning(cf, x).startswith("max-autotune: generated kernels chosen")

    # a fresh process's view: no program in memory, the winner on disk
    pipeline._PROGRAMS.clear()
    calls.clear()
    cf2 = lowering.compile(f, mode="max-autotune")
    np.testing.assert_allclose(cf2(x), f(x))
    assert calls == []
    assert _tuning(cf2, x) == ("max-autotune: generated kernels (timed in an earlier run, "
                               "read from the on-disk cache)")


def test_a_failing_candidate_is_dropped(fresh_cache, monkeypatch):
    real = autotune.time_program
    seen = []

    def timed(prog, inputs):
        seen.append(prog)
        if len(seen) == 2:
            raise RuntimeError("made-up failure")
        return real(prog, inputs)

    monkeypatch.setattr(autotune, "time_program", timed)

    def f(x, y):
        return np.maximum(x, y) @ y.T  # (a program no other test compiles)

    x, y = np.ones((5, 3)), np.arange(15.0).reshape(5, 3)
    cf = lowering.compile(f, mode="max-autotune")
    np.testing.assert_allclose(cf(x, y), f(x, y))
    assert "failed (RuntimeError: made-up failure)" in _tuning(cf, x, y)


def test_tuning_runs_on_copies_of_arguments_written_in_place(fresh_cache):
    def f(x):
        x += 1.0
        return np.sum(x * x)

    x = np.zeros(64)
    cf = lowering.compile(f, mode="max-autotune")
    r = cf(x)
    assert np.array_equal(x, np.ones(64)) and r == 64.0  # one call: one increment


def test_other_modes_do_not_share_the_tuned_program(fresh_cache):
    def f(x):
        return np.cos(x) + 0.5  # (a program no other test compiles)

    x = np.linspace(0, 1, 9)
    tuned = lowering.compile(f, mode="max-autotune")
    plain = lowering.compile(f)
    np.testing.assert_allclose(tuned(x), plain(x))
    assert any(p.startswith("max-autotune") for ps in lowering.explain(tuned)(x).paths for p in ps)
    assert not any(p.startswith("max-autotune") for ps in lowering.explain(plain)(x).paths
                   for p in ps)
