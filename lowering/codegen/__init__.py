"""Code generators: loop/kernel-level IR to LLVM IR (and later Triton)."""
