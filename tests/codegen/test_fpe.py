"""IEEE floating-point exceptions of compiled programs (runtime/errors.py):
a program whose kernels or externs raised a flag that the caller's
`np.errstate` does not ignore raises FloatingPointFlags with numpy's
categories instead of returning; nothing for quiet NaN/Inf propagation. Run
at the program level — `CpuProgram`, the generated fast call, the native
entry and the numpy reference program — so that what the api layer does
with the exception is not part of the check."""

import dataclasses
import types

import numpy as np
import pytest

import lowering
from lowering.backends import cpu_cache
from lowering.backends.cpu_backend import KernelStep
from lowering.codegen import numpy_fpe
from lowering.fastpath import MISS
from runtime import cpu, errors
from runtime.errors import FloatingPointFlags

N = 37  # a vector body and a scalar tail at any vector width
MODES = ["ignore", "warn", "raise", "call", "print", "log"]
NAMES = {"divide by zero": "divide", "overflow": "over", "underflow": "under",
         "invalid value": "invalid"}


def numpy_categories(fn, *args) -> set[str]:
    """The categories numpy itself reports for fn(*args)."""
    got: set[str] = set()
    with np.errstate(all="call", call=lambda kind, flag: got.add(NAMES[kind])):
        fn(*args)
    return got


def runners(fn, *good, backend="cpu") -> dict:
    """Every way a compiled call of fn runs its program, compiled on `good`."""
    f = lowering.compile(fn, backend=backend)
    f(*good)
    prog = f.programs_run[-1]
    out = {"program": lambda *a: prog(list(a))}
    fast = f._fast
    if type(fast) is types.BuiltinFunctionType:
        out["native"] = fast
        out["fast"] = fast.__self__.fallback
    elif fast is not None:
        out["fast"] = fast
    return out


def raised(call, *args, **errstate) -> tuple[str, ...] | None:
    """The categories the call raised, None when it returned (a result: a
    guard miss of the fast call would check nothing)."""
    try:
        with np.errstate(**errstate):
            r = call(*args)
    except FloatingPointFlags as e:
        return e.categories
    assert r is not MISS
    return None


def full(v, dtype, at=None):
    """N copies of 2 with v at `at` (everywhere when None)."""
    x = np.full(N, 2.0 if at is not None else v, dtype)
    if at is not None:
        x[at] = v
    return x


# (id, fn, the value that raises, category); the good value is 2.0
CASES = [
    ("log0", np.log, 0.0, "divide"),
    ("log2-0", np.log2, 0.0, "divide"),
    ("log10-0", np.log10, -0.0, "divide"),
    ("log1p-1", np.log1p, -1.0, "divide"),
    ("reciprocal0", lambda x: 1.0 / x, 0.0, "divide"),
    ("log-neg", np.log, -1.0, "invalid"),
    ("sqrt-neg", np.sqrt, -4.0, "invalid"),
    ("zero-by-zero", lambda x: (x - 1.0) / (x - 1.0), 1.0, "invalid"),
    ("inf-minus-inf", lambda x: x - x, np.inf, "invalid"),
    ("exp-over", np.exp, 1000.0, "over"),
    ("square-over", lambda x: x * x, 1e200, "over"),
    ("sinh-over", np.sinh, 1000.0, "over"),
    ("exp-under", np.exp, -1000.0, "under"),
    ("mul-under", lambda x: x * 1e-300, 1e-300, "under"),
    ("float-to-int-nan", lambda x: (x * 0.0).astype(np.int64), np.inf, "invalid"),
]


