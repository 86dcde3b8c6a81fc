"""Tier 2 routines inside the graph (`array.routine`) against numpy itself:
sort/argsort/partition/argpartition/searchsorted, np.linalg (norm, solve, inv,
det, slogdet, cholesky, qr, svd, eigh, eigvalsh, lstsq, pinv, matrix_rank),
the real-result FFTs (irfft, irfft2, irfftn, hfft) and einsum diagonals.

Every property compiles with `fullgraph=True`: a graph break fails it. Values
hold NaN, ±Inf and -0.0 where the routine accepts any values (sorting,
searching, norms, FFTs); the factorizations also see empty and 1x1 matrices,
batches, and inputs numpy rejects (LinAlgError must be numpy's). Results are
numpy's own routine on the same values, so they compare bit for bit, except
norms, whose sums numpy orders by the operand's memory layout (`reduction`
tolerance)."""

from __future__ import annotations

import collections
import dataclasses

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from xdsl.dialects.builtin import StringAttr, TensorType, f64
from xdsl.utils.exceptions import VerifyException

import lowering
from dialects import array as A
from lowering import pytree
from lowering.capture.tracer import GraphBreakError
from lowering.testing import TOLERANCES, array_shapes, arrays, assert_matches_numpy, examples
from tests.dialects.test_roundtrip import check_segment

F32, F64 = np.dtype(np.float32), np.dtype(np.float64)
SPECIAL = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0]


def floats(dt):
    return st.one_of(st.sampled_from(SPECIAL), st.floats(-100, 100, width=dt.itemsize * 8))


def full(fn):
    return lowering.compile(fn, fullgraph=True)


def check(fn, *args, rtol=0.0, calls=1):
    # values, not warnings: 1/0 inside a routine (norm ord=-1 of inf) warns in numpy
    # and re-runs the call eagerly; that path has tests of its own
    with np.errstate(all="ignore"):
        return assert_matches_numpy(fn, *args, rtol=rtol, compiled=full(fn), calls=calls)


def check_raises(fn, *args):
    """numpy rejects the arguments: so must the compiled function, with numpy's
    exception (raised while tracing: the eager fallback re-raises it)."""
    with pytest.raises(Exception) as want:
        fn(*args)
    with pytest.raises(want.type):
        lowering.compile(fn)(*args)


def check_any(fn, *args, rtol=0.0):
    """`check`, or `check_raises` where numpy rejects these arguments."""
    try:
        with np.errstate(all="ignore"):
            fn(*args)
    except Exception:
        check_raises(fn, *args)
        return
    check(fn, *args, rtol=rtol)


def routines_in(cf) -> list[str]:
    return [op.fn.data for seg in cf.last_trace.segments for op in seg.module.walk()
            if isinstance(op, A.RoutineOp)]


# ---- sorting and searching ---------------------------------------------------------
sort_dtypes = st.sampled_from([F32, F64, np.dtype(np.int32), np.dtype(np.int64),
                               np.dtype(np.bool_), np.dtype(np.float16)])


@st.composite
def sortable(draw, min_dims=0):
    dt = draw(sort_dtypes)
    elems = floats(dt) if dt.kind == "f" else None
    x = draw(arrays(dt, array_shapes(min_dims=min_dims), elements=elems))
    axes = [None] + list(range(-x.ndim, x.ndim))
    return x, draw(st.sampled_from(axes))


@examples(1)
@given(case=sortable(), kind=st.sampled_from([None, "stable", "mergesort", "heapsort"]))
def test_sort_and_argsort_match_numpy(case, kind):
    x, axis = case
    check(lambda a: np.sort(a, axis=axis, kind=kind), x)
    check(lambda a: np.argsort(a, axis=axis, kind=kind), x)
    check(lambda a: np.argsort(a, axis=axis, stable=True), x)


