"""Linear algebra against numpy itself: matmul / @ (1-D, 2-D, batched with
broadcasting), dot (every numpy case), vdot, inner, outer, tensordot (int and
pair axes), einsum (explicit, implicit, ellipsis, several operands) and trace.

Every property compiles with `fullgraph=True`, so a graph break fails the test.
Each case is of one operand family. "int": int32/int64/bool over the full range;
products must wrap exactly as numpy's. "float": float32/float64 holding small
nonzero integers plus NaN/±Inf (int32/int64 operands mixed in hold small
nonzero integers too): every partial sum is exact and NaN/Inf propagation does
not depend on the summation order, so results compare exactly although numpy
sums with its own loops or BLAS dot where we use one batched matmul. Zeros are
left out there because numpy itself is not consistent about the sign of a zero
dot product: `np.inner([0.], [-1.])` is -0.0 (BLAS sdot), a loop starting from
+0.0 (numpy's matmul on non-BLAS strides) gives +0.0. matmul of 2-D and batched
operands, which runs numpy's own matmul on the same operands, also takes
arbitrary floats, zeros included."""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import lowering
from lowering.capture.tracer import GraphBreakError
from lowering.testing import assert_matches_numpy

DEEP = os.environ.get("HYPOTHESIS_PROFILE") == "deep"


def examples(n: int):
    return settings(max_examples=n * (20 if DEEP else 1), deadline=None, derandomize=not DEEP,
                    suppress_health_check=list(HealthCheck))


F32, F64 = np.dtype(np.float32), np.dtype(np.float64)
I32, I64, B = np.dtype(np.int32), np.dtype(np.int64), np.dtype(np.bool_)
TIER1 = [F32, F64, I32, I64, B]


def elements(dt: np.dtype, exact: bool, nonzero: bool, inf: bool = True):
    small = st.one_of(st.integers(1, 8), st.integers(-8, -1))
    if dt.kind == "f":
        sp = [np.nan, np.inf, -np.inf, 0.0, -0.0]
        if exact:  # nonzero integers: exact sums, no zero whose sign is path-dependent
            return st.one_of(small.map(float), st.sampled_from(sp[:3] if inf else sp[:1]))
        return st.one_of(st.floats(-100, 100, width=dt.itemsize * 8), st.sampled_from(sp),
                         st.floats(width=dt.itemsize * 8))
    if dt.kind == "i":
        if nonzero:  # operands of a float contraction: small, so float sums stay exact
            return small
        ii = np.iinfo(dt)
        return st.one_of(st.integers(-8, 8), st.sampled_from([ii.min, ii.max]),
                         st.integers(ii.min, ii.max))
    return st.booleans()


FAMILY = st.sampled_from(["float", "int"])


def array(draw, shape, fam: str = "any", exact: bool = True, inf: bool = True):
    """An operand. In exact mode a test case is of one family: "int" (int32,
    int64, bool; any values: exact wrap-around arithmetic) or "float" (float32,
    float64 and nonzero int32/int64: see the module docstring)."""
    if not exact or fam == "any":
        dtypes, nonzero = TIER1, False
    elif fam == "int":
        dtypes, nonzero = [I32, I64, B], False
    else:
        dtypes, nonzero = [F32, F64, I32, I64], True
    dt = np.dtype(draw(st.sampled_from(dtypes)))
    return draw(hnp.arrays(dt, tuple(shape), elements=elements(dt, exact, nonzero, inf)))


def check(fn, *args, **kw):
    return assert_matches_numpy(fn, *args, compiled=lowering.compile(fn, fullgraph=True), **kw)


dims = st.integers(0, 4)


# ---- matmul --------------------------------------------------------------------
@st.composite
def matmul_operands(draw, exact=False):
    n, k, m = draw(dims), draw(dims), draw(dims)
    nda, ndb = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    batch = draw(hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=2,
                                                   max_side=3))
    sa = (k,) if nda == 1 else batch.input_shapes[0] + (n, k)
    sb = (k,) if ndb == 1 else batch.input_shapes[1] + (k, m)
    exact = exact or nda == 1 or ndb == 1  # 1-D: numpy's vector path, see above
    fam = draw(FAMILY)
    return array(draw, sa, fam, exact), array(draw, sb, fam, exact)


