"""Integer-array (and boolean-mask) indexing. Boolean masks have data-dependent
shapes: a graph break."""

from __future__ import annotations

from ..tracer import Unsupported


def getitem(x, key):
    raise Unsupported("advanced indexing")


def setitem(x, key, value):
    raise Unsupported("advanced index assignment")
