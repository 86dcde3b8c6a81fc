"""Backends: each turns a tensor-level module into a runnable program."""
