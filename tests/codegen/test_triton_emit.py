"""The Triton emitter (lowering/codegen/triton_kernel.py, triton_ops.py), on a
machine without a GPU:

- every kernel it generates for a set of programs (pointwise chains with
  broadcasts, LayerNorm, softmax, RMSNorm, bias+GELU, Black-Scholes, integer
  floor_divide/remainder, comparisons, float64 and int64, reductions, rows
  too long for registers, kernels for many sizes) compiles for sm_90
  (`triton.compile` with an explicit `GPUTarget`), with IEEE division and
  square root and no FP contraction in the PTX;
- run by Triton's interpreter on numpy arrays, those kernels compute numpy's
  values for hypothesis inputs with NaN, ±Inf, -0.0, empty and size-1 dims,
  and every ufunc rule gives numpy's value bit for bit on every pair of edge
  values of each dtype;
- what the emitter cannot express yet is a "triton: no rule for ..." error."""

from __future__ import annotations

import functools
import os
import re
import tempfile

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from xdsl.parser import Parser

# Triton's own compile cache in a directory of the session's, never the user's
os.environ.setdefault("TRITON_CACHE_DIR", tempfile.mkdtemp(prefix="lowering-test-triton-"))

import triton  # noqa: E402,F401  (the test extra installs it: CI compiles every kernel)

import lowering  # noqa: E402
from dialects import ufuncs as U  # noqa: E402
from lowering import dump  # noqa: E402
from lowering.backends import triton_launch as TL  # noqa: E402
from lowering.codegen import ops  # noqa: E402
from lowering.codegen import triton_kernel as TK  # noqa: E402
from lowering.codegen.triton_ops import TritonOps  # noqa: E402
from passes import cost_model  # noqa: E402
from lowering.examples import gelu, layernorm, rmsnorm, softmax  # noqa: E402
from lowering.explain import explain  # noqa: E402
from lowering.pipeline import context, lower  # noqa: E402
from lowering.testing import TOLERANCES, assert_same_value, edge_values  # noqa: E402


# ---- the programs -------------------------------------------------------------------

def chain(x, y, z):
    """A pointwise chain with broadcasts along both axes."""
    return np.exp(x * y - z[:, None]) + np.abs(x) / 3.0 - np.maximum(x, 0.5) * np.sqrt(np.abs(y))


def muladd(x, y, z):
    return x * y + z


def _cnd(d):
    k = 1.0 / (1.0 + 0.2316419 * np.abs(d))
    poly = k * (0.31938153 + k * (-0.356563782 + k * (1.781477937 + k * (-1.821255978
                                                                         + k * 1.330274429))))
    ret = 0.3989422804014327 * np.exp(-0.5 * d * d) * poly
    return np.where(d > 0, 1.0 - ret, ret)


def black_scholes(S, K, T):
    r, v = 0.02, 0.30
    sq = v * np.sqrt(T)
    d1 = (np.log(S / K) + (r + 0.5 * v * v) * T) / sq
    d2 = d1 - sq
    disc = K * np.exp(-r * T)
    return S * _cnd(d1) - disc * _cnd(d2), disc * (1.0 - _cnd(d2)) - S * (1.0 - _cnd(d1))


def intdiv(a, b):
    return a // b, a % b, np.fmod(a, b)


def compare(x, y):
    return ((x < y) | ~(x == y)) & (x >= 0), np.where(x > y, x, y), np.logical_xor(x > 0, y != 0)


def compares(x, y):
    return x < y, x <= y, x > y, x >= y, x == y, x != y


def casts(x):
    """numpy's astype from a float: out-of-range and NaN as x86 converts them."""
    return (x.astype(np.int32), x.astype(np.int64), x.astype(np.int8), x.astype(np.uint8),
            x.astype(np.uint16), x.astype(bool), x.astype(np.float64))


def unsigned_casts(x):
    """(in range only: numpy's uint32/uint64 results for the others depend on
    which of its loops runs)"""
    return x.astype(np.uint32), x.astype(np.uint64)


