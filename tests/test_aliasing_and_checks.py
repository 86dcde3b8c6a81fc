"""Two ways a cached program answered other than numpy, each closed at its
mechanism:

- arguments that alias or overlap where the program writes: an entry traced
  with distinct arrays served `f(c, c)` (the overlap guard skipped pairs that
  were one object, though only an entry traced with aliases guards them as
  such) and answered as if they were distinct. The guard is now a check like
  any other (`OverlapCheck`): every rendering of an entry's guard carries it.
- an op that can raise whose result is unused: `y = x[i]` with i out of
  range raises in numpy; dead-code elimination dropped the gather. Ops that
  can raise now have that effect (`dialects.array.MayRaise`), which every
  xDSL DCE respects; an unused gather is a kernel that only checks.

CPU backend throughout, and `backend="gpu"` on numpy arrays (the same
entries), as tests/test_gpu_review.py first showed them."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, TensorType, f64, i64
from xdsl.ir import Block, Region
from xdsl.transforms.common_subexpression_elimination import CommonSubexpressionElimination
from xdsl.transforms.dead_code_elimination import DeadCodeElimination

import lowering
from dialects import array as A
from dialects.context import context
from passes.canonicalize import ArrayCanonicalize
from runtime.guards import OverlapCheck, render_checks


def _write_then_read(a, b):
    a[...] = b * 2
    return b + 1


def _backends():
    try:
        import triton  # noqa: F401
    except ImportError:
        return ["cpu"]
    return ["cpu", "gpu"]


BACKENDS = _backends()


@pytest.fixture(autouse=True)
def interpreted(monkeypatch):
    """backend="gpu" without a GPU: its kernels in Triton's interpreter."""
    monkeypatch.setenv("LOWERING_GPU", "interpret")


def _numpy(fn, make):
    """fn on fresh arrays made by `make` (a function of the arrays' base):
    what numpy returns and leaves in the base."""
    base = np.arange(6.0)
    out = fn(*make(base))
    return out, base


def _same(fn, f, make, calls=1):
    for _ in range(calls):
        want, want_base = _numpy(fn, make)
        base = np.arange(6.0)
        got = f(*make(base))
        np.testing.assert_array_equal(base, want_base)
        np.testing.assert_array_equal(got, want)


# ---- arguments that alias or overlap, where the program writes -------------------

@pytest.mark.parametrize("backend", BACKENDS)
def test_one_array_passed_twice_after_distinct_calls(backend):
    f = lowering.compile(_write_then_read, backend=backend)
    f(np.arange(4.0), np.ones(4))
    c, want_c = np.arange(4.0), np.arange(4.0)
    want = _write_then_read(want_c, want_c)
    got = f(c, c)
    np.testing.assert_array_equal(c, want_c)
    np.testing.assert_array_equal(got, want)  # numpy: [1, 3, 5, 7]
    assert f._failed is None and f.stats["recompiles"] == 1


def test_aliases_after_many_distinct_calls_then_both_kinds_keep_their_entries():
    """Distinct calls, then aliased ones, then both again: each served by the
    entry traced with its kind (one recompile, then hits), never the other's."""
    f = lowering.compile(_write_then_read)
    for _ in range(5):
        _same(_write_then_read, f, lambda c: (c.copy(), c[::-1].copy()))
    _same(_write_then_read, f, lambda c: (c, c), calls=4)
    _same(_write_then_read, f, lambda c: (c.copy(), c[::-1].copy()), calls=3)
    _same(_write_then_read, f, lambda c: (c, c), calls=3)
    assert f.stats["recompiles"] == 1 and len(f.entries) == 2


def test_the_recompile_reason_names_the_aliased_pair():
    f = lowering.compile(_write_then_read)
    f(np.arange(4.0), np.ones(4))
    c = np.arange(4.0)
    guards = f.entries[0].guards
    treedef = lowering.pytree.flatten(((c, c), {}))[1]
    assert not guards(treedef, [c, c], [])
    assert guards.why(treedef, [c, c], []) == (
        "'a' and 'b' are the same array now (traced as two) and the function writes 'a'")
    d = np.arange(8.0)
    assert guards.why(treedef, [d[4:], d[3:7]], []) == (
        "'a' and 'b' overlap in memory and the function writes 'a'")


