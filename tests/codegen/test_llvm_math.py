"""lowering.codegen.llvm_math against numpy: every function, both dtypes.

Each function is JIT-compiled (MCJIT, host CPU, -O3) inside a small kernel
`void k(T* in0[, T* in1], T* out, i64 n)` that runs the width-16 function over
whole vectors and the width-1 function over the tail, then compared with numpy
in ULPs (float bit patterns mapped to a monotone integer line; NaN must meet
NaN, and a zero must carry numpy's sign). Three kinds of inputs: dense sweeps
over the whole float range, every special value, and hypothesis examples.
"""

from __future__ import annotations

import ctypes
import functools
import re
import time

import llvmlite.binding as llvm
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from llvmlite import ir

from lowering.codegen.llvm_math import SUPPORTED, ULP_BOUND, math_function
from lowering.testing import examples

WIDTH = 16
DTYPES = {"f32": np.float32, "f64": np.float64}
UNARY = sorted(n for n, k in SUPPORTED.items() if k == 1)
BINARY = sorted(n for n, k in SUPPORTED.items() if k == 2)
NUMPY = {n: getattr(np, n) for n in SUPPORTED}
LIBM = {
    "exp",
    "exp2",
    "expm1",
    "log",
    "log2",
    "log10",
    "log1p",
    "tanh",
    "sinh",
    "cosh",
    "sin",
    "cos",
    "tan",
    "atan",
    "asin",
    "acos",
    "atan2",
    "pow",
    "cbrt",
    "erf",
}


# ---------------------------------------------------------------- JIT harness
def _kernel(module: ir.Module, name: str, dtype: str, width: int) -> None:
    """void k_<name>(T* in..., T* out, i64 n): `width` lanes at a time, then a
    scalar tail through the width-1 function."""
    fv = math_function(module, name, dtype, width)
    f1 = math_function(module, name, dtype, 1)
    t = f1.function_type.return_type
    vt, i64 = ir.VectorType(t, width), ir.IntType(64)
    arity = SUPPORTED[name]
    fnty = ir.FunctionType(ir.VoidType(), [t.as_pointer()] * (arity + 1) + [i64])
    fn = ir.Function(module, fnty, f"k_{name}")
    ins, out, n = fn.args[:arity], fn.args[arity], fn.args[arity + 1]
    blocks = [
        fn.append_basic_block(s) for s in ("entry", "vhead", "vbody", "thead", "tbody", "done")
    ]
    entry, vhead, vbody, thead, tbody, done = blocks
    b = ir.IRBuilder(entry)
    step = ir.Constant(i64, width)
    nvec = b.mul(b.sdiv(n, step), step)
    b.branch(vhead)

    def loop(head, body, pred, exit_, start, stop, inc, emit_body):
        b.position_at_end(head)
        i = b.phi(i64)
        i.add_incoming(start, pred)
        b.cbranch(b.icmp_signed("<", i, stop), body, exit_)
        b.position_at_end(body)
        emit_body(i)
        i.add_incoming(b.add(i, ir.Constant(i64, inc)), b.block)
        b.branch(head)

    def vector(i):
        args = [b.load(b.bitcast(b.gep(p, [i]), vt.as_pointer()), align=4) for p in ins]
        b.store(b.call(fv, args), b.bitcast(b.gep(out, [i]), vt.as_pointer()), align=4)

    def scalar(i):
        b.store(b.call(f1, [b.load(b.gep(p, [i])) for p in ins]), b.gep(out, [i]))

    loop(vhead, vbody, entry, thead, ir.Constant(i64, 0), nvec, width, vector)
    loop(thead, tbody, vhead, done, nvec, n, 1, scalar)
    b.position_at_end(done)
    b.ret_void()


def target_machine():
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    return llvm.Target.from_default_triple().create_target_machine(
        cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten(), opt=3
    )


def optimize(module: ir.Module, tm):
    mod = llvm.parse_assembly(str(module))
    mod.verify()
    pb = llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options(speed_level=3))
    pb.getModulePassManager().run(mod, pb)
    return mod


