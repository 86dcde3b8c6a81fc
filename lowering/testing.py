"""Public testing helpers: compare a compiled function against numpy itself.

`assert_matches_numpy(fn, *args)` runs `fn` eagerly and compiled on separate
copies of the arguments (same memory layout: strides, negative and zero
strides, read-only flags) and checks results and in-place effects: same type
(numpy scalar vs array vs Python scalar), dtype, shape, NaN positions, ±Inf,
signed zeros, values within a tolerance from `TOLERANCES`, and the same
exception type when numpy raises.

Hypothesis strategies for property tests against numpy (hypothesis is a test
dependency, imported only when a strategy is built):

- `dtypes()`: the Tier 1 dtypes of OPS.md.
- `elements(dtype)`: scalars of a dtype, biased to edge values (`edge_values`).
- `arrays(dtype, shape)`: arrays with edge values in every layout numpy
  programs see (C, Fortran, strided with negative steps, transposed,
  broadcast/read-only), shapes with 0-size and size-1 dims.
- `broadcastable_shapes(n)`: n shapes that broadcast together.
- `programs()`: random straight-line programs (DAGs of Tier 1 ops) with their
  inputs, for `assert_matches_numpy(prog.fn, *prog.args, rtol=prog.rtol)`.

Tolerances
----------
`TOLERANCES` is the one table of allowed error. Its plain mapping is
dtype -> rtol of one pointwise op (what `assert_same_value` uses by default);
`TOLERANCES.rtol(dtype, op_class, n)` gives it per op class:

============  =====================================================  ============
op class      what                                                    rtol
============  =====================================================  ============
exact         results IEEE fixes exactly or numpy defines bit for     0 (bitwise,
              bit: + - * / sqrt, abs, neg, min/max, rounding,          incl. -0.0)
              comparisons, casts, integer/bool ops, floor_divide,
              remainder, fmod, views, where
pointwise     one libm-class function (exp, log, sin, pow, hypot,     ULPS * eps
              logaddexp, cbrt, arctan2, ...): numpy's SIMD code and
              another libm may each be a couple of ULPs off
reduction     sum/prod/mean/var/std/matmul over n elements: the       ULPS * eps * n
              rounding error of n-term sums grows at most linearly
              in n (numpy's pairwise order and a backend's tree order
              both stay below that)
gradient      a reverse-mode gradient against another reverse-mode    ULPS * eps * n
              implementation (HIPS autograd) or another partition
              of the same joint function: n is the op budget of the
              forward and the backward (a reduction over k elements
              counts k), relative to the gradient's largest
              component, since cotangents summed over fan-out cancel
============  =====================================================  ============

with eps = `np.finfo(dtype).eps` and ULPS = `POINTWISE_ULPS[dtype]` (4 for
float32/float64; 1 for float16 and bfloat16, whose ops numpy (ml_dtypes for
bfloat16) computes in float32 and rounds once). Integer and bool results are
always compared exactly.

bfloat16 reductions (`ACCUMULATES_IN`): ml_dtypes' add and multiply loops round
every partial result to bfloat16, so numpy's `sum` of a bfloat16 array
accumulates in bfloat16, one element after the other (a sum of 1000 ones is
256.0; `mean` and `var` sum the same way). The compiler accumulates bfloat16
sums and products in float32 and rounds once (ARCHITECTURE: "fp32 for
fp16/bf16"; torch does the same): the result has numpy's dtype and shape, but
its value is compared with `bf16_reference(fn)`, numpy's answer on the float32
upcast rounded to bfloat16, not with numpy's bfloat16 answer. The reduction
rtol of bfloat16 is then eps(bfloat16) (the one rounding; a float32 reference
that lies next to a rounding tie can round the other way) plus float32's
reduction bound for n terms, not eps(bfloat16)·n. numpy's matmul has no
bfloat16 loop: `a @ b` of two bfloat16 arrays is float32 (the operands cast,
numpy's float32 matmul), and compared as float32. The bound is
relative to the result, so it does not cover catastrophic cancellation after
a rounded op; `programs()` adds the budgets of the ops along each path.

reassociated reductions: the tolerance above covers the order in which a
floating sum or product combines its terms while no partial result
overflows. Where one does, the order decides between ±Inf, NaN and a finite
value, and numpy's order is its own: products one element after the other,
the axes walked in memory order (the largest stride outermost); sums of 8 or
more terms pairwise, 8 partial sums at a time. The compiled reduction visits
the reduced axes of an array of known layout in numpy's order
(`capture/rules/reductions.py`, `_in_memory_order`), so small products agree
with numpy's to the NaN; a sum of 8 or more terms, and a reduction long
enough to be split into vector lanes or threads, may overflow where numpy's
does not, or the reverse. Tests of such values compare reductions short enough
to run in order, or products only.
"""