@examples(60)
@given(matmul_operands(), st.booleans())
def test_matmul(ab, operator):
    a, b = ab
    if operator:
        check(lambda x, y: x @ y, a, b)
    else:
        check(lambda x, y: np.matmul(x, y), a, b)


@examples(20)
@given(matmul_operands(exact=True), st.sampled_from(["T", "rev"]))
def test_matmul_non_contiguous(ab, how):
    a, b = ab

    def view(x):
        if x.ndim < 2:
            return x[::-1]
        return np.swapaxes(x, -1, -2) if how == "T" else x[..., ::-1, :]

    # the same data through views: transposes/reversals inside the function
    check(lambda x, y: view(view(x)) @ view(view(y)), a, b)
    check(lambda x, y: np.matmul(x[..., ::-1], y[::-1] if y.ndim == 1 else y[..., ::-1, :]),
          a, b)


def test_matmul_out_dtype_and_errors():
    a = np.arange(6, dtype=np.int32).reshape(2, 3)
    b = np.arange(12, dtype=np.int32).reshape(3, 4)
    check(lambda x, y: np.matmul(x, y, dtype=np.float64), a, b)
    check(lambda x, y, o: (np.matmul(x, y, out=o), o)[1], a, b, np.zeros((2, 4)))
    check(lambda x, y, o: np.matmul(x, y, out=o), a, b, np.zeros((2, 4), np.int32))
    check(lambda x, y, o: np.matmul(x, y, out=o), a, b, np.zeros((2, 4), np.float32))
    check(lambda x, y: x @ y, a, a)  # core dimension mismatch: ValueError
    check(lambda x, y: np.matmul(x, y[0, 0]), a, b)  # 0-d operand: ValueError
    check(lambda x, y: x @ y, a.astype(bool), b.astype(bool))  # bool: OR of ANDs


# ---- dot / vdot / inner / outer ------------------------------------------------------
@st.composite
def dot_operands(draw):
    case = draw(st.sampled_from(["0d", "1d1d", "2d2d", "nd1d", "ndmd", "1dnd"]))
    k = draw(dims)
    pre_a = draw(hnp.array_shapes(min_dims=0, max_dims=2, min_side=0, max_side=3))
    pre_b = draw(hnp.array_shapes(min_dims=0, max_dims=2, min_side=0, max_side=3))
    m = draw(dims)
    if case == "0d":
        sa, sb = (), draw(hnp.array_shapes(min_dims=0, max_dims=3, max_side=3))
        if draw(st.booleans()):
            sa, sb = sb, sa
    elif case == "1d1d":
        sa, sb = (k,), (k,)
    elif case == "2d2d":
        sa, sb = (draw(dims), k), (k, m)
    elif case == "nd1d":
        sa, sb = pre_a + (k,), (k,)
    elif case == "1dnd":
        sa, sb = (k,), pre_b + (k, m)
    else:
        sa, sb = pre_a + (k,), pre_b + (k, m)
    fam = draw(FAMILY)
    return array(draw, sa, fam), array(draw, sb, fam)


@examples(60)
@given(dot_operands(), st.booleans())
def test_dot(ab, method):
    a, b = ab
    if method and a.ndim:
        check(lambda x, y: x.dot(y), a, b)
    else:
        check(lambda x, y: np.dot(x, y), a, b)


@pytest.mark.parametrize("scalar", [2, 2.5, True])
def test_dot_python_scalars_are_strong(scalar):
    # np.dot converts its operands with asarray: a Python float is float64 here
    check(lambda x: np.dot(x, scalar), np.arange(3, dtype=np.float32))
    check(lambda x: np.dot(scalar, x), np.arange(3, dtype=np.int32))
    check(lambda x: np.inner(x, scalar), np.arange(3, dtype=np.float32))


