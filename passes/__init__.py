"""Tensor-level passes, one per file; each an xDSL ModulePass with a name."""