from __future__ import annotations

import copy
import math
import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from dialects import ufuncs as _U
from dialects.dtypes import BFLOAT16, finfo
from dialects.dtypes import kind as dtype_kind

from . import pytree
from .api import compile as _compile

# ---------------------------------------------------------------------------
# tolerances

OP_CLASSES = ("exact", "pointwise", "reduction", "gradient")

POINTWISE_ULPS: dict[np.dtype, int] = {
    np.dtype(np.float16): 1,
    BFLOAT16: 1,
    np.dtype(np.float32): 4,
    np.dtype(np.float64): 4,
}


class ToleranceTable(dict):
    """dtype -> rtol of one pointwise op; `rtol()` for every op class."""

    def rtol(self, dtype: Any, op_class: str = "pointwise", n: int = 1) -> float:
        if op_class not in OP_CLASSES:
            raise ValueError(f"op class must be one of {OP_CLASSES}, got {op_class!r}")
        dt = np.dtype(dtype)
        if op_class == "exact" or dtype_kind(dt) not in "fc":
            return 0.0
        if op_class == "reduction" and dt in ACCUMULATES_IN:
            return float(finfo(dt).eps) + self.rtol(ACCUMULATES_IN[dt], op_class, n)
        base = self.get(dt, self.get(np.dtype(dt.char.lower()), 0.0))
        return base * max(int(n), 1) if op_class in ("reduction", "gradient") else base


TOLERANCES: ToleranceTable = ToleranceTable(
    {dt: ulps * float(finfo(dt).eps) for dt, ulps in POINTWISE_ULPS.items()}
)
TOLERANCES[np.dtype(np.complex64)] = TOLERANCES[np.dtype(np.float32)]
# dtypes whose sums and products the compiler accumulates in a wider dtype than
# numpy does (see "bfloat16 reductions" above)
ACCUMULATES_IN: dict[np.dtype, np.dtype] = {BFLOAT16: np.dtype(np.float32)}
TOLERANCES[np.dtype(np.complex128)] = TOLERANCES[np.dtype(np.float64)]


# ---------------------------------------------------------------------------
# comparing with numpy