@examples(30)
@given(st.data(), st.integers(0, 12))
def test_vdot(data, n):
    shapes = [(n,), (n, 1), (1, n)] + ([(2, n // 2), (n // 2, 2)] if n % 2 == 0 else [])
    fam = data.draw(FAMILY)
    a = array(data.draw, data.draw(st.sampled_from(shapes)), fam)
    b = array(data.draw, data.draw(st.sampled_from(shapes)), fam)
    check(lambda x, y: np.vdot(x, y), a, b)
    check(lambda x, y: np.vdot(x.T, y), a, b)


@examples(40)
@given(st.data(), dims)
def test_inner(data, k):
    sa = data.draw(hnp.array_shapes(min_dims=0, max_dims=2, max_side=3)) + (k,)
    sb = data.draw(hnp.array_shapes(min_dims=0, max_dims=2, max_side=3)) + (k,)
    if data.draw(st.booleans()):
        sa = ()
    fam = data.draw(FAMILY)
    check(lambda x, y: np.inner(x, y), array(data.draw, sa, fam), array(data.draw, sb, fam))


@examples(30)
@given(st.data())
def test_outer(data):
    sa = data.draw(hnp.array_shapes(min_dims=0, max_dims=2, min_side=0, max_side=3))
    sb = data.draw(hnp.array_shapes(min_dims=0, max_dims=2, min_side=0, max_side=3))
    a = array(data.draw, sa, exact=False)  # element-wise products: any values
    b = array(data.draw, sb, exact=False)
    check(lambda x, y: np.outer(x, y), a, b)
    out = np.zeros((a.size, b.size), np.result_type(a, b))
    check(lambda x, y, o: (np.outer(x, y, out=o), o)[1], a, b, out)


def test_mismatched_shapes_raise_like_numpy():
    a, b = np.ones((2, 3)), np.ones((2, 4))
    for fn in (np.dot, np.inner, np.vdot, lambda x, y: np.tensordot(x, y, 1),
               lambda x, y: np.tensordot(x, y, ([0, 1], [0, 1])),
               lambda x, y: np.einsum("ij,jk", x, y)):
        check(lambda x, y, fn=fn: fn(x, y), a, b)


# ---- tensordot ----------------------------------------------------------------------
@st.composite
def tensordot_operands(draw):
    nc = draw(st.integers(0, 2))
    contracted = [draw(dims) for _ in range(nc)]
    free_a = list(draw(hnp.array_shapes(min_dims=0, max_dims=2, max_side=3)))
    free_b = list(draw(hnp.array_shapes(min_dims=0, max_dims=2, max_side=3)))
    if draw(st.booleans()):  # axes=int: last nc of a with first nc of b
        fam = draw(FAMILY)
        return (array(draw, free_a + contracted, fam), array(draw, contracted + free_b, fam),
                nc)
    pa = draw(st.permutations(range(len(free_a) + nc)))
    pb = draw(st.permutations(range(len(free_b) + nc)))
    sa = [0] * len(pa)
    sb = [0] * len(pb)
    for i, d in enumerate(free_a + contracted):
        sa[pa[i]] = d
    for i, d in enumerate(contracted + free_b):
        sb[pb[i]] = d
    axes_a = [pa[len(free_a) + j] for j in range(nc)]
    axes_b = [pb[j] for j in range(nc)]
    if draw(st.booleans()):
        axes_a = [x - len(sa) for x in axes_a]
    axes = (axes_a, axes_b) if nc != 1 or draw(st.booleans()) else (axes_a[0], axes_b[0])
    fam = draw(FAMILY)
    return array(draw, sa, fam), array(draw, sb, fam), axes


@examples(50)
@given(tensordot_operands())
def test_tensordot(ops):
    a, b, axes = ops
    check(lambda x, y: np.tensordot(x, y, axes=axes), a, b)


def test_tensordot_default_axes():
    a = np.arange(24.0).reshape(2, 3, 4)
    b = np.arange(24, dtype=np.int32).reshape(3, 4, 2)
    check(lambda x, y: np.tensordot(x, y), a, b)


# ---- einsum ---------------------------------------------------------------------------
EINSUM = [
    "ij,jk->ik", "ij,jk", "bij,bjk->bik", "ij->ji", "ij", "ji", "ij->", "i->", "i,i->",
    "i,i", "i,j->ij", "i,j", "ij,j->i", "ijk->kij", "ij,ij->ij", "ij,ij->i", "ijk,jk->i",
    "...ij,...jk->...ik", "...ij,...jk", "i...->...", "...i,...i->...", "ij,jk,kl->il",
    "abc,cd->abd", "ij->i", "ij,k->ik", "ij,k->i", "i,->i", ",->", "Ab,bC->AC",
    "ij,kl->ijkl", "ijk,ikl->ijl", "ij,jk,k->i", "b i j , b j k -> b k i",
]


@st.composite
def einsum_operands(draw):
    spec = draw(st.sampled_from(EINSUM))
    ins = spec.replace(" ", "").split("->")[0].split(",")
    sizes = {c: draw(dims) for c in set("".join(ins)) if c != "."}
    ell = list(draw(hnp.array_shapes(min_dims=0, max_dims=2, max_side=3)))
    ops = []
    fam = draw(FAMILY)
    # ±Inf only where the result is one sum of two-factor products: with three
    # operands, or a label summed inside one operand, numpy (optimize=False) sums
    # the full products while we contract pairwise (as numpy's optimize=True
    # does), and inf - inf cancellations then differ
    out = (spec.split("->")[1] if "->" in spec else None)
    labels = [set(t.replace(".", "")) for t in ins]
    inf = len(ins) == 2 and (out is not None and all(
        c in out or (c in labels[0] and c in labels[1]) for c in labels[0] | labels[1]))
    for term in ins:
        shape = []
        for c in term.replace("...", "."):
            if c == ".":
                shape += ell[len(ell) - draw(st.integers(0, len(ell))):]
            else:  # a label may be broadcast (size 1) in one operand (finite values
                # only: numpy's einsum then sums the other operand first, its own
                # stride-0 kernel, so inf - inf cancellations depend on the kernel)
                bcast = not inf and sizes[c] > 1 and draw(st.integers(0, 5)) == 0
                shape.append(1 if bcast else sizes[c])
        ops.append(array(draw, shape, fam, inf=inf))
    return spec, ops


@examples(80)
@given(einsum_operands())
def test_einsum(case):
    spec, ops = case
    check(lambda *xs: np.einsum(spec, *xs), *ops)


def test_einsum_dtype_and_views():
    a = np.arange(6, dtype=np.int32).reshape(2, 3)
    check(lambda x: np.einsum("ij->", x, dtype=np.float64), a)
    check(lambda x: np.einsum("ij->", x, dtype=np.float32), a)  # 'safe' casting: TypeError
    check(lambda x: np.einsum("ij->", x, dtype=np.float32, casting="unsafe"), a)
    check(lambda x: np.einsum("i,i->", x[0], 2.0), a)  # a Python float is float64
    check(lambda x: np.einsum("ij,jk", x, x), a)  # size mismatch: ValueError
    check(lambda x: np.einsum("i->ii", x[0]), a)  # bad subscripts: ValueError

    # a transpose through einsum is a view of the input, as in numpy
    def write_through(x):
        v = np.einsum("ij->ji", x)
        v[0, 1] = -1
        return x

    check(write_through, a.copy())


def test_einsum_graph_breaks():
    a = np.arange(9.0).reshape(3, 3)
    for fn, why in [(lambda x: np.einsum(x, [0, 1], [1, 0]), "sublist"),
                    (lambda x: np.einsum("ij->", x, out=np.zeros(())), "out=")]:
        cf = lowering.compile(fn)
        assert_matches_numpy(fn, a, compiled=cf)
        assert any(why in b.reason for b in cf.last_trace.breaks)
        with pytest.raises(GraphBreakError):
            lowering.compile(fn, fullgraph=True)(a)


# ---- trace ----------------------------------------------------------------------------
@examples(50)
@given(st.data(), st.sampled_from([None, F32, F64, I32, I64]), st.booleans())
def test_trace(data, dtype, method):
    x = array(data.draw, data.draw(hnp.array_shapes(min_dims=2, max_dims=4, min_side=0,
                                                    max_side=4)), data.draw(FAMILY))
    nd = x.ndim
    a1 = data.draw(st.integers(-nd, nd - 1), "axis1")
    a2 = data.draw(st.integers(-nd, nd - 1), "axis2")  # equal axes: ValueError in both
    off = data.draw(st.integers(-5, 5), "offset")
    if method:
        fn = lambda a: a.trace(off, a1, a2, dtype)
    else:
        fn = lambda a: np.trace(a, offset=off, axis1=a1, axis2=a2, dtype=dtype)
    check(fn, x)


def test_trace_out_and_errors():
    x = np.arange(12.0).reshape(3, 4)
    check(lambda a, o: (np.trace(a, out=o), o)[1], x, np.zeros(()))
    check(lambda a: np.trace(a[0]), x)  # 1-D: ValueError
    check(lambda a: np.trace(a, axis1=2), x)  # AxisError
    y = np.arange(24.0).reshape(2, 3, 4)
    check(lambda a, o: (np.trace(a, axis1=1, axis2=2, out=o), o)[1], y, np.zeros(2, np.int32))