def int_casts(a):
    return a.astype(np.float32), a.astype(np.int8), a.astype(np.uint16), a.astype(bool)


def intops(a, b):
    return (a * 3 + b) ^ (a >> 2), np.maximum(a, b), np.abs(a) - np.minimum(a, 7)


def reductions(x):
    return x.sum(-1), x.max(-1), x.min(-1), np.prod(x, -1), (x > 0).any(-1), (x > 0).all(-1)


def argmax(x):
    return x.argmax(-1)


def argmin(x):
    return x.argmin(-1)


def total(x):
    return x.sum()


def colsum(x):
    return x.sum(0)


def colsum_scaled(x):
    return x.sum(axis=0) * 2


def cumsum_down(x):
    return np.cumsum(x, axis=0)


def views(x):
    """Transposes and strided, reversed slices are index maps. (x.T with a
    C-ordered operand of its shape: the sum is computed in C order, reading
    x through the transposed map; `x.T + 1.0` alone is computed in x's
    order, capture/rules/ufuncs.py.)"""
    return x.T + x.reshape(x.shape[::-1]), x[::-1, 1::2] * 2.0


def mean_scaled(x):
    return np.float32(2.0) * x.mean()


def bias_layernorm(x, w, b):
    return layernorm(x + b, w, b)


# (function, argument spec, what the values are: "edge" any edge value, "tame"
# finite values and NaN/±Inf/-0.0 but nothing that overflows a sum, "finite"
# small finite values; one kind for every argument, or one per argument)
def residual_loss(out, b, y):
    """A value realized (returned) and reduced in one kernel: the store sits
    inside the reduction's body."""
    r = out + b - y
    return r, (r * r).mean()


def residual_rows(out, y):
    r = np.tanh(out - y)
    return r, r.max(axis=-1), np.abs(r).sum(axis=-1)


PROGRAMS = {
    "residual-loss": (residual_loss, "f32[16,40] f32[40] f32[16,40]", "tame"),
    "residual-loss-looped": (residual_loss, "f64[50,300] f64[300] f64[50,300]", "tame"),
    "residual-rows": (residual_rows, "f32[9,70] f32[9,70]", "tame"),
    "chain": (chain, "f32[4,8] f32[8] f32[4]", "edge"),
    "chain-f64": (chain, "f64[3,5] f64[5] f64[3]", "edge"),
    "muladd": (muladd, "f32[64] f32[64] f32[64]", "edge"),
    "layernorm": (layernorm, "f32[8,64] f32[64] f32[64]", "tame"),
    "layernorm-f64": (layernorm, "f64[4,33] f64[33] f64[33]", "tame"),
    "softmax": (softmax, "f32[8,64]", "tame"),
    "rmsnorm": (rmsnorm, "f32[8,64] f32[64]", "tame"),
    "gelu": (gelu, "f32[8,64] f32[64]", "edge"),
    "black-scholes": (black_scholes, "f32[256] f32[256] f32[256]", "edge"),
    "intdiv-i32": (intdiv, "i32[64] i32[64]", "edge"),
    "intdiv-i64": (intdiv, "i64[64] i64[64]", "edge"),
    "intdiv-i8": (intdiv, "i8[64] i8[64]", "edge"),
    "compare": (compare, "f32[16] f32[16]", "edge"),
    "intops-i64": (intops, "i64[32] i64[32]", "edge"),
    "compares-f32": (compares, "f32[32] f32[32]", "edge"),
    "compares-u8": (compares, "u8[32] u8[32]", "edge"),
    "compares-i64": (compares, "i64[32] i64[32]", "edge"),
    "casts-f32": (casts, "f32[64]", "edge"),
    "casts-f64": (casts, "f64[64]", "edge"),
    "casts-i64": (int_casts, "i64[64]", "edge"),
    "casts-unsigned": (unsigned_casts, "f64[64]", "unsigned"),
    "reductions": (reductions, "f32[6,20]", "tame"),
    "reductions-i32": (reductions, "i32[6,20]", "edge"),
    "argmax": (argmax, "f32[6,20]", "tame"),
    "argmin-i64": (argmin, "i64[6,20]", "edge"),
    "total": (total, "f32[1000]", "tame"),
    "mean": (mean_scaled, "f32[100]", "tame"),
    "colsum": (colsum, "f32[6,20]", "tame"),
    "colsum-ordered": (colsum_scaled, "f32[64,300]", "tame"),
    "cumsum-ordered": (cumsum_down, "f64[64,300]", "tame"),
    "views": (views, "f32[6,20]", "edge"),
    "softmax-long-rows": (softmax, "f32[2,10000]", "tame"),
    # the weight and bias finite: a constant row's x - mean is a rounding error whose
    # sign depends on the summation order, which an infinite weight turns into ±inf or NaN
    "layernorm-long-rows": (bias_layernorm, "f32[2,9000] f32[9000] f32[9000]",
                            "tame finite finite"),
}
# the same programs compiled for many sizes (size symbols: dynamic extents,
# strides and kernel parameters as run-time arguments)
DYNAMIC = {"softmax": (softmax, "f32[8,64]"), "gelu": (gelu, "f32[8,64] f32[64]"),
           "layernorm": (layernorm, "f32[8,64] f32[64] f32[64]")}


