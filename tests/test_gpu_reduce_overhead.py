"""mode="reduce-overhead" on backend="gpu" without a GPU: device entries
replayed as graphs (lowering/device_graph.py) through HostDevice's stand-in
graph (`runtime.gpu.HostGraph`: capture records the steps, replay runs them
on the same buffers), with every kernel in Triton's interpreter
(`LOWERING_GPU=interpret`). Device arrays are `Box`es (arrays that are not
numpy's, as in tests/runtime/test_gpu_backend.py), so the device-entry path,
the static buffers and the copies around a graph run as they do on a GPU;
answers are checked against numpy, copies through the graph's counters."""

from __future__ import annotations

import threading

import numpy as np
import pytest

pytest.importorskip("triton")

import lowering  # noqa: E402
from lowering.device_graph import RING, GraphedEntry  # noqa: E402
from lowering.examples import softmax  # noqa: E402
from runtime import gpu  # noqa: E402
from tests.stand_in_device import Box, install  # noqa: E402


@pytest.fixture(autouse=True)
def box_device(monkeypatch):
    monkeypatch.setenv("LOWERING_GPU", "interpret")
    return install(monkeypatch)


def graphed(fn):
    return lowering.compile(fn, backend="gpu", mode="reduce-overhead")


def runners(f) -> list[GraphedEntry]:
    return list(f._device_entries.values())


def w6(x):
    return x * 2 + 1


def test_replay_matches_numpy_across_calls_and_captures_once():
    f = graphed(w6)
    rng = np.random.default_rng(0)
    x = rng.standard_normal(16).astype(np.float32)
    buf = Box(x.copy())
    f(buf)  # host copies: traces and compiles
    for _ in range(4):  # the same buffer, new values: replays with no copy in
        buf.a[:] = rng.standard_normal(16)
        np.testing.assert_array_equal(f(buf).a, w6(buf.a))
    (r,) = runners(f)
    # each result dropped before the next call: one graph, its result
    # buffer handed out every time, nothing copied or cloned
    assert r.why == "" and r.captures == 1 and r.replays == 4
    assert r.copies == 0 and r.clones == 0 and r.shares == 4 and not r.copied
    for _ in range(3):  # new buffers: captured once more, then copied in
        y = rng.standard_normal(16).astype(np.float32)
        np.testing.assert_array_equal(f(Box(y)).a, w6(y))
    assert r.captures == 2 and r.copied == {0} and r.copies == 3
    assert f.stats["compiles"] == 1


def test_a_plain_replay_takes_the_armed_path_and_hands_over_to_the_general_one(monkeypatch):
    """`GraphedEntry.hot`: a call that is only a replay runs straight-line
    checks and the replay; a held result, a moved buffer or a result tuple
    are still answered right (the general path where hot says MISS)."""
    def two(x):
        return x * 2 + 1, x - 3
    f = graphed(two)
    rng = np.random.default_rng(5)
    buf = Box(rng.standard_normal(16).astype(np.float32))
    f(buf)
    f(buf)
    (r,) = runners(f)
    assert r.hot is not None
    general = []
    plain_call = GraphedEntry.__call__
    monkeypatch.setattr(GraphedEntry, "__call__",
                        lambda self, *a: general.append(1) or plain_call(self, *a))
    replays = r.replays
    for _ in range(4):  # results dropped: the armed path every time
        buf.a[:] = rng.standard_normal(16)
        out = f(buf)
        assert type(out) is tuple and len(out) == 2
        np.testing.assert_array_equal(out[0].a, buf.a * 2 + 1)
        np.testing.assert_array_equal(out[1].a, buf.a - 3)
        del out
    assert not general and r.replays == replays + 4 and r.captures == 1
    held = []
    for _ in range(4):  # results held: later calls may not overwrite them
        buf.a[:] = rng.standard_normal(16)
        a, b = f(buf)
        held.append((a, b, buf.a.copy()))
    for a, b, x in held:
        np.testing.assert_array_equal(a.a, x * 2 + 1)
        np.testing.assert_array_equal(b.a, x - 3)
    assert len(general) == 3 and r.captures == RING + 1
    other = Box(rng.standard_normal(16).astype(np.float32))  # a moved input: copied in
    np.testing.assert_array_equal(f(other)[0].a, other.a * 2 + 1)
    assert r.copied == {0} and r.hot is None
    np.testing.assert_array_equal(f(other)[1].a, other.a - 3)


