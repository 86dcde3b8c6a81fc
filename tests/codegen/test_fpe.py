"""IEEE floating-point exceptions of compiled programs (runtime/errors.py):
a program whose kernels or externs raised a flag that the caller's
`np.errstate` does not ignore raises FloatingPointFlags with numpy's
categories instead of returning; nothing for quiet NaN/Inf propagation. Run
at the program level — `CpuProgram`, the generated fast call, the native
entry and the numpy reference program — so that what the api layer does
with the exception is not part of the check."""

import types

import numpy as np
import pytest

import lowering
from lowering.backends.cpu_backend import KernelStep
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
# (the caller re-runs eagerly) but slower
OVER_REPORTED = {"log1p-1": {"invalid"}}


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