def _spec_of(args) -> str:
    return " ".join(f"{dump._CODE_OF[a.dtype]}[{','.join(map(str, a.shape))}]" for a in args)


@functools.lru_cache(maxsize=None)
def kernel_level(fn, spec: str, dynamic: bool = False, layouts: tuple[str, ...] = ()):
    """The kernel-level module of fn for inputs of `spec` (one graph), as the
    CPU pipeline leaves it (the level both emitters read), for inputs of the
    layout classes `layouts` (default C-contiguous) — its pointwise ops all
    generated, as the GPU pipeline keeps them (the CPU's cost model may leave
    a `power` to numpy's loop)."""
    args, _ = dump.make_inputs(spec)
    if dynamic:
        report = explain(lowering.compile(fn, dynamic=True))(*args)
        (text,) = report.kernel_levels
        assert text, "no kernel level for many sizes"
        return Parser(context(), text).parse_module()
    report = explain(lowering.compile(fn, backend="numpy"))(*args)
    (graph,) = report.graphs
    module = Parser(context(), graph).parse_module()
    with cost_model.forced({"power": "generated"}):
        final, _ = lower(module, "cpu", list(layouts) or ["C"] * len(args))
    return final


def kernels_of(fn, spec: str, dynamic: bool = False) -> list[TK.TritonKernel]:
    return TK.emit_module(kernel_level(fn, spec, dynamic))


def run(fn, args: list[np.ndarray]) -> list[np.ndarray]:
    """fn's results with every kernel run by Triton's interpreter."""
    return TL.run_module(kernel_level(fn, _spec_of(args)), args)


def eager(fn, args):
    with np.errstate(all="ignore"):
        out = fn(*[a.copy() for a in args])
    return [np.asarray(o) for o in (out if isinstance(out, tuple) else (out,))]


# ---- the handler ------------------------------------------------------------------------

def test_the_handler_rules_the_op_table_s_ops():
    assert set(TritonOps.UFUNCS) == set(U.names(lambda u: u.generated))
    assert set(TritonOps.UPSTREAM) == set(ops.upstream_names())
    assert not ops.abstract_methods(TritonOps)


# ---- compiled for sm_90 -----------------------------------------------------------------

COMPILED: dict[str, list] = {}


def compiled(name: str, dynamic: bool = False) -> list:
    key = f"{name}{' dynamic' if dynamic else ''}"
    if key not in COMPILED:
        fn, spec = (DYNAMIC[name] if dynamic else PROGRAMS[name][:2])
        COMPILED[key] = [(tk, TL.compile_for(tk)) for tk in kernels_of(fn, spec, dynamic)]
    return COMPILED[key]


