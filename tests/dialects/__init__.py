"""Tests of the dialects package (a package: see tests/__init__.py)."""
