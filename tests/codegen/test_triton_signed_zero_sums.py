"""numpy's float sums start from +0.0: a sum of -0.0 terms alone is +0.0
(`np.full(128, -0.0).sum()` is 0.0). The Triton emitter's block reductions
(`tl.reduce` over the lanes) returned -0.0 where a row filled its block
exactly (no masked lane adding +0.0: lengths of a power of two up to the
register row, and whole-array sums split into such chunks); the emitter now
ends a float sum with `+ 0.0`. Checked in Triton's interpreter on a machine
without a GPU, against numpy bit for bit (signs of zeros included)."""

from __future__ import annotations

import os
import tempfile

import numpy as np
import pytest
from xdsl.parser import Parser

os.environ.setdefault("TRITON_CACHE_DIR", tempfile.mkdtemp(prefix="lowering-test-triton-"))

pytest.importorskip("triton")

import lowering  # noqa: E402
from lowering.backends import triton_launch as TL  # noqa: E402
from lowering.explain import explain  # noqa: E402
from lowering.pipeline import context, lower  # noqa: E402
from lowering.testing import assert_same_value  # noqa: E402


def rowsum(x):
    return x.sum(axis=1)


def colsum(x):
    return x.sum(axis=0)


def total(x):
    return x.sum()


def rowmean(x):
    return x.mean(axis=-1)


def scaled_rowsum(x):
    return (x * 2.0).sum(axis=1) * 3.0


CASES = [(rowsum, (3, 128)), (rowsum, (2, 8192)), (rowsum, (3, 100)), (rowsum, (2, 10000)),
         (colsum, (128, 3)), (colsum, (64, 5)), (total, (4, 32)), (total, (512, 1024)),
         (rowmean, (3, 64)), (scaled_rowsum, (5, 256))]


def _run(fn, args):
    rep = explain(lowering.compile(fn, backend="numpy"))(*args)
    (graph,) = rep.graphs
    final, _ = lower(Parser(context(), graph).parse_module(), "gpu", ["C"] * len(args))
    return TL.run_module(final, args)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("fn,shape", CASES, ids=[f"{f.__name__}-{'x'.join(map(str, s))}"
                                                 for f, s in CASES])
def test_sums_of_negative_zeros_are_positive_zero(fn, shape, dtype):
    z = np.full(shape, -0.0, dtype)
    (got,) = _run(fn, [z])
    assert_same_value(np.asarray(got), np.asarray(fn(z)), rtol=0.0)  # (a 0-d result: an array)
    assert not np.signbit(got).any()


def test_a_sum_from_a_negative_zero_initial_keeps_numpys_sign():
    """`np.sum(x, axis=1, initial=-0.0)`: -0.0 exactly where every term of
    the row is -0.0 (numpy starts from `initial`)."""
    x = np.array([[-0.0] * 64, [0.0] + [-0.0] * 63, [1.0, -1.0] + [-0.0] * 62], np.float32)

    def f(x):
        return np.sum(x, axis=1, initial=-0.0)

    (got,) = _run(f, [x])
    assert_same_value(np.asarray(got), f(x), rtol=0.0)
    assert list(np.signbit(got)) == [True, False, False]
