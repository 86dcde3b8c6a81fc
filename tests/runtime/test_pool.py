"""The native thread pool (runtime/pool.py): a kernel split into chunks runs
every chunk exactly once, on the chunk bounds `launch` promises, with each
chunk's flags OR-ed in; jobs published back to back never run half-written;
several Python threads launching at once, a forked child and interpreter exit
all work; and compiled programs whose kernels split give numpy's answers
through it."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

from runtime import cpu
from runtime import pool as native_pool

# a kernel with the launch signature: out[i] += i + 1 for i in [begin, end),
# and flag bit (1 << chunk start's parity) | 8 where the chunk holds index `mark`
KERNEL = r"""
define i32 @pool_test_kernel(i64 %begin, i64 %end, i8** %bufs, i64* %status) {
entry:
  %b0 = load i8*, i8** %bufs
  %out = bitcast i8* %b0 to i64*
  %mp = getelementptr i64, i64* %status, i64 0
  %mark = load i64, i64* %mp
  br label %loop
loop:
  %i = phi i64 [ %begin, %entry ], [ %i1, %body ]
  %go = icmp ult i64 %i, %end
  br i1 %go, label %body, label %done
body:
  %p = getelementptr i64, i64* %out, i64 %i
  %v = load i64, i64* %p
  %w = add i64 %i, 1
  %v1 = add i64 %v, %w
  store i64 %v1, i64* %p
  %i1 = add i64 %i, 1
  br label %loop
done:
  %lo = icmp ule i64 %begin, %mark
  %hi = icmp ult i64 %mark, %end
  %has = and i1 %lo, %hi
  %f = select i1 %has, i32 8, i32 0
  %par = and i64 %begin, 1
  %bit = shl i64 1, %par
  %b32 = trunc i64 %bit to i32
  %r = or i32 %f, %b32
  ret i32 %r
}
"""


@pytest.fixture(scope="module")
def kernel() -> int:
    return cpu.jit(KERNEL, ["pool_test_kernel"])["pool_test_kernel"]


@pytest.fixture(scope="module")
def pool():
    p = native_pool.NativePool(3, cpu.jit)  # (more workers than this machine's cores is fine)
    yield p
    p.stop()


def _run(pool, kernel, work: int, threads: int, mark: int) -> tuple[np.ndarray, int]:
    out = np.zeros(max(work, 1), np.int64)
    bufs = (ctypes.c_void_p * 1)(out.ctypes.data)
    status = (ctypes.c_int64 * 1)(mark)
    flags = pool.run(kernel, work, ctypes.addressof(bufs), ctypes.addressof(status), threads)
    return out, flags


def _expected_flags(work: int, threads: int, mark: int) -> int:
    flags = 0
    for c in range(threads):
        b, e = work * c // threads, work * (c + 1) // threads
        flags |= (8 if b <= mark < e else 0) | (1 << (b & 1))
    return flags


@pytest.mark.parametrize("threads", [2, 3, 4])
@pytest.mark.parametrize("work", [4, 7, 1000, 100_003])
def test_every_point_runs_once_and_every_chunks_flags_are_ored(pool, kernel, work, threads):
    for mark in (0, work - 1, work // 2):
        out, flags = _run(pool, kernel, work, threads, mark)
        np.testing.assert_array_equal(out[:work], np.arange(1, work + 1))
        assert flags == _expected_flags(work, threads, mark), (work, threads, mark, flags)


def test_jobs_back_to_back_each_see_their_own_fields(pool, kernel):
    """Thousands of jobs of changing size and split in a row: a worker that
    reads a job while the next is being written would run a wrong range or
    miss one (a point added twice or not at all)."""
    rng = np.random.default_rng(0)
    for _ in range(3000):
        work, threads = int(rng.integers(1, 300)), int(rng.integers(2, 5))
        threads = min(threads, work)
        mark = int(rng.integers(0, work))
        out, flags = _run(pool, kernel, work, threads, mark)
        assert (out[:work] == np.arange(1, work + 1)).all()
        assert flags == _expected_flags(work, threads, mark)


def test_a_worker_asleep_is_woken(pool, kernel):
    """Past its spin a worker sleeps on the condition variable; the next job
    still reaches it."""
    import time

    time.sleep(0.05)  # (far longer than the spin)
    out, flags = _run(pool, kernel, 10_000, 4, 9_999)
    np.testing.assert_array_equal(out, np.arange(1, 10_001))
    assert flags & 8


def test_chunks_go_to_whoever_claims_them_first(kernel):
    """A job of more chunks than threads (one worker): the caller claims
    the chunks no worker took, so every point still runs once — as it does
    when a worker is asleep or off its core when the job comes."""
    p = native_pool.NativePool(1, cpu.jit)
    try:
        for work, threads in ((10, 5), (100_003, 8), (7, 7)):
            for mark in (0, work - 1):
                out, flags = _run(p, kernel, work, threads, mark)
                np.testing.assert_array_equal(out[:work], np.arange(1, work + 1))
                assert flags == _expected_flags(work, threads, mark), (work, threads, mark)
    finally:
        p.stop()


def test_a_lingering_worker_still_takes_every_job_and_then_sleeps(pool, kernel):
    """Jobs that ask the workers to linger (yielding turns after the job)
    run as any other, back to back and after a pause past the lingering;
    the job's linger is what the workers read."""
    import time

    for linger in (native_pool.LINGER_TURNS, 0, 5, native_pool.LINGER_TURNS):
        out = np.zeros(5000, np.int64)
        bufs = (ctypes.c_void_p * 1)(out.ctypes.data)
        status = (ctypes.c_int64 * 1)(4999)
        flags = pool.run(kernel, 5000, ctypes.addressof(bufs), ctypes.addressof(status), 4,
                         linger)
        np.testing.assert_array_equal(out, np.arange(1, 5001))
        assert flags & 8
        assert pool.mem[native_pool.LINGER] == linger
    time.sleep(0.05)
    out, flags = _run(pool, kernel, 10_000, 4, 0)
    np.testing.assert_array_equal(out, np.arange(1, 10_001))