@pytest.mark.parametrize("name", PROGRAMS)
def test_every_kernel_compiles_for_sm90(name):
    got = compiled(name)
    assert got, f"{name}: no kernels"
    for tk, ck in got:
        assert ck.asm["cubin"], f"{name}/{tk.name}: no cubin"
        ptx = ck.asm["ptx"]
        assert ".target sm_90" in ptx
        assert "div.full.f32" not in ptx and "div.approx.f32" not in ptx, \
            f"{name}/{tk.name}: an approximate float32 division"
        assert "sqrt.approx.f32" not in ptx, f"{name}/{tk.name}: an approximate square root"


@pytest.mark.parametrize("name", DYNAMIC)
def test_kernels_for_many_sizes_compile_with_sizes_as_arguments(name):
    got = compiled(name, dynamic=True)
    for tk, ck in got:
        assert ck.asm["cubin"]
        assert tk.index_bits == 64
        kinds = {a.kind for a in tk.args}
        assert "param" in kinds or "extent" in kinds, tk.args


def test_division_and_sqrt_are_ieee_in_the_ptx():
    ((_, ck),) = compiled("layernorm")
    ptx = ck.asm["ptx"]
    assert "div.rn.f32" in ptx and "sqrt.rn.f32" in ptx
    ((_, ck64),) = compiled("layernorm-f64")
    assert "div.rn.f64" in ck64.asm["ptx"] and "sqrt.rn.f64" in ck64.asm["ptx"]


def test_no_fp_contraction():
    """numpy rounds the product before the add: x * y + z is no fma."""
    ((tk, ck),) = compiled("muladd")
    assert tk.options["enable_fp_fusion"] is False
    ptx = ck.asm["ptx"]
    assert "mul.f32" in ptx or "mul.rn.f32" in ptx
    assert "fma.rn.f32" not in ptx


# ---- the shapes of kernel -------------------------------------------------------------

def test_softmax_keeps_its_row_in_registers():
    (tk,) = kernels_of(softmax, "f32[8,64]")
    assert tk.strategy == "rows" and tk.constexprs == {"R0_BLOCK": 64}
    assert tk.points == (8,) and tk.block == 1 and tk.index_bits == 32
    body = tk.source.split(f"def {tk.fn_name}(")[1]
    assert "for " not in body  # no loop: one block per row
    assert body.count("tl.load(") == 1  # the row read once for max, sum and the map
    assert body.count("libdevice.exp(") == 1  # exp computed once per element


def test_a_row_that_fills_its_block_is_not_masked():
    """A row as long as its register block (a power of two) loads and stores
    without a mask; a shorter one keeps it (its last lanes are past the
    row). Both give numpy's answer in the interpreter."""
    (full,) = kernels_of(layernorm, "f32[4,64] f32[64] f32[64]")
    (part,) = kernels_of(layernorm, "f32[4,48] f32[48] f32[48]")
    assert "mask" not in full.source.split(f"def {full.fn_name}(")[1]
    body = part.source.split(f"def {part.fn_name}(")[1]
    assert "< 48" in body and "mask=" in body
    for spec in ("f32[4,64] f32[64] f32[64]", "f32[4,48] f32[48] f32[48]"):
        args, _ = dump.make_inputs(spec, seed=1)
        module = kernel_level(layernorm, spec)
        _check("layernorm", TL.run_module(module, args), eager(layernorm, args), args)


def test_long_rows_loop():
    (tk,) = kernels_of(softmax, "f32[2,10000]")
    body = tk.source.split(f"def {tk.fn_name}(")[1]
    assert body.count("for base") == 3  # max, sum, then the map
    assert set(tk.constexprs.values()) == {TK.LOOP_BLOCK}


def test_pointwise_kernels_flatten_the_domain():
    (tk,) = kernels_of(gelu, "f32[8,64] f32[64]")
    assert tk.strategy == "pointwise" and tk.points == (8, 64)
    assert tk.programs({}) == 1 and tk.constexprs == {"XBLOCK": 512}
    assert "libdevice.tanh(" in tk.source