def test_the_armed_path_hands_out_results_as_the_program_returns_them(monkeypatch):
    """The generated replay (`_hot_source_call`) keeps the program's result
    structure: a result returned twice is one array (shared once), an
    argument returned is the caller's own object, a dict keeps its keys; a
    call of other arrays (another shape, another dtype, two arguments for
    one) misses the generated call (`device_call.fast_call`) and is still
    answered right."""
    def twice(x):
        y = x * 2 + 1
        return y, y, x

    def named(x, s):
        return {"sum": x + s, "diff": x - s}
    f, g = graphed(twice), graphed(named)
    rng = np.random.default_rng(7)
    x = Box(rng.standard_normal(16).astype(np.float32))
    s = Box(rng.standard_normal(16).astype(np.float32))
    for _ in range(2):
        f(x), g(x, s)
    (r,), (q,) = runners(f), runners(g)
    assert r.hot is not None and q.hot is not None
    general = []
    plain_call = GraphedEntry.__call__
    monkeypatch.setattr(GraphedEntry, "__call__",
                        lambda self, *a: general.append(1) or plain_call(self, *a))
    for _ in range(3):
        x.a[:] = rng.standard_normal(16)
        a, b, c = f(x)
        assert a is b and c is x
        np.testing.assert_array_equal(a.a, x.a * 2 + 1)
        out = g(x, s)
        assert list(out) == ["sum", "diff"]
        np.testing.assert_array_equal(out["sum"].a, x.a + s.a)
        np.testing.assert_array_equal(out["diff"].a, x.a - s.a)
        del a, b, c, out
    assert not general
    for other in (Box(np.ones(8, np.float32)), Box(np.ones(16, np.float64))):
        np.testing.assert_array_equal(f(other)[0].a, other.a * 2 + 1)
    np.testing.assert_array_equal(f(x)[0].a, x.a * 2 + 1)
    with pytest.raises(TypeError):
        f(x, x)


