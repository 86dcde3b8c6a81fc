"""Per-pass tests (tests/ mirrors the packages)."""