# flags the vector math raises on its own where numpy does not: correct
# (the caller re-runs eagerly) but slower (none left among these cases)
OVER_REPORTED: dict[str, set[str]] = {}


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("at", [None, 0, N - 1], ids=["all", "vector-lane", "tail"])
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_each_category_on_every_path(case, at, dtype):
    _, fn, bad, category = case
    if dtype == np.float32 and bad in (1e200, 1e-300, 1000.0) and "exp" not in case[0]:
        bad = {1e200: 1e30, 1e-300: 1e-30, 1000.0: 100.0}[bad]
    if case[0] == "mul-under" and dtype == np.float32:
        fn = lambda x: x * np.float32(1e-30)  # noqa: E731
    x = full(bad, dtype, at)
    want = numpy_categories(fn, x)
    assert want == {category}, want
    for path, call in runners(fn, np.full(N, 2.0, dtype)).items():
        for cat in sorted(want):
            for mode in MODES:
                others = {c: "ignore" for c in ("divide", "over", "under", "invalid") if c != cat}
                got = raised(call, x, **others, **{cat: mode})
                assert got == (None if mode == "ignore" else (cat,)), (path, cat, mode, got)
        assert raised(call, x, all="ignore") is None, path
        extra = OVER_REPORTED.get(case[0], set())
        assert set(raised(call, x, all="warn") or ()) - extra == want, path


def test_default_errstate_reports_log0_but_not_underflow():
    for path, call in runners(np.log, np.ones(N)).items():
        assert raised(call, np.zeros(N)) == ("divide",), path
    for path, call in runners(np.exp, np.ones(N)).items():
        assert raised(call, np.full(N, -1000.0)) is None, path  # under='ignore' by default
        assert raised(call, np.full(N, -1000.0), under="warn") == ("under",), path


def test_native_entry_reports_flags():
    paths = runners(lambda x: x * 2 + 1 / x, np.ones(16, np.float32))
    assert "native" in paths
    native = paths["native"]
    assert raised(native, np.zeros(16, np.float32)) == ("divide",)
    with np.errstate(divide="ignore"):
        out = native(np.zeros(16, np.float32))
    assert np.all(np.isinf(out))
    assert raised(native, np.ones(16, np.float32), all="raise") is None


def _int_floordiv(x, y):
    return x // y


def _int_mod(x, y):
    return x % y


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint32, np.int8])
@pytest.mark.parametrize("fn", [_int_floordiv, _int_mod, np.fmod])
def test_integer_division_by_zero(fn, dtype):
    x = np.arange(1, N + 1).astype(dtype)
    y = np.ones(N, dtype)
    y[N - 1] = 0
    assert numpy_categories(fn, x, y) == {"divide"}
    for path, call in runners(fn, x, np.ones(N, dtype)).items():
        assert raised(call, x, y) == ("divide",), path
        assert raised(call, x, y, divide="ignore") is None, path
        assert raised(call, x, np.ones(N, dtype), all="raise") is None, path


def test_int_min_floordiv_minus_one_overflows():
    x = np.full(N, np.iinfo(np.int64).min)
    y = np.full(N, -1)
    assert numpy_categories(_int_floordiv, x, y) == {"over"}
    assert numpy_categories(_int_mod, x, y) == set()
    for path, call in runners(_int_floordiv, x, np.ones(N, np.int64)).items():
        assert raised(call, x, y) == ("over",), path
    for path, call in runners(_int_mod, x, np.ones(N, np.int64)).items():
        assert raised(call, x, y, all="raise") is None, path


QUIET = [
    ("maximum", lambda x: np.maximum(x, 1.0)),
    ("minimum", lambda x: np.minimum(x, 1.0)),
    ("fmax", lambda x: np.fmax(x, 1.0)),
    ("add", lambda x: x + 1.0),
    ("mul", lambda x: x * 2.0),
    ("less", lambda x: x < 1.0),
    ("less_equal", lambda x: x <= 1.0),
    ("greater", lambda x: x > 1.0),
    ("greater_equal", lambda x: x >= 1.0),
    ("equal", lambda x: x == x),
    ("isnan", np.isnan),
    ("isfinite", np.isfinite),
    ("where", lambda x: np.where(x > 0, x, 0.0)),
    ("relu", lambda x: np.maximum(x, 0.0) * 2.0),
    ("sign", np.sign),
    ("max", lambda x: np.max(x)),
    ("min", lambda x: np.min(x)),
    ("sum", lambda x: np.sum(x)),
    ("abs", np.abs),
    ("sqrt", np.sqrt),
    ("clip", lambda x: np.clip(x, -1.0, 1.0)),
]


