"""A native thread pool for splitting a kernel's domain across cores.

Handing a chunk to a Python `ThreadPoolExecutor` worker costs 40-75 µs on a
2-vCPU VM (the worker's wake-up, and the GIL hand-offs around two ctypes
calls): a 4.8 MB row sum ran in 84 µs on one thread and 91-147 µs on two.
Here the workers are native threads (pthreads) running a loop compiled into
the process's LLVM engine: after each job a worker spins on the job counter
for SPIN_ITERATIONS pauses (10-25 µs) before it sleeps on a
condition variable, so the kernels of one program, launched back to back,
reach a worker that is awake (a hand-off of well under a microsecond), and a
worker left idle costs no CPU once it sleeps. The caller runs chunk 0 itself
and waits for the others by spinning: `run` is one C call that releases the
GIL (ctypes) and does not take it back until every chunk is done.

The job is published under a sequence lock: the counter is odd while the
caller writes the job's fields, even once they are complete; a worker reads
them between two equal even readings, so one that wakes late never runs a
half-written job. Chunk c of n is the points [work c // n, work (c + 1) // n)
(what `ordered_chunks` kernels rely on), chunk 0 the caller's; the others go
to whoever claims them first (a compare-and-swap on a word holding the job's
counter value and the next chunk), the caller included once its own chunk is
done: a worker asleep, lingering (below) or descheduled never holds a launch
up past the time of running it alone (a 400x400 kernel took 1.8 ms instead
of 30 µs while the worker had yielded its core to another process's
threads). Each chunk's return value (the IEEE flags it raised) is OR-ed into
the result.

One job runs at a time (`launch` holds a lock; a launch from another Python
thread that finds the pool busy runs its kernel on its own thread instead).
A forked child starts without workers (`os.register_at_fork`), and the
workers are stopped and joined at exit, before the engine that holds their
code could be torn down. `LOWERING_NATIVE_POOL=0` keeps the Python pool.
"""

from __future__ import annotations

import atexit
import ctypes
import os
import platform
import threading

import llvmlite.binding as llvm

# pauses a worker spins for a new job before it sleeps (x86's `pause` is
# 10-140 cycles: about 10-25 µs in all, longer than the gap between a
# program's kernels; 4000 ran back-to-back kernels as fast, within noise, and
# held the core away from BLAS's own threads longer after each kernel)
SPIN_ITERATIONS = 500
# a job may ask the workers to stay awake longer after it (`linger` turns,
# each a `sched_yield` and a pause: about 0.5-1 ms for LINGER_TURNS), so that
# the next kernel — of the next call of a program of kernels only — finds them
# awake: waking a sleeping worker cost 60-70 µs on a 2-vCPU VM (a 500x500
# float64 kernel: 168 µs a call back to back, 104 with the worker awake). Not
# where BLAS or numpy runs next: a yielding worker still held a core from
# OpenBLAS's threads (a 600^3 dgemm took 8.0 ms instead of 3.8)
LINGER_TURNS = 2000
# the pool's memory, in 8-byte words: each hot field on a cache line of its own
SEQ, DONE, FN, WORK, BUFS, STATUS, NT, STOP, LINGER, FLAGS = 0, 8, 16, 17, 18, 19, 20, 21, 22, 24
CLAIM = 96  # (after the flags of MAX_THREADS chunks)
MAX_THREADS = 64
MUTEX_AT, COND_AT, SIZE = 1024, 1536, 2048  # byte offsets (generous for any libc)

