"""backend="gpu" on a CUDA device: compiled functions called with numpy
arrays (copied in and out), torch CUDA tensors and CuPy arrays (results of
the same kind, writes into the caller's device arrays), against numpy.

Marked `gpu`: skipped without torch and a CUDA device."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp


from tests.gpu.marks import GPU  # noqa: E402

pytestmark = GPU

import lowering  # noqa: E402
from lowering.examples import gelu, layernorm, rmsnorm, softmax  # noqa: E402


@pytest.fixture(autouse=True)
def on_device(monkeypatch):
    monkeypatch.delenv("LOWERING_GPU", raising=False)


def close(got, want, rtol=1e-5, atol=1e-5):
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=True)


@settings(max_examples=20, deadline=None)
@given(hnp.arrays(np.float32, st.tuples(st.integers(1, 9), st.integers(1, 300)),
                  elements=st.one_of(st.floats(-30, 30, width=32),
                                     st.sampled_from([0.0, -0.0, np.inf, -np.inf, np.nan]))))
def test_numpy_inputs_softmax_and_rmsnorm(x):
    f, g = lowering.compile(softmax, backend="gpu"), lowering.compile(rmsnorm, backend="gpu")
    w = np.linspace(-2, 2, x.shape[1], dtype=np.float32)
    with np.errstate(all="ignore"):
        close(f(x), softmax(x))
        close(g(x, w), rmsnorm(x, w), rtol=1e-4, atol=1e-5)
    assert f.stats["eager_fallbacks"] == 0 and g.stats["eager_fallbacks"] == 0


def test_torch_tensors_in_torch_tensors_out():
    import torch

    rng = np.random.default_rng(0)
    x, w, b = (rng.standard_normal(s).astype(np.float32) for s in ((64, 512), (512,), (512,)))
    f = lowering.compile(layernorm, backend="gpu")
    for _ in range(3):  # host copies once, then the device entry
        tx, tw, tb = (torch.from_numpy(a).cuda() for a in (x, w, b))
        got = f(tx, tw, tb)
        assert isinstance(got, torch.Tensor) and got.is_cuda
        close(got.cpu().numpy(), layernorm(x, w, b), rtol=1e-4, atol=1e-5)
    assert f.stats["compiles"] == 1 and f.stats["cache_hits"] == 2
    g = lowering.compile(gelu, backend="gpu")
    got = g(torch.from_numpy(x).cuda(), torch.from_numpy(b).cuda())
    close(got.cpu().numpy(), gelu(x, b), rtol=1e-5, atol=1e-5)


def test_torch_arguments_written_in_place_and_matmul():
    import torch

    def step(a, m, v):
        a[:, :2] = (m @ v)[:, None] * 0.5
        return np.tanh(a)

    rng = np.random.default_rng(1)
    a, m, v = rng.standard_normal((128, 8)), rng.standard_normal((128, 96)), rng.standard_normal(96)
    f = lowering.compile(step, backend="gpu")
    for _ in range(2):
        ta = torch.from_numpy(a.copy()).cuda()
        got = f(ta, torch.from_numpy(m).cuda(), torch.from_numpy(v).cuda())
        a2 = a.copy()
        want = step(a2, m, v)
        close(got.cpu().numpy(), want, rtol=1e-12, atol=1e-12)
        close(ta.cpu().numpy(), a2, rtol=1e-12, atol=1e-12)


def test_cupy_arrays():
    cp = pytest.importorskip("cupy")
    rng = np.random.default_rng(2)
    x = rng.standard_normal((32, 200)).astype(np.float32)
    f = lowering.compile(softmax, backend="gpu")
    for _ in range(2):
        got = f(cp.asarray(x))
        assert isinstance(got, cp.ndarray)
        close(cp.asnumpy(got), softmax(x))
    assert f.stats["cache_hits"] == 1


def test_launches_with_other_alignments_and_strides():
    """A compiled kernel's launcher serves launches Triton would specialize the
    same way; a view 4 bytes past an aligned address must not reuse it."""
    import torch

    def f(x, y):
        return np.tanh(x) * 2 + y

    c = lowering.compile(f, backend="gpu")
    base = torch.randn(4096 + 32, device="cuda")
    y = torch.randn(4096, device="cuda")
    for off in (0, 1, 0, 1, 16, 3):
        x = base[off:off + 4096]
        got = c(x, y).cpu().numpy()
        close(got, f(x.cpu().numpy(), y.cpu().numpy()), rtol=1e-6, atol=1e-6)


def test_max_autotune_times_configurations_and_keeps_results():
    import torch

    rng = np.random.default_rng(3)
    x, w, b = (rng.standard_normal(s).astype(np.float32) for s in ((256, 1024), (1024,), (1024,)))
    for fn, args in ((layernorm, (x, w, b)), (gelu, (x, b))):
        f = lowering.compile(fn, mode="max-autotune", backend="gpu")
        targs = [torch.from_numpy(a).cuda() for a in args]
        for _ in range(2):
            close(f(*targs).cpu().numpy(), fn(*args), rtol=1e-4, atol=1e-5)
        launches = [s for s in f._last_prog.steps if hasattr(s, "tuned")]
        assert launches and all(s.tuned for s in launches)
        for s in launches:  # the launch runs the fastest configuration timed
            (consts, warps, grid), _ = s.tuned[0]
            assert (tuple(consts.values()), warps, grid) == (s.constexpr_values, s.num_warps,
                                                           s.grid)


def test_constants_column_sums_and_explain_on_the_device():
    import torch

    def f(x):
        w = np.arange(x.shape[1], dtype=x.dtype) * 0.5  # a constant, made once
        return (x * w).sum(axis=0), np.cumsum(x, axis=0)

    rng = np.random.default_rng(5)
    c = lowering.compile(f, backend="gpu")
    for _ in range(3):
        x = rng.standard_normal((128, 300))
        s, cs = c(torch.from_numpy(x).cuda())
        ws, wcs = f(x)
        close(s.cpu().numpy(), ws, rtol=1e-12, atol=1e-12)
        np.testing.assert_array_equal(cs.cpu().numpy(), wcs)
    text = str(lowering.explain(c)(x))
    assert "ordered kernel" in text and c.stats["eager_fallbacks"] == 0


def _embed(table, ids, scale):
    return np.tanh(table[ids] * scale).sum(axis=-1)


def test_gathers_on_the_device_and_an_index_out_of_range():
    """A gather (embedding lookup) runs as a Triton kernel with its indices
    checked on the device: torch tensors in, a torch tensor out; an index
    out of range raises numpy's IndexError, and the next good call answers."""
    import torch

    rng = np.random.default_rng(3)
    table = rng.standard_normal((1000, 64)).astype(np.float32)
    ids = rng.integers(-1000, 1000, size=(32, 8))
    f = lowering.compile(_embed, backend="gpu")
    close(f(table, ids, 0.5), _embed(table, ids, 0.5))
    tt, ti = torch.from_numpy(table).cuda(), torch.from_numpy(ids).cuda()
    for _ in range(3):
        got = f(tt, ti, 0.5)
        assert isinstance(got, torch.Tensor) and got.is_cuda
        close(got.cpu().numpy(), _embed(table, ids, 0.5))
    bad = ids.copy()
    bad[5, 5] = 1000
    with pytest.raises(IndexError):
        f(tt, torch.from_numpy(bad).cuda(), 0.5)
    close(f(tt, ti, 0.5).cpu().numpy(), _embed(table, ids, 0.5))
    assert f.stats["eager_fallbacks"] == 1  # (the bad call's: numpy raised its error)