def test_sort_method_forms_and_default_axis():
    x = np.array([[3.0, -0.0, np.nan], [0.0, -np.inf, 2.0]])
    check(lambda a: a.argsort(), x)
    check(lambda a: np.sort(a) * 2, x)
    cf = full(lambda a: np.sort(a))
    cf(x)
    assert routines_in(cf) == ["np.sort"]


@examples(1)
@given(case=sortable(min_dims=1), data=st.data())
def test_partition_and_argpartition_match_numpy(case, data):
    x, axis = case
    n = x.size if axis is None else x.shape[axis]
    if n == 0:
        kth = 0  # numpy rejects every kth of an empty axis
    else:
        kth = data.draw(st.one_of(st.integers(-n, n - 1),
                                  st.lists(st.integers(-n, n - 1), min_size=1, max_size=3).map(tuple)))
    check(lambda a: np.partition(a, kth, axis=axis), x)
    check(lambda a: np.argpartition(a, kth, axis=axis), x)


def test_partition_rejects_kth_out_of_range_like_numpy():
    x = np.arange(5.0)
    check_raises(lambda a: np.partition(a, 5), x)
    check_raises(lambda a: np.argpartition(a, (-6,)), x)


@examples(1)
@given(a=arrays(F64, array_shapes(1, 1), elements=floats(F64)),
       v=arrays(F64, array_shapes(0, 2), elements=floats(F64)),
       side=st.sampled_from(["left", "right"]), use_sorter=st.booleans())
def test_searchsorted_matches_numpy(a, v, side, use_sorter):
    if use_sorter:
        sorter = np.argsort(a, kind="stable")
        check(lambda s, q, o: np.searchsorted(s, q, side=side, sorter=o), a, v, sorter)
    else:
        s = np.sort(a)
        check(lambda s, q: np.searchsorted(s, q, side=side), s, v)
        check(lambda s, q: s.searchsorted(q, side), s, v)


def test_searchsorted_with_python_and_numpy_scalars():
    s = np.array([0.1, 0.5, 0.5, 2.0], np.float32)
    for q in (0.1, 0.5, np.float32(0.5), np.float64(0.1), 3, -np.inf, np.nan):
        check(lambda a, q=q: np.searchsorted(a, q), s)
        check(lambda a, q=q: np.searchsorted(a, q, side="right"), s)


# ---- norms ---------------------------------------------------------------------------
VECTOR_ORDS = [None, 2, 1, 0, -1, -2, 3, 0.5, np.inf, -np.inf]
MATRIX_ORDS = [None, "fro", "nuc", 1, -1, 2, -2, np.inf, -np.inf]


def norm_rtol(x):
    dt = np.result_type(x.dtype, np.float32) if x.dtype != np.float16 else x.dtype
    return TOLERANCES.rtol(dt, "reduction", max(x.size, 1))


@examples(1)
@given(x=arrays(st.sampled_from([F32, F64]), array_shapes(1, 3, min_side=1), elements=floats(F64)),
       data=st.data(), keepdims=st.booleans())
def test_vector_norms_match_numpy(x, data, keepdims):
    ord_ = data.draw(st.sampled_from(VECTOR_ORDS))
    axis = data.draw(st.sampled_from(list(range(-x.ndim, x.ndim))))
    x = x.astype(x.dtype)
    check(lambda a: np.linalg.norm(a, ord=ord_, axis=axis, keepdims=keepdims), x,
          rtol=norm_rtol(x))


@examples(1)
@given(x=arrays(st.sampled_from([F32, F64]), array_shapes(2, 3, min_side=1),
                elements=st.floats(-100, 100)),
       data=st.data(), keepdims=st.booleans())
def test_matrix_norms_match_numpy(x, data, keepdims):
    ord_ = data.draw(st.sampled_from(MATRIX_ORDS))
    axes = data.draw(st.permutations(range(x.ndim)).map(lambda p: tuple(p[:2])))
    # the spectral and nuclear norms are SVDs: LAPACK's error, not a sum's
    rtol = norm_rtol(x) * (100 if ord_ in (2, -2, "nuc") else 1)
    check(lambda a: np.linalg.norm(a, ord=ord_, axis=axes, keepdims=keepdims), x, rtol=rtol)


