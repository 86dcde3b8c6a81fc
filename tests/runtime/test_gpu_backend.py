"""backend="gpu" without a GPU: the program's steps (allocations, views,
Triton launches, device and host externs, copies back of arguments written
in place) run on host memory with every kernel in Triton's interpreter
(`LOWERING_GPU=interpret`), against numpy; device-array calls through a
stand-in device whose arrays are not numpy's (`Box`), so that results of
the caller's kind, writes into the caller's arrays and the device entries'
cache are checked the same way."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

pytest.importorskip("triton")

import lowering  # noqa: E402
from lowering.examples import layernorm, softmax  # noqa: E402
from runtime import gpu  # noqa: E402
from tests.stand_in_device import Box, install  # noqa: E402


@pytest.fixture(autouse=True)
def interpreted(monkeypatch):
    monkeypatch.setenv("LOWERING_GPU", "interpret")


def compiled(fn):
    return lowering.compile(fn, backend="gpu")


def no_warnings():
    w = warnings.catch_warnings()
    w.__enter__()
    warnings.simplefilter("error", RuntimeWarning)
    return w


finite32 = st.floats(-8, 8, width=32)
edge32 = st.sampled_from([0.0, -0.0, 1.0, np.nan, np.inf, -np.inf, 1e-38, 3e38])


@settings(max_examples=15, deadline=None)
@given(hnp.arrays(np.float32, st.tuples(st.integers(0, 5), st.integers(1, 40)),
                  elements=st.one_of(finite32, edge32)))
def test_softmax_matches_numpy(x):
    f = compiled(softmax)
    with np.errstate(all="ignore"):
        want = softmax(x)
    np.testing.assert_allclose(f(x), want, rtol=1e-5, atol=1e-6, equal_nan=True)
    assert f.stats["eager_fallbacks"] == 0


def test_layernorm_f_order_and_strided_inputs():
    rng = np.random.default_rng(0)
    f = compiled(layernorm)
    w, b = rng.standard_normal(48, np.float32), rng.standard_normal(48, np.float32)
    base = rng.standard_normal((10, 96), np.float32)
    for x in (base[:, :48].copy(), np.asfortranarray(base[:, :48]), base[::2, ::2]):
        np.testing.assert_allclose(f(x, w, b), layernorm(x, w, b), rtol=2e-5, atol=2e-5)
    assert f.stats["eager_fallbacks"] == 0 and f.stats["compiles"] == 3


def test_writes_into_arguments_reach_the_caller():
    def update(a, b):
        a[1:3] = b * 2
        a[0] += 1
        return a.sum()

    f = compiled(update)
    a, b = np.arange(20.0).reshape(4, 5), np.linspace(-1, 1, 5)
    a2 = a.copy()
    got, want = f(a, b), update(a2, b)
    assert got == want and np.array_equal(a, a2)
    got = f(a, b)  # the cached entry
    assert got == update(a2, b) and np.array_equal(a, a2)
    assert f.stats["cache_hits"] == 1 and f.stats["eager_fallbacks"] == 0


def test_matmul_runs_on_the_device_library_and_sort_on_the_host():
    def mm(a, b):
        return np.tanh(a @ b) + 1

    def sorted_rows(x):
        return np.sort(x * 2, axis=1)[:, :3]

    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((40, 64)), rng.standard_normal((64, 48))
    f = compiled(mm)
    np.testing.assert_allclose(f(a, b), mm(a, b), rtol=1e-12)
    prog = f._last_prog
    assert prog.host_externs == [] and any(st.matmul for st in prog.steps
                                           if hasattr(st, "matmul"))
    g = compiled(sorted_rows)
    x = rng.standard_normal((4, 7))
    np.testing.assert_array_equal(g(x), sorted_rows(x))
    assert g._last_prog.host_externs and g.stats["eager_fallbacks"] == 0


def test_zero_size_and_scalar_results():
    def f(x):
        return (x * 3).sum(), x + 1

    c = compiled(f)
    for x in (np.zeros((0, 4), np.float32), np.ones((1, 1), np.float32)):
        got, want = c(x), f(x)
        assert np.asarray(got[0]) == want[0] and np.array_equal(got[1], want[1])


def test_a_kernel_without_a_triton_rule_falls_back_with_a_warning():
    def scan(x):  # along the last axis: no ordered kernel (no map of independent points)
        return np.cumsum(x, axis=1) * 2

    f = compiled(scan)
    x = np.arange(12.0).reshape(4, 3)
    with pytest.warns(RuntimeWarning, match="triton: no rule"):
        got = f(x)
    np.testing.assert_array_equal(got, scan(x))


def test_no_device_is_a_clear_warning(monkeypatch):
    monkeypatch.setenv("LOWERING_GPU", "")

    def no_device(kind):
        raise gpu.NoDevice("no CUDA device here")
    monkeypatch.setattr(gpu, "_make", no_device)
    f = compiled(softmax)
    x = np.ones((2, 3), np.float32)
    with pytest.warns(RuntimeWarning, match="backend='gpu' needs a CUDA device"):
        np.testing.assert_array_equal(f(x), softmax(x))


# ---- calls on device arrays --------------------------------------------------------

@pytest.fixture
def box_device(monkeypatch):
    return install(monkeypatch)


def test_device_arrays_in_device_arrays_out(box_device):
    rng = np.random.default_rng(2)
    x, w, b = (rng.standard_normal(s, np.float32) for s in ((6, 32), (32,), (32,)))
    f = compiled(layernorm)
    got = f(Box(x), Box(w), Box(b))
    assert isinstance(got, Box)
    np.testing.assert_allclose(got.a, layernorm(x, w, b), rtol=2e-5, atol=2e-5)
    x2 = rng.standard_normal((6, 32), np.float32)
    got = f(Box(x2), Box(w), Box(b))  # the device entry: no guard walk, no compile
    np.testing.assert_allclose(got.a, layernorm(x2, w, b), rtol=2e-5, atol=2e-5)
    assert f.stats["compiles"] == 1 and f.stats["cache_hits"] == 1
    f(Box(x2[:3]), Box(w), Box(b))  # another shape: compiles again
    assert f.stats["compiles"] == 2


def test_device_arguments_written_in_place(box_device):
    def update(a, b):
        a[:, 1] = b * 3
        return a * 2

    f = compiled(update)
    a, b = np.zeros((3, 4)), np.arange(3.0)
    box = Box(a.copy())
    got = f(box, Box(b))
    want = update(a, b)
    assert isinstance(got, Box)
    np.testing.assert_array_equal(got.a, want)
    np.testing.assert_array_equal(box.a, a)
    box2 = Box(np.ones((3, 4)))
    f(box2, Box(b))  # the device entry writes the device array itself
    a2 = np.ones((3, 4))
    update(a2, b)
    np.testing.assert_array_equal(box2.a, a2)


def test_device_calls_with_a_graph_break_run_on_host_copies(box_device):
    def branchy(x, n):
        y = x * 2
        if float(y.sum()) > 0:  # a value Python needs: a graph break
            y = y + n
        x[0] = 7.0
        return y

    f = compiled(branchy)
    x = np.arange(4.0)
    box = Box(x.copy())
    got = f(box, 3)
    want = branchy(x, 3)
    assert isinstance(got, Box)
    np.testing.assert_array_equal(got.a, want)
    np.testing.assert_array_equal(box.a, x)  # the write reached the device array


SCALE = 2.0


def _helper(x):
    return x * SCALE + 1


def test_device_entries_check_the_python_state_they_read(box_device):
    def uses_state(x):
        return np.tanh(_helper(x))

    global SCALE
    f = compiled(uses_state)
    x = np.linspace(-1, 1, 8)
    try:
        for scale in (2.0, 2.0, 3.0, 3.0):
            SCALE = scale
            got = f(Box(x))
            np.testing.assert_allclose(got.a, np.tanh(x * scale + 1), rtol=1e-12)
    finally:
        SCALE = 2.0
    # each value of SCALE compiled once; the repeated calls ran the device entry
    assert f.stats["compiles"] == 2 and f.stats["cache_hits"] >= 2


def test_device_entries_for_float_arguments_python_reads(box_device):
    def damp(x, rate):
        return x * math.exp(-rate)  # Python needs the float: specialized

    f = compiled(damp)
    x = np.linspace(0, 1, 5)
    for rate in (0.5, 0.5, 0.25, 0.25):
        got = f(Box(x), rate)
        np.testing.assert_allclose(got.a, damp(x, rate), rtol=1e-15)
    # the first value: a device entry; a changed value is no longer specialized
    # (Python's use of it breaks the graph, as on the host): host copies
    assert [k[-1] for k in f._device_entries] == [(float, (0.5).hex())]


def test_max_autotune_candidates_keep_the_kernel_valid():
    from lowering.backends.gpu_backend import candidates

    f = compiled(softmax)
    f(np.ones((4, 300), np.float32))
    (rows,) = f._last_prog.kernels
    assert rows.strategy == "rows"
    cands = candidates(rows)
    # a row stays one block (it must fit); only the warps vary
    assert {c for c, _ in cands} == {tuple(rows.constexprs.values())}
    assert len({w for _, w in cands}) > 1
    g = compiled(lambda x: np.tanh(x) + 1)
    g(np.ones(5000, np.float32))
    (pw,) = g._last_prog.kernels
    cands = candidates(pw)
    assert pw.strategy == "pointwise" and (tuple(pw.constexprs.values()), pw.num_warps) in cands
    for (block,), warps in cands:
        assert block >= 32 * warps
        assert -(-pw.block_points({}) // block) * block >= 5000  # the grid covers the domain


@settings(max_examples=50, deadline=None)
@given(prog=__import__("lowering.testing", fromlist=["programs"]).programs())
def test_random_programs_on_the_gpu_backend_match_numpy(prog):
    """The random Tier 1 programs (every layout, in-place updates of arguments
    and views, reductions, matmuls) through the GPU program's steps."""
    from lowering.testing import assert_matches_numpy

    cf = compiled(prog.fn)
    assert_matches_numpy(prog.fn, *prog.args, rtol=prog.rtol, calls=2, compiled=cf)


