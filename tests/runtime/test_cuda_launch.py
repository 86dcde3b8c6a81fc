"""The early launcher (`lowering/backends/cuda_launch.py`): a kernel's
parameters packed as Triton's per-signature launcher packs them, and the
hand-over to Triton's launcher once it is built. The driver calls are
stood in for here; tests/gpu runs them on a device."""

from __future__ import annotations

import ctypes
import types

import pytest

from lowering.backends import cuda_launch as C
from lowering.backends import triton_launch as TL


class _Buf:
    def __init__(self, ptr):
        self.ptr = ptr

    def data_ptr(self):
        return self.ptr


def _decode(params):
    return [(type(p).__name__, p.value) for p in params]


def test_pack_follows_the_signature_and_appends_the_scratch_pointers():
    sig = {"x": "*fp32", "n": "i32", "big": "i64", "scale": "fp32", "eps": "fp64",
           "flag": "i1", "BLOCK": "constexpr", "out": "*bf16", "none": "*i8"}
    args = (_Buf(4096), 7, 1 << 40, 0.5, 1e-300, True, 1024, 8192, None)
    got = _decode(C.pack(sig, args))
    assert got == [("c_ulong", 4096), ("c_int", 7), ("c_long", 1 << 40), ("c_float", 0.5),
                   ("c_double", 1e-300), ("c_byte", 1), ("c_ulong", 8192), ("c_ulong", 0),
                   ("c_ulong", 0), ("c_ulong", 0)]


def test_pack_refuses_what_it_cannot_pack():
    with pytest.raises(TypeError, match="fp16"):
        C.pack({"h": "fp16"}, (1.0,))
    with pytest.raises(TypeError):
        C.pack({"t": ("i32", "i32")}, ((1, 2),))
    with pytest.raises(ValueError):  # (one value per signature entry)
        C.pack({"a": "i32", "b": "i32"}, (1,))


def _metadata(**kw):
    base = dict(global_scratch_size=0, profile_scratch_size=0, num_ctas=1,
                launch_cooperative_grid=False, launch_pdl=False, tensordesc_meta=None,
                num_warps=4, shared=1024, name="k")
    base.update(kw)
    return types.SimpleNamespace(**base)


@pytest.mark.parametrize("kw", [dict(global_scratch_size=64), dict(profile_scratch_size=8),
                                dict(num_ctas=2), dict(launch_cooperative_grid=True),
                                dict(launch_pdl=True), dict(tensordesc_meta=[{}])])
def test_launches_only_triton_can_do_get_no_early_runner(kw, monkeypatch):
    assert C.plain(_metadata())
    assert not C.plain(_metadata(**kw))
    monkeypatch.setattr(C, "_per_signature_launcher", lambda: True)
    ck = types.SimpleNamespace(_run=None, metadata=_metadata(**kw), src=None)
    assert C.early_runner(ck, 4, lambda: 0, lambda: None) is None


def test_no_early_runner_for_another_launcher_or_a_loaded_kernel(monkeypatch):
    ck = types.SimpleNamespace(_run=None, metadata=_metadata(), src=None)
    monkeypatch.setattr(C, "_per_signature_launcher", lambda: False)
    assert C.early_runner(ck, 4, lambda: 0, lambda: None) is None
    monkeypatch.setattr(C, "_per_signature_launcher", lambda: True)
    ck._run = object()  # (Triton's launcher already built)
    assert C.early_runner(ck, 4, lambda: 0, lambda: None) is None


class _FakeCuda:
    def __init__(self):
        self.launches = []

    def launch(self, fn, gx, gy, gz, bx, by, bz, shared, stream, ptrs, extra):
        n = 4  # x, n, scale + 2 scratch (BLOCK is a constexpr)
        addrs = [ptrs[i] for i in range(n + 1)]
        vals = (ctypes.c_uint64.from_address(addrs[0]).value,
                ctypes.c_int32.from_address(addrs[1]).value,
                ctypes.c_float.from_address(addrs[2]).value,
                ctypes.c_uint64.from_address(addrs[3]).value,
                ctypes.c_uint64.from_address(addrs[4]).value)
        self.launches.append((fn, (gx, gy, gz), (bx, by, bz), shared, stream, vals))
        return 0

    @staticmethod
    def check(status, what):
        assert status == 0, what


def test_early_launches_hand_over_to_tritons_launcher(monkeypatch):
    """Until the thread has built Triton's launcher, the driver launches the
    kernel with the packed parameters on the caller's (or the device's
    current) stream; after, `later()`'s runner takes every call."""
    import triton.runtime

    fake = _FakeCuda()
    monkeypatch.setattr(C, "_per_signature_launcher", lambda: True)
    monkeypatch.setattr(C, "_cuda", lambda: fake)
    monkeypatch.setattr(C, "_load", lambda ck: 0xABC)
    gate = __import__("threading").Event()
    built = []

    def launcher_cls(src, md):
        gate.wait(10)
        built.append((src, md))
    monkeypatch.setattr(triton.runtime, "driver", types.SimpleNamespace(
        active=types.SimpleNamespace(launcher_cls=launcher_cls)))
    sig = {"x": "*fp32", "n": "i32", "scale": "fp32", "BLOCK": "constexpr"}
    ck = types.SimpleNamespace(_run=None, metadata=_metadata(num_warps=8, shared=512),
                               src=types.SimpleNamespace(signature=sig))
    fast_calls = []

    def later():
        def fast(*args, stream=None):
            fast_calls.append((args, stream))
        return fast
    run = C.early_runner(ck, 6, lambda: 55, later)
    assert run.builder in TL._BACKGROUND  # (the exit waits for the build)
    run(_Buf(1 << 33), 100, 2.5, 256)
    run(_Buf(64), -3, 0.25, 256, stream=9)
    assert fake.launches == [
        (0xABC, (6, 1, 1), (256, 1, 1), 512, 55, (1 << 33, 100, 2.5, 0, 0)),
        (0xABC, (6, 1, 1), (256, 1, 1), 512, 9, (64, -3, 0.25, 0, 0))]
    gate.set()
    run.builder.join(10)
    assert built == [(ck.src, ck.metadata)]
    run(_Buf(64), 1, 1.0, 256, stream=3)
    assert len(fake.launches) == 2
    assert [(args[1:], stream) for args, stream in fast_calls] == [((1, 1.0, 256), 3)]
    # what a graph records keeps the driver's launch (no hand-over inside a capture)
    run.driver(_Buf(128), 2, 0.5, 256, stream=4)
    assert fake.launches[-1] == (0xABC, (6, 1, 1), (256, 1, 1), 512, 4, (128, 2, 0.5, 0, 0))
