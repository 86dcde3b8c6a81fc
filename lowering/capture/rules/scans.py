"""Scans: cumsum, cumprod, ufunc.accumulate."""

from __future__ import annotations
