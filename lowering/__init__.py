"""lowering: compile numpy programs through an MLIR-style IR built on xDSL."""

from .api import CompileError, compile
from .backends.cpu_cache import cache_clear, cache_info
from .autodiff import checkpoint, grad, value_and_grad, vjp
from .capture.tracer import GraphBreakError
from .dynamic import mark_dynamic, mark_static
from .explain import explain

__all__ = ["compile", "explain", "GraphBreakError", "CompileError", "grad", "value_and_grad", "vjp", "checkpoint",
           "cache_info", "cache_clear", "mark_dynamic", "mark_static"]
__version__ = "0.1.0"
