"""Passes are iterative: a program whose use-def chain is longer than Python's
recursion limit compiles (the compiler's walks keep explicit stacks; none
nests a call per op of the chain) and gives numpy's answer.

Each program is a chain of CHAIN multiplications by an input array (one op a
step: the chain is as deep as the program is long) — cheap to trace and
compile, and exact, so the compiled result equals numpy's bit for bit."""

from __future__ import annotations

import sys

import numpy as np

import lowering

CHAIN = 3000  # ops in the chain, well past the default recursion limit (1000)


def chain(x, c):
    for _ in range(CHAIN):
        x = x * c
    return x


def loss(x, c):
    return chain(x, c).sum()


def checkpointed_loss(x, c):
    y = lowering.checkpoint(chain)(x, c)
    return (y * y).sum()  # the backward reads y: recomputed, through the whole chain


def _inputs():
    rng = np.random.default_rng(0)
    return rng.standard_normal(8), 1.0 - rng.uniform(0, 1e-3, 8)


def _within_default_limit():
    assert sys.getrecursionlimit() < CHAIN  # the chain really is deeper than the limit


def test_long_chain_compiles_and_matches_numpy():
    _within_default_limit()
    x, c = _inputs()
    f = lowering.compile(chain)
    np.testing.assert_array_equal(f(x, c), chain(x, c))
    assert f.stats["compiles"] == 1 and f.stats["graph_breaks"] == 0
    assert f.stats["eager_fallbacks"] == 0


def test_long_chain_value_and_grad():
    """The joint forward+backward graph (twice as deep), its partition and
    both halves' lowering."""
    _within_default_limit()
    x, c = _inputs()
    vg = lowering.value_and_grad(loss)
    value, g = vg(x, c)
    np.testing.assert_allclose(value, loss(x, c), rtol=1e-13)
    # d/dx sum(x * c**CHAIN) = c**CHAIN, multiplied in the backward's order
    want = np.ones_like(x)
    for _ in range(CHAIN):
        want = want * c
    np.testing.assert_array_equal(g, want)
    assert vg._compiled.stats["graph_breaks"] == 0


def test_long_checkpointed_chain_grad():
    """A checkpointed chain the backward reads: the partitioner's walk from
    the value to what it is recomputed from goes through every op."""
    _within_default_limit()
    x, c = _inputs()
    want = 2 * chain(x, c)
    for _ in range(CHAIN):
        want = want * c
    np.testing.assert_allclose(lowering.grad(checkpointed_loss)(x, c), want, rtol=1e-13)


def test_row_cache_compares_deep_expressions():
    """The codegen's check that a reduce body and a map body compute the same
    value (`plan_row_cache`) walks both expressions side by side."""
    from xdsl.dialects import arith
    from xdsl.dialects.builtin import f64
    from xdsl.ir import Block

    from lowering.codegen.llvm import _same_value

    outer = Block(arg_types=[f64]).args[0]  # defined outside both bodies
    a, b = Block(arg_types=[f64]).args[0], Block(arg_types=[f64]).args[0]

    def expr(arg, bottom=arith.MulfOp):
        v = bottom(arg, outer).result
        for _ in range(CHAIN):
            v = arith.MulfOp(v, outer).result
        return v

    _within_default_limit()
    assert _same_value(expr(a), expr(b), (a, b))
    assert not _same_value(expr(a), expr(b, bottom=arith.AddfOp), (a, b))
    assert not _same_value(expr(a), expr(outer), (a, b))  # b's index argument is not used
