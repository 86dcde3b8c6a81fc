"""Random programs over the Tier 1 surface against numpy.

`lowering.testing.programs()` draws straight-line programs of 2-30 statements
(ufuncs, operators with arrays and Python/numpy scalars, reductions with
axis/keepdims/ddof, reshape/transpose/slicing views, where, matmul, astype,
and in-place updates of arguments, their views and intermediates) over inputs
in every layout. Each program is checked with `assert_matches_numpy` under
the tolerance its ops add up to in `TOLERANCES`, on its first (traced) call and
on a second, cached call; and once more compiled with `fullgraph=True`,
because OPS.md's Tier 1 must compile without a graph break.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given

import lowering
from lowering.testing import Program, assert_matches_numpy, examples, programs


@examples(4.0)
@given(prog=programs())
def test_random_program_matches_numpy(prog: Program):
    assert_matches_numpy(prog.fn, *prog.args, rtol=prog.rtol, calls=2)


@examples(1.0)
@given(prog=programs(max_ops=12))
def test_random_program_has_no_graph_break(prog: Program):
    cf = lowering.compile(prog.fn, fullgraph=True)
    # (floating-point flags numpy would warn about re-run a call eagerly, so
    # numpy warns: with them ignored, every call must be the compiled one)
    with np.errstate(all="ignore"):
        assert_matches_numpy(prog.fn, *prog.args, rtol=prog.rtol, compiled=cf)
    assert cf.stats["graph_breaks"] == 0 and cf.stats["eager_fallbacks"] == 0


def test_programs_cover_the_surface():
    """The strategy reaches every kind of statement (a check on the generator,
    so a bug there cannot silently shrink what the property tests cover)."""
    from hypothesis import HealthCheck, settings
    from hypothesis import strategies as st

    seen: set[str] = set()

    @settings(max_examples=60, derandomize=True, database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(st.data())
    def collect(data):
        prog = data.draw(programs())
        seen.update(prog.source.split())

    collect()
    text = " ".join(seen)
    for needle in ["np.where(", "@", "+=", "out=", "axis=", "keepdims=", ".reshape(", ".T",
                   "np.transpose(", "[", "astype(", "np.float32(2.0)", "abs(", "~"]:
        assert needle in text, needle


@examples(2.0)
@given(prog=programs())
def test_random_program_with_size_symbols_matches_numpy(prog: Program):
    """Traced with a size symbol for every dim (`dynamic=True`): every op's
    rule meets symbolic sizes; whether the entry serves other sizes or keeps
    its own, the answer is numpy's, traced and cached."""
    cf = lowering.compile(prog.fn, dynamic=True)
    assert_matches_numpy(prog.fn, *prog.args, rtol=prog.rtol, compiled=cf, calls=2)
