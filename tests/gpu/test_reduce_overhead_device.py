"""mode="reduce-overhead" on a CUDA device: device entries replayed as CUDA
graphs (torch.cuda.CUDAGraph for torch tensors, CuPy's stream capture for
CuPy arrays; lowering/device_graph.py), against numpy: replays over several
calls with new values, results that later calls do not overwrite, writes
into arguments that reach the caller's arrays, and a timing print (never an
assert) of W6 (`x*2+1` on 16 floats) per call with and without the mode.

Only a wrong answer fails a test: where the device captures no graph (the
entry's `why` says why, printed), the calls still run, step by step, and
are still checked.

Marked `gpu`: skipped without torch and a CUDA device."""

from __future__ import annotations

import time

import numpy as np
import pytest


from tests.gpu.marks import GPU  # noqa: E402

pytestmark = GPU

import lowering  # noqa: E402
from lowering.examples import layernorm, softmax  # noqa: E402


@pytest.fixture(autouse=True)
def on_device(monkeypatch):
    monkeypatch.delenv("LOWERING_GPU", raising=False)


def close(got, want, rtol=1e-5, atol=1e-5):
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=True)


def graphed(fn):
    return lowering.compile(fn, backend="gpu", mode="reduce-overhead")


def report(f) -> None:
    """What the entries did (printed: a device without graphs is no failure)."""
    for r in f.__dict__.get("_device_entries", {}).values():
        print(f"{f.__qualname__}: captures={getattr(r, 'captures', '-')} "
              f"replays={getattr(r, 'replays', '-')} why={getattr(r, 'why', '-')!r}")


def w6(x):
    return x * 2 + 1


def update(a, b):
    a[:, 1:3] = b[:, None] * 2
    a[0] += 1
    return np.tanh(a)


# ---- torch ---------------------------------------------------------------------------

def test_torch_replays_match_numpy_and_results_stay_apart():
    import torch

    rng = np.random.default_rng(0)
    x, w, b = (rng.standard_normal(s).astype(np.float32) for s in ((64, 512), (512,), (512,)))
    f = graphed(layernorm)
    tw, tb = torch.from_numpy(w).cuda(), torch.from_numpy(b).cuda()
    same = torch.from_numpy(x).cuda()
    outs, wants = [], []
    for k in range(6):
        if k % 2:  # the same buffer, new values (no copy in)
            same.copy_(torch.from_numpy(x + k))
            tx = same
        else:  # a new buffer (copied into the graph's own)
            tx = torch.from_numpy(x - k).cuda()
        outs.append(f(tx, tw, tb))
        wants.append(layernorm(tx.cpu().numpy(), w, b))
    torch.cuda.synchronize()
    for got, want in zip(outs, wants):  # earlier results not overwritten by later replays
        assert isinstance(got, torch.Tensor) and got.is_cuda
        close(got.cpu().numpy(), want, rtol=1e-4, atol=1e-5)
    assert len({o.data_ptr() for o in outs}) == len(outs)
    report(f)


def test_torch_writes_into_arguments_reach_the_caller():
    import torch

    rng = np.random.default_rng(1)
    a0, b = rng.standard_normal((32, 8)), rng.standard_normal(32)
    f = graphed(update)
    tb = torch.from_numpy(b).cuda()
    kept = torch.from_numpy(a0.copy()).cuda()
    for k in range(5):
        ta = kept if k % 2 else torch.from_numpy(a0 + k).cuda()
        want_a = ta.cpu().numpy()
        want = update(want_a, b)
        got = f(ta, tb)
        close(got.cpu().numpy(), want, rtol=1e-12, atol=1e-12)
        close(ta.cpu().numpy(), want_a, rtol=1e-12, atol=1e-12)
    report(f)


def test_torch_a_new_shape_captures_its_own_graph():
    import torch

    f = graphed(softmax)
    rng = np.random.default_rng(2)
    for shape in ((8, 100), (8, 100), (8, 100), (3, 33), (3, 33), (3, 33)):
        x = rng.standard_normal(shape).astype(np.float32)
        close(f(torch.from_numpy(x).cuda()).cpu().numpy(), softmax(x))
    report(f)


def test_torch_host_extern_runs_without_a_graph():
    import torch

    def sorted_rows(x):
        return np.sort(x * 2, axis=1)[:, :3] + 1

    f = graphed(sorted_rows)
    x = np.random.default_rng(3).standard_normal((16, 40))
    for _ in range(3):
        close(f(torch.from_numpy(x).cuda()).cpu().numpy(), sorted_rows(x), rtol=0, atol=0)
    report(f)