def test_device_entries_tell_minus_zero_from_zero(box_device):
    """A float Python reads keys the device entry by its bits: -0.0 and 0.0
    are equal as floats but not to math.copysign."""
    def signed(x, s):
        return x * math.copysign(1.0, s)

    f = compiled(signed)
    x = np.arange(1.0, 4.0)
    for s in (0.0, 0.0, -0.0, -0.0, 0.0):
        np.testing.assert_array_equal(f(Box(x), s).a, signed(x, s))


def test_the_last_device_entry_serves_calls_of_the_same_arrays(box_device):
    f = compiled(softmax)
    rng = np.random.default_rng(4)
    xs = [rng.standard_normal((3, 7)).astype(np.float32) for _ in range(4)]
    for x in xs:
        np.testing.assert_allclose(f(Box(x)).a, softmax(x), rtol=1e-6)
    assert f._device_last is not None and f.stats["compiles"] == 1
    y = rng.standard_normal((3, 8)).astype(np.float32)  # another shape: not the last entry
    np.testing.assert_allclose(f(Box(y)).a, softmax(y), rtol=1e-6)
    z = rng.standard_normal((7, 3)).astype(np.float32).T  # other strides
    np.testing.assert_allclose(f(Box(z)).a, softmax(z), rtol=1e-6)
    assert f.stats["compiles"] == 3