class TorchLikeBox(Box):
    """A Box read as torch tensors are (`device_call._tensor_signature`: shape,
    dtype, stride() and device, one by one in the generated call)."""

    __module__ = "torch.stand_in"

    def stride(self):
        return tuple(s // self.a.itemsize for s in self.a.strides)

    def element_size(self):
        return self.a.itemsize

    device = property(lambda self: "stand-in:0")

    def __getitem__(self, k):
        return TorchLikeBox(self.a[k])


def test_the_generated_call_reads_torch_tensors_field_by_field():
    from lowering import device_call

    f = graphed(w6)
    rng = np.random.default_rng(8)
    x = TorchLikeBox(rng.standard_normal((4, 6)).astype(np.float32))
    assert device_call.signature(x)[1] is device_call._tensor_signature
    for _ in range(3):
        np.testing.assert_array_equal(f(x).a, w6(x.a))
    (r,) = runners(f)
    replays = r.replays
    x.a[:] = rng.standard_normal((4, 6))
    np.testing.assert_array_equal(f(x).a, w6(x.a))
    assert r.replays == replays + 1  # the generated call, then the armed replay
    # another stride (a transposed view), dtype or shape: not this entry's call
    for other in (TorchLikeBox(np.ascontiguousarray(x.a.T).T), TorchLikeBox(x.a.astype(np.float64)),
                  TorchLikeBox(x.a[:3])):
        np.testing.assert_array_equal(f(other).a, w6(other.a))
    assert r.replays == replays + 1


def test_earlier_results_are_not_overwritten_by_later_calls():
    f = graphed(softmax)
    rng = np.random.default_rng(1)
    xs = [rng.standard_normal((3, 7)).astype(np.float32) for _ in range(5)]
    buf = Box(xs[0].copy())
    outs = []
    for x in xs:
        buf.a[:] = x
        outs.append(f(buf))
    for x, out in zip(xs, outs):
        np.testing.assert_allclose(out.a, softmax(x), rtol=1e-6)
    assert len({id(o.a) for o in outs}) == len(outs)
    (r,) = runners(f)
    # every result kept: RING captures hand theirs out, the last one's are cloned
    assert r.replays == 4 and r.captures == RING + 1
    assert r.shares == RING and r.clones == 4 - RING


def test_a_held_result_or_a_view_of_it_is_never_overwritten():
    f = graphed(w6)
    rng = np.random.default_rng(5)
    xs = [rng.standard_normal(16).astype(np.float32) for _ in range(8)]
    buf = Box(xs[0].copy())
    f(buf)  # (host copies: traces and compiles)
    prev, prev_x = None, None
    for x in xs:  # the previous result alive during each call: two graphs take turns
        buf.a[:] = x
        cur = f(buf)
        if prev is not None:
            np.testing.assert_array_equal(prev.a, w6(prev_x))
        prev, prev_x = cur, x
    (r,) = runners(f)
    assert r.captures == 2 and r.clones == 0 and r.shares == 8
    del prev, cur
    views = []
    for x in xs[:4]:  # only a view of each result kept (the result itself dropped)
        buf.a[:] = x
        views.append(f(buf).a[3:9])
    for x, v in zip(xs, views):
        np.testing.assert_array_equal(v, w6(x)[3:9])
    views.clear()
    before = r.captures
    for x in xs:  # all dropped: the graphs are free again
        buf.a[:] = x
        np.testing.assert_array_equal(f(buf).a, w6(x))
    assert r.captures == before


def test_results_are_cloned_where_the_device_cannot_tell_who_holds_them(box_device):
    box_device.probe = lambda x: None
    f = graphed(w6)
    buf = Box(np.arange(16, dtype=np.float32))
    f(buf)
    outs = [f(buf) for _ in range(3)]
    (r,) = runners(f)
    assert r.captures == 1 and r.clones == 3 and r.shares == 0
    assert len({id(o.a) for o in outs}) == 3
    for o in outs:
        np.testing.assert_array_equal(o.a, w6(buf.a))


def test_a_training_step_hands_out_its_gradients():
    def loss(w, x):
        return np.sum(np.tanh(x @ w) ** 2)

    f = graphed(lowering.value_and_grad(loss))
    rng = np.random.default_rng(6)
    w = Box(rng.standard_normal((4, 3)))
    x = Box(rng.standard_normal((5, 4)))
    f(w, x)  # (host copies: traces and compiles)
    grads = []
    for k in range(5):
        w.a[:] = rng.standard_normal((4, 3))
        val, g = f(w, x)
        ref_val, ref_g = lowering.value_and_grad(loss)(w.a, x.a)
        np.testing.assert_allclose(float(val.a if isinstance(val, Box) else val), ref_val,
                                   rtol=1e-12)
        np.testing.assert_allclose(g.a, ref_g, rtol=1e-12)
        grads.append((g, ref_g))
        if k % 2:  # keep every other gradient: the kept ones stay as they were
            grads[-2:-1] = []
    for g, ref_g in grads:
        np.testing.assert_allclose(g.a, ref_g, rtol=1e-12)
    (r,) = runners(f)
    assert r.why == "" and r.replays == 5 and r.shares > 0


def test_writes_into_arguments_reach_the_caller():
    def update(a, b):
        a[1:3] = b[1:3] * 2
        a[0] += 1
        return a.sum()

    def bump(x):  # the argument itself is the result
        x += 1
        return x

    f = graphed(update)
    same = Box(np.zeros(5))
    for k in range(4):
        b = np.arange(5.0) * k
        fresh = Box(np.arange(5.0) + k)  # a new buffer each call: copied in
        for box in (fresh, same):
            want = box.a.copy()
            total = update(want, b)
            got = f(box, Box(b))
            assert float(got.a if isinstance(got, Box) else got) == total
            np.testing.assert_array_equal(box.a, want)
    (r,) = runners(f)
    assert r.why == "" and r.replays > 0
    g = graphed(bump)
    buf = Box(np.arange(4.0))
    g(buf)  # (host copies: traces and compiles)
    for k in range(3):
        out = g(buf)
        assert out is buf  # numpy returns the argument itself
        np.testing.assert_array_equal(buf.a, np.arange(4.0) + k + 2)
    other = Box(np.zeros(4))
    assert g(other) is other and np.array_equal(other.a, np.ones(4))
    np.testing.assert_array_equal(buf.a, np.arange(4.0) + 4)  # untouched by other's call
    assert runners(g)[0].replays == 4


def test_same_buffers_skip_the_copy_in():
    def axpy(x, y, a):
        return a * x + y

    f = graphed(axpy)
    x, y = Box(np.linspace(0, 1, 8)), Box(np.ones(8))
    f(x, y, 2.0)
    for k in range(3):
        x.a[:] = k
        np.testing.assert_array_equal(f(x, y, 2.0).a, 2.0 * x.a + y.a)
    (r,) = runners(f)
    assert r.copies == 0
    y2 = Box(np.full(8, 5.0))  # one argument moved: only it is copied in from now on
    for _ in range(2):
        np.testing.assert_array_equal(f(x, y2, 2.0).a, 2.0 * x.a + 5.0)
    assert r.copied == {1} and r.copies == 2
    np.testing.assert_array_equal(f(x, y, 2.0).a, 2.0 * x.a + 1.0)  # and back
    assert r.copies == 3 and np.array_equal(y.a, np.ones(8))


def test_a_new_shape_or_scalar_is_a_new_entry_with_its_own_graph():
    def scale(x, s):
        return np.tanh(x) * s

    f = graphed(scale)
    rng = np.random.default_rng(2)
    for shape, s in (((4, 5), 0.5), ((2, 3), 0.5), ((2, 3), 0.25)):
        x = rng.standard_normal(shape)
        for _ in range(3):  # (another box of the same memory: the same buffer)
            np.testing.assert_allclose(f(Box(x), s).a, scale(x, s), rtol=1e-12)
    rs = runners(f)
    assert len(rs) == 3 and all(r.captures == 1 and r.replays == 2 for r in rs)
    assert f.stats["compiles"] == 2  # (the scalar's value keys the entry, not the program)


def test_a_guard_on_python_state_captures_again():
    table = {"k": 2.0}

    def uses_state(x):
        return x * table["k"] + 1

    f = graphed(uses_state)
    x = np.arange(6.0)
    seen = []
    for k in (2.0, 2.0, 2.0, 3.0, 3.0, 3.0):
        table["k"] = k
        np.testing.assert_array_equal(f(Box(x)).a, x * k + 1)
        seen.extend(r for r in runners(f) if r not in seen)
    # the failed guard: a new entry for the key, which captures its own graph
    assert len(seen) == 2 and all(r.captures == 1 and r.replays == 2 for r in seen)


def test_layouts_matmul_and_constants_in_a_graph():
    def mm(a, b):
        return np.tanh(a @ b) + np.arange(b.shape[1]) * 0.5

    f = graphed(mm)
    rng = np.random.default_rng(3)
    for _ in range(4):  # F-ordered and strided arguments, new buffers every call
        a = np.asfortranarray(rng.standard_normal((6, 5)))
        b = rng.standard_normal((5, 14))[:, ::2]
        np.testing.assert_allclose(f(Box(a), Box(b)).a, mm(a, b), rtol=1e-12)
    (r,) = runners(f)
    assert r.why == "" and r.captures == 2 and r.replays == 3
    assert r.graphs[0].vals[0].a.flags.f_contiguous  # its own copy of `a` in a's layout


def test_a_program_with_a_host_extern_is_not_graphed_and_explain_says_why():
    def sorted_rows(x):
        return np.sort(x * 2, axis=1)[:, :3] + 1

    f = graphed(sorted_rows)
    x = np.random.default_rng(4).standard_normal((4, 7))
    for _ in range(3):
        np.testing.assert_array_equal(f(Box(x)).a, sorted_rows(x))
    (r,) = runners(f)
    assert r.graph is None and "numpy routines on host copies" in r.why
    text = str(lowering.explain(f)(x))
    assert "reduce-overhead: no graph: it runs numpy routines on host copies" in text
    ok = str(lowering.explain(graphed(w6))(np.ones(16, np.float32)))
    assert "reduce-overhead: calls on device arrays replay one graph" in ok
    assert "reduce-overhead" not in str(lowering.explain(
        lowering.compile(w6, backend="gpu"))(np.ones(16, np.float32)))


def test_another_stream_or_a_failed_capture_runs_step_by_step(box_device, monkeypatch):
    f = graphed(w6)
    x = Box(np.arange(16, dtype=np.float32))
    for _ in range(3):
        f(x)
    (r,) = runners(f)
    assert r.replays == 2
    monkeypatch.setattr(box_device, "current_stream", lambda: 7)
    np.testing.assert_array_equal(f(x).a, w6(x.a))
    assert r.replays == 2  # not replayed on another stream
    g = graphed(lambda x: x * 3 - 1)
    g(x)

    def broken(*args):
        raise gpu.NotCapturable("no capture here")
    monkeypatch.setattr(type(f._last_prog), "capture", broken)
    for _ in range(2):
        np.testing.assert_array_equal(g(x).a, x.a * 3 - 1)
    (r,) = runners(g)
    assert r.graph is None and "its capture failed" in r.why and "no capture here" in r.why


def test_calls_from_threads_share_one_graph_correctly():
    f = graphed(w6)
    f(Box(np.zeros(16, np.float32)))
    errors = []

    def worker(seed):
        rng = np.random.default_rng(seed)
        for _ in range(3):
            x = rng.standard_normal(16).astype(np.float32)
            if not np.array_equal(f(Box(x)).a, w6(x)):
                errors.append(seed)
    threads = [threading.Thread(target=worker, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_modes_never_share_a_program():
    """The compile mode is in the program key (GPU): max-autotune's tuned
    launch state is its own, default-mode functions of the same IR get
    another program."""
    def f(x):
        return np.exp(x) * 2

    x = np.linspace(0, 1, 32)
    progs = {}
    for mode in ("max-autotune", "default", "reduce-overhead"):
        c = lowering.compile(f, backend="gpu", mode=mode)
        np.testing.assert_allclose(c(x), f(x), rtol=1e-12)
        progs[mode] = c._last_prog
    assert len({id(p) for p in progs.values()}) == 3
    assert progs["max-autotune"].tune and not progs["default"].tune
    again = lowering.compile(f, backend="gpu")
    again(x)
    assert again._last_prog is progs["default"]  # the same mode still shares


@pytest.mark.parametrize("mode", ["default", "reduce-overhead"])
def test_device_entries_of_strided_arguments_run_the_program_for_their_layout(mode):
    """The first call runs on host copies, which compile the program the
    device entry then runs on the device arrays: the copies keep each
    array's layout class (a device library's host copy of a strided view is
    C-contiguous; the program compiled for it read the view as if it were)."""
    def mm(a, b):
        return np.tanh(a @ b) * 2

    f = lowering.compile(mm, backend="gpu", mode=mode)
    rng = np.random.default_rng(7)
    for _ in range(3):
        a = rng.standard_normal((6, 5))
        b = rng.standard_normal((5, 14))[:, ::2]
        np.testing.assert_allclose(f(Box(a), Box(b)).a, mm(a, b), rtol=1e-12)
    assert f.stats["compiles"] == 1 and f.stats["cache_hits"] == 2


def _mse(X, W1, b1, W2, Y):
    h = np.tanh(X @ W1 + b1)
    return ((h @ W2 - Y) ** 2).mean()


def test_a_training_step_is_one_graph():
    """value_and_grad compiled for the GPU in reduce-overhead: the forward's
    and the backward's steps are captured into one graph (the saved values
    in its own buffers) and replayed; value and gradients match the CPU
    backend's over calls with new values in the same buffers and in new
    ones, and earlier results stay as they were."""
    rng = np.random.default_rng(11)
    shapes = ((16, 8), (8, 32), (32,), (32, 4), (16, 4))
    cpu = lowering.compile(lowering.value_and_grad(_mse, argnums=(1, 2, 3)), backend="cpu")
    step = graphed(lowering.value_and_grad(_mse, argnums=(1, 2, 3)))
    bufs = [Box(rng.standard_normal(s)) for s in shapes]
    kept = []
    for k in range(5):
        if k == 3:  # new buffers: copied into the graph's own
            bufs = [Box(rng.standard_normal(s)) for s in shapes]
        else:
            for b in bufs:
                b.a[...] = rng.standard_normal(b.a.shape)
        want_v, want_g = cpu(*[b.a.copy() for b in bufs])
        v, g = step(*bufs)
        v = v.a if isinstance(v, Box) else v  # (the loss: a 0-d array or its scalar)
        np.testing.assert_allclose(v, want_v, rtol=1e-10)
        for got, want in zip(g, want_g):
            np.testing.assert_allclose(got.a, want, rtol=1e-9, atol=1e-12)
        kept.append(([np.array(x.a) for x in g], g))
    for g0, g in kept:  # (no later replay wrote an earlier result)
        for a, b in zip(g, g0):
            np.testing.assert_array_equal(a.a, b)
    (entry,) = runners(step)
    assert entry.graph is not None and entry.replays >= 3
    lines = [x for prog in lowering.explain(step)(*[b.a for b in bufs]).device for x in prog]
    assert any("replay one graph" in x for x in lines), lines