def test_int64_indices_past_int32():
    (tk,) = kernels_of(muladd, "f32[64] f32[64] f32[64]")
    assert tk.index_bits == 32
    module = kernel_level(muladd, "f32[64] f32[64] f32[64]")
    text = str(module).replace("64xf32", "3000000000xf32").replace("[64]", "[3000000000]")
    big = Parser(context(), text).parse_module()
    (tk,) = TK.emit_module(big)
    assert tk.index_bits == 64 and "tl.program_id(0).to(tl.int64)" in tk.source


# ---- numerics: Triton's interpreter against numpy --------------------------------------

TAME = [0.0, -0.0, 1.0, -1.0, 0.5, np.nan, np.inf, -np.inf]


def _values(dtype: np.dtype, kind: str):
    if kind == "unsigned":
        return st.one_of(st.sampled_from([0.0, -0.0, 0.5, 2.0 ** 31, 2.0 ** 32 - 1, 3e9]),
                         st.floats(0, 2.0 ** 32 - 1))
    if dtype.kind in "iub":
        if kind == "tame" and dtype.kind in "iu":
            return st.integers(-50 if dtype.kind == "i" else 0, 50)
        from lowering.testing import elements
        return elements(dtype)
    if kind == "tame":
        return st.one_of(st.sampled_from(TAME), st.floats(-8, 8, width=dtype.itemsize * 8))
    if kind == "finite":
        return st.one_of(st.sampled_from([0.0, -0.0, 1.0, -1.0, 0.5]),
                         st.floats(-8, 8, width=dtype.itemsize * 8))
    from lowering.testing import elements
    return elements(dtype)


@st.composite
def inputs(draw, spec: str, kind: str, min_row: int = 0):
    """Arrays for `spec`, their dims resized together: each distinct size of
    the spec becomes one drawn size (0, 1 or small), so broadcasts still fit."""
    specs = dump.parse_spec(spec)
    sizes = sorted({d for s in specs for d in s.shape})
    pick = {n: draw(st.sampled_from([0, 1, 2, 5] if n < 1000 else [1, 3])) for n in sizes}
    if min_row:
        last = max(len(s.shape) for s in specs)
        for s in specs:
            if len(s.shape) == last and s.shape:
                pick[s.shape[-1]] = max(pick[s.shape[-1]], min_row)
    if sizes and max(sizes) >= 1000:  # long rows stay long (they loop)
        pick[max(sizes)] = max(sizes)
    kinds = kind.split()
    out = []
    for i, s in enumerate(specs):
        shape = tuple(pick[d] for d in s.shape)
        k = kinds[i] if len(kinds) > 1 else kind
        out.append(draw(hnp.arrays(s.dtype, shape, elements=_values(s.dtype, k))))
    return out


def _check(name: str, got: list[np.ndarray], want: list[np.ndarray], args) -> None:
    for i, (g, w) in enumerate(zip(got, want)):
        assert g.shape == w.shape and g.dtype == w.dtype, (name, i, g.shape, w.shape, g.dtype)
        if w.dtype.kind != "f":
            assert_same_value(g, w, what=f"{name} result {i}")
            continue
        n = max([a.shape[-1] for a in args if a.ndim] + [1])
        tol = TOLERANCES.rtol(w.dtype, "reduction", 16 * n)
        scale = max([float(np.max(np.abs(a[np.isfinite(a)]), initial=0.0)) for a in args
                     if a.dtype.kind == "f"] + [1.0])
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol * scale, equal_nan=True,
                                   err_msg=f"{name} result {i}")


def min_row(name: str) -> int:
    """The shortest row a program's inputs may have (numpy's max, argmax of
    an empty row raise): one for those that reduce rows so."""
    return 1 if name.startswith(("softmax", "reductions", "argm", "residual-rows")) else 0


def _program_test(name: str):
    fn, spec, kind = PROGRAMS[name]

    @given(inputs(spec, kind, min_row(name)))
    def test(args):
        want = eager(fn, args)
        got = run(fn, args)
        _check(name, got, want, args)
    return test