@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf], ids=["nan", "inf", "-inf"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("case", QUIET, ids=[c[0] for c in QUIET])
def test_quiet_nan_and_inf_propagation_raises_nothing(case, dtype, value):
    _, fn = case
    if fn is np.sqrt and value == -np.inf:
        return  # sqrt(-inf) is invalid (numpy warns too): covered above
    for at in (None, 0, N - 1):
        x = full(value, dtype, at)
        assert numpy_categories(fn, x) == set()
        for path, call in runners(fn, np.ones(N, dtype)).items():
            assert raised(call, x, all="raise") is None, (path, at)


def test_flags_of_every_thread_count():
    n = 2 * cpu.PARALLEL_THRESHOLD
    f = lowering.compile(np.log, backend="cpu")
    f(np.ones(n, np.float32))
    prog = f.programs_run[-1]
    threads = [st.threads for st in prog.steps if isinstance(st, KernelStep)]
    if cpu.THREADS > 1:
        assert max(threads) > 1  # the domain is split: the last chunk is a pool thread's
    x = np.ones(n, np.float32)
    x[-1] = 0.0
    assert raised(lambda a: prog([a]), x) == ("divide",)
    x[-1], x[0] = 1.0, -1.0
    assert raised(lambda a: prog([a]), x) == ("invalid",)
    assert raised(lambda a: prog([a]), np.ones(n, np.float32), all="raise") is None


def test_matmul_extern_reports_numpy_flags():
    a = np.full((4, 4), np.inf)
    b = np.zeros((4, 4))
    assert numpy_categories(np.matmul, a, b) == {"invalid"}
    for path, call in runners(lambda a, b: a @ b, np.ones((4, 4)), np.ones((4, 4))).items():
        assert raised(call, a, b) == ("invalid",), path
        assert raised(call, a, b, invalid="ignore") is None, path
        assert raised(call, np.ones((4, 4)), b, all="raise") is None, path


@pytest.mark.parametrize("case", CASES[:8] + QUIET[:4], ids=[c[0] for c in CASES[:8] + QUIET[:4]])
def test_numpy_reference_program(case):
    fn, bad = case[1], (case[2] if len(case) == 4 else np.nan)
    x = full(bad, np.float64, N - 1)
    want = numpy_categories(fn, x)
    (call,) = runners(fn, np.full(N, 2.0), backend="numpy").values()
    assert set(raised(call, x, all="warn") or ()) == want
    assert raised(call, x, all="ignore") is None
    for cat in want:
        assert raised(call, x, all="ignore", **{cat: "raise"}) == (cat,)


def test_errstate_read_follows_nested_blocks_and_threads():
    import threading

    assert errors.reported_mask() == errors.MXCSR_ZE | errors.MXCSR_OE | errors.MXCSR_IE
    with np.errstate(all="ignore"):
        assert errors.reported_mask() == 0
        with np.errstate(under="raise"):
            assert errors.reported_mask() == errors.MXCSR_UE
        assert errors.reported_mask() == 0
        seen = []
        t = threading.Thread(target=lambda: seen.append(errors.reported_mask()))
        t.start()
        t.join()
        assert seen == [errors.MXCSR_ZE | errors.MXCSR_OE | errors.MXCSR_IE]  # its own state
    with pytest.raises(FloatingPointFlags) as e:
        errors.check(errors.MXCSR_ZE | errors.MXCSR_UE)
    assert e.value.categories == ("divide",)


# ---------------------------------------------------------------- vector math: only numpy's flags
# The vector functions (lowering/codegen/llvm_math.py) compute on harmless
# operands where an input is special and select the special results, and
# `math_flags` works numpy's flags out from the inputs and the result: a
# special value must raise exactly what numpy raises (an intermediate's flag,
# such as log(0) = -inf times 0 inside pow, would make every call an eager
# re-run, and under np.errstate a category numpy never reports).

def _f(dtype, *vs):
    with np.errstate(all="ignore"):
        return np.unique(np.array(vs, dtype))


SPECIAL = [0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 0.5, 0.7, 1 - 2.0**-53, np.nan, np.inf, -np.inf,
           5e-324, -5e-324, 1e-310, 1e-300, 1e-45, 1e-40, 1e-20, 3e38, 1e22, 1e300, -1e300,
           88.5, 90.0, -104.0, 700.0, 710.0, -745.0, 1e6]
UNARY = "exp exp2 expm1 log log2 log10 log1p tanh sinh cosh sin cos tan arctan arcsin arccos cbrt"


def _program(fn, dtype, arity):
    f = lowering.compile(fn, backend="cpu")
    f(*[np.full(N, 0.25, dtype) for _ in range(arity)])  # (distinct: not an aliased pair)
    return f.programs_run[-1]


def _hw_categories(prog, *args) -> set[str]:
    return set(raised(lambda *a: prog(list(a)), *args, all="warn") or ())


def _over_reported(name, dtype, x, y=None) -> bool:
    """Where we still raise underflow and numpy does not (an eager re-run
    under np.errstate(under=...), never a wrong answer): the hot fast paths
    of exp and tanh take powers of a tiny x; glibc's atan2 flags some tiny
    angles and not others."""
    ax = abs(float(x))
    if name == "exp":  # Estrin's powers of r = x
        return 0 < ax < (2.0**-100 if dtype == np.float64 else 2.0**-20)
    if name == "tanh":  # x^3
        return 0 < ax < (2.0**-340 if dtype == np.float64 else 2.0**-40)
    if name == "arctan2":
        with np.errstate(all="ignore"):
            return x != 0 and abs(float(np.arctan2(x, y))) < np.finfo(dtype).tiny
    return False


def _check(name, dtype, got, want, *vals):
    assert want <= got, (name, dtype, vals, "numpy raises", want - got)  # never fewer
    extra = got - want
    assert not extra or (extra == {"under"} and _over_reported(name, dtype, *vals)), (
        name, dtype, vals, "spurious", extra)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", UNARY.split())
def test_vector_math_raises_numpys_flags_at_special_values(name, dtype):
    fn = getattr(np, name)
    prog = _program(fn, dtype, 1)
    for v in _f(dtype, *SPECIAL):
        for at in (None, 0, N - 1):
            x = full(v, dtype, at) if at is not None else np.full(N, v, dtype)
            if at is not None:
                x[np.arange(N) != at] = 0.25
            _check(name, dtype, _hw_categories(prog, x), numpy_categories(fn, x), v)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", ["power", "arctan2"])
def test_binary_vector_math_raises_numpys_flags_at_special_values(name, dtype):
    fn = getattr(np, name)
    prog = _program(fn, dtype, 2)
    vals = _f(dtype, *SPECIAL)
    at = 5
    for v in vals:
        x = np.full(N, 0.25, dtype)
        y = np.full(N, 0.25, dtype)
        x[at] = v
        for w in vals:
            y[at] = w
            want = numpy_categories(fn, x, y)
            _check(name, dtype, _hw_categories(prog, x, y), want, v, w)
            with np.errstate(all="ignore"):
                got, ref = prog([x, y])[0], fn(x, y)
            np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
            ok = ~np.isnan(ref)
            np.testing.assert_allclose(got[ok], ref[ok], rtol=4 * np.finfo(dtype).eps,
                                       atol=0, err_msg=f"{name}({v!r}, {w!r})")
            assert np.array_equal(np.signbit(got[ok]), np.signbit(ref[ok])), (v, w)


def _numpy_raises(category, fn, *args) -> bool:
    return category in numpy_categories(fn, *args)


def test_numpy_fpe_table_is_what_numpy_does_here():
    """The flags `math_flags` takes from `numpy_fpe.table()` (numpy's where
    they depend on its loops: SVML's on AVX-512, glibc's or its own on AVX2)
    are numpy's on this machine: underflow for every tiny input below a
    bound and not at it, none for a subnormal input where there is no
    bound; pow's divide for 0 ** -inf, overflow for x ** inf and underflow
    for an exact tiny power as the table says."""
    t = numpy_fpe.table()
    for name in numpy_fpe.unary():
        fn = getattr(np, name)
        for ty, dtype in (("float", np.float32), ("double", np.float64)):
            sub = np.finfo(dtype).smallest_subnormal
            bound = t.tiny_input_underflows.get((name, ty))
            if bound is None:
                assert not _numpy_raises("under", fn, np.full(N, sub, dtype)), (name, ty)
                continue
            last = np.nextafter(dtype(bound), dtype(0))
            for v in (sub, -sub, last, -last):
                assert _numpy_raises("under", fn, np.full(N, v, dtype)), (name, ty, v)
            assert not _numpy_raises("under", fn, np.full(N, bound, dtype)), (name, ty)
    for ty, dtype in numpy_fpe.TYPES.items():
        minf, inf = np.full(N, -np.inf, dtype), np.full(N, np.inf, dtype)
        for z, raises in zip((0.0, -0.0), t.pow_pole_divides[ty]):
            assert _numpy_raises("divide", np.power, np.full(N, z, dtype), minf) == raises, (ty, z)
        over = t.pow_inf_overflows.get(ty)
        if over is None:
            assert not _numpy_raises("over", np.power, np.full(N, np.finfo(dtype).max, dtype), inf)
        else:
            assert _numpy_raises("over", np.power, np.full(N, -over, dtype), inf), ty
            below = np.nextafter(dtype(over), dtype(0))
            assert not _numpy_raises("over", np.power, np.full(N, below, dtype), inf), ty
        sub = np.full(N, np.finfo(dtype).smallest_subnormal, dtype)
        assert _numpy_raises("under", np.power, sub, np.ones(N, dtype)) == \
            t.pow_exact_tiny_underflows[ty], ty


def test_numpy_fpe_table_is_pinned_by_a_file_and_keys_the_compile_cache(tmp_path, monkeypatch):
    """LOWERING_NUMPY_FPE reads a table `write` made (the process replay pins
    one) instead of probing; the compile cache's key holds the table, so
    that kernels built where numpy flags differently are not reused."""
    here = numpy_fpe.table()
    path = tmp_path / "numpy_fpe.json"
    numpy_fpe.write(path, here)
    assert numpy_fpe.load(path) == here
    key = cpu_cache.entry_key("ir", [], [], [])
    other = dataclasses.replace(here, pow_exact_tiny_underflows={
        ty: not v for ty, v in here.pow_exact_tiny_underflows.items()})
    numpy_fpe.write(path, other)
    monkeypatch.setenv("LOWERING_NUMPY_FPE", str(path))
    monkeypatch.setattr(numpy_fpe, "_table", None)
    monkeypatch.setattr(cpu_cache, "_environment", None)
    assert numpy_fpe.table() == other
    assert cpu_cache.entry_key("ir", [], [], []) != key


# x ** p: a constant p (strength-reduced to multiplies up to 4, numpy's own
# special cases 0.5, 2, -1, the vector pow otherwise), a 0-d traced p (numpy
# decides between sqrt and pow per call: both run), an array p
POWER_X = [0.0, -0.0, -2.0, -0.5, np.nan, np.inf, -np.inf, 5e-324, 1e-310, 1e-300, 1.0, 1e300,
           -1e300, 3.0, 0.9]
POWER_P = [5, 6, 7, 8, 9, 10, 16, 100, 1000, -1, -2, -3, -8, 0, 1, 2, 3, 0.5, 1.5, 2.5, -0.5,
           8.0, 1e10]


def _power_case(x, p, dtype):
    """The compiled call's values and categories against numpy's."""
    fn = eval(f"lambda x: x ** {p!r}")  # a literal of the program, as a user writes it
    prog = _program(fn, dtype, 1)
    want = numpy_categories(fn, x)
    got = _hw_categories(prog, x)
    return fn, prog, want, got


def _same_values(got, want, dtype):
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    np.testing.assert_allclose(got[ok], want[ok], rtol=4 * np.finfo(dtype).eps, atol=0)
    assert np.array_equal(np.signbit(got[ok]), np.signbit(want[ok]))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("p", POWER_P, ids=[repr(p) for p in POWER_P])
def test_power_by_a_constant_raises_numpys_flags(p, dtype):
    for v in _f(dtype, *POWER_X):
        for at in (0, N - 1):
            x = np.full(N, 2.0, dtype)
            x[at] = v
            fn, prog, want, got = _power_case(x, p, dtype)
            assert got == want, (p, v, at, got, want)
            with np.errstate(all="ignore"):
                _same_values(prog([x])[0], fn(x), dtype)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_power_by_a_traced_scalar_raises_numpys_flags(dtype):
    fn = lambda x, p: x ** p  # noqa: E731
    f = lowering.compile(fn, backend="cpu")
    f(np.full(N, 2.0, dtype), 3.0)  # p: a Python float, traced as a 0-d input
    prog = f.programs_run[-1]
    for p in [0.5, 2.0, 3.0, 8.0, -1.0, -8.0, 2.5, 0.0, 1e10, np.inf, -np.inf, np.nan]:
        for v in _f(dtype, *POWER_X):
            x = np.full(N, 2.0, dtype)
            x[3] = v
            want = numpy_categories(fn, x, p)
            got = set(raised(lambda a: prog([a, np.asarray(p)]), x, all="warn") or ())
            assert got == want, (p, v, got, want)
            with np.errstate(all="ignore"):
                _same_values(prog([x, np.asarray(p)])[0], fn(x, p), dtype)


@pytest.mark.parametrize("backend", ["cpu", "numpy"])
def test_power_of_zeros_runs_the_compiled_program(backend):
    """x ** 8 of an array with zeros (a mask, a ReLU's output) stays on the
    compiled path: no eager re-run on any call, under any errstate."""
    def poly(x, p):
        return x ** 8 + x ** 0.5 * 2.0 + x ** p + x ** 9.0

    x = np.linspace(-1.0, 1.0, 101)
    x[::7] = 0.0
    x = np.abs(x)
    f = lowering.compile(poly, backend=backend)
    for _ in range(3):
        for errstate in ({}, {"all": "raise"}, {"all": "warn"}):
            with np.errstate(**errstate):
                got = f(x, 12.0)
                want = poly(x, 12.0)
            np.testing.assert_allclose(got, want, rtol=1e-14)
    assert f.stats["eager_fallbacks"] == 0, f.stats
    assert f.stats["compiles"] == 1


# x == ±inf: a float compare that x86's instruction selection makes a
# signaling `<=` / `>=` in a kernel's scalar code (invalid raised on a NaN,
# where numpy's loop raises nothing). Every position of the NaN, so that
# vector body and scalar tail are both met whatever the vector width.
INF_COMPARES = ["x == -np.inf", "x == np.inf", "x != -np.inf", "x != np.inf",
                "np.where(x == -np.inf, 1.0, x)", "np.where(x == np.inf, x, 2.0)",
                "x ** 1.5", "x ** 2.5", "x ** -0.5"]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("expr", INF_COMPARES)
def test_a_compare_with_infinity_is_quiet_on_a_nan_anywhere(expr, dtype):
    fn = eval("lambda x: " + expr)
    prog = _program(fn, dtype, 1)
    for v in (np.nan, -np.inf, np.inf):
        for at in range(N):
            x = np.full(N, 2.0, dtype)
            x[at] = v
            assert _hw_categories(prog, x) == numpy_categories(fn, x), (expr, v, at)
            with np.errstate(all="ignore"):
                got, want = prog([x])[0], fn(x)
            if want.dtype == bool:
                np.testing.assert_array_equal(got, want)
            else:
                _same_values(got, want, dtype)