class Jit:
    """Kernels for `names` at one dtype and width, compiled together."""

    def __init__(self, dtype: str, width: int = WIDTH, names: tuple[str, ...] = tuple(SUPPORTED)):
        module = ir.Module(f"llvm_math_{dtype}x{width}")
        module.triple = llvm.get_process_triple()
        for name in names:
            _kernel(module, name, dtype, width)
        tm = target_machine()
        mod = optimize(module, tm)
        self.optimized_ir = str(mod)
        self.engine = llvm.create_mcjit_compiler(mod, tm)
        self.engine.finalize_object()
        self.np_dtype = DTYPES[dtype]
        self.fns = {}
        for name in names:
            arity = SUPPORTED[name]
            proto = ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * (arity + 1), ctypes.c_int64)
            self.fns[name] = proto(self.engine.get_function_address(f"k_{name}"))

    def __call__(self, name: str, *xs: np.ndarray) -> np.ndarray:
        xs = np.broadcast_arrays(*[np.asarray(x, dtype=self.np_dtype) for x in xs])
        xs = [np.ascontiguousarray(x) for x in xs]
        out = np.empty_like(xs[0])
        self.fns[name](*[x.ctypes.data for x in xs], out.ctypes.data, out.size)
        return out


@functools.cache
def jit(dtype: str, width: int = WIDTH, names: tuple[str, ...] = tuple(SUPPORTED)) -> Jit:
    return Jit(dtype, width, names)


