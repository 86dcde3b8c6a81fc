"""argmax/argmin down the rows of a long-rowed array (`column_arg`): one
ordered kernel, rows in order, columns vectorized, the extreme so far in a
buffer beside the indices — numpy's first occurrence, a NaN the extreme —
where a row kernel per column walked the input down its stride (an HMM
Viterbi step at 256 states ran at 0.7x numpy)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import lowering
from lowering.testing import assert_matches_numpy, elements


def arg_down(x):
    return x.argmax(axis=0), x.argmin(axis=0)


def arg_of_sum(a, b):
    return (a + b).argmax(axis=0) * 2


@settings(max_examples=25, deadline=None)
@given(dt=st.sampled_from(["float64", "float32", "int32", "int64", "uint8", "bool"]),
       rows=st.sampled_from([1, 2, 130, 300]), cols=st.sampled_from([8, 33, 256]),
       data=st.data())
def test_matches_numpy(dt, rows, cols, data):
    dt = np.dtype(dt)
    # few distinct values: ties everywhere (the first row must win)
    x = data.draw(hnp.arrays(dt, (rows, cols), elements=st.one_of(
        st.sampled_from(list(np.array([0, 1, 2], dtype=dt))), elements(dt))))
    assert_matches_numpy(arg_down, x, calls=2)


def loop_text(fn, spec: str) -> str:
    import io

    from lowering.dump import capture, parse_spec, print_lower_stages

    out = io.StringIO()
    print_lower_stages(capture(fn, parse_spec(spec)), out, ("loop",))
    return out.getvalue()


def test_is_one_ordered_kernel_and_fuses_its_input():
    text = loop_text(arg_of_sum, "f64[256,256] f64[256,256]")
    # rows in order over a map of the columns, not a reduce down each column
    assert "{accumulate}" in text and 'loop.reduce "argmax"' not in text, text
    a = np.random.default_rng(1).standard_normal((256, 256))
    b = np.random.default_rng(2).standard_normal((256, 256))
    a[5, 3] = np.nan
    a[9, 3] = np.nan
    a[:, 4] = -0.0
    out = lowering.explain(lowering.compile(arg_of_sum))(a, b)
    assert out.kernel_count == 2, out.kernels  # the argmax (with a + b fused in), then * 2
    assert any("array.argreduce" in " ".join(ops) and "arith.addf" in " ".join(ops)
               for ks in out.kernels for _, ops in ks)
    assert_matches_numpy(arg_of_sum, a, b, calls=2)
