"""Compiling for many sizes: `dynamic=True`, automatic dynamic, `mark_dynamic`,
relational guards, and the check that keeps a program to its traced sizes
where it cannot serve others."""

import logging

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lowering
from lowering.testing import TIER1_UFUNCS, TOLERANCES, assert_matches_numpy

SIZES = [2, 3, 5, 7, 8, 13, 16, 31, 64, 127]


def _rng(seed=0):
    return np.random.default_rng(seed)


def _bias_gelu(x, b):
    # (a GELU-like chain without 1 + tanh's cancellation, which turns a few
    # ulps of tanh into any relative error)
    y = x + b
    return 0.5 * y * np.exp(np.tanh(0.7978845608 * (y + 0.044715 * y ** 3)))


def _gelu_rtol(dtype):
    # eight pointwise ops in a chain: their errors add as a sum's do
    return TOLERANCES.rtol(dtype, "reduction", 8)


def test_dynamic_true_compiles_once_for_many_sizes():
    f = lowering.compile(_bias_gelu, dynamic=True)
    rng = _rng()
    for m, n in [(64, 256), (10, 33), (7, 1000), (128, 5), (2, 2), (31, 17)]:
        x = rng.standard_normal((m, n)).astype(np.float32)
        b = rng.standard_normal(n).astype(np.float32)
        assert_matches_numpy(_bias_gelu, x, b, compiled=f, rtol=_gelu_rtol(np.float32))
    assert f.stats["compiles"] == 1
    assert f.stats["recompiles"] == 0
    guards = f.entries[0].guards.describe()
    assert "x: ndarray float32[s0, s1] C-contiguous writeable" in guards
    assert any(g.startswith("s1 == s2") for g in guards), guards


def test_sizes_zero_and_one_are_specialized():
    f = lowering.compile(_bias_gelu, dynamic=True)
    rng = _rng(1)
    assert_matches_numpy(_bias_gelu, rng.standard_normal((4, 6)), rng.standard_normal(6),
                         compiled=f, rtol=_gelu_rtol(np.float64))
    # a size of 1 (broadcasting depends on it) and 0 get entries of their own
    assert_matches_numpy(_bias_gelu, rng.standard_normal((1, 6)), rng.standard_normal(6),
                         compiled=f, rtol=_gelu_rtol(np.float64))
    assert_matches_numpy(_bias_gelu, rng.standard_normal((0, 6)), rng.standard_normal(6),
                         compiled=f, rtol=_gelu_rtol(np.float64))
    assert_matches_numpy(_bias_gelu, rng.standard_normal((4, 1)), rng.standard_normal(1),
                         compiled=f, rtol=_gelu_rtol(np.float64))
    assert f.stats["compiles"] == 4
    assert "x: ndarray float64[1, s0] C-contiguous writeable" in f.entries[1].guards.describe()
    # and later sizes of 2 or more reuse the first
    assert_matches_numpy(_bias_gelu, rng.standard_normal((9, 3)), rng.standard_normal(3),
                         compiled=f, rtol=_gelu_rtol(np.float64))
    assert f.stats["compiles"] == 4


def test_a_broken_relation_recompiles_and_says_which(caplog):
    def add(x, y):
        return np.sin(x) * 2 + y

    f = lowering.compile(add, dynamic=True)
    assert_matches_numpy(add, np.ones((4, 5)), np.ones((4, 5)), compiled=f)
    assert_matches_numpy(add, np.ones((6, 3)), np.ones((6, 3)), compiled=f)
    assert f.stats["compiles"] == 1
    with caplog.at_level(logging.INFO, logger="lowering.recompiles"):
        assert_matches_numpy(add, np.ones((6, 3)), np.ones((1, 3)), compiled=f)
    assert f.stats["recompiles"] == 1
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert "'y' size 1 at index 0" in text
    with caplog.at_level(logging.INFO, logger="lowering.recompiles"):
        caplog.clear()
        g = lowering.compile(add, dynamic=True)
        g(np.ones((4, 5)), np.ones((4, 5)))
        with pytest.raises(ValueError, match="broadcast"):  # numpy's error, as numpy raises it
            g(np.ones((4, 5)), np.ones((2, 5)))
    assert "size relation s0 == s2 does not hold (s0 = 4, s2 = 2)" in "\n".join(
        r.getMessage() for r in caplog.records)


def test_broadcast_mismatch_raises_numpys_error():
    def add(x, y):
        return x + y

    f = lowering.compile(add, dynamic=True)
    f(np.ones((4, 5)), np.ones((4, 5)))
    with pytest.raises(ValueError, match="broadcast"):
        f(np.ones((4, 5)), np.ones((3, 5)))


