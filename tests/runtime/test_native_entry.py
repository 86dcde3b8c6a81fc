"""Native entries (runtime/native.py, lowering/codegen/entry.py): a cached
call as one JIT-compiled builtin. It must give numpy's results, miss (never
be wrong) on any argument the guards did not see, and hold no reference it
does not own."""

import gc
import sys
import tracemalloc
import types

import numpy as np
import pytest

import lowering
from lowering.codegen.entry import Alloc, ArgCheck, EntrySpec, entry_ir
from runtime import native

pytestmark = pytest.mark.skipif(not native.supported()[0], reason=native.supported()[1])

F32 = np.dtype(np.float32)


def axpb(x):
    return x * 2 + 1


def is_native(f) -> bool:
    return type(f._fast) is types.BuiltinFunctionType


def compiled(fn, *args):
    f = lowering.compile(fn, backend="cpu")
    f(*args)
    return f


def x16():
    return np.random.default_rng(0).standard_normal(16, dtype=np.float32)


def same(a, b) -> bool:
    """Equal bitwise, with the same type, dtype and shape."""
    if isinstance(a, tuple):
        return type(b) is tuple and len(a) == len(b) and all(map(same, a, b))
    return (type(a) is type(b) and a.dtype == b.dtype and a.shape == b.shape
            and a.tobytes() == b.tobytes())


def test_w6_is_native_and_bitwise_equal_to_numpy():
    x = x16()
    f = compiled(axpb, x)
    assert is_native(f)
    assert f._fast.__self__.source.startswith("def fast(*L):")
    for _ in range(3):
        assert same(f(x), axpb(x))
    assert f.stats["compiles"] == 1 and f.stats["cache_hits"] == 3


def test_switched_off_by_the_environment(monkeypatch):
    monkeypatch.setenv("LOWERING_NATIVE_ENTRY", "0")
    x = x16()
    f = compiled(axpb, x)
    assert type(f._fast) is types.FunctionType
    assert same(f(x), axpb(x))


class Sub(np.ndarray):
    pass


def _misses():
    x = x16()
    base = np.random.default_rng(1).standard_normal(32, dtype=np.float32)
    ro = x.copy()
    ro.flags.writeable = False
    return {
        "shape": np.ones(17, np.float32),
        "dtype": x.astype(np.float64),
        "non-contiguous view": base[::2],
        "subclass": x.view(Sub),
        "byte-swapped": x.astype(">f4"),
        "read-only": ro,
        "0-d": np.float32(3)[()],
        "python float": 2.5,
    }


def outcome(f, *args):
    try:
        return "ok", f(*args)
    except Exception as e:  # noqa: BLE001 - the kind of failure is what is compared
        return "raises", type(e)


def same_outcome(a, b) -> bool:
    if a[0] != b[0]:
        return False
    if a[0] == "raises":
        return a[1] is b[1]
    x, y = a[1], b[1]
    return same(x, y) if isinstance(x, (np.ndarray, tuple)) else type(x) is type(y) and x == y


@pytest.mark.parametrize("case", list(_misses()))
def test_guard_miss_falls_back_to_the_general_path(case, monkeypatch):
    x = x16()
    f = compiled(axpb, x)
    assert is_native(f)
    y = _misses()[case]
    got = outcome(f, y)
    monkeypatch.setenv("LOWERING_NATIVE_ENTRY", "0")
    plain = compiled(axpb, x)
    assert type(plain._fast) is types.FunctionType
    assert same_outcome(got, outcome(plain, y))  # whatever the general path does
    if got[0] == "ok":
        assert same_outcome(got, ("ok", axpb(y)))
    assert f.stats["cache_hits"] == 0  # no entry took it (a recompile or an eager call)
    assert same(f(x), axpb(x))  # the native entry still serves its own arguments


def test_equal_but_different_descr_misses_natively_and_hits_in_python():
    x = x16()
    f = compiled(axpb, x)
    other = np.dtype("f4").newbyteorder("=")
    assert other == F32 and other is not F32
    y = x.view(other)
    assert same(f(y), axpb(y))
    assert f.stats["compiles"] == 1 and f.stats["cache_hits"] == 1


def test_python_list_takes_the_general_path():
    f = compiled(lambda x: np.asarray(x, np.float32) * 2 + 1, x16())
    lst = [float(v) for v in range(16)]
    assert same(f(lst), np.asarray(lst, np.float32) * 2 + 1)
    assert f.stats["compiles"] == 2