@pytest.mark.parametrize("backend", BACKENDS)
def test_overlapping_slices_run_as_numpy_without_recompiling(backend):
    """f(c[1:], c[:-1]): no trace can serve it (the program reads b as it was
    before the write), so it runs eagerly, every time, with no new entry, no
    recompile and no recompile-limit warning."""
    f = lowering.compile(_write_then_read, backend=backend)
    for _ in range(3):
        _same(_write_then_read, f, lambda c: (c[:5].copy(), c[1:].copy()))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _same(_write_then_read, f, lambda c: (c[1:], c[:-1]), calls=12)
        _same(_write_then_read, f, lambda c: (c[:-1], c[1:]), calls=3)
    assert f.stats["recompiles"] == 0 and len(f.entries) == 1
    assert f.stats["eager_fallbacks"] == 15


def test_overlapping_slices_on_the_first_call_then_distinct_ones():
    f = lowering.compile(_write_then_read)
    _same(_write_then_read, f, lambda c: (c[1:], c[:-1]), calls=3)
    _same(_write_then_read, f, lambda c: (c[:5].copy(), c[1:].copy()), calls=3)
    assert f.stats["cache_hits"] >= 2


@pytest.mark.parametrize("spelling", ["keyword", "keywords", "nested", "list"])
def test_aliases_in_other_spellings(spelling):
    def pair(p):
        a, b = p
        a[...] = b * 2
        return b + 1

    fn, call = {
        "keyword": (_write_then_read, lambda f, a, b: f(a, b=b)),
        "keywords": (_write_then_read, lambda f, a, b: f(b=b, a=a)),
        "nested": (pair, lambda f, a, b: f((a, b))),
        "list": (pair, lambda f, a, b: f([a, b])),
    }[spelling]
    f = lowering.compile(fn)
    for _ in range(3):
        call(f, np.arange(4.0), np.ones(4))
    c, want_c = np.arange(4.0), np.arange(4.0)
    want = call(fn, want_c, want_c)
    got = call(f, c, c)
    np.testing.assert_array_equal(c, want_c)
    np.testing.assert_array_equal(got, want)
    d, want_d = np.arange(6.0), np.arange(6.0)
    want = call(fn, want_d[1:], want_d[:-1])
    got = call(f, d[1:], d[:-1])
    np.testing.assert_array_equal(d, want_d)
    np.testing.assert_array_equal(got, want)


W = np.zeros(4)


def _write_state(x):
    W[...] = x * 2
    return x + 1


def test_a_written_global_passed_as_the_argument():
    """The array written through a global is the argument now (traced
    distinct): the same array for numpy."""
    global W
    f = lowering.compile(_write_state)
    for _ in range(2):
        f(np.arange(4.0))
    W[...] = np.arange(4.0)
    want = np.arange(4.0) * 2 + 1
    got = f(W)
    np.testing.assert_array_equal(W, np.arange(4.0) * 2)
    np.testing.assert_array_equal(got, want)


def test_reads_only_two_aliases_overlap_freely():
    """A function that writes nothing has no overlap check: aliased or
    overlapping arguments hit the entry traced with distinct ones (its fast
    call, natively where it applies), without recompiling."""
    def axpy(a, b):
        return a * 2 + b

    f = lowering.compile(axpy)
    for _ in range(3):
        f(np.arange(4.0), np.ones(4))
    assert not f.entries[0].guards.no_overlap
    c = np.arange(4.0)
    for _ in range(5):
        np.testing.assert_array_equal(f(c, c), axpy(c, c))
    d = np.arange(5.0)
    for _ in range(3):
        np.testing.assert_array_equal(f(d[1:], d[:-1]), axpy(d[1:], d[:-1]))
    assert f.stats["recompiles"] == 0 and len(f.entries) == 1


def test_reads_only_traced_with_aliases_then_distinct_then_alternating():
    def axpy(a, b):
        return a * 2 + b

    f = lowering.compile(axpy)
    c = np.arange(4.0)
    f(c, c)
    f(np.arange(4.0), np.ones(4))
    for _ in range(4):
        np.testing.assert_array_equal(f(c, c), axpy(c, c))
        np.testing.assert_array_equal(f(c, np.ones(4)), axpy(c, np.ones(4)))
    assert f.stats["recompiles"] == 1