def test_norm_defaults_and_integer_input():
    x = np.arange(-4, 8).reshape(3, 4)
    check(lambda a: np.linalg.norm(a), x, rtol=norm_rtol(x))
    check(lambda a: np.linalg.norm(a, keepdims=True), x.astype(np.float32),
          rtol=norm_rtol(x.astype(np.float32)))
    check(lambda a: np.linalg.norm(a, axis=1), x, rtol=norm_rtol(x))
    check_raises(lambda a: np.linalg.norm(a, ord="fro", axis=0), x)


# ---- factorizations and solvers ------------------------------------------------------
def well_conditioned(n: int, batch=(), dt=F64, seed=0, spd=False):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((*batch, n, n))
    if spd:
        a = a @ np.swapaxes(a, -1, -2) + n * np.eye(n)
    else:
        a = a + n * np.eye(n)
    return a.astype(dt)


@st.composite
def square(draw, spd=False, max_n=4):
    n = draw(st.integers(0, max_n))
    batch = draw(st.sampled_from([(), (1,), (2,), (2, 1)]))
    dt = draw(st.sampled_from([F32, F64]))
    a = well_conditioned(n, batch, dt, draw(st.integers(0, 2**16)), spd)
    layout = draw(st.sampled_from(["C", "F", "T"]))
    return np.asfortranarray(a) if layout == "F" else np.swapaxes(np.swapaxes(a, -1, -2).copy(), -1, -2) \
        if layout == "T" else a


@examples(1)
@given(a=square())
def test_inv_det_slogdet_match_numpy(a):
    check(lambda m: np.linalg.inv(m), a)
    check(lambda m: np.linalg.det(m), a)
    check(lambda m: np.linalg.slogdet(m), a)
    check(lambda m: np.linalg.pinv(m), a)
    check(lambda m: np.linalg.matrix_rank(m), a)


@examples(1)
@given(a=square(), k=st.sampled_from([None, 1, 3]), batch_b=st.booleans())
def test_solve_matches_numpy(a, k, batch_b):
    n = a.shape[-1]
    rng = np.random.default_rng(n)
    shape = (n,) if k is None else ((*a.shape[:-2], n, k) if batch_b else (n, k))
    b = rng.standard_normal(shape).astype(a.dtype)
    check(lambda m, r: np.linalg.solve(m, r), a, b)


@examples(1)
@given(a=square(spd=True), upper=st.booleans(), uplo=st.sampled_from(["L", "U"]))
def test_cholesky_eigh_eigvalsh_match_numpy(a, upper, uplo):
    check(lambda m: np.linalg.cholesky(m, upper=upper), a)
    check(lambda m: np.linalg.eigh(m, UPLO=uplo), a)
    check(lambda m: np.linalg.eigvalsh(m, uplo), a)


@examples(1)
@given(m=st.integers(0, 4), n=st.integers(0, 4), batch=st.sampled_from([(), (2,)]),
       mode=st.sampled_from(["reduced", "complete", "r", "raw"]),
       full_matrices=st.booleans(), compute_uv=st.booleans(), dt=st.sampled_from([F32, F64]))
def test_qr_svd_pinv_match_numpy(m, n, batch, mode, full_matrices, compute_uv, dt):
    a = np.random.default_rng(m * 5 + n).standard_normal((*batch, m, n)).astype(dt)
    if mode != "raw" or not batch:
        check(lambda x: np.linalg.qr(x, mode=mode), a)
    check(lambda x: np.linalg.svd(x, full_matrices=full_matrices, compute_uv=compute_uv), a)
    check(lambda x: np.linalg.pinv(x), a)
    check(lambda x: np.linalg.matrix_rank(x), a)