# one test per program, so that a failure names it
for _name in PROGRAMS:
    globals()[f"test_interpreted_{_name.replace('-', '_')}_matches_numpy"] = _program_test(_name)
del _name


@pytest.mark.parametrize("name", DYNAMIC)
def test_kernels_for_many_sizes_run_other_sizes(name):
    fn, spec = DYNAMIC[name]
    module = kernel_level(fn, spec, dynamic=True)
    args, _ = dump.make_inputs(spec, seed=3)
    got = TL.run_module(module, args)
    _check(name, got, eager(fn, args), args)


def test_strided_inputs_read_their_strides():
    """Inputs of the "F" and "strided" layout classes: their strides (in
    elements, negative for a reversed view) are run-time arguments."""
    rng = np.random.default_rng(0)
    base = rng.standard_normal((8, 16)).astype(np.float32)
    y, z = rng.standard_normal(8).astype(np.float32), rng.standard_normal(4).astype(np.float32)
    for layout, x in (("F", np.asfortranarray(base[:4, :8])), ("strided", base[::-2, ::2])):
        module = kernel_level(chain, "f32[4,8] f32[8] f32[4]", layouts=(layout, "C", "C"))
        (tk,) = TK.emit_module(module)
        assert {(a.name, a.kind) for a in tk.args} >= {("b0_s0", "stride"), ("b0_s1", "stride")}
        assert tk.index_bits == 64
        got = TL.run_module(module, [x, y, z])
        _check(f"chain ({layout})", got, eager(chain, [x, y, z]), [x, y, z])


# ---- every ufunc rule, bit for bit, on every pair of edge values ----------------------

def _loops(name: str) -> list[np.dtype]:
    """The dtypes (of ours) whose loop of `name` the loop level generates."""
    u = U.UFUNCS[name]
    uf = getattr(np, name)
    out = []
    # (no float16: the loop level runs float16 ops through numpy, as externs)
    for dt in map(np.dtype, ["float32", "float64", "int8", "int32", "int64", "uint8", "bool"]):
        if u.gen == "float" and dt.kind != "f":
            continue
        if any(t.split("->")[0] == dt.char * uf.nin for t in uf.types):
            out.append(dt)
    return out


UFUNC_CASES = [(n, dt) for n in U.names(lambda u: u.generated) for dt in _loops(n)]


def _edge_pairs(dt: np.dtype, nin: int) -> list[np.ndarray]:
    v = np.array(edge_values(dt) + ([0.1, -7.25, 1e-3, 40.0] if dt.kind == "f" else []), dt)
    if nin == 1:
        return [v]
    a, b = np.meshgrid(v, v)
    return [a.ravel(), b.ravel()]


@functools.lru_cache(maxsize=None)
def _ufunc_fn(name: str, nin: int):
    uf = getattr(np, name)
    return (lambda x: uf(x)) if nin == 1 else (lambda x, y: uf(x, y))


@pytest.mark.parametrize("name,dt", UFUNC_CASES, ids=[f"{n}-{d}" for n, d in UFUNC_CASES])
def test_every_ufunc_rule_matches_numpy_on_edge_values(name, dt):
    u = U.UFUNCS[name]
    args = _edge_pairs(dt, u.nin)
    fn = _ufunc_fn(name, u.nin)
    (want,) = eager(fn, args)
    (got,) = run(fn, args)
    rtol = 0.0 if u.exactness == "exact" else None
    assert_same_value(got, want, rtol=rtol, what=f"np.{name} on {dt}")


@pytest.mark.parametrize("dt", ["float32", "float64", "int8", "int32", "int64", "uint8", "bool"])
def test_every_ufunc_rule_compiles_for_sm90(dt):
    """One kernel computing every ufunc of the dtype, compiled."""
    dt = np.dtype(dt)
    names = [n for n, d in UFUNC_CASES if d == dt]
    assert names

    def every(x, y):
        return tuple(getattr(np, n)(x) if U.UFUNCS[n].nin == 1 else getattr(np, n)(x, y)
                     for n in names)

    every.__name__ = f"every_{dt}"
    kernels = kernels_of(every, f"{dump._CODE_OF[dt]}[16] {dump._CODE_OF[dt]}[16]")
    assert kernels
    for tk in kernels:
        assert TL.compile_for(tk).asm["cubin"]