def test_explain_says_what_runs_on_the_device():
    def mm(a, b):
        return np.sort(np.tanh(a @ b), axis=1)

    a = np.random.default_rng(6).standard_normal((64, 64))
    out = lowering.explain(compiled(mm))(a, a)
    text = str(out)
    assert len(out.device) == 1
    assert "extern matmul: the device library's matmul" in text
    assert "Triton pointwise kernel" in text and "XBLOCK=" in text
    assert "numpy:np.sort: numpy on host copies" in text
    assert f"1 inputs ({a.nbytes} bytes) copied to the device" in text
    assert not lowering.explain(lowering.compile(mm, backend="cpu"))(a, a).device


def test_constants_are_made_once_unless_written_or_returned(monkeypatch):
    from lowering.backends import interpreter

    calls = []
    real = interpreter.run_extern

    def counting(op, bufs):
        calls.append(op.fn.data)
        return real(op, bufs)
    monkeypatch.setattr(interpreter, "run_extern", counting)

    def shifted(x):  # np.arange(...) ** 2: a constant the kernel reads
        return x + np.arange(x.shape[0], dtype=x.dtype) ** 2 * 0.5

    def filled(x):  # a constant array written in place: made again every call
        c = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
        c[1:4] = x[:3] * 2
        return c * 2

    for fn, once in ((shifted, True), (filled, False)):
        f = compiled(fn)
        calls.clear()
        for k in range(3):
            x = np.linspace(0, 1 + k, 6)
            np.testing.assert_array_equal(f(x), fn(x))
        consts = [s for s in f._last_prog.steps if getattr(s, "once", None) is not None
                  and s.op.fn.data == "numpy:array.constant"]
        assert consts and all(s.once == once for s in consts)
        assert calls.count("numpy:array.constant") == len(consts) * (1 if once else 3)