# ---------------------------------------------------------------- ULPs
def ulp_distance(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """|got - want| in ULPs; 0 for NaN vs NaN, huge for NaN vs number or for a
    zero of the wrong sign."""
    ity = np.int32 if got.dtype == np.float32 else np.int64
    big = np.iinfo(ity).max

    def line(a):  # monotone integer line, -0.0 and +0.0 both at 0
        i = a.view(ity).astype(np.int64)
        return np.where(i < 0, -(i & big), i)

    lg, lw = line(got), line(want)
    same_side = (lg >= 0) == (lw >= 0)  # int64 difference cannot overflow
    d = np.where(
        same_side,
        np.abs(np.where(same_side, lg - lw, 0)).astype(np.float64),
        np.abs(lg.astype(np.float64)) + np.abs(lw.astype(np.float64)),
    )
    gn, wn = np.isnan(got), np.isnan(want)
    d[gn & wn] = 0
    d[gn ^ wn] = np.inf
    zero_sign = (want == 0) & (got == 0) & (np.signbit(got) != np.signbit(want))
    d[zero_sign] = np.inf
    return d


def reference(name: str, *xs: np.ndarray, dtype=None) -> np.ndarray:
    """numpy's result, rounded to `dtype` (default: the inputs')."""
    with np.errstate(all="ignore"):
        r = NUMPY[name](*xs)
        return r if dtype is None else r.astype(dtype)


def check(name: str, dtype: str, *xs: np.ndarray, bound: float | None = None) -> float:
    t = DTYPES[dtype]
    xs = tuple(np.asarray(x, dtype=t) for x in xs)
    got = jit(dtype)(name, *xs)
    want = reference(name, *np.broadcast_arrays(*xs), dtype=t)
    d = ulp_distance(got, want)
    worst = int(np.argmax(d))
    limit = ULP_BOUND[(name, dtype)] if bound is None else bound
    if d[worst] > limit:
        args = ", ".join(repr(np.broadcast_arrays(*xs)[k][worst]) for k in range(len(xs)))
        pytest.fail(
            f"{name}[{dtype}]({args}) = {got[worst]!r}, numpy {want[worst]!r}: "
            f"{d[worst]} ULP > {limit} ({int(np.sum(d > limit))} of {d.size} over)"
        )
    return float(d.max())


# ---------------------------------------------------------------- inputs
def special_values(dtype: str) -> np.ndarray:
    t = DTYPES[dtype]
    fi = np.finfo(t)
    base = [
        0.0,
        1.0,
        2.0,
        3.0,
        0.5,
        0.25,
        1.5,
        10.0,
        100.0,
        1e-3,
        1e-10,
        1e10,
        1e30,
        np.pi,
        np.pi / 2,
        np.pi / 4,
        3 * np.pi / 4,
        2 * np.pi,
        1e5 * np.pi,
        0.41421356,
        2.41421356,
        np.inf,
        fi.max,
        fi.tiny,
        fi.smallest_subnormal,
        fi.smallest_subnormal * 3,
        fi.tiny / 2,
        fi.eps,
        fi.epsneg,
        1 - fi.epsneg,
        1 + fi.eps,
        88.72283,
        88.72284,
        88.7229,
        89.41599,
        89.4160,
        103.97,
        103.98,
        104.0,
        87.33654,
        87.3366,
        709.78271289338397,
        709.7828,
        710.4758600739439,
        710.476,
        745.1332191019411,
        745.14,
        744.44,
        708.39,
        127.0,
        128.0,
        149.0,
        150.0,
        151.0,
        1022.0,
        1023.0,
        1024.0,
        1074.0,
        1075.0,
        1076.0,
        9.01,
        9.02,
        19.06,
        20.0,
        0.55,
        0.4,
        2.0**19,
        2.0**19 + 1,
        2.0**20,
        2.0**30,
        2.0**52,
        2.0**60,
        17.0,
        44.0,
    ]
    v = np.array(base, dtype=np.float64)
    with np.errstate(all="ignore"):
        v = np.concatenate([v, np.nextafter(v, np.inf), np.nextafter(v, -np.inf)]).astype(t)
    v = np.concatenate([v, -v, np.array([np.nan, -np.nan], dtype=t)])
    return v


def sweep(dtype: str, n: int, seed: int = 0) -> np.ndarray:
    """n values: log-uniform magnitudes from the smallest subnormal to the
    largest finite, both signs, plus dense [-20, 20] and [-1, 1]."""
    t = DTYPES[dtype]
    fi = np.finfo(t)
    rng = np.random.default_rng(seed)
    k = n // 2
    mag = np.exp(rng.uniform(np.log(float(fi.smallest_subnormal)), np.log(float(fi.max)), k))
    mag *= rng.choice([-1.0, 1.0], k)
    mid = rng.uniform(-20, 20, (n - k) // 2)
    small = rng.uniform(-1, 1, n - k - mid.size)
    with np.errstate(over="ignore"):
        return np.concatenate([mag, mid, small]).astype(t)


# float64 references are close to correctly rounded for float32 results, so
# float32 is also held to this bound against the truth (numpy's own float32
# exp/log/sinh/... are 2-4 ULP off it, which is why ULP_BOUND is looser).
F32_TRUE_BOUND = 1

# a uniform sweep over each function's interesting interval, on top of `sweep`
DOMAINS = {
    "exp": {"f32": (-110, 92), "f64": (-750, 712)},
    "exp2": {"f32": (-155, 130), "f64": (-1080, 1030)},
    "expm1": {"f32": (-20, 92), "f64": (-40, 712)},
    "log": (0, 3),
    "log2": (0, 3),
    "log10": (0, 3),
    "log1p": (-1, 3),
    "tanh": (-12, 12),
    "sinh": {"f32": (-92, 92), "f64": (-712, 712)},
    "cosh": {"f32": (-92, 92), "f64": (-712, 712)},
    "sin": (-1e6, 1e6),
    "cos": (-1e6, 1e6),
    "tan": (-100, 100),
    "arctan": (-5, 5),
    "arcsin": (-1, 1),
    "arccos": (-1, 1),
    "cbrt": (-10, 10),
}


def domain(name: str, dtype: str) -> tuple[float, float]:
    d = DOMAINS[name]
    return d[dtype] if isinstance(d, dict) else d


def _cases(names):
    return [pytest.param(n, d, id=f"{n}-{d}") for n in names for d in DTYPES]


# ---------------------------------------------------------------- dense sweeps
@pytest.mark.parametrize("name,dtype", _cases(UNARY))
def test_sweep(name, dtype):
    rng = np.random.default_rng(1)
    lo, hi = domain(name, dtype)
    xs = np.concatenate([sweep(dtype, 1_000_000), rng.uniform(lo, hi, 200_000)])
    worst = check(name, dtype, xs.astype(DTYPES[dtype]))
    if dtype == "f32":  # against the (nearly) correctly rounded float64 result
        xs = xs.astype(np.float32)
        true = reference(name, xs.astype(np.float64), dtype=np.float32)
        d = ulp_distance(jit(dtype)(name, xs), true)
        assert d.max() <= F32_TRUE_BOUND, (
            f"{name}: {d.max()} ULP from the truth at {xs[np.argmax(d)]!r}"
        )
    print(f"{name}[{dtype}]: max {worst:g} ULP from numpy")


def _binary_inputs(dtype: str, n: int):
    t = DTYPES[dtype]
    rng = np.random.default_rng(2)
    x, y = sweep(dtype, n, seed=3), sweep(dtype, n, seed=4)
    moderate = (np.exp(rng.uniform(-5, 5, n)) * rng.choice([-1, 1], n)).astype(t)
    y_uniform = rng.uniform(-30, 30, n).astype(t)
    y_int = np.round(rng.uniform(-40, 40, n)).astype(t)
    return {
        "sweep x sweep": (x, y),
        "sweep x U(-30,30)": (x, y_uniform),
        "sweep x integers": (x, y_int),
        "e^U(-5,5) x U(-30,30)": (moderate, y_uniform),
        "e^U(-5,5) x integers": (moderate, y_int),
    }


@pytest.mark.parametrize("name,dtype", _cases(BINARY))
def test_sweep_binary(name, dtype):
    for label, (a, b) in _binary_inputs(dtype, 300_000).items():
        worst = check(name, dtype, a, b)
        print(f"{name}[{dtype}] {label}: max {worst:g} ULP from numpy")


# ---------------------------------------------------------------- special values
@pytest.mark.parametrize("name,dtype", _cases(UNARY))
def test_special_values(name, dtype):
    check(name, dtype, special_values(dtype))


@pytest.mark.parametrize("name,dtype", _cases(BINARY))
def test_special_values_binary(name, dtype):
    v = special_values(dtype)
    a, b = np.meshgrid(v, v)
    check(name, dtype, a.ravel(), b.ravel())


INF, NAN = float("inf"), float("nan")
# (function, arguments, exact result): what numpy gives, spelled out
EXACT = [
    ("exp", (-INF,), 0.0),
    ("exp", (INF,), INF),
    ("exp", (NAN,), NAN),
    ("exp", (-0.0,), 1.0),
    ("exp", (1000.0,), INF),
    ("exp", (-1000.0,), 0.0),
    ("exp2", (-INF,), 0.0),
    ("expm1", (-0.0,), -0.0),
    ("expm1", (-INF,), -1.0),
    ("expm1", (INF,), INF),
    ("log", (0.0,), -INF),
    ("log", (-0.0,), -INF),
    ("log", (-1.0,), NAN),
    ("log", (INF,), INF),
    ("log", (1.0,), 0.0),
    ("log2", (8.0,), 3.0),
    ("log10", (1000.0,), 3.0),
    ("log1p", (-1.0,), -INF),
    ("log1p", (-2.0,), NAN),
    ("log1p", (-0.0,), -0.0),
    ("tanh", (INF,), 1.0),
    ("tanh", (-INF,), -1.0),
    ("tanh", (-0.0,), -0.0),
    ("tanh", (NAN,), NAN),
    ("sinh", (-0.0,), -0.0),
    ("sinh", (-INF,), -INF),
    ("cosh", (-INF,), INF),
    ("sin", (-0.0,), -0.0),
    ("sin", (INF,), NAN),
    ("cos", (-INF,), NAN),
    ("cos", (0.0,), 1.0),
    ("tan", (-0.0,), -0.0),
    ("arctan", (-INF,), -np.pi / 2),
    ("arctan", (-0.0,), -0.0),
    ("arcsin", (1.0,), np.pi / 2),
    ("arcsin", (1.5,), NAN),
    ("arcsin", (-0.0,), -0.0),
    ("arccos", (1.0,), 0.0),
    ("arccos", (-1.0,), np.pi),
    ("cbrt", (-8.0,), -2.0),
    ("cbrt", (-0.0,), -0.0),
    ("cbrt", (-INF,), -INF),
    ("arctan2", (0.0, -0.0), np.pi),
    ("arctan2", (-0.0, -0.0), -np.pi),
    ("arctan2", (-0.0, 0.0), -0.0),
    ("arctan2", (INF, -INF), 3 * np.pi / 4),
    ("arctan2", (-1.0, INF), -0.0),
    ("arctan2", (1.0, 0.0), np.pi / 2),
    ("power", (NAN, 0.0), 1.0),
    ("power", (NAN, -0.0), 1.0),
    ("power", (1.0, NAN), 1.0),
    ("power", (-1.0, INF), 1.0),
    ("power", (-1.0, -INF), 1.0),
    ("power", (-2.0, 3.0), -8.0),
    ("power", (-2.0, 0.5), NAN),
    ("power", (-0.0, -1.0), -INF),
    ("power", (0.0, -1.0), INF),
    ("power", (-0.0, 3.0), -0.0),
    ("power", (-0.0, 2.0), 0.0),
    ("power", (-0.0, -2.0), INF),
    ("power", (-INF, 3.0), -INF),
    ("power", (-INF, -3.0), -0.0),
    ("power", (-INF, 0.5), INF),
    ("power", (0.5, INF), 0.0),
    ("power", (0.5, -INF), INF),
    ("power", (2.0, -INF), 0.0),
    ("power", (-0.5, INF), 0.0),
    ("power", (NAN, 1.0), NAN),
    ("power", (4.0, 0.5), 2.0),
    ("power", (2.0, 10.0), 1024.0),
    ("power", (10.0, 2.0), 100.0),
    ("power", (-3.0, 3.0), -27.0),
]


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("name,args,want", EXACT, ids=[f"{n}{a}" for n, a, _ in EXACT])
def test_exact_special_cases(name, args, want, dtype):
    t = DTYPES[dtype]
    got = jit(dtype)(name, *[np.array([a] * 19, dtype=t) for a in args])  # 16 lanes + tail
    want = t(want)
    assert np.all(ulp_distance(got, np.full_like(got, want)) == 0), (
        f"{name}{args} = {got[0]!r}, want {want!r}"
    )


def test_subnormal_results_and_thresholds():
    """Overflow to inf and gradual underflow at exactly numpy's thresholds."""
    for dtype, t in DTYPES.items():
        fi = np.finfo(t)
        x = (
            np.linspace(-760, 720, 100_001).astype(t)
            if dtype == "f64"
            else np.linspace(-110, 92, 100_001).astype(t)
        )
        got = jit(dtype)("exp", x)
        want = reference("exp", x)
        assert np.array_equal(got == np.inf, want == np.inf)
        assert np.array_equal(got == 0, want == 0)
        sub = (want > 0) & (want < fi.tiny)
        assert sub.any() and np.all(ulp_distance(got[sub], want[sub]) <= ULP_BOUND[("exp", dtype)])


# ---------------------------------------------------------------- hypothesis
def _floats(dtype: str):
    return st.floats(width=32 if dtype == "f32" else 64, allow_nan=True, allow_infinity=True)


@pytest.mark.parametrize("name,dtype", _cases(UNARY))
@examples(1.0)
@given(data=st.data())
def test_hypothesis(name, dtype, data):
    xs = data.draw(st.lists(_floats(dtype), min_size=1, max_size=40))
    check(name, dtype, np.array(xs, dtype=DTYPES[dtype]))


@pytest.mark.parametrize("name,dtype", _cases(BINARY))
@examples(2.0)
@given(data=st.data())
def test_hypothesis_binary(name, dtype, data):
    n = data.draw(st.integers(1, 40))
    xs = data.draw(st.lists(_floats(dtype), min_size=n, max_size=n))
    small_ints = st.integers(-20, 20).map(float)
    ys = data.draw(st.lists(st.one_of(_floats(dtype), small_ints), min_size=n, max_size=n))
    check(name, dtype, np.array(xs, dtype=DTYPES[dtype]), np.array(ys, dtype=DTYPES[dtype]))


# ---------------------------------------------------------------- other widths
@pytest.mark.parametrize("width", [2, 4, 8])
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_other_widths(width, dtype):
    names = ("exp", "log1p", "tanh", "sin", "power")
    j = jit(dtype, width, names)
    xs = np.concatenate([sweep(dtype, 20_003, seed=7), special_values(dtype)])
    for name in names:
        args = (xs, xs[::-1]) if SUPPORTED[name] == 2 else (xs,)
        got = j(name, *args)
        want = reference(name, *args, dtype=DTYPES[dtype])
        assert ulp_distance(got, want).max() <= ULP_BOUND[(name, dtype)], name


# ---------------------------------------------------------------- the API and the code
def test_api():
    module = ir.Module()
    f = math_function(module, "exp", "f32", 16)
    assert f is math_function(module, "exp", "f32", 16)
    assert f.name == "lowering.exp.f32x16" and f.linkage == "internal"
    assert "alwaysinline" in f.attributes
    assert str(f.function_type) == "<16 x float> (<16 x float>)"
    assert str(math_function(module, "power", "f64", 1).function_type) == "double (double, double)"
    assert str(math_function(module, "arctan2", "f64", 4).function_type) == (
        "<4 x double> (<4 x double>, <4 x double>)"
    )
    with pytest.raises(KeyError, match="no vector math rule for 'erfcx'"):
        math_function(module, "erfcx", "f32", 4)
    with pytest.raises(ValueError, match="dtype"):
        math_function(module, "exp", "f16", 4)
    assert set(ULP_BOUND) == {(n, d) for n in SUPPORTED for d in DTYPES}
    for name in (
        "exp",
        "log",
        "tanh",
        "power",
        "log1p",
        "expm1",
        "exp2",
        "log2",
        "log10",
        "sin",
        "cos",
    ):
        assert name in SUPPORTED


def _called(text: str) -> set[str]:
    return set(re.findall(r'call[^@\n]*@"?([\w.$]+)', text))


def test_no_libm_calls():
    """Width-16 float32 code really is vector code: the optimized IR calls
    nothing outside LLVM's intrinsics and our own out-of-line Payne-Hanek
    reduction, and the hot functions' assembly calls nothing at all."""
    for dtype in DTYPES:
        called = _called(jit(dtype).optimized_ir)
        assert not {c for c in called if not c.startswith(("llvm.", "lowering.payne_hanek"))}, (
            called
        )
        assert not called & LIBM
    module = ir.Module("hot")
    module.triple = llvm.get_process_triple()
    for name in ("exp", "log", "tanh"):
        f = math_function(module, name, "f32", 16)
        f.linkage = "external"
    tm = target_machine()
    asm = tm.emit_assembly(optimize(module, tm))
    assert not re.findall(r"\bcall", asm), [l for l in asm.splitlines() if "call" in l]
    assert re.search(r"\bv(fmadd|fmsub|fnmadd)\d+ps\s+%[yz]mm", asm), "expected packed FMA"


def test_throughput():
    """Printed, not asserted: time per call on 1M float32 elements."""
    rng = np.random.default_rng(0)
    x = rng.uniform(-10, 10, 1_000_000).astype(np.float32)
    out = np.empty_like(x)
    j = jit("f32")
    for name in ("exp", "tanh", "log"):
        arg = np.abs(x) if name == "log" else x
        ours = functools.partial(j.fns[name], arg.ctypes.data, out.ctypes.data, arg.size)
        theirs = functools.partial(NUMPY[name], arg, out=out)
        t_ours, t_np = (min(_timed(f) for _ in range(15)) for f in (ours, theirs))
        print(
            f"{name} f32 x 1M: ours {t_ours * 1e3:.2f} ms, numpy {t_np * 1e3:.2f} ms "
            f"({t_np / t_ours:.1f}x)"
        )


def _timed(f) -> float:
    t0 = time.perf_counter()
    f()
    return time.perf_counter() - t0


# ---------------------------------------------------------------- fast paths
# functions with a whole-vector fast path (`fast_or_general`), and a value
# that sends a vector down the general path
GENERAL_LANE = {"exp": 1000.0, "log": -1.0, "log2": 0.0, "log10": float("nan")}


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("name", sorted(GENERAL_LANE))
def test_result_does_not_depend_on_neighbours(name, dtype):
    """A lane's result is the same whether its vector took the fast path or,
    because another lane needed it, the general one (bitwise)."""
    t = DTYPES[dtype]
    rng = np.random.default_rng(5)
    lo, hi = (0.5, 30.0) if name.startswith("log") else (-20.0, 20.0)
    xs = rng.uniform(lo, hi, WIDTH * 64).astype(t)
    alone = jit(dtype)(name, xs)
    mixed = xs.copy()
    mixed[::WIDTH] = GENERAL_LANE[name]  # one such lane in every vector
    got = jit(dtype)(name, mixed)
    keep = np.ones(xs.size, bool)
    keep[::WIDTH] = False
    np.testing.assert_array_equal(got[keep], alone[keep])
    np.testing.assert_array_equal(got[~keep], reference(name, mixed[~keep]))