def test_lstsq_matches_numpy_where_its_shapes_are_static():
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((3, 5)), rng.standard_normal(3)
    check(lambda x, y: np.linalg.lstsq(x, y), a, b)
    check(lambda x, y: np.linalg.lstsq(x, y, rcond=1e-3), a, np.stack([b, b], 1))
    check(lambda x, y: np.linalg.lstsq(x, y), np.eye(3), b)


def test_results_are_numpys_namedtuples():
    a = well_conditioned(3, spd=True)
    for fn, name in [(np.linalg.svd, "SVDResult"), (np.linalg.eigh, "EighResult"),
                     (np.linalg.slogdet, "SlogdetResult"), (np.linalg.qr, "QRResult")]:
        got = full(lambda m, fn=fn: fn(m))(a)
        assert type(got) is type(fn(a)) and type(got).__name__ == name
        assert got._fields == fn(a)._fields
    u, s, vh = full(lambda m: np.linalg.svd(m))(a)
    assert np.allclose((u * s) @ vh, a)
    res = full(lambda m: np.linalg.svd(m).S.sum())(a)
    assert res == np.linalg.svd(a).S.sum()


def test_nan_inf_and_singular_inputs_behave_as_numpy():
    sing = np.array([[1.0, 2.0], [2.0, 4.0]])
    nan = np.array([[np.nan, 1.0], [1.0, 2.0]])
    inf = np.array([[np.inf, 1.0], [1.0, 2.0]])
    not_spd = np.array([[1.0, 2.0], [2.0, 1.0]])
    fns = [np.linalg.inv, np.linalg.det, np.linalg.slogdet, np.linalg.cholesky,
           lambda m: np.linalg.solve(m, np.ones(2)), lambda m: np.linalg.eigvalsh(m)]
    for fn in fns:
        # compiled on a regular matrix; the cached program then meets the others
        # (a LinAlgError at run time re-runs the call eagerly: numpy's own error)
        cf = full(fn)
        cf(np.eye(2))
        for a in (sing, nan, inf, not_spd):
            with np.errstate(all="ignore"):
                assert_matches_numpy(fn, a, rtol=0.0, compiled=cf, calls=2)


def test_arguments_numpy_rejects_raise_numpys_errors():
    check_raises(lambda m: np.linalg.inv(m), np.ones((2, 3)))  # not square: LinAlgError
    check_raises(lambda m: np.linalg.det(m), np.ones(3))  # 1-D: LinAlgError
    check_raises(lambda m: np.linalg.qr(m, mode="bogus"), np.ones((2, 2)))  # ValueError
    check_raises(lambda m: np.linalg.solve(m, np.ones(3)), np.eye(2))  # ValueError
    check_raises(lambda m: np.linalg.inv(m), np.eye(2, dtype=np.float16))  # TypeError


def test_integer_and_bool_inputs_promote_as_numpy():
    i = np.array([[2, 1], [1, 3]])
    check(lambda m: np.linalg.inv(m), i)
    check(lambda m: np.linalg.det(m), i.astype(np.int32))
    check(lambda m: np.linalg.eigvalsh(m), i)
    check(lambda m: np.sort(m, axis=0), i > 1)


# ---- FFT -----------------------------------------------------------------------------
@examples(1)
@given(x=arrays(st.sampled_from([F32, F64]), array_shapes(1, 3, min_side=1, max_side=6),
                elements=floats(F64)),
       norm=st.sampled_from([None, "ortho", "forward", "backward"]), data=st.data())
