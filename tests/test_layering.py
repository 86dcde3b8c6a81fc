"""The layering of the architecture (dialects ← passes ← lowering; runtime
importing neither passes nor lowering; no cycles inside passes, dialects,
runtime and between lowering's packages; a backend never importing the
pipeline, the API or capture) is a set of import-linter contracts in
pyproject.toml. This runs
them: a module that imports across a layer fails the suite, naming the
import chain."""

from __future__ import annotations

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_the_layering_contracts_hold():
    exe = os.path.join(os.path.dirname(sys.executable), "lint-imports")
    run = subprocess.run([exe, "--no-cache"], cwd=ROOT, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "0 broken" in run.stdout and "6 kept" in run.stdout, run.stdout