def _embed(table, ids, scale):
    return np.tanh(table[ids] * scale).sum(axis=-1)


def test_gathers_run_on_the_device_and_an_index_out_of_range_raises_numpy_s_error(box_device):
    """A gather is a Triton kernel (no warning, no fallback) whose indices
    are checked on the device: out of range, the call raises numpy's own
    IndexError (the call re-runs eagerly) from host arrays and from device
    arrays, and a later good call still answers correctly."""
    rng = np.random.default_rng(7)
    table = rng.standard_normal((50, 16))
    ids = rng.integers(-50, 50, size=(4, 6))
    f = compiled(_embed)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # (no fallback warning)
        got = f(table, ids, 0.5)
    np.testing.assert_allclose(got, _embed(table, ids, 0.5), rtol=1e-12)
    bad = ids.copy()
    bad[2, 3] = 50
    with pytest.raises(IndexError) as numpy_error:
        _embed(table, bad, 0.5)
    with pytest.raises(IndexError) as ours:
        f(table, bad, 0.5)
    assert str(ours.value) == str(numpy_error.value)
    # device arrays: the device entry runs the gather on them
    got = f(Box(table), Box(ids), 0.5)
    assert isinstance(got, Box)
    np.testing.assert_allclose(got.a, _embed(table, ids, 0.5), rtol=1e-12)
    got = f(Box(table), Box(ids[::-1].copy()), 0.5)  # (the entry, not a compile)
    np.testing.assert_allclose(got.a, _embed(table, ids[::-1], 0.5), rtol=1e-12)
    with pytest.raises(IndexError) as ours:
        f(Box(table), Box(bad), 0.5)
    assert str(ours.value) == str(numpy_error.value)
    got = f(Box(table), Box(ids), 0.5)  # the status was cleared: a good call answers
    np.testing.assert_allclose(got.a, _embed(table, ids, 0.5), rtol=1e-12)


def test_a_gather_that_writes_its_argument_runs_on_host_copies_of_device_arrays(box_device):
    """On the caller's own arrays, a write would land before a failing index
    check is read: such a program takes the host-copy path, which leaves
    the caller's array untouched when numpy raises."""
    def scatter_from(a, ids):
        a[:, 0] = a[ids, 1]
        return a.sum()

    a = np.arange(12.0).reshape(4, 3)
    f = compiled(scatter_from)
    box = Box(a.copy())
    f(box, Box(np.array([3, 2, 1, 0])))
    want = a.copy()
    scatter_from(want, np.array([3, 2, 1, 0]))
    np.testing.assert_array_equal(box.a, want)
    box2 = Box(a.copy())
    with pytest.raises(IndexError):
        f(box2, Box(np.array([3, 2, 9, 0])))
    np.testing.assert_array_equal(box2.a, a)  # untouched, as numpy leaves it