# ---- what has no rule yet --------------------------------------------------------------

def test_a_matmul_has_no_rule_yet():
    from lowering.examples import mlp

    module = kernel_level(mlp, "f32[8,16] f32[16,32] f32[32] f32[32,4] f32[4]")
    with pytest.raises(NotImplementedError, match="triton: no rule for loop.extern 'matmul'"):
        TK.emit_module(module)
    assert "# loop.extern 'matmul': triton: no rule" in TK.module_text(module)


def _take(x, i):
    return x[i] * 2.0


def _take_rows(x, i):
    return x[i, :] + 1.0


def _take_cols_sum(x, i):
    return x[:, i].sum(axis=-1)


def _take_2d_index(x, i):
    return np.exp(x[i]) - x[i]


GATHERS = {
    "take": (_take, (64,), (16,), np.float32, np.int64),
    "take-rows": (_take_rows, (8, 16), (5,), np.float32, np.int32),
    "take-cols-sum": (_take_cols_sum, (6, 40), (7,), np.float64, np.int64),
    "take-2d-index": (_take_2d_index, (30,), (3, 4), np.float64, np.int64),
}


def _gather_args(name: str, seed: int, out_of_range: bool = False):
    fn, xs, isz, xdt, idt = GATHERS[name]
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(xs).astype(xdt)
    axis = 1 if name == "take-cols-sum" else 0
    n = xs[axis]
    lo = 0 if np.dtype(idt).kind == "u" else -n  # (negatives count from the end)
    i = rng.integers(lo, n, size=isz).astype(idt)
    if out_of_range:
        i.flat[rng.integers(0, i.size)] = n + 3
    return fn, [x, i]


def _gather_level(fn, args):
    """The kernel level of fn for these arguments (kernel_level's inputs are
    random integers: out of range as indices)."""
    report = explain(lowering.compile(fn, backend="numpy"))(*args)
    (graph,) = report.graphs
    final, _ = lower(Parser(context(), graph).parse_module(), "cpu", ["C"] * len(args))
    return final


@pytest.mark.parametrize("name", list(GATHERS))
def test_gathers_match_numpy_in_the_interpreter(name):
    fn, args = _gather_args(name, 0)
    module = _gather_level(fn, args)
    for seed in range(3):
        _, args = _gather_args(name, seed)
        _check(name, TL.run_module(module, args), eager(fn, args), args)


@pytest.mark.parametrize("name", list(GATHERS))
def test_a_gather_out_of_range_raises(name):
    """The kernel reads element 0 instead and flags its check: the run
    raises IndexError, never returns what it read."""
    fn, args = _gather_args(name, 5)
    module = _gather_level(fn, args)
    _, args = _gather_args(name, 5, out_of_range=True)
    with pytest.raises(IndexError):
        fn(*args)
    with pytest.raises(IndexError):
        TL.run_module(module, args)


@pytest.mark.parametrize("name", list(GATHERS))
def test_gathers_compile_for_sm90(name):
    fn, args = _gather_args(name, 0)
    for tk in TK.emit_module(_gather_level(fn, args)):
        assert TL.compile_for(tk).asm["cubin"]


def test_a_scatter_has_no_rule_yet():
    def put(x, i, v):
        x = x.copy()
        x[i] = v
        return x

    module = kernel_level(put, "f32[16] i64[4] f32[4]")
    with pytest.raises(NotImplementedError, match="triton: no rule for .*scatter"):
        TK.emit_module(module)


def test_dump_prints_triton_source():
    import io

    out = io.StringIO()
    assert dump.main(["--example", "softmax", "--args", "f32[4,32]", "--stage", "triton"],
                     out=out) == 0
    text = out.getvalue()
    assert "// -----// triton level //----- //" in text
    assert "@triton.jit\ndef k1(b0, b1, R0_BLOCK: tl.constexpr):" in text
    assert "# launch k1: grid (4,), num_warps 1, R0_BLOCK=32" in text


