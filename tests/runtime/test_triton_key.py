"""Triton's installation key (`triton.runtime.cache.triton_key`, part of
every compile's cache key) is Triton's hash of its source files and 100+ MB
library, 0.35-0.7 s once per process: most of what a first compile in a
fresh process waited for. `triton_launch._seed_triton_key` puts in its place
a digest of Triton's version and of those files' paths, sizes and
modification times: no file is read, and another installation (another
version, a changed file) has another key."""

from __future__ import annotations

import os
import types

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


def test_the_key_is_seeded_without_hashing(fresh, monkeypatch):
    TL._seed_triton_key()
    key = tc.triton_key()
    assert not fresh and key.startswith("lowering-")  # Triton's hash never ran
    # another process: the same installation, the same key
    monkeypatch.setattr(tc, "triton_key", lambda: pytest.fail("hashed"))
    monkeypatch.setattr(TL, "_SEEDED", [])
    TL._seed_triton_key()
    assert tc.triton_key() == key
    TL._seed_triton_key()  # (once per process)
    assert tc.triton_key() == key


def test_the_disk_cache_plays_no_part(fresh, monkeypatch):
    monkeypatch.setenv("LOWERING_CACHE", "0")
    TL._seed_triton_key()
    assert tc.triton_key().startswith("lowering-") and not fresh
    assert disk_cache.current().writes == 0


def _installation(root):
    """A stand-in Triton installation under root: its package's module."""
    for rel, size in (("compiler/compiler.py", 10), ("language/core.py", 20),
                      ("_C/libtriton.so", 30), ("backends/nvidia/compiler.py", 40),
                      ("backends/nvidia/include/cuda.h", 50), ("runtime/jit.py", 60)):
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x" * size)
    (root / "__init__.py").write_text("")
    return types.SimpleNamespace(__file__=str(root / "__init__.py"), __version__="9.9.9")


def test_another_installation_has_another_key(tmp_path):
    fake = _installation(tmp_path / "triton")
    key = TL._installation_key(fake, disk_cache.digest)()
    assert TL._installation_key(fake, disk_cache.digest)() == key
    # a header is not the compiler's code: the same key
    (tmp_path / "triton/backends/nvidia/include/cuda.h").write_bytes(b"y" * 51)
    assert TL._installation_key(fake, disk_cache.digest)() == key
    # another version
    other = types.SimpleNamespace(__file__=fake.__file__, __version__="9.9.10")
    assert TL._installation_key(other, disk_cache.digest)() != key
    # a source file changed (its time; then its size)
    lib = tmp_path / "triton/language/core.py"
    st = os.stat(lib)
    os.utime(lib, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    touched = TL._installation_key(fake, disk_cache.digest)()
    assert touched != key
    lib.write_bytes(b"x" * 21)
    os.utime(lib, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    assert TL._installation_key(fake, disk_cache.digest)() not in (key, touched)
    # the library
    so = tmp_path / "triton/_C/libtriton.so"
    so.write_bytes(b"x" * 31)
    assert TL._installation_key(fake, disk_cache.digest)() != key


def test_warm_up_seeds_the_key_in_a_thread_and_a_compile_waits_for_it(fresh, monkeypatch):
    """`warm_up` (the first call on a device's arrays) seeds the key while
    the call is traced; a compile seeding meanwhile waits for that thread.
    (No GPU here: the driver part fails quietly.)"""
    monkeypatch.setattr(TL, "_WARM", [])
    TL.warm_up()
    TL.warm_up()  # (once per process)
    (thread,) = TL._WARM
    TL._seed_triton_key()  # (waits on the seeding lock where the thread holds it)
    thread.join(60)
    assert not thread.is_alive()
    assert TL._SEEDED and not fresh and tc.triton_key().startswith("lowering-")


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


def test_warm_up_imports_the_compilers_modules_in_its_thread():
    """A fresh process: after the warm-up thread, Triton's code generator
    and the experimental language it imports (0.4 s of a cold first compile
    on the device machine) are loaded, without the main thread asking."""
    import subprocess
    import sys

    code = ("import sys; from lowering.backends import triton_launch as TL; "
            "before = 'triton.compiler.code_generator' in sys.modules; "
            "TL.warm_up(); TL._WARM[0].join(120); "
            "print(before, 'triton.compiler.code_generator' in sys.modules, "
            "'triton.experimental.gluon' in sys.modules)")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=root, timeout=300,
                         env={**os.environ, "PYTHONPATH": root, "LOWERING_CACHE": "0"})
    assert out.stdout.split() == ["False", "True", "True"], (out.stdout, out.stderr[-2000:])