def test_max_autotune_winners_persist_in_the_disk_cache(monkeypatch, tmp_path):
    """A tuned launch's timings go to the on-disk cache; a program of the
    same kernel in a later process (here: a fresh program) reads the winner
    and times nothing. The timings are made up (no GPU: each candidate runs
    once in the interpreter), so the winner is known."""
    import triton.testing

    from lowering.backends.gpu_backend import GpuProgram, Launch, candidates
    from lowering.pipeline import clear_programs

    monkeypatch.setenv("LOWERING_CACHE_DIR", str(tmp_path))
    timed = []

    def fake_bench(launch, **kw):
        launch()
        timed.append(1)
        return 5.0 - 0.5 * len(timed)  # the last candidate wins

    monkeypatch.setattr(triton.testing, "do_bench", fake_bench)

    def tuned_launch(fn):
        clear_programs()
        f = compiled(fn)
        x = np.linspace(-3, 3, 5000).astype(np.float32)
        f(x)
        prog = f._last_prog
        assert isinstance(prog, GpuProgram)
        (st,) = [s for s in prog.steps if isinstance(s, Launch)]
        dev = prog.device
        bufs = [dev.from_host(x), dev.empty((5000,), np.float32)]
        values = prog._launch_values(st, bufs, dev)
        prog._tune(st, prog._kernel_fn(st, dev), values, bufs, dev)
        return prog, st, bufs, dev

    prog, st, bufs, dev = tuned_launch(lambda x: np.tanh(x) + 1)
    n = len(candidates(st.kernel))
    assert len(timed) == n and not st.tuned_from_disk
    (consts, warps, _), _ = st.tuned[0]
    assert (tuple(consts.values()), warps) == candidates(st.kernel)[-1]
    prog2, st2, bufs2, dev2 = tuned_launch(lambda x: np.tanh(x) + 1)
    assert len(timed) == n  # nothing timed: the winner came from disk
    assert st2.tuned_from_disk and st2.tuned == st.tuned
    assert (st2.constexpr_values, st2.num_warps, st2.grid) == \
        (st.constexpr_values, st.num_warps, st.grid)
    prog2._run(bufs2[:1], dev2)  # the chosen configuration runs and answers
    assert "read from the on-disk cache" in "\n".join(prog2.describe())
    out = prog2._run([dev2.from_host(np.linspace(-3, 3, 5000).astype(np.float32))], dev2)[0]
    np.testing.assert_allclose(dev2.to_host(out), np.tanh(np.linspace(-3, 3, 5000)
                                                          .astype(np.float32)) + 1, rtol=1e-6)
    # another kernel (another source) is timed afresh
    tuned_launch(lambda x: np.tanh(x) * 3)
    assert len(timed) > n


def test_reductions_to_a_scalar_split_into_programs(monkeypatch):
    """On a GPU a reduction to a scalar in one program would stream the whole
    array through one multiprocessor: it splits into chunks reduced by many
    programs plus one program for their partials (the threshold lowered
    here, so that small arrays split). The residual stored inside the
    reduction lands at its own index; sums within the reduction tolerance,
    max and integer sums exact."""
    from lowering import pipeline
    from lowering.testing import TOLERANCES, assert_same_value

    monkeypatch.setitem(pipeline.GPU_REDUCTIONS, "split_threshold", 256)
    pipeline.clear_programs()

    def loss(out, y, k):
        r = np.tanh(out) - y
        return r, (r * r).mean(), out.max(), (k * 3).sum()

    rng = np.random.default_rng(4)
    out = rng.standard_normal((16, 64)).astype(np.float32)
    out[3, 7] = np.nan
    y = rng.standard_normal((16, 64)).astype(np.float32)
    k = rng.integers(-2**40, 2**40, size=(16, 64))
    f = compiled(loss)
    got = f(out, y, k)
    want = loss(out, y, k)
    assert_same_value(got[0], want[0], TOLERANCES.rtol(np.float32, "pointwise"))
    assert_same_value(got[1], want[1], TOLERANCES.rtol(np.float32, "reduction", out.size))
    assert_same_value(got[2], want[2], 0.0)
    assert_same_value(got[3], want[3], 0.0)
    lines = "\n".join(f._last_prog.describe())
    assert "_part: Triton rows kernel, grid 8" in lines and "_join" in lines
    pipeline.clear_programs()


