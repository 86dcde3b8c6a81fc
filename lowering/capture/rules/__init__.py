"""Capture rules, one module per family of the numpy surface (see OPS.md)."""

from . import ufuncs, reductions, shapes, indexing, linalg, creation  # noqa: F401