def test_real_result_ffts_match_numpy(x, norm, data):
    axis = data.draw(st.integers(-x.ndim, x.ndim - 1))
    n = data.draw(st.sampled_from([None, 1, 2, 5, 8]))
    # (n=None on an axis of length 1 is n = 0: numpy's ValueError)
    check_any(lambda a: np.fft.irfft(a, n=n, axis=axis, norm=norm), x)
    check_any(lambda a: np.fft.hfft(a, n=n, axis=axis, norm=norm), x)
    check_any(lambda a: np.fft.irfftn(a, norm=norm), x)
    if x.ndim >= 2:
        check_any(lambda a: np.fft.irfft2(a, s=(3, 4), norm=norm), x)
        check_any(lambda a: np.fft.irfft2(a), x)


def test_irfft_of_a_length_one_axis_raises_as_numpy():
    check_raises(lambda a: np.fft.irfft(a), np.ones(1))  # n = 0: ValueError


# ---- einsum diagonals ----------------------------------------------------------------
EINSUM_DIAGONALS = [
    ("ii->i", [(3, 3)]), ("ii", [(3, 3)]), ("ij,jj->i", [(2, 3), (3, 3)]),
    ("iii->i", [(2, 2, 2)]), ("iij->ji", [(3, 3, 2)]), ("...ii->...i", [(2, 4, 4)]),
    ("bii->b", [(2, 3, 3)]), ("ii,i->i", [(3, 3), (3,)]), ("ii->", [(0, 0)]),
    ("ijij->ij", [(2, 3, 2, 3)]), ("ii,jj->ij", [(2, 2), (3, 3)]),
]


@pytest.mark.parametrize("sub,shapes", EINSUM_DIAGONALS)
@pytest.mark.parametrize("dt", [F64, np.dtype(np.int64), np.dtype(np.bool_)])
def test_einsum_diagonals_match_numpy(sub, shapes, dt):
    rng = np.random.default_rng(0)
    ops = [rng.integers(-3, 4, s).astype(dt) for s in shapes]
    check(lambda *xs: np.einsum(sub, *xs), *ops)


def test_einsum_diagonal_is_a_writeable_view_like_numpys():
    def fn(a):
        d = np.einsum("ii->i", a)
        d[1] = 100.0
        return a, d * 2

    check(fn, np.arange(9.0).reshape(3, 3))


def test_einsum_diagonal_size_mismatch_raises_numpys_error():
    check_raises(lambda a: np.einsum("ii->i", a), np.ones((2, 3)))
    check_raises(lambda a, b: np.einsum("ij,jj->i", a, b), np.ones((2, 3)), np.ones((3, 4)))


# ---- what still breaks ---------------------------------------------------------------
@pytest.mark.parametrize("fn,reason", [
    (lambda a: np.sum(np.fft.fft(a)), "complex"),  # complex values: numpy routines only
    (lambda a: np.fft.rfft(a).reshape(-1), "complex"),
    (lambda a: np.linalg.lstsq(a, np.ones(4)), "rank"),
    (lambda a: np.unique(a), "np.unique"),
])
def test_data_dependent_or_complex_results_still_break(fn, reason):
    a = np.random.default_rng(0).standard_normal((4, 3))
    with pytest.raises(GraphBreakError, match=reason):
        full(fn)(a)
    # numpy's results all the same (complex ones too: the eager piece's own)
    gl, gt = pytree.flatten(lowering.compile(fn)(a))
    wl, wt = pytree.flatten(fn(a))
    assert gt == wt
    for g, w in zip(gl, wl):
        assert type(g) is type(w) and g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)


# ---- the op: IR, round trip, names ---------------------------------------------------
def test_routine_ops_verify_roundtrip_and_survive_every_tensor_pass():
    def fn(a, v, x):
        s = np.sort(x, axis=0)
        u, sv, vh = np.linalg.svd(a)
        return (np.searchsorted(s[:, 0], v), np.linalg.norm(a, ord=-2), u @ vh + sv,
                np.linalg.slogdet(a).logabsdet, np.fft.irfft(x, axis=0))

    a = well_conditioned(3)
    v, x = np.array([-0.5, 0.0, np.nan]), np.array([[3.0, -0.0], [np.inf, 1.0], [-2.0, 0.0]])
    cf = full(fn)
    cf(a, v, x)
    (seg,) = cf.last_trace.segments
    assert set(routines_in(cf)) == {"np.sort", "np.linalg.svd", "np.searchsorted",
                                    "np.linalg.norm", "np.linalg.slogdet", "np.fft.irfft"}
    check_segment(seg.module, [a, v, x])
    text = str(seg.module)
    assert 'array.routine "np.linalg.norm"' in text and "ord = -2 : i64" in text
    check(fn, a, v, x, calls=2)


