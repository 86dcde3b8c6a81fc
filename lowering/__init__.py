"""lowering: compile numpy programs through an MLIR-style IR built on xDSL."""

from .api import compile
from .capture.tracer import GraphBreakError
from .explain import explain

__all__ = ["compile", "explain", "GraphBreakError"]
__version__ = "0.1.0"
