"""The CPU benchmark of shared/BENCH.md: `python -m bench` (see bench/README.md)."""
