"""docs/SURFACE.md is generated from the capture rule tables and must be up
to date: regenerate with `make surface` (python -m lowering.surface)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from lowering import surface
from lowering.capture import registry
from lowering.capture.rules.ufuncs import SUPPORTED_UFUNCS

DOC = Path(__file__).resolve().parent.parent / "docs" / "SURFACE.md"


def test_surface_doc_is_up_to_date():
    assert DOC.read_text() == surface.generate(), (
        "docs/SURFACE.md is stale: run `make surface` (python -m lowering.surface "
        "> docs/SURFACE.md)")


def test_rows_follow_the_rule_tables():
    registry._load_rules()
    for name in ("exp", "add", "tanh"):
        assert name in SUPPORTED_UFUNCS
        assert surface.lookup(name).status == "captured"
        assert surface.lookup(name).where == "capture/rules/ufuncs.py"
    assert np.sum in registry.FUNCTIONS
    assert surface.lookup("sum").captured
    # a numpy function nobody will write a rule for
    assert np.busday_count not in registry.FUNCTIONS
    row = surface.lookup("busday_count")
    assert row.status == "graph break" and row.where == "no rule"


def test_probes_tell_captured_from_graph_break():
    assert surface.probe("x + y", "return x + y").status == "captured"
    row = surface.probe("if", "if x.sum() > 0:\n        return x\n    return -x")
    assert row.status == "graph break" and "bool() of a traced value" in row.where
    row = surface.probe("crash", "return x.no_such_method()")
    assert row.status == "error" and "AttributeError" in row.where


def test_tier1_lists_every_ops_md_ufunc():
    ufuncs = [e for e in dict(surface.TIER1)["Ufuncs (call form)"] if isinstance(e, str)]
    assert len(ufuncs) == 71 and "logaddexp" in ufuncs and "right_shift" in ufuncs
    assert all(isinstance(getattr(np, u), np.ufunc) for u in ufuncs)