def test_different_argument_count_falls_back():
    def g(x, y=1.0):
        return x * 2 + y

    x = x16()
    f = compiled(g, x)
    assert is_native(f)
    assert same(f(x, 3.0), g(x, 3.0))
    assert same(f(x), g(x))
    assert f.stats["compiles"] == 2


def test_two_arguments_and_multiple_outputs():
    def g(x, y):
        return x + y, x * y

    x, y = x16(), x16()[::-1].copy()
    f = compiled(g, x, y)
    assert is_native(f)
    assert same(f(x, y), g(x, y))
    assert same(f(y, x), g(y, x))
    assert same(f(x, x), g(x, x))  # the same array twice: no alias guard to fail
    one = compiled(lambda x: (x + 1,), x)
    assert is_native(one) and same(one(x), (x + 1,))


@pytest.mark.parametrize("layout", ["F", "strided"])
def test_other_layouts(layout):
    a = np.random.default_rng(2).standard_normal((6, 8), dtype=np.float32)
    x = a.T if layout == "F" else a[:, ::2]
    f = compiled(axpb, x)
    assert is_native(f)
    assert same(f(x), axpb(x))
    c = np.ascontiguousarray(x)
    assert same(f(c), axpb(c))  # C layout: a guard miss
    assert f.stats["compiles"] == 2


def test_output_is_fresh_every_call():
    x = x16()
    f = compiled(axpb, x)
    r1, r2 = f(x), f(x)
    assert r1 is not r2 and not np.shares_memory(r1, r2)
    assert r1.flags.owndata and r1.flags.writeable and r1.flags.c_contiguous
    r1[:] = 0
    assert same(r2, axpb(x))
    assert sys.getrefcount(r2) == 2  # ours alone (+ the argument)


def test_scalar_outputs_are_numpys_scalars_from_the_native_entry():
    """A 0-d result numpy returns as a scalar (`x.sum()`, `x.max()` beside an
    array) comes out of the native entry as that scalar: same type, same
    value, no reference left behind."""
    def f(x):
        return x.sum(), x * 2, x.max()

    x = x16()
    cf = compiled(f, x)
    assert is_native(cf)
    before = sys.getrefcount(x)
    for _ in range(3):
        assert same_scalars(cf(x), f(x))
    assert sys.getrefcount(x) == before
    g = compiled(lambda x: x.sum(), x)
    assert is_native(g) and same_scalars(g(x), x.sum())


def same_scalars(a, b) -> bool:
    if isinstance(a, tuple):
        return type(b) is tuple and len(a) == len(b) and all(map(same_scalars, a, b))
    return type(a) is type(b) and np.array_equal(a, b)


def test_pooled_output_and_a_temporary(monkeypatch):
    from runtime import cpu

    # (kernels on one thread: a split kernel keeps the Python entry)
    monkeypatch.setattr(cpu, "PARALLEL_THRESHOLD", 1 << 24)
    x = np.random.default_rng(3).standard_normal((512, 512), dtype=np.float32)  # 1 MiB: pooled
    g = lambda x: (x + 1).sum(axis=0) * x
    f = compiled(g, x)
    assert is_native(f)
    spec = f._fast.__self__.spec
    assert any(a.call is not None for a in spec.allocs) and len(spec.allocs) > len(spec.sources)
    np.testing.assert_allclose(f(x), g(x), rtol=1e-6)


def _rss() -> int:
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * 4096
    except OSError:
        return 0


@pytest.mark.parametrize("which", ["w6", "tuple", "temporary", "miss", "scalar", "index",
                                   "float"])
