"""Process replay (tests/process_replay.py): the recorded programs still
compile to exactly the recorded kernel-level IR and LLVM IR.

The check runs in a fresh interpreter, so that its pinned environment
(LOWERING_THREADS, ...) is read when lowering is imported there, whatever
this test session imported before."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests import process_replay as pr

ROOT = Path(__file__).resolve().parents[1]


def _check(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tests.process_replay", "check", *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONHASHSEED": "0"})


def test_kernels_unchanged():
    r = _check()
    assert r.returncode == 0, (f"kernels changed (re-record with `python -m tests.process_replay "
                               f"record` if that is intended):\n{r.stdout}{r.stderr}")


def _altered(text: str) -> str:
    """The text with its first kernel renamed: a one-line change."""
    assert 'kernel.kernel "k1"' in text
    return text.replace('kernel.kernel "k1"', 'kernel.kernel "k1_altered"', 1)


def test_compare_sees_a_change():
    entry = pr.load()["programs"]["softmax"]
    old = {s: entry[s] for s in pr.STAGES}
    assert pr.compare(old, dict(old), "softmax") == ""
    diff = pr.compare(old, {**old, "kernel": _altered(old["kernel"])}, "softmax")
    assert "--- baseline/softmax/kernel" in diff and "+++ current/softmax/kernel" in diff
    lines = diff.splitlines()
    assert [l for l in lines if l.startswith("-") and not l.startswith("---")] == \
        ["-" + l for l in old["kernel"].splitlines() if 'kernel.kernel "k1"' in l]
    assert any(l.startswith("+") and '"k1_altered"' in l for l in lines)
    assert "llvm" not in diff


def test_check_fails_on_an_altered_baseline(tmp_path):
    base = pr.load()
    entry = base["programs"]["W6"]
    entry["kernel"] = _altered(entry["kernel"])
    path = tmp_path / "baseline.json"
    path.write_text(json.dumps(base))
    r = _check("--only", "W6", "--baseline", str(path))
    assert r.returncode == 1, r.stdout + r.stderr
    # the baseline is the altered text, the current rendering the real one
    assert '-    kernel.kernel "k1_altered"' in r.stdout and '+    kernel.kernel "k1"' in r.stdout
    assert "1 of 1 programs changed: W6" in r.stdout