def test_automatic_dynamic_static_first_then_one_dynamic_recompile():
    def f2(x, y):
        return np.exp(x) * (y * 3)

    f = lowering.compile(f2)
    rng = _rng(2)
    for n in [10, 20, 30, 41, 7, 64]:
        assert_matches_numpy(f2, rng.standard_normal((n, 3)), rng.standard_normal((n, 3)),
                             compiled=f)
    assert f.stats["compiles"] == 2 and f.stats["recompiles"] == 1
    first, second = (e.guards.describe() for e in f.entries)
    assert first[0] == "x: ndarray float64[10, 3] C-contiguous writeable"
    # only the dim that changed is symbolic
    assert second[0] == "x: ndarray float64[s0, 3] C-contiguous writeable"


def test_dynamic_false_never_makes_symbols():
    f = lowering.compile(np.sin, dynamic=False)
    for n in (3, 4, 5):
        f(np.ones(n))
    assert f.stats["compiles"] == 3


def test_mark_dynamic_and_mark_static():
    def f2(x):
        return x * 2 + 1

    f = lowering.compile(f2)
    x = np.ones((5, 6))
    lowering.mark_dynamic(x, 0)
    f(x)
    assert f.entries[0].guards.describe()[0] == "x: ndarray float64[s0, 6] C-contiguous writeable"
    g = lowering.compile(f2, dynamic=True)
    y = np.ones((5, 6))
    lowering.mark_static(y, -1)
    g(y)
    assert g.entries[0].guards.describe()[0] == "x: ndarray float64[s0, 6] C-contiguous writeable"
    with pytest.raises(ValueError, match="dim 2 is out of range"):
        lowering.mark_dynamic(x, 2)
    with pytest.raises(TypeError, match="x must be a numpy array"):
        lowering.mark_dynamic([1, 2], 0)


def test_dynamic_argument_is_checked():
    with pytest.raises(ValueError, match="dynamic must be True, False or None"):
        lowering.compile(np.sin, dynamic="yes")


def test_a_loop_over_a_size_is_compiled_for_its_sizes_only():
    # `range(n)` takes an int: the program is for that many iterations (the
    # guards say so), the other dim stays symbolic
    def rows(x):
        out = np.empty_like(x)
        for i in range(x.shape[0]):
            out[i] = x[i] * (i + 1)
        return out

    f = lowering.compile(rows, dynamic=True)
    assert_matches_numpy(rows, np.ones((3, 4)), compiled=f)
    guards = f.entries[0].guards.describe()
    assert guards[0] == "x: ndarray float64[s0, s1] C-contiguous writeable"
    assert any(g.startswith("s0 == 3") for g in guards), guards
    assert_matches_numpy(rows, np.ones((3, 9)), compiled=f)
    assert f.stats["compiles"] == 1
    assert_matches_numpy(rows, np.ones((5, 4)), compiled=f)  # another entry, right answer
    assert f.stats["compiles"] == 2