def test_only_a_program_of_kernels_only_keeps_the_workers_awake():
    """Lingering workers held a core from OpenBLAS's threads (a dgemm ran 2x
    slower): a program that calls BLAS or numpy asks for none."""
    import lowering
    from lowering.backends import cpu_backend

    def linger(fn, *args):
        progs = []
        orig = cpu_backend.CpuProgram.__init__

        def spy(self, *a, **k):
            orig(self, *a, **k)
            progs.append(self)
        cpu_backend.CpuProgram.__init__ = spy
        try:
            lowering.compile(fn)(*args)
        finally:
            cpu_backend.CpuProgram.__init__ = orig
        return {p.linger for p in progs}

    x = np.random.default_rng(0).standard_normal((300, 300))
    assert linger(lambda a: np.exp(a) * 2.0 + a, x) == {native_pool.LINGER_TURNS}
    assert linger(lambda a: (a @ a) * 2.0, x) == {0}
    assert linger(lambda a: np.sort(a * 2.0, axis=1), x) == {0}


SCRIPT = textwrap.dedent("""
    import os, sys, threading
    import numpy as np
    import lowering
    from runtime import cpu, pool

    def f(x):
        return np.exp(x) * 0.5 + x.sum(axis=1, keepdims=True)

    from lowering.testing import TOLERANCES

    rng = np.random.default_rng(0)
    x = rng.standard_normal((2048, 1024))
    cf = lowering.compile(f)
    want = f(x)
    got = cf(x)
    assert pool._pool is not None and pool._pool.workers == cpu.THREADS - 1, "no native pool"
    # numpy's answer within the bound of a 1024-term sum (relative to its terms)
    bound = TOLERANCES.rtol(np.float64, "reduction", 1024) * (
        np.abs(np.exp(x) * 0.5) + np.abs(x).sum(axis=1, keepdims=True))
    assert (np.abs(got - want) <= bound).all(), "split kernels"
    # and bit for bit the Python pool's (the same chunks, in the same order)
    native, pool._pool = pool._pool, None
    pool._failed = True
    py = cf(x)
    pool._pool, pool._failed = native, False
    assert np.array_equal(py, got), "the native pool's chunks differ from the Python pool's"

    # an overflow only in the last chunk's rows raises, as numpy does
    y = x.copy()
    y[-1, -1] = 1000.0
    with np.errstate(over="raise"):
        try:
            cf(y)
        except FloatingPointError:
            pass
        else:
            raise AssertionError("the last chunk's overflow was lost")

    # several Python threads at once: each gets numpy's answer
    res = [None] * 6
    def run(i):
        xi = x * (i + 1)
        first = cf(xi)
        res[i] = all(np.array_equal(cf(xi), first) for _ in range(5)) and \
            np.allclose(first, f(xi), rtol=1e-9, atol=1e-9)
    ts = [threading.Thread(target=run, args=(i,)) for i in range(6)]
    for t in ts: t.start()
    for t in ts: t.join()
    assert all(res), res

    # a forked child makes its own workers
    pid = os.fork()
    if pid == 0:
        ok = np.array_equal(cf(x), got) and pool._pool is not None
        os._exit(0 if ok else 3)
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0, status
    print("ok")
""")


def test_compiled_programs_split_through_the_pool_and_the_process_exits():
    env = {**os.environ, "LOWERING_THREADS": "3", "LOWERING_CACHE": "0"}
    r = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stdout + r.stderr


def test_launches_from_many_threads_share_the_pool_or_run_alone(pool, kernel):
    """The process's pool runs one job at a time; a launch that finds it busy
    runs its kernel on its own thread: every launch's answer is whole."""
    errors = []

    def work(seed):
        rng = np.random.default_rng(seed)
        for _ in range(300):
            n = int(rng.integers(2, 5000))
            out = np.zeros(n, np.int64)
            bufs = (ctypes.c_void_p * 1)(out.ctypes.data)
            status = (ctypes.c_int64 * 1)(n - 1)
            fn = ctypes.cast(kernel, cpu.KERNEL_TYPE)
            flags = cpu.launch(fn, n, bufs, ctypes.addressof(status), 2)
            if not (out == np.arange(1, n + 1)).all() or not flags & 8:
                errors.append((seed, n, flags))

    ts = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors[:3]
