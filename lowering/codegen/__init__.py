"""Code generation helpers shared by the backends (LLVM IR building blocks)."""