_IR = r"""
declare i32 @pthread_mutex_lock(i8*)
declare i32 @pthread_mutex_unlock(i8*)
declare i32 @pthread_cond_wait(i8*, i8*)
declare i32 @pthread_cond_broadcast(i8*)
declare i32 @sched_yield()
{pause_decl}

define internal void @spin_pause() {{
  {pause_call}
  ret void
}}

define internal i64* @field(i64* %pool, i64 %i) {{
  %p = getelementptr i64, i64* %pool, i64 %i
  ret i64* %p
}}

define internal i8* @at(i64* %pool, i64 %off) {{
  %b = bitcast i64* %pool to i8*
  %p = getelementptr i8, i8* %b, i64 %off
  ret i8* %p
}}

define internal i32 @run_chunk(i64* %pool, i64 %c, i64 %nt) {{
  %wp = call i64* @field(i64* %pool, i64 {WORK})
  %work = load i64, i64* %wp
  %lo = mul i64 %work, %c
  %begin = udiv i64 %lo, %nt
  %c1 = add i64 %c, 1
  %hi = mul i64 %work, %c1
  %end = udiv i64 %hi, %nt
  %fp = call i64* @field(i64* %pool, i64 {FN})
  %fi = load i64, i64* %fp
  %fn = inttoptr i64 %fi to i32 (i64, i64, i8*, i8*)*
  %bp = call i64* @field(i64* %pool, i64 {BUFS})
  %bi = load i64, i64* %bp
  %bufs = inttoptr i64 %bi to i8*
  %sp = call i64* @field(i64* %pool, i64 {STATUS})
  %si = load i64, i64* %sp
  %status = inttoptr i64 %si to i8*
  %r = call i32 %fn(i64 %begin, i64 %end, i8* %bufs, i8* %status)
  ret i32 %r
}}

; chunks 1..nt-1 of the job tagged %tag, each to whoever claims it first (the
; claim word: the job's tag, then the next chunk in its low byte); each run
; chunk's flags stored and counted done. Returns when none is left, or the
; word holds another job's tag (a worker that read this job late)
define internal void @claim_and_run(i64* %pool, i64 %tag, i64 %nt) {{
entry:
  %cp = call i64* @field(i64* %pool, i64 {CLAIM})
  %donep = call i64* @field(i64* %pool, i64 {DONE})
  br label %claim

claim:
  %w = load atomic i64, i64* %cp seq_cst, align 8
  %t = lshr i64 %w, 8
  %same = icmp eq i64 %t, %tag
  br i1 %same, label %chunk, label %out

chunk:
  %c = and i64 %w, 255
  %left = icmp ult i64 %c, %nt
  br i1 %left, label %try, label %out

try:
  %w1 = add i64 %w, 1
  %x = cmpxchg i64* %cp, i64 %w, i64 %w1 seq_cst seq_cst
  %won = extractvalue {{ i64, i1 }} %x, 1
  br i1 %won, label %run, label %claim

run:
  %r = call i32 @run_chunk(i64* %pool, i64 %c, i64 %nt)
  %fi = add i64 %c, {FLAGS}
  %flp = call i64* @field(i64* %pool, i64 %fi)
  %r64 = zext i32 %r to i64
  store i64 %r64, i64* %flp
  %old = atomicrmw add i64* %donep, i64 1 seq_cst
  br label %claim

out:
  ret void
}}

; a worker: %arg points at a word holding the pool's address (a worker runs
; the chunks it claims: `claim_and_run`)
define i8* @lowering_pool_worker(i8* %arg) {{
entry:
  %a = bitcast i8* %arg to i64*
  %pi = load i64, i64* %a
  %pool = inttoptr i64 %pi to i64*
  %seqp = call i64* @field(i64* %pool, i64 {SEQ})
  %donep = call i64* @field(i64* %pool, i64 {DONE})
  %ntp = call i64* @field(i64* %pool, i64 {NT})
  %stopp = call i64* @field(i64* %pool, i64 {STOP})
  %mutex = call i8* @at(i64* %pool, i64 {MUTEX_AT})
  %cond = call i8* @at(i64* %pool, i64 {COND_AT})
  br label %wait

wait:
  %seen = phi i64 [ 0, %entry ], [ %seen, %torn ], [ %s, %done ]
  br label %spin

spin:
  %n = phi i64 [ 0, %wait ], [ %n1, %pause ], [ 0, %woke ]
  %s = load atomic i64, i64* %seqp seq_cst, align 8
  %new = icmp ne i64 %s, %seen
  %odd = and i64 %s, 1
  %even = icmp eq i64 %odd, 0
  %ready = and i1 %new, %even
  br i1 %ready, label %got, label %more

more:
  %keep = icmp ult i64 %n, {SPIN}
  br i1 %keep, label %pause, label %yielding

yielding:
  %lgp = call i64* @field(i64* %pool, i64 {LINGER})
  %lg = load atomic i64, i64* %lgp monotonic, align 8
  %lim = add i64 %lg, {SPIN}
  %still = icmp ult i64 %n, %lim
  br i1 %still, label %yield, label %sleep

yield:
  %y = call i32 @sched_yield()
  br label %pause

pause:
  call void @spin_pause()
  %n1 = add i64 %n, 1
  br label %spin

sleep:
  %l = call i32 @pthread_mutex_lock(i8* %mutex)
  br label %check

check:
  %s1 = load atomic i64, i64* %seqp seq_cst, align 8
  %same = icmp eq i64 %s1, %seen
  br i1 %same, label %block, label %woke

block:
  %w = call i32 @pthread_cond_wait(i8* %cond, i8* %mutex)
  br label %check

woke:
  %u = call i32 @pthread_mutex_unlock(i8* %mutex)
  br label %spin

got:
  %stop = load atomic i64, i64* %stopp monotonic, align 8
  %nt = load atomic i64, i64* %ntp monotonic, align 8
  fence acquire  ; (the two reads above stay before the counter's second reading)
  %s2 = load atomic i64, i64* %seqp seq_cst, align 8
  %stable = icmp eq i64 %s2, %s
  br i1 %stable, label %read, label %torn

torn:
  br label %wait

read:
  %quit = icmp ne i64 %stop, 0
  br i1 %quit, label %exit, label %job

job:
  call void @claim_and_run(i64* %pool, i64 %s, i64 %nt)
  br label %done

done:
  br label %wait

exit:
  ret i8* null
}}

; the caller: publish the job (fields between an odd and an even counter),
; wake sleepers, run chunk 0, wait for chunks 1..nt-1, OR their flags in
define i32 @lowering_pool_run(i64* %pool, i64 %fn, i64 %work, i64 %bufs, i64 %status,
                              i64 %nt, i64 %stop, i64 %linger) {{
entry:
  %seqp = call i64* @field(i64* %pool, i64 {SEQ})
  %donep = call i64* @field(i64* %pool, i64 {DONE})
  %mutex = call i8* @at(i64* %pool, i64 {MUTEX_AT})
  %cond = call i8* @at(i64* %pool, i64 {COND_AT})
  %o = atomicrmw add i64* %seqp, i64 1 seq_cst
  %fp = call i64* @field(i64* %pool, i64 {FN})
  store i64 %fn, i64* %fp
  %wp = call i64* @field(i64* %pool, i64 {WORK})
  store i64 %work, i64* %wp
  %bp = call i64* @field(i64* %pool, i64 {BUFS})
  store i64 %bufs, i64* %bp
  %sp = call i64* @field(i64* %pool, i64 {STATUS})
  store i64 %status, i64* %sp
  %np = call i64* @field(i64* %pool, i64 {NT})
  store atomic i64 %nt, i64* %np monotonic, align 8
  %stp = call i64* @field(i64* %pool, i64 {STOP})
  store atomic i64 %stop, i64* %stp monotonic, align 8
  %lgp = call i64* @field(i64* %pool, i64 {LINGER})
  store atomic i64 %linger, i64* %lgp monotonic, align 8
  store atomic i64 0, i64* %donep seq_cst, align 8
  %tag = add i64 %o, 2  ; (the counter's value once the job is published)
  %tagged = shl i64 %tag, 8
  %first = or i64 %tagged, 1  ; (chunk 0 is the caller's)
  %cp = call i64* @field(i64* %pool, i64 {CLAIM})
  store atomic i64 %first, i64* %cp seq_cst, align 8
  %l = call i32 @pthread_mutex_lock(i8* %mutex)
  %e = atomicrmw add i64* %seqp, i64 1 seq_cst
  %b = call i32 @pthread_cond_broadcast(i8* %cond)
  %u = call i32 @pthread_mutex_unlock(i8* %mutex)
  %quit = icmp ne i64 %stop, 0
  br i1 %quit, label %stopped, label %mine

stopped:
  ret i32 0

mine:
  %r0 = call i32 @run_chunk(i64* %pool, i64 0, i64 %nt)
  call void @claim_and_run(i64* %pool, i64 %tag, i64 %nt)  ; (the chunks no worker took)
  %others = sub i64 %nt, 1
  br label %waitloop

waitloop:
  %d = load atomic i64, i64* %donep seq_cst, align 8
  %all = icmp uge i64 %d, %others
  br i1 %all, label %collect, label %pausing

pausing:
  call void @spin_pause()
  br label %waitloop

collect:
  %i = phi i64 [ 1, %waitloop ], [ %i1, %orin ]
  %acc = phi i32 [ %r0, %waitloop ], [ %acc1, %orin ]
  %more = icmp ult i64 %i, %nt
  br i1 %more, label %orin, label %out

orin:
  %fi = add i64 %i, {FLAGS}
  %flp = call i64* @field(i64* %pool, i64 %fi)
  %f64 = load i64, i64* %flp
  %f = trunc i64 %f64 to i32
  %acc1 = or i32 %acc, %f
  %i1 = add i64 %i, 1
  br label %collect

out:
  ret i32 %acc
}}
"""