def _mse(X, W1, b1, W2, Y):
    h = np.tanh(X @ W1 + b1)
    return ((h @ W2 - Y) ** 2).mean()


def test_a_training_step_runs_on_device_arrays_without_the_host(box_device, monkeypatch):
    """value_and_grad compiled for the GPU, called with device arrays: after
    the first call (host copies, compile) the forward and the backward both
    run on the device arrays (the saved values stay there), and the value
    and gradients match the CPU backend's."""
    rng = np.random.default_rng(9)
    args = [rng.standard_normal(s) for s in ((16, 8), (8, 32), (32,), (32, 4), (16, 4))]
    step = lowering.compile(lowering.value_and_grad(_mse, argnums=(1, 2, 3)), backend="gpu")
    want_v, want_g = lowering.compile(lowering.value_and_grad(_mse, argnums=(1, 2, 3)),
                                      backend="cpu")(*args)
    step(*[Box(a.copy()) for a in args])  # host copies: compiles
    host_copies = []
    real = box_device.to_host
    monkeypatch.setattr(box_device, "to_host", lambda x: (host_copies.append(1), real(x))[1])
    for _ in range(2):
        v, g = step(*[Box(a.copy()) for a in args])
        assert isinstance(v, Box) and all(isinstance(x, Box) for x in g)
        np.testing.assert_allclose(v.a, want_v, rtol=1e-10)
        for got, want in zip(g, want_g):
            np.testing.assert_allclose(got.a, want, rtol=1e-9, atol=1e-12)
    assert step._device_entries and step.stats["compiles"] == 1
    assert host_copies == []  # no argument went through the host


# ---- the compiled kernel's launcher ---------------------------------------------

class _FakeCompiled:
    """What `launcher` reads of a Triton CompiledKernel."""

    def __init__(self):
        self.calls = []
        self.function, self.packed_metadata = "fn-handle", ("meta",)

    def run(self, *args):
        self.calls.append(args)

    def __getitem__(self, grid):
        def runner(*args, stream=None):
            self.calls.append(("runner", grid, stream, args))
        return runner


def _noop(*args):
    pass


class _StreamDevice:
    def current_stream(self):
        return 77


def test_launcher_calls_the_c_launcher_with_everything_fixed():
    from lowering.backends.gpu_backend import launcher

    ck = _FakeCompiled()
    run = launcher(ck, 12, _StreamDevice())
    run("a", 3, 4)
    run("b", 5, 6, stream=9)
    assert ck.calls == [(12, 1, 1, 77, "fn-handle", ("meta",), None, None, None, "a", 3, 4),
                        (12, 1, 1, 9, "fn-handle", ("meta",), None, None, None, "b", 5, 6)]


def test_launcher_keeps_tritons_runner_where_launch_hooks_are_set(monkeypatch):
    from triton import knobs

    from lowering.backends.gpu_backend import launcher

    hook = knobs.runtime.launch_enter_hook
    if hasattr(hook, "add"):  # (Triton 3.5 on: a chain of hooks)
        monkeypatch.setattr(hook, "calls", [_noop])
    else:
        monkeypatch.setattr(knobs.runtime, "launch_enter_hook", _noop)
    ck = _FakeCompiled()
    launcher(ck, 3, _StreamDevice())("x")
    assert ck.calls == [("runner", (3, 1, 1), None, ("x",))]