def test_explain_names_the_numpy_routine():
    x = np.arange(6.0).reshape(2, 3)
    rep = lowering.explain(lowering.compile(lambda a: np.linalg.norm(a, "nuc") + 1))(x)
    assert rep.graph_break_count == 0
    assert "np.linalg.norm" in str(rep)


def test_verifier_rejects_unknown_routines_and_bad_configs():
    from xdsl.dialects.builtin import DenseArrayBase, i64
    from xdsl.ir import Block

    blk = Block(arg_types=[TensorType(f64, [2])])
    t = TensorType(f64, [2])
    with pytest.raises(VerifyException, match="unknown routine"):
        A.RoutineOp("np.linalg.eig", [blk.args[0]], {}, [t]).verify()
    with pytest.raises(VerifyException, match="config"):
        A.RoutineOp("np.sort", [blk.args[0]], {"axis": DenseArrayBase.from_list(i64, [0])},
                    [t]).verify()
    with pytest.raises(VerifyException, match="needs operands and results"):
        A.RoutineOp("np.sort", [blk.args[0]], {"axis": StringAttr("x")}, []).verify()
    A.RoutineOp("np.sort", [blk.args[0]], {"axis": StringAttr("x")}, [t]).verify()
    op = A.RoutineOp("np.linalg.norm", [blk.args[0]],
                     {"ord": float("-inf"), "axis": (0,), "keepdims": True, "x": None}, [t])
    op.verify()
    assert op.kwargs() == {"ord": float("-inf"), "axis": (0,), "keepdims": True, "x": None}


# ---- pytrees keep container types ----------------------------------------------------
Pair = collections.namedtuple("Pair", ["first", "second"])


@pytree.register_dataclass
@dataclasses.dataclass
class State:
    w: object
    b: object
    step: int = 0


def test_pytree_keeps_namedtuple_and_registered_dataclass_types():
    tree = {"p": Pair(np.ones(2), [np.zeros(1), None]), "s": State(np.ones(3), 2.0, 5)}
    leaves, tdef = pytree.flatten(tree)
    assert len(leaves) == 6
    back = pytree.unflatten(tdef, leaves)
    assert type(back["p"]) is Pair and type(back["s"]) is State
    assert back["s"].step == 5 and back["p"].second[1] is None
    assert pytree.paths(tdef) == ["['p'].first", "['p'].second[0]", "['p'].second[1]",
                                  "['s'].w", "['s'].b", "['s'].step"]
    _, other = pytree.flatten({"p": (np.ones(2), [np.zeros(1), None]), "s": State(1, 2, 3)})
    assert other != tdef  # a plain tuple is not a Pair


def test_compiled_functions_take_and_return_namedtuples_and_dataclasses():
    def step(p: Pair, s: State):
        return Pair(p.first * s.w, p.second + s.b), State(s.w * 2, s.b, s.step + 1)

    p, s = Pair(np.ones(3), np.arange(3.0)), State(np.full(3, 2.0), np.ones(3), 1)
    cf = full(step)
    for _ in range(2):  # traced, then the cached path
        got = cf(p, s)
        assert type(got[0]) is Pair and type(got[1]) is State
        np.testing.assert_array_equal(got[0].first, np.full(3, 2.0))
        np.testing.assert_array_equal(got[1].w, np.full(3, 4.0))
        assert got[1].step == 2