_RUN_TYPE = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64,
                             ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64,
                             ctypes.c_int64)
_LIBC_NAMES = ("pthread_mutex_lock", "pthread_mutex_unlock", "pthread_cond_wait",
               "pthread_cond_broadcast", "pthread_mutex_init", "pthread_cond_init",
               "pthread_create", "pthread_join", "sched_yield")


def _ir() -> str:
    x86 = platform.machine().lower() in ("x86_64", "amd64", "i686", "i386")
    return _IR.format(
        pause_decl="declare void @llvm.x86.sse2.pause()" if x86 else "",
        pause_call="call void @llvm.x86.sse2.pause()" if x86 else "",
        SEQ=SEQ, DONE=DONE, FN=FN, WORK=WORK, BUFS=BUFS, STATUS=STATUS, NT=NT, STOP=STOP,
        FLAGS=FLAGS, MUTEX_AT=MUTEX_AT, COND_AT=COND_AT, SPIN=SPIN_ITERATIONS, LINGER=LINGER,
        CLAIM=CLAIM)


class NativePool:
    """`workers` native threads (chunks 1..workers of a job) and the
    caller's own (chunk 0); `jit(ir, names, what)` compiles the workers'
    loop into the process's engine (`runtime.cpu.jit`)."""

    def __init__(self, workers: int, jit):
        if not 1 <= workers < MAX_THREADS:
            raise ValueError(f"a native pool takes 1 to {MAX_THREADS - 1} workers, got {workers}")
        libc = ctypes.CDLL(None)
        fns = {n: getattr(libc, n) for n in _LIBC_NAMES}
        for n in (*_LIBC_NAMES[:4], "sched_yield"):
            llvm.add_symbol(n, ctypes.cast(fns[n], ctypes.c_void_p).value)
        addrs = jit(_ir(), ["lowering_pool_worker", "lowering_pool_run"], "pool_modules")
        self._run = _RUN_TYPE(addrs["lowering_pool_run"])
        self.workers = workers
        self.mem = (ctypes.c_int64 * (SIZE // 8))()
        base = ctypes.addressof(self.mem)
        if fns["pthread_mutex_init"](ctypes.c_void_p(base + MUTEX_AT), None) or \
                fns["pthread_cond_init"](ctypes.c_void_p(base + COND_AT), None):
            raise OSError("lowering: pthread_mutex_init/pthread_cond_init failed")
        self.args = (ctypes.c_int64 * workers)()  # (each worker's argument: the pool's address)
        self.tids = (ctypes.c_uint64 * workers)()
        self._join = fns["pthread_join"]
        create = fns["pthread_create"]
        entry = ctypes.c_void_p(addrs["lowering_pool_worker"])
        started = 0
        try:
            for i in range(workers):
                self.args[i] = base
                arg = ctypes.c_void_p(ctypes.addressof(self.args) + 8 * i)
                if create(ctypes.byref(self.tids, 8 * i), None, entry, arg):
                    raise OSError("lowering: pthread_create failed")
                started += 1
        except BaseException:
            self.workers = started
            self.stop()
            raise
        self.busy = threading.Lock()
        self.stopped = False

    def run(self, fn: int, work: int, bufs: int, status: int, threads: int,
            linger: int = 0) -> int:
        """Run the kernel at address `fn` over [0, work) in `threads` chunks
        (at most workers + 1); the OR of the chunks' return values. After
        it, the workers stay awake for `linger` more turns (`LINGER_TURNS`),
        each a `sched_yield` and a pause, before they sleep."""
        return self._run(ctypes.addressof(self.mem), fn, work, bufs or 0, status or 0,
                         threads, 0, linger)

    def stop(self) -> None:
        """Stop and join the workers (idempotent)."""
        if getattr(self, "stopped", False) or not self.workers:
            self.stopped = True
            return
        self.stopped = True
        self._run(ctypes.addressof(self.mem), 0, 0, 0, 0, 1, 1, 0)
        for i in range(self.workers):
            self._join(ctypes.c_uint64(self.tids[i]), None)


_pool: NativePool | None = None
_pool_lock = threading.Lock()
_failed = False


def enabled() -> bool:
    return os.environ.get("LOWERING_NATIVE_POOL", "1") != "0"


def available() -> bool:
    """Whether launches here go through a native pool (made or to be made)."""
    if _pool is not None:
        return True
    if _failed or not enabled():
        return False
    global _has_pthreads
    if _has_pthreads is None:
        _has_pthreads = all(hasattr(ctypes.CDLL(None), n) for n in _LIBC_NAMES)
    return _has_pthreads


_has_pthreads: bool | None = None


def get(workers: int, jit) -> NativePool | None:
    """The process's native pool of `workers` workers (made at the first
    split launch), or None where it cannot be made here (no pthreads in the
    C library, LLVM refused the IR, LOWERING_NATIVE_POOL=0): the caller
    keeps the Python pool."""
    global _pool, _failed
    if _pool is not None or _failed or not enabled():
        return _pool
    with _pool_lock:
        if _pool is None and not _failed:
            try:
                _pool = NativePool(workers, jit)
            except (OSError, AttributeError, RuntimeError, ValueError):
                _failed = True
    return _pool


def _shutdown() -> None:
    global _pool
    p, _pool = _pool, None
    if p is not None:
        with p.busy:
            p.stop()


def _forget_in_child() -> None:  # the child of a fork has none of the workers
    global _pool
    _pool = None


atexit.register(_shutdown)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)
