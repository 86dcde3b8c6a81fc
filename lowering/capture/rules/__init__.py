"""Capture rules, one module per family of the numpy surface (see OPS.md)."""

from . import (  # noqa: F401  (importing registers the rules)
    creation,
    indexing,
    linalg,
    reductions,
    scans,
    selection,
    shapes,
    tier2,
    ufuncs,
)
