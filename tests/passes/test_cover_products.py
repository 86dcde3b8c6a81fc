"""`cover-products`: a loop's products of windows of the same two matrices
run as one product over the windows' cover (one BLAS call), each result a
window of it, with numpy's values (to the reduction tolerance: BLAS's
summation order), numpy's warnings (an element only the cover computes
that overflows re-runs the call eagerly), and nothing grouped where a
product reads what an earlier one wrote or the cover would waste work."""

from __future__ import annotations

import io
import warnings

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import lowering
from lowering.dump import capture, parse_spec, print_lower_stages
from lowering.testing import TOLERANCES, arrays, assert_matches_numpy


def loop_text(fn, spec: str) -> str:
    out = io.StringIO()
    print_lower_stages(capture(fn, parse_spec(spec)), out, ("loop",))
    return out.getvalue()


def products(text: str) -> int:
    return text.count('loop.extern "matmul')


def covariance(data):
    n, m = data.shape
    d = data - data.mean(axis=0)
    cov = np.empty((m, m))
    for i in range(m):
        cov[i:, i] = cov[i, i:] = d[:, i] @ d[:, i:] / (n - 1)
    return cov


def syrk(C, A):
    C = C.copy()
    for i in range(C.shape[0]):
        C[i, : i + 1] = 1.2 * C[i, : i + 1] + 1.5 * (A[: i + 1] @ A[i])
    return C


def trisolv(L, b):
    x = np.zeros_like(b)
    for i in range(b.shape[0]):
        x[i] = (b[i] - L[i, :i] @ x[:i]) / L[i, i]
    return x


def test_a_triangle_row_by_row_is_one_product():
    text = loop_text(covariance, "f64[30,7]")
    assert products(text) == 1, text  # d.T @ d, not 7 matrix-vector products
    g = np.random.default_rng(0)
    assert_matches_numpy(covariance, g.standard_normal((30, 7)), calls=2,
                         rtol=TOLERANCES.rtol(np.float64, "reduction", 30))


def test_rows_times_a_row_is_one_product():
    text = loop_text(syrk, "f32[6,6] f32[6,9]")
    assert products(text) == 1, text  # A @ A.T
    g = np.random.default_rng(1)
    assert_matches_numpy(syrk, g.standard_normal((6, 6)).astype(np.float32),
                         g.standard_normal((6, 9)).astype(np.float32), calls=2,
                         rtol=TOLERANCES.rtol(np.float32, "reduction", 9))


def test_products_of_what_earlier_ones_wrote_are_left_alone():
    """x is another value after each row: no two products share a matrix."""
    text = loop_text(trisolv, "f64[8,8] f64[8,3]")
    assert products(text) == 8, text  # one product per row still
    g = np.random.default_rng(2)
    L = np.tril(g.standard_normal((8, 8))) + 8 * np.eye(8)
    assert_matches_numpy(trisolv, L, g.standard_normal((8, 3)),
                         rtol=TOLERANCES.rtol(np.float64, "reduction", 8 * 8))


def far_apart(x, M):
    return x[0] @ M[:, :2], x[5] @ M[:, 30:32]


def test_a_cover_that_wastes_work_is_not_made():
    text = loop_text(far_apart, "f64[6,10] f64[10,32]")
    assert products(text) == 2, text  # a 6 x 32 cover for 2 x 2 results: left apart
    g = np.random.default_rng(3)
    assert_matches_numpy(far_apart, g.standard_normal((6, 10)), g.standard_normal((10, 32)),
                         rtol=TOLERANCES.rtol(np.float64, "reduction", 10))


def overflow_outside(x, Q):
    return x[0] @ Q[:, 1:3], x[1] @ Q[:, :1]


def test_an_overflow_only_the_cover_computes_raises_nothing():
    """The cover computes x[0] @ Q[:, 0], which overflows; numpy never
    computes it: no warning, numpy's values."""
    text = loop_text(overflow_outside, "f64[2,4] f64[4,3]")
    assert products(text) == 1, text
    x = np.array([[1e200] * 4, [1.0] * 4])
    Q = np.ones((4, 3))
    Q[:, 0] = 1e200
    f = lowering.compile(overflow_outside)
    for _ in range(2):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            got = f(x.copy(), Q.copy())
        want = overflow_outside(x, Q)
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])
    with np.errstate(over="raise"):  # and what numpy raises, it raises
        x2 = x.copy()
        x2[0, 0] = 1e300
        Q2 = Q.copy()
        Q2[0, 1] = 1e300
        try:
            overflow_outside(x2, Q2)
        except FloatingPointError:
            pass
        else:
            raise AssertionError("numpy did not raise")
        try:
            f(x2, Q2)
        except FloatingPointError:
            pass
        else:
            raise AssertionError("compiled did not raise")


@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_windowed_products_match_numpy(data):
    """Random windows of P (rows or columns, through a transpose or not)
    times random windows of Q, several per call, on values with NaN, ±Inf,
    -0.0, subnormals and huge magnitudes, in any layout."""
    dt = data.draw(st.sampled_from([np.float32, np.float64]), label="dtype")
    n, k, m = (data.draw(st.integers(2, 6)) for _ in range(3))
    P = data.draw(arrays(dt, (n, k)), label="P")
    Q = data.draw(arrays(dt, (k, m)), label="Q")
    windows = data.draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n),
                                           st.integers(0, m - 1), st.integers(0, m)),
                                 min_size=2, max_size=5), label="windows")
    windows = [(a, max(a + 1, b), c, max(c + 1, d)) for a, b, c, d in windows]
    row_form = data.draw(st.booleans(), label="row_form")

    def f(P, Q):
        out = []
        for a, b, c, d in windows:
            if row_form:  # a row of P times a window of Q's columns
                out.append(P[a] @ Q[:, c:d])
            else:  # a window of P's rows times a column of Q, through P.T.T
                out.append(P.T.T[a:b] @ Q[:, c])
        return tuple(out)

    assert_matches_numpy(f, P, Q, compiled=lowering.compile(f),
                         rtol=TOLERANCES.rtol(dt, "reduction", k))
