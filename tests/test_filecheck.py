"""Runs the FileCheck tests in tests/filecheck/: each `// RUN:` line of a file
is a shell pipeline (`%s` is the file), run from the repository root with this
virtualenv's tools (xdsl-opt, filecheck, python) first on PATH; it must exit 0.
No `lit` needed."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent / "filecheck"
ROOT = Path(__file__).resolve().parent.parent
FILES = sorted(HERE.glob("*.mlir"))


def run_lines(path: Path) -> list[str]:
    lines = [m.group(1).strip() for m in re.finditer(r"^// RUN:(.*)$", path.read_text(), re.M)]
    return [line.replace("%s", shlex.quote(str(path))) for line in lines]


def test_every_file_has_run_lines():
    assert FILES, "no FileCheck tests found"
    for f in FILES:
        assert run_lines(f), f"{f.name} has no // RUN: line"


@pytest.mark.parametrize("path", FILES, ids=[f.name for f in FILES])
def test_filecheck(path: Path):
    env = dict(os.environ)
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    env["PYTHONWARNINGS"] = "ignore"
    for cmd in run_lines(path):
        p = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], cwd=ROOT, env=env,
                           capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, f"RUN: {cmd}\nexit {p.returncode}\n{p.stdout}\n{p.stderr}"