def test_written_argument_check_compares_bits():
    """device_call._same: which host copies a call wrote (their bits)."""
    from dialects.dtypes import BFLOAT16
    from lowering.device_call import _same

    a = np.array([0.0, 1.0, np.nan])
    assert _same(a, a.copy())
    assert not _same(a, np.array([-0.0, 1.0, np.nan]))  # a signed zero is a write
    payload = a.copy()
    payload.view(np.uint64)[2] ^= 1  # another NaN
    assert not _same(a, payload)
    m = np.arange(24.0).reshape(4, 6)
    assert _same(m[:, ::2], m[:, ::2].copy()) and not _same(m[:, ::2], m[:, 1::2])
    h = np.array([1.5, -2.0], BFLOAT16)
    assert _same(h, h.copy()) and not _same(h, -h)
    c = np.array([1 + 2j, 3 - 4j])
    assert _same(c, c.copy()) and not _same(c, np.conj(c))
    assert _same(np.float32(2.0) * np.ones(()), np.array(2.0))


def test_explain_takes_device_arrays(box_device):
    """explain on device arrays traces on their host copies, as a device
    call's first call does (it raised numpy's TypeError on a plain function
    and recursed without end on a compiled value_and_grad); arguments the
    function writes reach the caller's device arrays."""
    def f(x, w):
        x[0] += 1.0
        return ((np.tanh(x) @ w) ** 2).mean()

    rng = np.random.default_rng(9)
    x, w = rng.standard_normal((8, 4)).astype(np.float32), rng.standard_normal((4, 3))
    bx, bw = Box(x.copy()), Box(w.astype(np.float32))
    text = str(lowering.explain(compiled(f))(bx, bw))
    assert "Triton rows kernel" in text and "Triton pointwise kernel" in text
    np.testing.assert_array_equal(bx.a[0], x[0] + 1.0)  # (the write reached the caller)
    np.testing.assert_array_equal(bx.a[1:], x[1:])
    step = lowering.compile(lowering.value_and_grad(lambda x, w: ((np.tanh(x) @ w) ** 2).mean(),
                                                    argnums=(1,)), backend="gpu")
    report = lowering.explain(step)(Box(x), bw)
    assert report.partitions and "Triton" in str(report)


@pytest.mark.parametrize("half", ["bfloat16", "float16"])
def test_a_rounded_half_product_is_written_narrow_by_the_library(box_device, monkeypatch, half):
    """`(a @ b).astype(bfloat16)` of two bfloat16 arrays (numpy: a float32
    matmul, rounded): the device library's matmul writes the narrow result
    itself (its float32 sums rounded once), no float32 product made; where
    the float32 product is used otherwise too, it is made as before."""
    from tests.stand_in_device import BoxDevice

    dt = np.dtype(half) if half == "float16" else gpu._BFLOAT16
    outs = []
    real = BoxDevice.matmul

    def recording(self, a, b, out):
        outs.append(out.a.dtype)
        return real(self, a, b, out)
    monkeypatch.setattr(BoxDevice, "matmul", recording)
    rng = np.random.default_rng(12)
    a, b = rng.standard_normal((33, 70)).astype(dt), rng.standard_normal((70, 20)).astype(dt)

    def rounded(a, b):
        return np.tanh((a @ b).astype(dt))

    got = compiled(rounded)(Box(a), Box(b)).a
    assert outs == [dt]
    np.testing.assert_array_equal(got.view(np.uint16), rounded(a, b).view(np.uint16))

    def both(a, b):
        p = a @ b
        return p.astype(dt), p * 2.0

    outs.clear()
    r, p2 = compiled(both)(Box(a), Box(b))
    # (numpy's float16 @ float16 is float16 itself; bfloat16's is float32)
    assert outs == [np.dtype(np.float32) if half == "bfloat16" else dt]
    want_r, want_p2 = both(a, b)
    np.testing.assert_array_equal(r.a.view(np.uint16), want_r.view(np.uint16))
    np.testing.assert_array_equal(p2.a, want_p2)