def copy_array(x: np.ndarray) -> np.ndarray:
    """A copy of x with x's strides (negative and zero ones included) and its
    writeable flag, so the compiled function sees the layout the caller has."""
    itemsize = x.itemsize
    if x.ndim == 0 or x.size == 0 or itemsize == 0 or any(s % itemsize for s in x.strides):
        out = x.copy(order="K")
    else:
        lo = sum((n - 1) * s for n, s in zip(x.shape, x.strides) if s < 0)
        hi = sum((n - 1) * s for n, s in zip(x.shape, x.strides) if s > 0) + itemsize
        buf = np.zeros((hi - lo) // itemsize, x.dtype)
        out = np.lib.stride_tricks.as_strided(buf[-lo // itemsize:], x.shape, x.strides)
        out[...] = x
    if not x.flags.writeable:
        out.flags.writeable = False
    return out


def _arrays_in(x: Any, found: dict[int, np.ndarray]) -> None:
    if isinstance(x, np.ndarray):
        found.setdefault(id(x), x)
    elif isinstance(x, (tuple, list)):
        for e in x:
            _arrays_in(e, found)
    elif isinstance(x, dict):
        for e in x.values():
            _arrays_in(e, found)


def _copy(x: Any) -> Any:
    """Deep copy that keeps array layouts and the identity of repeated arrays."""
    found: dict[int, np.ndarray] = {}
    _arrays_in(x, found)
    memo: dict[int, Any] = {i: copy_array(a) for i, a in found.items()}
    return copy.deepcopy(x, memo)


def _float_repr(a: np.ndarray) -> str:
    with np.printoptions(precision=20, threshold=50):
        return repr(a)


def assert_same_value(got: Any, want: Any, rtol: float | None = None, what: str = "result") -> None:
    """got equals numpy's want: type, dtype, shape, NaN/±Inf/-0.0, values within
    rtol (default: `TOLERANCES[dtype]`; 0.0 means bitwise)."""
    if isinstance(want, (np.ndarray, np.generic)):
        assert type(got) is type(want), f"{what}: type {type(got).__name__} != numpy's {type(want).__name__}"
        assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != numpy's {want.dtype}"
        assert np.shape(got) == np.shape(want), f"{what}: shape {np.shape(got)} != numpy's {np.shape(want)}"
        g, w = np.asarray(got), np.asarray(want)
        if dtype_kind(w.dtype) in "fc":
            tol = TOLERANCES.get(w.dtype, 0.0) if rtol is None else rtol
            def detail():
                return f"\n got={_float_repr(g)}\nwant={_float_repr(w)}"

            assert np.array_equal(np.isnan(g), np.isnan(w)), f"{what}: NaN positions differ{detail()}"
            fin = np.isfinite(w)
            inf = ~fin & ~np.isnan(w)
            assert np.array_equal(g[inf], w[inf]), f"{what}: infinities differ{detail()}"
            if tol == 0.0:
                ok = g[fin] == w[fin]
            else:
                gf, wf = g[fin].astype(np.float64), w[fin].astype(np.float64)
                ok = np.abs(gf - wf) <= tol * np.abs(wf) + float(finfo(w.dtype).tiny)
            assert np.all(ok), f"{what}: values differ beyond rtol={tol}{detail()}"
            # the sign of a zero is fixed by IEEE whatever the evaluation order
            zero = (w == 0) & (g == 0)
            if dtype_kind(w.dtype) == "f":
                assert np.array_equal(np.signbit(g[zero]), np.signbit(w[zero])), \
                    f"{what}: signed zeros differ{detail()}"
        else:
            assert np.array_equal(g, w), f"{what}: values differ\n got={g}\nwant={w}"
        return
    if isinstance(want, (tuple, list, dict)):
        gl, gt = pytree.flatten(got)
        wl, wt = pytree.flatten(want)
        assert gt == wt, f"{what}: structure {gt} != numpy's {wt}"
        for i, (a, b) in enumerate(zip(gl, wl)):
            assert_same_value(a, b, rtol, f"{what}[{i}]")
        return
    assert type(got) is type(want), f"{what}: type {type(got).__name__} != {type(want).__name__}"
    if isinstance(want, float):
        if math.isnan(want):
            assert math.isnan(got), f"{what}: {got!r} != {want!r}"
            return
        tol = TOLERANCES[np.dtype(np.float64)] if rtol is None else rtol
        assert abs(got - want) <= tol * abs(want) or got == want, f"{what}: {got!r} != {want!r}"
        assert math.copysign(1.0, got) == math.copysign(1.0, want) or want != 0.0, \
            f"{what}: signed zeros differ: {got!r} != {want!r}"
    else:
        assert got == want, f"{what}: {got!r} != {want!r}"


def stage_text(fn, spec: str, stage: str = "kernel") -> str:
    """`python -m lowering.dump --stage STAGE` of fn on inputs of `spec`
    (`--args`'s form: "f64[64,32] f32[] int:3")."""
    import io

    from .dump import capture, parse_spec, print_lower_stages

    out = io.StringIO()
    print_lower_stages(capture(fn, parse_spec(spec)), out, (stage,))
    return out.getvalue()


def assert_matches_numpy(fn, *args, rtol: float | None = None, compiled=None, calls: int = 1,
                         **kwargs) -> Any:
    """Run fn eagerly and compiled on copies of args; assert equal results and
    equal effects on the arguments. `calls` > 1 calls the compiled function
    again on fresh copies (the cached path: guards hit, no tracing) and checks
    each call the same way. Returns the (last) compiled result."""
    cf = compiled if compiled is not None else _compile(fn)
    eager_args, eager_kwargs = _copy(args), _copy(kwargs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            want = fn(*eager_args, **eager_kwargs)
        except Exception as e:  # numpy rejects the input: so must we
            for _ in range(calls):
                comp_args, comp_kwargs = _copy(args), _copy(kwargs)
                try:
                    cf(*comp_args, **comp_kwargs)
                except type(e):
                    continue
                except Exception as e2:
                    raise AssertionError(f"numpy raised {type(e).__name__}({e}); compiled raised "
                                         f"{type(e2).__name__}({e2})") from e2
                raise AssertionError(f"numpy raised {type(e).__name__}({e}); compiled did not")
            return None
    got = None
    for i in range(calls):
        comp_args, comp_kwargs = _copy(args), _copy(kwargs)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = cf(*comp_args, **comp_kwargs)
        call = "" if calls == 1 else f" (call {i + 1})"
        assert_same_value(got, want, rtol, "result" + call)
        assert_same_value(comp_args, eager_args, rtol, "arguments after the call" + call)
        assert_same_value(comp_kwargs, eager_kwargs, rtol, "keyword arguments after the call" + call)
    return got


# ---------------------------------------------------------------------------
# hypothesis strategies

TIER1_DTYPES: tuple[np.dtype, ...] = tuple(
    np.dtype(d) for d in (np.float32, np.float64, np.int32, np.int64, np.bool_)
)
LAYOUTS = ("C", "F", "strided", "transposed", "broadcast")


def bf16_reference(fn: Callable) -> Callable:
    """fn run by numpy on the float32 upcast of its bfloat16 array arguments,
    its float32 results rounded to bfloat16 where fn's own result is bfloat16:
    the value the compiler's bfloat16 sums (accumulated in float32) are
    compared with (see "bfloat16 reductions" above). Use it where fn reduces
    bfloat16 values; its pointwise ops then round once, not after each op, so
    the comparison takes fn's op budget in bfloat16 ULPs."""
    def up(x):
        return x.astype(np.float32) if isinstance(x, (np.ndarray, np.generic)) and \
            x.dtype == BFLOAT16 else x

    def ref(*args, **kwargs):
        want = fn(*args, **kwargs)
        got = fn(*[up(a) for a in args], **{k: up(v) for k, v in kwargs.items()})

        def down(w, g):
            if isinstance(w, (tuple, list)):
                return type(w)(down(a, b) for a, b in zip(w, g))
            if isinstance(w, np.ndarray) and w.dtype == BFLOAT16:
                return np.asarray(g).astype(BFLOAT16)
            if isinstance(w, np.generic) and w.dtype == BFLOAT16:
                return BFLOAT16.type(g)
            return g
        return down(want, got)
    return ref


def examples(scale: float):
    """`@examples(0.5)`: a test's hypothesis example count relative to the active
    profile's (tests/conftest.py: "ci" by default, "deep" for long runs)."""
    from hypothesis import settings

    return settings(max_examples=max(1, round(settings.default.max_examples * scale)))


def _hyp():
    import hypothesis.extra.numpy as hnp
    import hypothesis.strategies as st

    return st, hnp


def dtypes(kinds: str = "fib"):
    """Tier 1 dtypes whose kind is in `kinds` ("f" float, "i" int, "b" bool)."""
    st, _ = _hyp()
    return st.sampled_from([d for d in TIER1_DTYPES if d.kind in kinds])


def edge_values(dtype: Any) -> list:
    """Values where implementations disagree first: signed zeros, NaN, ±Inf,
    smallest normal and subnormal, largest finite, rounding ties, integer
    extremes, 0 and ±1 (division, shifts, powers)."""
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return [False, True]
    if dt.kind in "iu":
        info = np.iinfo(dt)
        vals = {0, 1, 2, 3, info.max, info.max - 1, info.min, info.min + 1, dt.itemsize * 8,
                dt.itemsize * 8 - 1}
        if dt.kind == "i":
            vals |= {-1, -2, -3}
        return sorted(vals)
    fi = finfo(dt)
    vals = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, 2.5, -2.5, 3.0, np.nan, np.inf, -np.inf,
            fi.tiny, -fi.tiny, fi.smallest_subnormal, -fi.smallest_subnormal, fi.max, -fi.max,
            fi.eps, 1 + fi.eps, np.pi, -np.pi / 2, 88.0, 710.0, 1e-7]
    if dt == BFLOAT16:  # (its scalars' .item() is the scalar itself: floats here)
        return [float(dt.type(v)) for v in vals]
    return [dt.type(v).item() if dt.kind == "f" else v for v in vals]


def elements(dtype: Any):
    """Scalars of `dtype`: edge values, small "ordinary" values and anything."""
    st, _ = _hyp()
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return st.booleans()
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return st.one_of(st.sampled_from(edge_values(dt)), st.integers(-8, 8).filter(
            lambda v: info.min <= v <= info.max), st.integers(int(info.min), int(info.max)))
    if dt == BFLOAT16:  # float32 values that `arrays` rounds to bfloat16
        return st.one_of(st.sampled_from(edge_values(dt)), st.floats(-8, 8, width=32),
                         st.floats(width=32))
    width = dt.itemsize * 8
    return st.one_of(st.sampled_from(edge_values(dt)),
                     st.floats(-8, 8, width=width),
                     st.floats(width=width))


def array_shapes(min_dims: int = 0, max_dims: int = 3, min_side: int = 0, max_side: int = 4):
    _, hnp = _hyp()
    return hnp.array_shapes(min_dims=min_dims, max_dims=max_dims, min_side=min_side,
                            max_side=max_side)


def broadcastable_shapes(n: int, min_dims: int = 0, max_dims: int = 3, min_side: int = 0,
                         max_side: int = 4):
    """n shapes that broadcast together (numpy's rules: right-aligned, 1 stretches,
    0-size dims included)."""
    _, hnp = _hyp()
    return hnp.mutually_broadcastable_shapes(
        num_shapes=n, min_dims=min_dims, max_dims=max_dims, min_side=min_side, max_side=max_side
    ).map(lambda b: tuple(b.input_shapes))


def _sentinel(dt: np.dtype):
    return {"b": True, "i": 0x5A5A, "u": 0x5A, "f": 12345.0}[dtype_kind(dt)]


def arrays(dtype: Any = None, shape: Any = None, *, elements: Any = None,
           layout: str | None = None):
    """Arrays of `dtype` (a dtype, a strategy, or None for `dtypes()`) and `shape`
    (a tuple, a strategy, or None for `array_shapes()`), values from
    `elements(dtype)` unless given, in a random layout of `LAYOUTS` unless
    `layout` names one. Memory a strided/transposed view skips holds a
    sentinel, so a compiled function that reads it gets wrong answers."""
    st, hnp = _hyp()
    SearchStrategy = st.SearchStrategy
    elems_given = elements

    @st.composite
    def _arrays(draw):
        dt = dtype if dtype is not None else dtypes()
        dt = np.dtype(draw(dt) if isinstance(dt, SearchStrategy) else dt)
        shp = shape if shape is not None else array_shapes()
        shp = tuple(draw(shp) if isinstance(shp, SearchStrategy) else
                    ((shp,) if isinstance(shp, int) else shp))
        lay = layout if layout is not None else draw(st.sampled_from(LAYOUTS))
        elems = elems_given if elems_given is not None else _elements(dt)
        # (bfloat16: hypothesis draws float32 values, rounded to bfloat16)
        draw_dt = np.dtype(np.float32) if dt == BFLOAT16 else dt
        if lay == "broadcast":
            src = tuple(draw(st.sampled_from((1, n))) for n in shp)
            src = src[draw(st.integers(0, len(src))):]
            vals = draw(hnp.arrays(draw_dt, src, elements=elems)).astype(dt)
            return np.broadcast_to(vals, shp)
        vals = draw(hnp.arrays(draw_dt, shp, elements=elems)).astype(dt)
        if lay == "F":
            return np.asfortranarray(vals)
        if not shp:
            return vals
        if lay == "strided":
            steps = [draw(st.sampled_from((1, 2, -1, -2, 3))) for _ in shp]
            base = np.full([n * abs(s) for n, s in zip(shp, steps)], _sentinel(dt), dt)
            out = base[tuple(slice(None, None, s) for s in steps)]
        elif lay == "transposed":
            perm = draw(st.permutations(range(len(shp))))
            base = np.full([shp[p] for p in perm], _sentinel(dt), dt)
            out = base.transpose(np.argsort(perm))
        else:
            return vals
        assert out.shape == shp
        out[...] = vals
        return out

    return _arrays()


_elements = elements  # `arrays` has a keyword of that name


def python_scalars(kinds: str = "bif", big_ints: bool = True):
    """Python bool/int/float operands (NEP 50 weak scalars), including ints out
    of every Tier 1 range when `big_ints`."""
    st, _ = _hyp()
    parts = []
    if "b" in kinds:
        parts.append(st.booleans())
    if "i" in kinds:
        parts.append(st.sampled_from([0, 1, 2, 3, -1, -2, 7, 31, 32, 63, 64, 100]))
        if big_ints:
            parts.append(st.sampled_from([2**31 - 1, 2**31, -2**31 - 1, 2**63 - 1, 2**63,
                                          -2**63 - 1, 2**64, 2**70]))
    if "f" in kinds:
        parts.append(st.sampled_from([0.0, -0.0, 0.5, -1.5, 2.0, 3.0, 1e-3, 1e38, 1e300,
                                      float("nan"), float("inf"), -float("inf")]))
        parts.append(st.floats(-8, 8))
    return st.one_of(*parts)


# ---------------------------------------------------------------------------
# random programs

# op classes of the Tier 1 ufuncs (see TOLERANCES), OPS.md's aliases included:
# the op table's exactness column (dialects/ufuncs.py)
EXACT_UFUNCS = frozenset(_U.names(lambda u: u.tier == 1 and u.exactness == "exact",
                                  aliases=True))
POINTWISE_UFUNCS = frozenset(_U.names(lambda u: u.tier == 1 and u.exactness == "pointwise",
                                      aliases=True))
TIER1_UFUNCS = EXACT_UFUNCS | POINTWISE_UFUNCS


def ufunc_class(name: str) -> str:
    """The op class of a ufunc by numpy name or alias ("pointwise" for one
    the table does not know)."""
    u = _U.lookup(name)
    return u.exactness if u is not None else "pointwise"


_UNARY = sorted(n for n in TIER1_UFUNCS if getattr(np, n).nin == 1)
_BINARY = sorted(n for n in TIER1_UFUNCS if getattr(np, n).nin == 2)
_BINOPS = ["+", "-", "*", "/", "//", "%", "**", "&", "|", "^", "<<", ">>", "<", "<=", ">",
           ">=", "==", "!="]
_INPLACE = ["+", "-", "*", "/", "//", "%", "**", "&", "|", "^"]
_REDUCTIONS = ["sum", "prod", "mean", "var", "std", "max", "min", "amax", "amin", "argmax",
               "argmin", "all", "any"]
_LITERALS = ["2.0", "0.5", "-1.5", "3", "-2", "1", "True", "1e-3", "np.nan", "np.inf",
             "np.float32(2.0)", "np.int32(3)", "-0.0"]
_MAX_SIZE = 2048


@dataclass
class Program:
    """A random program: `fn(*args)`, its source, and the tolerance its ops add
    up to (None: numpy's default for the dtype)."""

    fn: Callable
    args: tuple
    source: str
    rtol: float | None

    def __repr__(self) -> str:
        def show(a):
            if isinstance(a, np.ndarray):
                return (f"np.array({a.tolist()!r}, dtype=np.{a.dtype}) "
                        f"# shape={a.shape} strides={a.strides} writeable={a.flags.writeable}")
            return repr(a)

        args = "\n".join(f"  {show(a)}," for a in self.args)
        return f"Program(rtol={self.rtol})\n{self.source}\nargs = (\n{args}\n)"


@dataclass
class _Node:
    name: str
    value: Any
    ulps: float  # error budget in ULPs of the widest float seen

    @property
    def shape(self) -> tuple[int, ...]:
        return np.shape(self.value)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def dtype(self) -> np.dtype:
        return np.asarray(self.value).dtype


def _axis(draw, st, ndim: int):
    """axis=None, an int (negative too) or a tuple of distinct axes."""
    if ndim == 0:
        return draw(st.sampled_from(["None", "()"]))
    choice = draw(st.integers(0, 2))
    if choice == 0:
        return "None"
    if choice == 1:
        return str(draw(st.integers(-ndim, ndim - 1)))
    axes = draw(st.lists(st.integers(0, ndim - 1), unique=True, max_size=ndim))
    return "(" + "".join(f"{a}, " for a in axes) + ")"


def _reduced_count(shape, axis: str) -> int:
    ax = eval(axis)  # noqa: S307  (our own generated text)
    if ax is None:
        return int(np.prod(shape, dtype=np.int64))
    ax = ax if isinstance(ax, tuple) else (ax,)
    return int(np.prod([shape[a] for a in ax], dtype=np.int64))


def _slice_key(draw, st, shape) -> str:
    parts = []
    for n in shape:
        k = draw(st.integers(0, 5))
        if k == 0:
            parts.append(":")
        elif k == 1:
            parts.append("::-1")
        elif k == 2:
            parts.append(f"{draw(st.integers(-n - 1, n))}::{draw(st.sampled_from([2, -2, 3]))}")
        elif k == 3 and n:
            parts.append(str(draw(st.integers(-n, n - 1))))
        elif k == 4:
            parts.append("None, :")
        else:
            parts.append(f":{draw(st.integers(-n, n))}")
    if draw(st.booleans()) and parts:
        parts = ["..."] + parts[1:]
    if draw(st.booleans()):
        parts.insert(draw(st.integers(0, len(parts))), "None")
    return ", ".join(parts) if parts else "..."


def _op(draw, st, nodes: list[_Node], inplace: bool) -> tuple[str, str, float, bool]:
    """One statement: (kind, python text with `{out}` for the new name, own ULPs
    or -n for a reduction over n elements, whether it assigns in place)."""
    pick = lambda: draw(st.sampled_from(nodes))  # noqa: E731
    x = pick()
    kinds = ["unary", "binary", "binop", "scalar_binop", "unop", "reduce", "view", "where",
             "matmul", "astype"] + (["inplace"] * 2 if inplace else [])
    kind = draw(st.sampled_from(kinds))
    if kind == "unary":
        f = draw(st.sampled_from(_UNARY))
        return kind, f"{{out}} = np.{f}({x.name})", _ulps(f), False
    if kind == "binary":
        f = draw(st.sampled_from(_BINARY))
        y = draw(st.sampled_from([pick().name, draw(st.sampled_from(_LITERALS))]))
        args = (x.name, y) if draw(st.booleans()) else (y, x.name)
        return kind, f"{{out}} = np.{f}({args[0]}, {args[1]})", _ulps(f), False
    if kind in ("binop", "scalar_binop"):
        op = draw(st.sampled_from(_BINOPS))
        y = pick().name if kind == "binop" else draw(st.sampled_from(_LITERALS))
        a, b = (x.name, y) if draw(st.booleans()) else (y, x.name)
        return kind, f"{{out}} = {a} {op} {b}", 4 if op == "**" else 0, False
    if kind == "unop":
        op = draw(st.sampled_from(["-", "+", "~", "abs"]))
        text = f"abs({x.name})" if op == "abs" else f"{op}{x.name}"
        return kind, f"{{out}} = {text}", 0, False
    if kind == "reduce":
        f = draw(st.sampled_from(_REDUCTIONS))
        axis = _axis(draw, st, x.ndim)
        if f in ("argmax", "argmin"):
            axis = "None" if axis.startswith("(") else axis
        extra = ""
        if draw(st.booleans()):
            extra += f", keepdims={draw(st.booleans())}"
        if f in ("var", "std") and draw(st.booleans()):
            extra += f", ddof={draw(st.integers(0, 2))}"
        n = _reduced_count(x.shape, axis) if x.ndim or axis == "None" else 1
        cls = -max(n, 1) if f in ("sum", "prod", "mean", "var", "std") else 0
        if draw(st.booleans()):
            return kind, f"{{out}} = np.{f}({x.name}, axis={axis}{extra})", cls, False
        f = {"amax": "max", "amin": "min"}.get(f, f)
        return kind, f"{{out}} = {x.name}.{f}(axis={axis}{extra})", cls, False
    if kind == "view":
        v = draw(st.integers(0, 5))
        if v == 0:
            return kind, f"{{out}} = {x.name}.reshape(-1)", 0, False
        if v == 1 and x.ndim:
            return kind, f"{{out}} = {x.name}.reshape({x.shape[-1]}, -1)" if x.shape[-1] else \
                f"{{out}} = {x.name}.reshape(-1, 1, {x.shape[-1]})", 0, False
        if v == 2:
            return kind, f"{{out}} = {x.name}.T", 0, False
        if v == 3:
            perm = draw(st.permutations(range(x.ndim)))
            return kind, f"{{out}} = np.transpose({x.name}, {tuple(perm)!r})", 0, False
        return kind, f"{{out}} = {x.name}[{_slice_key(draw, st, x.shape)}]", 0, False
    if kind == "where":
        c = draw(st.sampled_from([f"{x.name} > 0", f"np.isnan({x.name})", pick().name]))
        a = draw(st.sampled_from([pick().name, draw(st.sampled_from(_LITERALS))]))
        b = draw(st.sampled_from([pick().name, draw(st.sampled_from(_LITERALS))]))
        return kind, f"{{out}} = np.where({c}, {a}, {b})", 0, False
    if kind == "matmul":
        y = pick()
        form = draw(st.integers(0, 3))
        if form == 0:
            text = f"{x.name} @ {y.name}"
        elif form == 1:
            text = f"{x.name} @ np.swapaxes({x.name}, -1, -2)" if x.ndim >= 2 else f"{x.name} @ {x.name}"
        elif form == 2:
            text = f"np.matmul({x.name}.T, {x.name})"
        else:
            text = f"{x.name} @ {y.name}.T"
        k = x.shape[-1] if x.ndim else 1
        return kind, f"{{out}} = {text}", -max(k, 1), False
    if kind == "astype":
        dt = draw(st.sampled_from(["np.float32", "np.float64", "np.int32", "np.int64", "bool"]))
        return kind, f"{{out}} = {x.name}.astype({dt})", 0, False
    # in place: through an input, a view of one, or an intermediate
    op = draw(st.sampled_from(_INPLACE))
    y = draw(st.sampled_from([pick().name, draw(st.sampled_from(_LITERALS))]))
    if draw(st.booleans()):
        return kind, f"{x.name} {op}= {y}\n{{out}} = {x.name}", 4 if op == "**" else 0, True
    f = {"+": "add", "-": "subtract", "*": "multiply", "/": "divide", "//": "floor_divide",
         "%": "remainder", "**": "power", "&": "bitwise_and", "|": "bitwise_or",
         "^": "bitwise_xor"}[op]
    return kind, f"np.{f}({x.name}, {y}, out={x.name})\n{{out}} = {x.name}", \
        4 if op == "**" else 0, True


def _ulps(ufunc_name: str) -> float:
    return 0 if ufunc_class(ufunc_name) == "exact" else POINTWISE_ULPS[np.dtype(np.float64)]


def _budget(own: float, inputs: list[_Node]) -> float:
    child = max((n.ulps for n in inputs), default=0.0)
    if own < 0:  # reduction over -own elements
        return (child + POINTWISE_ULPS[np.dtype(np.float64)]) * -own
    return child + own


def programs(min_ops: int = 2, max_ops: int = 30, max_inputs: int = 3, dtype: Any = None,
             inplace: bool = True, float_arg: bool = True):
    """Random straight-line numpy programs over the Tier 1 surface: a DAG of
    `min_ops`..`max_ops` statements (ufuncs, operators with arrays and Python or
    numpy scalars, reductions with axis/keepdims/ddof, reshape/transpose/slicing
    views, where, matmul, astype, and in-place updates of inputs, their views and
    intermediates when `inplace`), returning one or more of the values.
    Each statement is run on the inputs while the program is drawn and dropped if
    numpy rejects it, so programs run without error in numpy."""
    st, _ = _hyp()

    @st.composite
    def _programs(draw):
        n_in = draw(st.integers(1, max_inputs))
        shapes = draw(broadcastable_shapes(n_in, max_dims=3, max_side=4))
        dts = dtype if dtype is not None else dtypes()
        args: list[Any] = [draw(arrays(dts, s)) for s in shapes]
        if float_arg and draw(st.integers(0, 3)) == 0:
            args.append(draw(st.sampled_from([0.5, -2.0, 3.0, float("nan"), -0.0])))
        names = [f"a{i}" for i in range(len(args))]
        env: dict[str, Any] = {"np": np}
        work = _copy(tuple(args))
        env.update(zip(names, work))
        nodes = [_Node(n, env[n], 0.0) for n in names]
        lines: list[str] = []
        target = draw(st.integers(min_ops, max_ops))
        attempts = 0
        while len(nodes) - len(names) < target and attempts < 4 * max_ops:
            attempts += 1
            kind, text, own, in_place = _op(draw, st, nodes, inplace)
            name = f"v{len(nodes) - len(names)}"
            stmt = text.format(out=name)
            trial = dict(env)
            snapshot = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in env.items()}
            try:
                with warnings.catch_warnings(), np.errstate(all="ignore"):
                    warnings.simplefilter("ignore")
                    exec(stmt, trial)  # noqa: S102  (our own generated text)
                value = trial[name]
                if np.size(value) > _MAX_SIZE or (
                        isinstance(value, np.ndarray) and value.dtype not in TIER1_DTYPES) or (
                        isinstance(value, np.generic) and value.dtype not in TIER1_DTYPES):
                    raise ValueError("too big or not Tier 1")
            except Exception:
                for k, v in snapshot.items():  # undo in-place effects of the failed statement
                    cur = env[k]
                    if isinstance(cur, np.ndarray) and cur.flags.writeable:
                        cur[...] = v
                continue
            env = trial
            refs = set(re.findall(r"\b[av]\d+\b", stmt))
            used = [n for n in nodes if n.name in refs]
            nodes.append(_Node(name, value, _budget(own, used)))
            lines.extend(stmt.split("\n"))
        produced = nodes[len(names):] or nodes
        outs = [produced[-1]] + draw(st.lists(st.sampled_from(nodes), max_size=2))
        ret = outs[0].name if len(outs) == 1 and draw(st.booleans()) else \
            "(" + "".join(f"{o.name}, " for o in outs) + ")"
        source = "def program(" + ", ".join(names) + "):\n" + "".join(
            f"    {ln}\n" for ln in lines) + f"    return {ret}\n"
        ns: dict[str, Any] = {"np": np}
        exec(compile(source, "<program>", "exec"), ns)  # noqa: S102
        floats = [n.dtype for n in nodes if n.dtype.kind == "f"]
        eps = max((float(finfo(d).eps) for d in floats), default=0.0)
        ulps = max(n.ulps for n in nodes)
        rtol = ulps * eps if ulps else 0.0
        return Program(ns["program"], tuple(args), source, rtol)

    return _programs()