def test_only_written_arrays_need_to_be_apart():
    """Read-only arguments may alias each other in a function that writes
    another: the entry serves them."""
    def write_sum(out, x, y):
        out[...] = x + y
        return out.sum()

    f = lowering.compile(write_sum)
    for _ in range(2):
        f(np.zeros(4), np.arange(4.0), np.ones(4))
    x = np.arange(4.0)
    for _ in range(3):
        out, want_out = np.zeros(4), np.zeros(4)
        want = write_sum(want_out, x, x)
        assert f(out, x, x) == want
        np.testing.assert_array_equal(out, want_out)
    assert f.stats["recompiles"] == 0 and len(f.entries) == 1


def test_every_rendering_of_a_writing_entry_s_guard_has_the_overlap_check():
    f = lowering.compile(_write_then_read)
    f(np.arange(4.0), np.ones(4))
    guards = f.entries[0].guards
    (over,) = [c for c in guards.checks if isinstance(c, OverlapCheck)]
    assert over.n_written == 1 and [n for _, _, n in over.arrays] == ["a", "b"]
    (cond,) = render_checks([over], {})
    assert "_overlap((L[0], L[1], ), 1)" in cond
    assert cond in guards.source  # the guard function
    ns: dict = {}
    assert cond in render_checks(guards.checks, ns) and "_overlap" in ns  # the fast call's
    assert any("share no memory" in d for d in guards.describe())


def test_a_path_through_a_graph_break_that_writes_overlapping_views():
    """The entry's path wrote nothing (no overlap check); another path
    writes, with views that overlap: numpy's answer, eagerly, without an
    entry (and a recompile) per call."""
    def maybe_write(a, b, flag):
        if flag.sum() > 0:  # a graph break: Python decides
            a[...] = b * 2
        return b + 1

    f = lowering.compile(maybe_write)
    off, on = np.zeros(1), np.ones(1)
    for _ in range(2):
        f(np.arange(4.0), np.ones(4), off)
    for _ in range(3):
        d, want_d = np.arange(6.0), np.arange(6.0)
        want = maybe_write(want_d[1:], want_d[:-1], on)
        got = f(d[1:], d[:-1], on)
        np.testing.assert_array_equal(d, want_d)
        np.testing.assert_array_equal(got, want)
    assert f.stats["recompiles"] <= 1 and len(f.entries) <= 2


def test_a_function_traced_on_every_call_that_writes_overlapping_views():
    """A graph break that is not replayed (a generator method runs eagerly):
    every call is traced again, its write-backs applied by the trace's own
    plan, which no guard saw write (the entry's path wrote nothing)."""
    def shuffled_write(a, b, flag, rng):
        t = flag.copy()
        rng.shuffle(t)
        if t.sum() > 0:
            a[...] = b * 2
        return b + 1

    f = lowering.compile(shuffled_write)
    off, on = np.zeros(3), np.ones(3)
    for _ in range(2):
        f(np.arange(5.0), np.ones(5), off, np.random.default_rng(0))
    assert not f.entries[0].trace.replayable
    for _ in range(3):
        d, want_d = np.arange(6.0), np.arange(6.0)
        want = shuffled_write(want_d[1:], want_d[:-1], on, np.random.default_rng(0))
        got = f(d[1:], d[:-1], on, np.random.default_rng(0))
        np.testing.assert_array_equal(d, want_d)
        np.testing.assert_array_equal(got, want)


# ---- ops that can raise, their results unused ---------------------------------

@pytest.mark.parametrize("backend", BACKENDS)
def test_a_gather_whose_result_is_unused_still_raises(backend):
    def unused(x, i):
        y = x[i]  # noqa: F841
        return x * 2

    x, i = np.arange(10.0), np.array([1, 2, 30])
    with pytest.raises(IndexError):
        unused(x, i)
    f = lowering.compile(unused, backend=backend)
    with pytest.raises(IndexError):
        f(x, i)
    assert f._failed is None and f.entries
    for _ in range(3):  # the cached call (its fast call, its native entry)
        np.testing.assert_array_equal(f(x, np.array([1, 2, 3])), x * 2)
        with pytest.raises(IndexError):
            f(x, np.array([1, -11, 3]))


