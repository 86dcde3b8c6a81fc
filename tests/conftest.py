"""Hypothesis profiles for the whole suite, and its compile cache directory.

- "ci" (the default): a fixed seed (`derandomize=True`, so every run checks the
  same examples and a failure reproduces), modest example counts, no deadline
  (the first call of a compiled function traces and compiles), and the blob to
  reproduce a failure printed.
- "deep": `HYPOTHESIS_PROFILE=deep pytest tests/...` for long, randomized runs.

Tests that need more or fewer examples than the profile scale it with
`lowering.testing.examples(scale)` rather than fixing a number, so "deep"
deepens them all.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

# the verifier runs after every pass in tests (set before lowering is imported)
os.environ.setdefault("LOWERING_VERIFY", "1")

# the on-disk compile cache stays on (every compile writes its entry, as a
# user's would) in a directory of the session's own, never the user's cache;
# subprocesses the tests start inherit it
_CACHE_DIR = tempfile.mkdtemp(prefix="lowering-test-cache-")
os.environ["LOWERING_CACHE_DIR"] = _CACHE_DIR
atexit.register(shutil.rmtree, _CACHE_DIR, ignore_errors=True)

# the cost model decides with one shipped table on every machine (the default
# kind's), so that the paths the tests expect — and the numerics of each path
# at special values — do not depend on the CPU the suite runs on; the table
# selection itself is tested in tests/passes/test_cost_model.py
os.environ.setdefault("LOWERING_COST_TABLE", os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "passes", "cost_tables",
    "rocketlake-2c-512bit.json"))

from hypothesis import HealthCheck, settings  # noqa: E402

_SLOW_DATA = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]

settings.register_profile(
    "ci", derandomize=True, max_examples=25, deadline=None, print_blob=True,
    suppress_health_check=_SLOW_DATA,
)
settings.register_profile(
    "deep", max_examples=1000, deadline=None, print_blob=True,
    suppress_health_check=_SLOW_DATA,
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

