"""Triton's installation key (`triton.runtime.cache.triton_key`, a hash of
its source files and 100+ MB library, part of every compile's cache key)
is taken from the on-disk cache by a process whose Triton files have the
same paths, sizes and modification times as when it was hashed
(`triton_launch._seed_triton_key`): hashed once per installation instead
of once per process."""

from __future__ import annotations

import pytest

pytest.importorskip("triton")

import triton  # noqa: E402
import triton.runtime.cache as tc  # noqa: E402

from lowering.backends import triton_launch as TL  # noqa: E402
from runtime import disk_cache  # noqa: E402


@pytest.fixture
def fresh(monkeypatch, tmp_path):
    """A process state with nothing seeded and an empty cache directory;
    Triton's own key function counted."""
    monkeypatch.setenv("LOWERING_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("LOWERING_CACHE", raising=False)
    calls = []
    real = tc.triton_key

    def counted():
        calls.append(1)
        return real()
    monkeypatch.setattr(tc, "triton_key", counted)
    monkeypatch.setattr(TL, "_SEEDED", [])
    return calls


def test_the_key_is_hashed_once_then_read_from_the_cache(fresh, monkeypatch):
    want = tc.triton_key()  # (Triton's value; counted once)
    TL._seed_triton_key()
    assert len(fresh) == 2  # hashed: the cache was empty
    assert tc.triton_key() == want and len(fresh) == 2  # the seeded value, no hashing
    assert disk_cache.current().writes == 1
    # another process: Triton's function again, the cache has the key
    monkeypatch.setattr(tc, "triton_key", lambda: pytest.fail("hashed again"))
    monkeypatch.setattr(TL, "_SEEDED", [])
    TL._seed_triton_key()
    assert tc.triton_key() == want


def test_another_installation_is_hashed_again(fresh, monkeypatch):
    TL._seed_triton_key()
    assert len(fresh) == 1
    monkeypatch.setattr(TL, "_SEEDED", [])
    monkeypatch.setattr(triton, "__version__", triton.__version__ + ".other")
    hashed = []
    monkeypatch.setattr(tc, "triton_key", lambda: hashed.append(1) or "other-key")
    TL._seed_triton_key()
    assert hashed == [1] and tc.triton_key() == "other-key"


def test_without_the_disk_cache_triton_hashes_as_usual(fresh, monkeypatch):
    monkeypatch.setenv("LOWERING_CACHE", "0")
    before = tc.triton_key
    TL._seed_triton_key()
    assert tc.triton_key is before and not fresh


def test_warm_up_seeds_the_key_in_a_thread_and_a_compile_waits_for_it(fresh, monkeypatch):
    """`warm_up` (the first call on a device's arrays) seeds the key while
    the call is traced; a compile seeding meanwhile waits for that thread
    instead of hashing again. (No GPU here: the driver part fails quietly.)"""
    monkeypatch.setattr(TL, "_WARM", [])
    TL.warm_up()
    TL.warm_up()  # (once per process)
    (thread,) = TL._WARM
    TL._seed_triton_key()  # (waits on the seeding lock where the thread holds it)
    thread.join(60)
    assert not thread.is_alive()
    assert TL._SEEDED and len(fresh) == 1  # hashed once, by one of the two
    assert disk_cache.current().writes == 1


def test_no_warm_up_for_kernels_in_the_interpreter(monkeypatch):
    """Under the interpreter the warm-up thread would import Triton while a
    kernel load sets TRITON_INTERPRET: the first device call never starts it."""
    import numpy as np

    import lowering
    from tests.stand_in_device import Box, install

    monkeypatch.setenv("LOWERING_GPU", "interpret")
    install(monkeypatch)
    monkeypatch.setattr(TL, "_WARM", [])
    f = lowering.compile(lambda x: x * 2 + 1, backend="gpu")
    np.testing.assert_array_equal(f(Box(np.ones(4, np.float32))).a, np.full(4, 3, np.float32))
    assert TL._WARM == []