@pytest.mark.parametrize("how", ["take", "columns", "negative", "scatter", "add.at"])
def test_other_unused_index_checks_raise(how):
    def fn(x, i):
        if how == "take":
            np.take(x, i, axis=0)
        elif how == "columns":
            x[:, i]  # noqa: B018
        elif how == "negative":
            x[-i]  # noqa: B018
        elif how == "scatter":
            y = x.copy()
            y[i] = 0.0
        else:
            y = x.copy()
            np.add.at(y, i, 1.0)
        return x * 2

    x = np.arange(12.0).reshape(4, 3)
    good, bad = np.array([0, 2]), np.array([0, 5])
    with pytest.raises(IndexError):
        fn(x, bad)
    f = lowering.compile(fn)
    for _ in range(3):
        np.testing.assert_array_equal(f(x, good), fn(x, good))
        with pytest.raises(IndexError):
            f(x, bad)


def test_an_unused_inverse_of_a_singular_matrix_raises():
    def fn(a):
        np.linalg.inv(a)
        return a * 2

    f = lowering.compile(fn)
    ok, singular = np.eye(3) * 2, np.ones((3, 3))
    np.testing.assert_array_equal(f(ok), ok * 2)
    with pytest.raises(np.linalg.LinAlgError):
        fn(singular)
    with pytest.raises(np.linalg.LinAlgError):
        f(singular)


def test_an_unused_gather_in_a_gradient_s_forward_raises():
    """The forward/backward cut builds each half from what it needs: the
    forward also keeps what has an effect though nothing uses it."""
    def loss(x, i):
        x[i]  # noqa: B018
        return (x ** 2).sum()

    g = lowering.grad(loss)
    x = np.arange(5.0)
    np.testing.assert_array_equal(g(x, np.array([1, 2])), 2 * x)
    with pytest.raises(IndexError):
        g(x, np.array([1, 9]))


def test_an_unused_gather_is_a_kernel_that_only_checks():
    """Kept for its check, not computed into a buffer: the CPU program
    allocates only the result."""
    from lowering.backends.cpu_backend import AllocStep, KernelStep

    def unused(x, i):
        x[i]  # noqa: B018
        return x * 2

    f = lowering.compile(unused)
    x = np.arange(1000.0)
    f(x, np.array([1, 2]))
    prog = f._last_prog
    kernels = [s for s in prog.steps if isinstance(s, KernelStep)]
    allocs = [s for s in prog.steps if isinstance(s, AllocStep)]
    assert len(kernels) == 2 and len(allocs) == 1
    assert [k for k in kernels if k.checks is not None]


def _module(ops, results):
    block = Block(arg_types=[TensorType(f64, [10]), TensorType(i64, [3])])
    body = ops(*block.args)
    block.add_ops([*body, func.ReturnOp(*results(body, *block.args))])
    fn = func.FuncOp("main", (block.arg_types, [r.type for r in results(body, *block.args)]),
                     Region(block))
    return ModuleOp([fn])


@pytest.mark.parametrize("pass_", [DeadCodeElimination(), ArrayCanonicalize(),
                                   CommonSubexpressionElimination()],
                         ids=lambda p: p.name)
def test_dead_code_elimination_keeps_what_can_raise_and_drops_the_rest(pass_):
    def ops(x, i):
        g = A.GatherOp(x, i, 0, TensorType(f64, [3]))
        s = A.ScatterOp(x, i, g.result, 0, "set")
        c = A.ConstantOp("2.0", TensorType(f64, []))
        b = A.BroadcastOp(c.result, TensorType(f64, [10]))
        return [g, s, c, b]

    m = _module(ops, lambda body, x, i: [x])
    pass_.apply(context(), m)
    names = [op.name for op in m.walk()]
    assert "array.gather" in names and "array.scatter" in names
    assert "array.broadcast" not in names  # (CSE: its constant was live when visited)
    m.verify()


def test_a_routine_that_cannot_raise_is_still_dead_code():
    def ops(x, i):
        return [A.RoutineOp("np.sort", [x], {}, [TensorType(f64, [10])]),
                A.RoutineOp("np.linalg.norm", [x], {}, [TensorType(f64, [])])]

    m = _module(ops, lambda body, x, i: [x])
    DeadCodeElimination().apply(context(), m)
    assert [op.fn.data for op in m.walk() if isinstance(op, A.RoutineOp)] == ["np.linalg.norm"]