def test_kernel_sources_live_in_linecache():
    import inspect

    (tk,) = kernels_of(softmax, "f32[8,64]")
    fn = TL.load(tk)
    assert "def k1(" in inspect.getsource(fn.fn)


def test_gpu_only_semantics_are_in_the_source():
    """What Triton's interpreter cannot show (it runs numpy): on a GPU,
    Triton's unary minus is 0 - x (+0.0 for -(+0.0)), its float % is
    a - b*trunc(a/b) (NaN for fmod(x, inf)), libdevice flushes subnormals
    unless told not to, and float64 hypot overflows at DBL_MAX. The
    emitter's source must avoid each (the GPU suite checks the values)."""
    assert TK.OPTIONS["enable_reflect_ftz"] is False and TK.OPTIONS["enable_fp_fusion"] is False

    def ops(x, y):
        return -x, np.fmod(x, y), x % y, x // y, np.hypot(x, y)

    for dt in ("f32", "f64"):
        (tk,) = kernels_of(ops, f"{dt}[16] {dt}[16]")
        body = tk.source.split(f"def {tk.fn_name}(")[1]
        assert "bitcast=True) ^" in body and not re.search(r"\(-v\d+\)", body)
        assert " % " not in tk.source  # float remainders: libdevice.fmod
        assert ("_np_hypot_f64(" in body) == (dt == "f64")


@pytest.mark.parametrize("name", ["colsum-ordered", "cumsum-ordered"])
def test_ordered_kernels_run_in_order(name):
    """An accumulate kernel (a column reduction, a scan down the rows) as a
    Triton kernel: XBLOCK columns per program, the rows looped over in order
    (numpy's order: results bit for bit), at the shapes that lower to one."""
    fn, spec, _ = PROGRAMS[name]
    assert "ordered" in [tk.strategy for tk in kernels_of(fn, spec)]
    (x,) = dump.make_inputs(spec, seed=7)[0]
    x[3, 5], x[10, 7], x[11, 7] = np.nan, np.inf, -np.inf
    got, want = run(fn, [x]), eager(fn, [x])
    for g, w in zip(got, want):
        assert_same_value(g, w, rtol=0.0, what=name)


@pytest.mark.parametrize("rows", [1, 31, 70, 96])
def test_a_column_sum_keeps_its_accumulator_in_registers(rows):
    """A column reduction's output is one address per column, no row moves
    it: loaded once, carried across the rows in a variable (the rows'
    loads issued ORDERED_UNROLL at a time), stored once, with the adds in
    numpy's order: bit for bit numpy's, for row counts below, at and past a
    multiple of the unroll."""
    fn, _, _ = PROGRAMS["colsum-ordered"]
    spec = f"f32[{rows},300]"
    tks = [tk for tk in kernels_of(fn, spec) if tk.strategy == "ordered"]
    if rows >= 64:  # (fewer rows: a rows kernel per column instead)
        (tk,) = tks
        body = tk.source.split(f"def {tk.fn_name}(")[1]
        loop = body[body.index("for q0"):body.rindex("tl.store(")]
        assert "tl.store(" not in loop and "tl.static_range(" in loop
        assert body.count("tl.store(") == 1
    (x,) = dump.make_inputs(spec, seed=rows)[0]
    x[min(3, rows - 1), 5] = np.nan
    got, want = run(fn, [x]), eager(fn, [x])
    for g, w in zip(got, want):
        assert_same_value(g, w, rtol=0.0, what=spec)


def test_ordered_kernels_refuse_what_points_share():
    """A scan along the last axis has no map of independent points (every
    point of a row in order): no ordered kernel, a rule refused by name."""
    def scan_rows(x):
        return np.cumsum(x, axis=1)
    with pytest.raises(NotImplementedError, match="an ordered kernel"):
        kernels_of(scan_rows, "f32[5,7]")