@pytest.mark.parametrize("case", ["len", "range", "float", "hash", "set", "ne", "log2", "str"])
def test_python_on_a_size_specializes_or_records(case):
    """What Python does with a size in the user's code either keeps it
    symbolic with the relation it relied on, or specializes the program to
    it: never the traced size's answer at another size."""
    import math

    fns = {
        "len": lambda x: x * 2 if len(x) > 100 else x * 3,
        "range": lambda x: sum(x[i] for i in range(x.shape[0] // 2)),
        "float": lambda x: x * 2 if x.shape[0] > 100.0 else x * 3,
        "hash": lambda x: x * {2: 1.0, 3: 10.0, 4: 100.0}.get(x.shape[0], -1.0),
        "set": lambda x: x * 2 if x.shape[0] in {2, 4, 8} else x * 3,
        "ne": lambda x: x * 2 if x.shape[0] == x.shape[1] else x * 3,
        "log2": lambda x: x[: int(math.log2(x.shape[0]))] * 1,
        "str": lambda x: x * float(len(str(x.shape[0]))),
    }
    fn = fns[case]
    for dynamic in (True, None):
        f = lowering.compile(fn, dynamic=dynamic)
        for n in (200, 300, 4, 3, 8, 9, 16, 50, 101):
            assert_matches_numpy(fn, np.arange(float(n * n)).reshape(n, n) % 7, compiled=f)


def test_a_slice_by_a_size_is_symbolic():
    f = lowering.compile(lambda x: x[: x.shape[0] // 2] + x[::2][: x.shape[0] // 2], dynamic=True)
    for n in (8, 100, 7, 2, 3, 64):
        assert_matches_numpy(lambda x: x[: x.shape[0] // 2] + x[::2][: x.shape[0] // 2],
                             np.arange(float(n)), compiled=f)


def test_a_size_in_a_set_or_slice_comes_back_an_int():
    f = lowering.compile(lambda x: ({x.shape[0]}, slice(0, x.shape[0]), x + 1), dynamic=True)
    s, sl, _ = f(np.ones(5))
    assert s == {5} and type(next(iter(s))) is int
    assert sl == slice(0, 5) and type(sl.stop) is int
    s, sl, _ = f(np.ones(6))
    assert s == {6} and sl == slice(0, 6)


def test_a_size_as_a_scalar_operand_stays_symbolic():
    def norm(x):
        return x / x.shape[0] + np.zeros((x.shape[0], 1)) + np.where(x > 2, x.shape[1], x)

    f = lowering.compile(norm, dynamic=True)
    for n in (4, 5, 6, 7):
        assert_matches_numpy(norm, np.arange(n * 3.0).reshape(n, 3), compiled=f)
    assert f.stats["compiles"] == 1 and f.stats["eager_fallbacks"] == 0


def test_a_size_returned_as_a_value_is_not_generalized():
    def with_size(x):
        return x + 1, x.shape[0] * 2

    f = lowering.compile(with_size, dynamic=True)
    assert_matches_numpy(with_size, np.ones((3, 4)), compiled=f)
    assert_matches_numpy(with_size, np.ones((5, 4)), compiled=f)


def test_an_array_passed_twice_shares_its_symbols():
    def add(x, y):
        return x * y

    f = lowering.compile(add, dynamic=True)
    x = np.arange(6.0).reshape(2, 3)
    assert_matches_numpy(add, x, x, compiled=f)
    y = np.arange(20.0).reshape(4, 5)
    r = f(y, y)
    np.testing.assert_array_equal(r, y * y)
    assert f.stats["compiles"] == 1


_UNARY = sorted(n for n in TIER1_UFUNCS if getattr(np, n).nin == 1 and getattr(np, n).nout == 1)


@pytest.mark.parametrize("name", _UNARY)
def test_tier1_unary_ufuncs_one_compile_for_many_sizes(name):
    ufunc = getattr(np, name)
    types = {t.split("->")[0] for t in ufunc.types}
    dtype = np.float64 if "d" in types else np.int64 if "l" in types else np.bool_

    def fn(x):
        return ufunc(x)

    f = lowering.compile(fn, dynamic=True)
    rng = _rng(3)
    for shape in [(5, 7), (2, 3), (16, 31), (64, 2)]:
        x = (rng.standard_normal(shape) * 3).astype(dtype)
        assert_matches_numpy(fn, x, compiled=f)
    assert f.stats["compiles"] == 1, f"{name}: {f.stats}"


@settings(max_examples=25, deadline=None)
@given(st.lists(st.sampled_from(SIZES), min_size=2, max_size=2), st.sampled_from(SIZES),
       st.sampled_from(["add", "multiply", "maximum", "subtract", "arctan2", "hypot"]))
def test_binary_broadcast_at_any_sizes(shape, k, name):
    ufunc = getattr(np, name)

    def fn(x, y):
        return ufunc(x, y) * 2

    f = _BINARY.setdefault(name, lowering.compile(fn, dynamic=True))
    rng = _rng(k)
    x = rng.standard_normal(tuple(shape))
    y = rng.standard_normal(shape[-1])
    assert_matches_numpy(fn, x, y, compiled=f)
    assert f.stats["compiles"] == 1


_BINARY: dict = {}


_REDUCERS: dict = {}


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(["sum", "mean", "max", "min", "argmax", "argmin", "var", "std", "prod"]),
       st.sampled_from([0, -1, None]), st.booleans(),
       st.lists(st.sampled_from([0, 1] + SIZES), min_size=2, max_size=2),
       st.sampled_from([np.float32, np.float64, np.int64]))
def test_reductions_at_any_sizes(name, axis, keepdims, shape, dtype):
    """One compiled function per reduction and axis, called at sizes drawn
    from 0, 1, primes and powers of two: numpy's result every time, and for
    sizes of 2 or more one entry serves them all (per dtype)."""
    if name in ("argmax", "argmin") and keepdims:
        keepdims = False
    if name in ("argmax", "argmin", "max", "min") and 0 in shape:
        return  # (numpy raises on an empty reduction: covered elsewhere)

    def fn(x):
        r = getattr(np, name)(x, axis=axis, **({"keepdims": True} if keepdims else {}))
        return r * 2 if name not in ("argmax", "argmin") else r

    key = (name, axis, keepdims)
    f, classes = _REDUCERS.setdefault(key, (lowering.compile(fn, dynamic=True), set()))
    # sizes of 2 or more are one class: a symbol; 0 and 1 are specialized
    classes.add((np.dtype(dtype), tuple(n if n < 2 else "s" for n in shape)))
    x = (_rng(sum(shape)).standard_normal(tuple(shape)) * 3).astype(dtype)
    n = x.size if axis is None else x.shape[axis]
    kind = "reduction" if name in ("sum", "mean", "prod") else "gradient"
    with np.errstate(all="ignore"):
        assert_matches_numpy(fn, x, compiled=f,
                             rtol=TOLERANCES.rtol(np.result_type(dtype, np.float32), kind,
                                                  4 * max(n, 1)))
    # one entry per class of sizes seen, never one per size
    assert f.stats["compiles"] <= len(classes), (f.stats, classes)


def test_dump_dynamic_shows_symbols_relations_and_the_kernels_parameters():
    import io

    from lowering.dump import main

    out = io.StringIO()
    assert main(["--example", "layernorm", "--args", "f32[6,40] f32[40] f32[40]", "--dynamic",
                 "--stage", "kernel"], out) == 0
    text = out.getvalue()
    assert "x: ndarray float32[s0, s1] C-contiguous writeable" in text
    assert "s1 == s2  (s1 = x.shape[1], s2 = w.shape[0])" in text
    assert "sizes: symbolic" in text
    assert "kernel level (for many sizes)" in text and "kernel.param" in text
    assert "sizes(" in text  # the row's extent is the call's


def test_explain_says_whether_the_entry_serves_other_sizes():
    e = lowering.explain(_bias_gelu, dynamic=True)(np.ones((4, 6)), np.ones(6))
    assert "Sizes: symbolic" in str(e)

    def rows(x):
        return np.stack([x[i] * i for i in range(x.shape[0])])

    e = lowering.explain(rows, dynamic=True)(np.ones((3, 6)))
    assert e.sizes == "" and any(g.startswith("s0 == 3") for g in e.guards)


def test_many_sizes_from_many_threads():
    import threading

    f = lowering.compile(_bias_gelu, dynamic=True)
    f(np.ones((3, 4)), np.ones(4))
    errors: list = []

    def work(seed):
        rng = _rng(seed)
        try:
            for _ in range(20):
                m, n = (int(v) for v in rng.integers(2, 40, 2))
                x, b = rng.standard_normal((m, n)), rng.standard_normal(n)
                np.testing.assert_allclose(f(x, b), _bias_gelu(x, b), rtol=1e-12)
        except Exception as e:  # (reported below)
            errors.append(e)

    threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert f.stats["compiles"] == 1


def test_numpy_scalar_times_a_size_keeps_numpys_dtype():
    def sc(x):
        n = x.shape[0]
        return x * (np.float32(2) * n), x - np.float32(1) * x.shape[0]

    f = lowering.compile(sc, dynamic=True)
    for n in (5, 8, 3):
        assert_matches_numpy(sc, np.ones(n, np.float32), compiled=f)


def test_a_size_too_big_for_a_narrow_int_raises_as_numpy():
    def i8(x):
        return x * x.shape[1]

    f = lowering.compile(i8, dynamic=True)
    for n in (5, 7, 1000):
        assert_matches_numpy(i8, np.ones((3, n), np.int8), compiled=f)


def test_many_size_sets_from_many_threads():
    """More size sets than a program keeps, from several threads."""
    import threading

    def g(x, y):
        return (x @ y).sum(1)

    f = lowering.compile(g, dynamic=True)
    rng0 = _rng(9)
    sizes = [tuple(int(v) for v in rng0.integers(2, 40, 2)) for _ in range(60)]
    errors: list = []

    def work(i):
        rng = _rng(i)
        for _ in range(60):
            n, m = sizes[int(rng.integers(0, len(sizes)))]
            x, y = rng.standard_normal((n, m)), rng.standard_normal((m, n))
            if not np.allclose(f(x, y), g(x, y), rtol=1e-9):
                errors.append((n, m))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def test_always_answers_for_every_size_and_records_nothing():
    """`symbols.always`: a pass's question about sizes that must not become
    a guard (sizes 0 and 1 are specialized, so every symbol is at least 2)."""
    from dialects.symbols import ShapeEnv, always

    with ShapeEnv() as env:
        s0, s1 = env.symbol(5), env.symbol(2)
        assert always(">", s0, 0) and always(">", s0 * s1, 3) and always(">", s0 - 1, 0)
        assert not always(">", s0 - 2, 0)  # (0 at s0 == 2)
        assert not always("==", s0, 5)  # (its value here, not at every size)
        assert not always(">", s1 - s0, 0)
        assert always("==", (s0 + 1) - 1, s0) and always(">", 3, 2) and not always("<", 3, 2)
    assert env.relations == {}