def test_torch_matmul_in_a_graph():
    import torch

    def mm(a, b):
        return np.tanh(a @ b) + 1

    rng = np.random.default_rng(4)
    f = graphed(mm)
    tb = torch.from_numpy(rng.standard_normal((96, 48))).cuda()
    for _ in range(4):
        a = rng.standard_normal((128, 96))
        got = f(torch.from_numpy(a).cuda(), tb)
        close(got.cpu().numpy(), mm(a, tb.cpu().numpy()), rtol=1e-12, atol=1e-12)
    report(f)


# ---- CuPy ----------------------------------------------------------------------------

def test_cupy_replays_writes_and_results():
    cp = pytest.importorskip("cupy")
    rng = np.random.default_rng(5)
    x = rng.standard_normal((32, 200)).astype(np.float32)
    f = graphed(softmax)
    same = cp.asarray(x)
    outs, wants = [], []
    for k in range(6):
        cx = same if k % 2 else cp.asarray(x * (k + 1))
        if k % 2:
            cx[...] = cp.asarray(x - k)
        outs.append(f(cx))
        wants.append(softmax(cp.asnumpy(cx)))
    for got, want in zip(outs, wants):
        assert isinstance(got, cp.ndarray)
        close(cp.asnumpy(got), want)
    report(f)
    g = graphed(update)
    a0, b = rng.standard_normal((32, 8)), rng.standard_normal(32)
    cb = cp.asarray(b)
    kept = cp.asarray(a0)
    for k in range(4):
        ca = kept if k % 2 else cp.asarray(a0 + k)
        want_a = cp.asnumpy(ca)
        want = update(want_a, b)
        close(cp.asnumpy(g(ca, cb)), want, rtol=1e-12, atol=1e-12)
        close(cp.asnumpy(ca), want_a, rtol=1e-12, atol=1e-12)
    report(g)


def test_cupy_f_ordered_and_strided_arguments():
    cp = pytest.importorskip("cupy")

    def f(x, y):
        return np.tanh(x) * 2 + y

    c = graphed(f)
    rng = np.random.default_rng(6)
    for _ in range(4):
        cx = cp.asarray(np.asfortranarray(rng.standard_normal((40, 30))), order="F")
        cy = cp.asarray(rng.standard_normal((40, 60)))[:, ::2]
        got = c(cx, cy)
        close(cp.asnumpy(got), f(cp.asnumpy(cx), cp.asnumpy(cy)), rtol=1e-12, atol=1e-12)
    report(c)


# ---- timing (printed, never asserted) ---------------------------------------------------

def _per_call_us(f, args, n=2000) -> float:
    import torch

    for _ in range(50):
        f(*args)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        f(*args)
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / n * 1e6


def test_w6_per_call_time_with_and_without_reduce_overhead(capsys):
    import torch

    x = torch.arange(16, dtype=torch.float32, device="cuda")
    want = w6(x.cpu().numpy())
    times = {}
    for mode in ("default", "reduce-overhead"):
        f = lowering.compile(w6, backend="gpu", mode=mode)
        close(f(x).cpu().numpy(), want, rtol=0, atol=0)
        times[mode] = _per_call_us(f, (x,))
        close(f(x).cpu().numpy(), want, rtol=0, atol=0)
        if mode == "reduce-overhead":
            report(f)
    clone = _per_call_us(lambda t: t.clone(), (x,))
    eager = _per_call_us(lambda t: t * 2 + 1, (x,))
    with capsys.disabled():
        print(f"\nW6 per call (host time, µs): default {times['default']:.1f}, "
              f"reduce-overhead {times['reduce-overhead']:.1f} "
              f"(of which one output clone ~{clone:.1f}), torch eager {eager:.1f}")


def _mse(X, W1, b1, W2, Y):
    h = np.tanh(X @ W1 + b1)
    return ((h @ W2 - Y) ** 2).mean()


@pytest.mark.parametrize("mode", ["default", "reduce-overhead"])
def test_a_training_step_on_torch_tensors(mode):
    """value_and_grad on torch tensors: the forward and backward on the
    device (one graph in reduce-overhead), against numpy's float64 gradient."""
    import torch

    import lowering

    rng = np.random.default_rng(12)
    host = [rng.standard_normal(s).astype(np.float32)
            for s in ((256, 64), (64, 512), (512,), (512, 32), (256, 32))]
    want_v, want_g = lowering.compile(lowering.value_and_grad(_mse, argnums=(1, 2, 3)),
                                      backend="numpy")(*[a.astype(np.float64) for a in host])
    step = lowering.compile(lowering.value_and_grad(_mse, argnums=(1, 2, 3)), backend="gpu",
                            mode=mode)
    t = [torch.from_numpy(a).cuda() for a in host]
    for _ in range(4):
        v, g = step(*t)
        np.testing.assert_allclose(float(v), want_v, rtol=1e-4)
        for got, want in zip(g, want_g):
            assert isinstance(got, torch.Tensor) and got.is_cuda
            np.testing.assert_allclose(got.cpu().numpy(), want, rtol=2e-3, atol=1e-5)