def test_no_reference_or_memory_leak(which):
    x, y = x16(), x16()[::-1].copy()
    if which == "w6":
        f, args = compiled(axpb, x), (x,)
    elif which == "scalar":
        f, args = compiled(lambda x, y: (x.sum(), x * y), x, y), (x, y)
    elif which == "float":  # a Python float: a 0-d input the entry makes and drops
        f, args = compiled(lambda x, s: x * s + 1, x, 2.5), (x, 2.5)
    elif which == "index":  # a checked gather whose index is out of range: to the fallback
        f = compiled(lambda x, i: x[i] * 2, x, np.array([1, 2]))
        bad = np.array([1, 99])

        def call(x, i):
            try:
                f(x, i)
            except IndexError:
                pass

        assert is_native(f)
        for _ in range(1000):
            call(x, bad)
        rss, rc = _rss(), sys.getrefcount(x)
        for _ in range(20_000):
            call(x, bad)
        assert sys.getrefcount(x) == rc
        assert _rss() - rss < 8 << 20
        return
    elif which == "tuple":
        f, args = compiled(lambda x, y: (x + y, x * y), x, y), (x, y)
    elif which == "temporary":
        x = np.random.default_rng(4).standard_normal((4, 8), dtype=np.float32)
        f, args = compiled(lambda x: (x + 1).sum(axis=0) * x, x), (x,)
    else:  # a native miss that the Python fast function serves
        f = compiled(axpb, x)
        args = (x.view(np.dtype("f4").newbyteorder("=")),)
    assert is_native(f)
    n = 100_000
    for _ in range(1000):
        f(*args)
    gc.collect()
    counts = [sys.getrefcount(a) for a in args] + [sys.getrefcount(F32)]
    rss = _rss()
    for _ in range(n):
        f(*args)
    assert [sys.getrefcount(a) for a in args] + [sys.getrefcount(F32)] == counts
    assert _rss() - rss < 4 << 20  # a leaked 16-float array a call would be > 10 MiB
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(n // 10):
            f(*args)
        assert tracemalloc.get_traced_memory()[0] - before < 64 << 10
    finally:
        tracemalloc.stop()


def _entry(spec: EntrySpec, fallback, keep):
    text = entry_ir(spec, native.abi())
    owner = native.NativeEntry(spec.name, fallback, keep, text, spec)
    return owner.builtin(native.jit_entry(text, spec.name))


def test_allocation_failure_raises_and_releases_what_was_allocated():
    def no_memory(*_):
        raise MemoryError("test")

    def fallback(*args):
        raise ValueError(f"fallback with {len(args)} args")

    shape = (4,)
    check = ArgCheck(0, id(F32), shape, "C", False)
    allocs = (Alloc(1, shape, id(F32)), Alloc(2, shape, id(F32), (id(no_memory), id(shape))))
    spec = EntrySpec("test_entry_alloc_failure", 1, (check,), (0,), allocs, (),
                     (("slot", 1), ("slot", 2)), True, id(fallback))
    entry = _entry(spec, fallback, [no_memory, shape, fallback])
    x = np.zeros(4, np.float32)
    with pytest.raises(ValueError, match="fallback with 2 args"):
        entry(x, x)  # a miss reaches the fallback, its exception comes back
    with pytest.raises(ValueError, match="fallback with 1 args"):
        entry(np.zeros(5, np.float32))
    before = sys.getrefcount(F32), sys.getrefcount(x)
    tracemalloc.start()
    try:
        for _ in range(2):
            with pytest.raises(MemoryError, match="test"):
                entry(x)
        mem = tracemalloc.get_traced_memory()[0]
        for _ in range(10_000):
            try:
                entry(x)
            except MemoryError:
                pass
        assert tracemalloc.get_traced_memory()[0] - mem < 64 << 10
    finally:
        tracemalloc.stop()
    assert (sys.getrefcount(F32), sys.getrefcount(x)) == before


def test_entry_outlives_nothing_it_points_at():
    x = x16()
    f = compiled(axpb, x)
    entry = f._fast
    del f
    gc.collect()
    assert same(entry(x), axpb(x))  # the builtin keeps its owner and fallback alive
    assert entry.__self__.fallback is not None


def test_zero_d_array_argument():
    def g(x, s):
        return x * s

    x, s = x16(), np.array(3, np.float32)
    f = compiled(g, x, s)
    assert is_native(f)
    assert same(f(x, s), g(x, s))
    t = np.array([3], np.float32)  # rank 1: a miss
    assert same(f(x, t), g(x, t))
    assert f.stats["compiles"] == 2


def test_memory_plan_reuses_intermediate_buffers_within_a_call():
    """Liveness-based memory plan: intermediates live in buffers the program
    keeps, shared by intermediates whose lifetimes do not overlap; a call
    takes only its output from the pool. Two calls on different inputs both
    match numpy (no value leaks from one call to the next)."""
    from lowering.backends.cpu_backend import AllocStep, KernelStep, static_buffers
    from runtime.memory import POOL

    def chain(x):
        a = np.tanh(x) @ x
        b = np.tanh(a) @ x
        return np.tanh(b) @ x

    rng = np.random.default_rng(0)
    x = (rng.standard_normal((512, 512)) / 16).astype(np.float32)  # (1 MiB: pooled)
    f = lowering.compile(chain, backend="cpu")
    np.testing.assert_allclose(f(x), chain(x), rtol=2e-4, atol=1e-3)
    POOL.clear()
    before = dict(POOL.stats)
    y = (rng.standard_normal((512, 512)) / 16).astype(np.float32)
    got = f(y)
    assert POOL.stats["allocs"] - before["allocs"] == 1  # the result only
    np.testing.assert_allclose(got, chain(y), rtol=2e-4, atol=1e-3)

    # the plan itself: slot 1 dies at step 2, so slot 3 (allocated at step 3)
    # takes its buffer; slot 2 overlaps both; slot 4 is the output
    f32 = np.float32
    steps = [AllocStep(1, (64,), f32), AllocStep(2, (64,), f32),
             KernelStep(None, (0, 1, 2), 1, 1, None),
             AllocStep(3, (64,), f32), KernelStep(None, (2, 3), 1, 1, None),
             AllocStep(4, (64,), f32), KernelStep(None, (3, 4), 1, 1, None)]
    planned = static_buffers(steps, (4,))
    v1, v2, v3, v4 = (planned[k].static for k in (0, 1, 3, 5))
    assert v4 is None and v1 is not None and v2 is not None
    assert np.shares_memory(v1, v3) and not np.shares_memory(v1, v2)
    assert not np.shares_memory(v2, v3)
    # each kept buffer starts on a vector's width (no vector store splits a line)
    for sizes in ((3,), (1, 5), (17,)):
        steps = [AllocStep(k + 1, n, np.float64) for k, n in enumerate(sizes)]
        for st in static_buffers(steps + [KernelStep(None, tuple(range(1, 1 + len(sizes))),
                                                     1, 1, None)], ()):
            if isinstance(st, AllocStep):
                assert st.static.ctypes.data % 64 == 0 and st.static.flags.writeable


def test_pool_returns_a_block_only_when_every_view_is_gone():
    """A pooled block goes back when the last array or view over it dies, not
    before: a live view's data is never handed to the next allocation."""
    from runtime.memory import Pool

    pool = Pool()
    a = pool.empty((256, 1024), np.float32)  # (1 MiB: pooled)
    assert type(a) is np.ndarray and a.flags.c_contiguous and a.flags.writeable
    a[...] = 1.0
    tail = a[128:]
    del a
    b = pool.empty((256, 1024), np.float32)  # the first block is still in use
    assert not np.shares_memory(b, tail) and pool.stats["reused"] == 0
    b[...] = 2.0
    assert np.all(tail == 1.0)
    del tail
    c = pool.empty((256, 1024), np.float32)  # now it is free again
    assert pool.stats["reused"] == 1 and not np.shares_memory(c, b)
    del b, c
    assert not pool._live


# ---- numpy externs called back from the entry ---------------------------------

def sort_then_scale(x, y):
    return np.sort(x * 2.0) * 3.0 + y


@pytest.mark.filterwarnings("error")
def test_a_numpy_extern_is_called_back_from_the_native_entry():
    rng = np.random.default_rng(3)
    x, y = rng.standard_normal(300), rng.standard_normal(300)
    f = compiled(sort_then_scale, x, y)
    assert is_native(f)
    for _ in range(3):
        assert same(f(x, y), sort_then_scale(x, y))


@pytest.mark.filterwarnings("error")
def test_an_externs_exception_propagates_and_the_entry_stays_usable():
    def power(a, b):
        return a ** b + 1

    a, b = np.arange(1, 9, dtype=np.int64), np.arange(8, dtype=np.int64)
    f = compiled(power, a, b)
    assert is_native(f)
    with pytest.raises(ValueError, match="negative integer powers"):
        f(a, -a)
    # the program's lock was released on the way out: the next call runs
    assert same(f(a, b), power(a, b))


@pytest.mark.filterwarnings("error")
def test_an_externs_floating_point_flags_follow_errstate_natively():
    def square(x):
        return x * x + 1  # float16: numpy runs it (an extern)

    x = np.full(8, 300.0, np.float16)
    f = compiled(square, np.ones(8, np.float16))
    assert is_native(f)
    with np.errstate(over="raise"):
        with pytest.raises(FloatingPointError):
            f(x)
    with np.errstate(over="ignore"):
        assert np.isinf(f(x)).all()


@pytest.mark.filterwarnings("error")
def test_threads_calling_one_native_entry_with_externs_get_their_own_results():
    import threading

    rng = np.random.default_rng(4)
    xs = [rng.standard_normal(5000) for _ in range(4)]
    y = rng.standard_normal(5000)
    f = compiled(sort_then_scale, xs[0], y)
    assert is_native(f)
    want = [sort_then_scale(x, y) for x in xs]
    bad = []

    def work(i):
        for _ in range(40):
            if not same(f(xs[i], y), want[i]):
                bad.append(i)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not bad


# ---- keyword arguments --------------------------------------------------------

def test_keyword_calls_are_native_and_other_names_miss():
    def f(x, y=None, z=None):
        return x * 2 + y - z

    rng = np.random.default_rng(5)
    x, y, z = (rng.standard_normal(16).astype(np.float32) for _ in range(3))
    cf = lowering.compile(f, backend="cpu")
    cf(x, y=y, z=z)
    assert is_native(cf)
    for _ in range(3):
        assert same(cf(x, y=y, z=z), f(x, y=y, z=z))
    # a name that is equal but not the interned object: the native check
    # misses, the Python fast call reads it by name
    name = "".join(["y"])
    assert same(cf(x, **{name: y}, z=z), f(x, y=y, z=z))
    # other orders, names and counts: the general path, their own results
    assert same(cf(x, z=z, y=y), f(x, z=z, y=y))
    assert same(cf(x, y=z, z=y), f(x, y=z, z=y))
    assert same(cf(x, y, z), f(x, y, z))
    assert same(cf(x, y=y, z=z), f(x, y=y, z=z))


def row_fill(x, d):
    out = np.zeros_like(x)
    for i in range(x.shape[0]):
        out[i] = x[i] / d[i] + i
    return out


def test_a_long_run_of_launches_is_a_loop_over_a_table():
    """Twelve row stores: one loop over a table of launches in the entry
    (its code does not grow with the launches), the same results, and an
    IEEE flag raised by any of them reaches the errstate check."""
    rng = np.random.default_rng(6)
    x = rng.standard_normal((12, 8))
    d = rng.standard_normal((12, 8)) + 3.0
    f = compiled(row_fill, x, d)
    assert is_native(f)
    assert 'table:' in f._fast.__self__.llvm_ir
    for _ in range(2):
        assert same(f(x, d), row_fill(x, d))
    d0 = d.copy()
    d0[9, 3] = 0.0  # a division by zero in the tenth launch
    with np.errstate(divide="raise"):
        with pytest.raises(FloatingPointError):
            f(x, d0)
    with np.errstate(divide="ignore"):
        assert same(f(x, d0), row_fill(x, d0))


class Interrupt(BaseException):
    pass


def test_an_interrupted_lock_acquire_raises_and_holds_nothing(monkeypatch):
    """A signal handler can raise while an entry waits for its program's
    lock: the entry raises it, holds no lock, leaks nothing, and the next
    call runs."""
    import threading

    from lowering.backends import cpu_backend

    real = threading.Lock
    state = {"fail": False, "held": 0}

    class Lock:
        def __init__(self):
            self._lock = real()

        def acquire(self, *a, **k):
            if state["fail"]:
                raise Interrupt()
            state["held"] += 1
            return self._lock.acquire(*a, **k)

        def release(self):
            state["held"] -= 1
            self._lock.release()

        __enter__ = acquire

        def __exit__(self, *exc):
            self.release()

    def sort_then_shift(x, y):  # (a program of its own: not one an earlier test built)
        return np.sort(x * 5.0) - y * 7.0

    monkeypatch.setattr(cpu_backend.threading, "Lock", Lock)
    rng = np.random.default_rng(7)
    x, y = rng.standard_normal(300), rng.standard_normal(300)
    f = compiled(sort_then_shift, x, y)
    assert is_native(f)
    state["fail"] = True
    with pytest.raises(Interrupt):
        f(x, y)
    assert state["held"] == 0
    state["fail"] = False
    assert same(f(x, y), sort_then_shift(x, y)) and state["held"] == 0


def test_a_gather_runs_in_the_native_entry_and_raises_numpys_index_error():
    """A kernel that checks indices (a gather by an index array) runs in the
    native entry; an index out of range sends the call to the Python fast
    call, which runs it again and raises numpy's IndexError — nothing is
    left half done, and the next call is native again."""
    def pick(x, idx):
        return x[:, idx] * 2 + 1

    x = np.random.default_rng(5).standard_normal((32, 16))
    idx = np.array([1, 5, -3])
    f = compiled(pick, x, idx)
    assert is_native(f)
    spec = f._fast.__self__.spec
    assert any(getattr(k, "checked", False) for k in spec.launches)
    assert same(f(x, idx), pick(x, idx))
    for bad in ([1, 16, 3], [-17, 0, 0]):
        with pytest.raises(IndexError) as got:
            f(x, np.array(bad))
        with pytest.raises(IndexError) as want:
            pick(x, np.array(bad))
        assert str(got.value) == str(want.value)
    assert same(f(x, idx), pick(x, idx)) and is_native(f)


def test_specialized_ints_bools_and_none_are_checked_natively():
    """An entry specialized on Python ints, bools and None (`ValueCheck`)
    still gets its native entry: the very object for None, bools and small
    ints, an exact int of that value otherwise; any other value misses to
    the Python path and recompiles, never runs the wrong program."""
    def f(x, n, flag, none, big):
        y = x * n
        if flag:
            y = y + 1
        if none is None:
            y = y * 2
        return y + (big % 1000)

    x = np.arange(4.0)
    cf = compiled(f, x, 3, True, None, 10**12)
    assert is_native(cf)
    calls = [(3, True, None, 10**12), (4, True, None, 10**12), (3, False, None, 10**12),
             (3, True, None, 10**12 + 1), (3, 1, None, 10**12), (3, True, 0, 10**12),
             (3, True, None, 2**70 + 5), (3, 3.0, None, 10**12), (3, True, None, 10**12)]
    for args in calls:
        assert same(cf(x, *args), f(x, *args)), args
    assert cf.stats["compiles"] == 1 + len(calls) - 2  # (the first and the last hit)


def test_python_float_arguments_are_0d_inputs_made_by_the_native_entry():
    """A Python float argument (a 0-d float64 input of the program) keeps the
    native entry: any float value runs the same program, bit for bit as
    numpy (-0.0, NaN, huge); an int there misses to the Python path."""
    def f(x, s, t):
        return x * s + t

    x = np.arange(16.0)
    cf = compiled(f, x, 1.5, 2.0)
    assert is_native(cf)
    with np.errstate(all="ignore"):
        for s, t in [(1.5, 2.0), (-0.0, 3.25), (float("nan"), 1.0), (1e308, 1e308)]:
            got, want = cf(x, s, t), f(x, s, t)
            assert got.dtype == want.dtype and np.array_equal(got, want, equal_nan=True)
            assert np.array_equal(np.signbit(got), np.signbit(want))
    assert cf.stats["compiles"] == 1
    assert same(cf(x, 2, 1.0), f(x, 2, 1.0)) and cf.stats["compiles"] == 2


def test_a_view_of_a_result_is_made_by_the_native_entry():
    """A function returning a view of what it computed (`out.reshape(...)
    .transpose(...)`, a slice) keeps the native entry: the view is made of
    the program's buffer as numpy would have it (same shape, strides and
    values), and the buffer lives as long as the view."""
    def f(x):
        out = (x * 2 + 1).reshape(3, 2, 4)
        return out.transpose(1, 0, 2), (x - 1)[::2, 1:]

    x = np.arange(24.0).reshape(6, 4)
    cf = compiled(f, x)
    assert is_native(cf)
    got, want = cf(x), f(x)
    for g, w in zip(got, want):
        assert same(g, w) and g.strides == w.strides
    a = cf(x)[0]
    import gc
    gc.collect()
    assert same(a, f(x)[0])


def test_specialized_values_are_checked_natively():
    """An entry specialized on a Python float's value or on a small array's
    elements (`ContentsCheck`: Python used them) keeps its native entry: the
    float's bits and the array's bytes are compared there; another value
    misses, recompiles once, and is numpy's."""
    import math

    def knap(weights, values, capacity, lr):
        best = np.zeros(capacity + 1)
        for w, v in zip(weights, values):
            best[w:] = np.maximum(best[w:], best[:-w] + v * math.sqrt(lr))
        return best

    w, v = np.array([3, 5, 2]), np.array([1.0, 2.0, 0.5])
    cf = compiled(knap, w, v, 12, 0.25)
    assert is_native(cf)
    assert same(cf(w, v * 2, 12, 0.25), knap(w, v * 2, 12, 0.25))
    assert cf.stats["compiles"] == 1
    for args in [(np.array([3, 4, 2]), v, 12, 0.25), (w, v, 12, 0.5), (w, v, 12, -0.0)]:
        with np.errstate(invalid="ignore"):
            assert same(cf(*args), knap(*args))
    assert cf.stats["compiles"] == 4