def test_max_autotune_winners_come_from_disk_in_a_second_process(tmp_path):
    """max-autotune in one process writes its winners; a second process with
    the same cache directory reads them (explain says so) and answers."""
    import os
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent("""
        import numpy as np, lowering
        from lowering.examples import softmax
        f = lowering.compile(softmax, backend="gpu", mode="max-autotune")
        x = np.random.default_rng(0).standard_normal((512, 1024)).astype(np.float32)
        got = f(x)
        np.testing.assert_allclose(got, softmax(x), rtol=1e-5, atol=1e-7)
        print("\\n".join(f._last_prog.describe()))
    """)
    env = {**os.environ, "LOWERING_CACHE_DIR": str(tmp_path), "LOWERING_CACHE": "1"}
    env.pop("LOWERING_GPU", None)
    runs = [subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                           text=True, timeout=300) for _ in range(2)]
    for r in runs:
        assert r.returncode == 0, r.stderr[-2000:]
    assert "max-autotune (ms):" in runs[0].stdout
    assert "read from the on-disk cache" in runs[1].stdout


def test_first_launches_go_through_the_driver_until_tritons_launcher_is_built(
        monkeypatch, tmp_path):
    """A new kernel signature on an empty Triton cache: the first call
    launches through the driver (`cuda_launch.early_runner`) while Triton
    builds its launcher in a thread; once built, launches go through it.
    Results match numpy both ways (strided inputs: stride arguments; a
    float constant)."""
    import torch

    from lowering.backends import cuda_launch, gpu_backend

    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path))  # (a launcher to build)
    made, launches = [], []
    real = gpu_backend.early_runner

    def spy(*args):
        run = real(*args)
        if run is not None:
            made.append(run)
        return run
    monkeypatch.setattr(gpu_backend, "early_runner", spy)

    def f(x, y):
        return np.tanh(x[:, ::3]) * 2.71828 + y.T

    rng = np.random.default_rng(31)
    x, y = rng.standard_normal((37, 159)).astype(np.float32), \
        rng.standard_normal((53, 37)).astype(np.float32)
    g = lowering.compile(f, backend="gpu")
    tx, ty = torch.from_numpy(x).cuda(), torch.from_numpy(y).cuda()
    cu = cuda_launch._cuda()
    driver_launch = cu.launch
    monkeypatch.setattr(cu, "launch", lambda *a: (launches.append(1), driver_launch(*a))[1])
    close(g(tx, ty).cpu().numpy(), f(x, y), rtol=1e-5, atol=1e-5)  # (compiles)
    assert made and launches, "no early launch"
    for run in made:
        run.builder.join(120)
    before = len(launches)
    for _ in range(2):
        close(g(tx, ty).cpu().numpy(), f(x, y), rtol=1e-5, atol=1e-5)
    assert len(launches) == before  # (Triton's launcher took over)
