"""The on-disk compile cache end to end (lowering/backends/cpu_cache.py): a
new process runs what an earlier one compiled without the passes or LLVM,
with numpy's results; a damaged entry is rebuilt; the cache off when its
directory is not the user's alone, or when asked."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np

import lowering
from lowering import pipeline
from lowering.backends import cpu_cache
from runtime import disk_cache

ROOT = Path(__file__).resolve().parents[1]

# each program compiled in a child process; it prints what the cache saw and
# whether every result equals numpy's
CHILD = textwrap.dedent("""
    import json, sys
    import numpy as np
    import lowering
    from bench.workloads import layernorm
    from lowering.testing import TOLERANCES, assert_same_value

    def libm(x, y):  # a kernel that calls libm (hypot, fmod: no inline expansion)
        return np.hypot(x, y) + np.fmod(x, y + 3.0)

    def externs(x):  # BLAS and a numpy routine around kernels
        return np.sort(x @ x.T, axis=-1) * 2.0

    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 256), dtype=np.float32)
    w, b = rng.standard_normal(256, dtype=np.float32), rng.standard_normal(256, dtype=np.float32)
    y = rng.uniform(0.5, 2.0, (64, 256)).astype(np.float32)
    ok = []
    for fn, args in [(layernorm, (x, w, b)), (libm, (x, y)), (externs, (x[:16, :16],))]:
        got = lowering.compile(fn)(*args)
        try:  # (the suite's tolerance table: LayerNorm reduces 256 terms; libm's sum
            # cancels, so its ULP from hypot grow as much)
            assert_same_value(got, fn(*args), rtol=TOLERANCES.rtol(np.float32, "reduction", 256))
            ok.append(True)
        except AssertionError:
            ok.append(False)
        ok.append(lowering.explain(fn)(*args).kernel_count > 0)
    print(json.dumps({"ok": ok, "info": lowering.cache_info()}))
""")


def child(cache_dir, **env) -> dict:
    r = subprocess.run([sys.executable, "-c", CHILD], cwd=ROOT, capture_output=True, text=True,
                       timeout=300, env={**os.environ, "LOWERING_CACHE_DIR": str(cache_dir),
                                         "LOWERING_CACHE": "1", **env})
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    out["stderr"] = r.stderr
    return out


def entries(d) -> list[Path]:
    return sorted(Path(d).glob("*" + disk_cache.SUFFIX))


def test_a_new_process_runs_what_an_earlier_one_compiled(tmp_path):
    first = child(tmp_path)
    assert all(first["ok"]), first
    info = first["info"]
    assert info["enabled"] and info["hits"] == 0 and info["writes"] == 3 == info["entries"]
    assert info["llvm"]["kernel_modules"] == 3
    second = child(tmp_path)
    assert all(second["ok"]), second
    info = second["info"]
    assert info["hits"] == 3 and info["misses"] == 0 and info["writes"] == 0
    # no LLVM for the kernels: the entries' objects linked instead (a native
    # entry, which holds this process's addresses, is compiled in each process)
    assert info["llvm"]["kernel_modules"] == 0 and info["llvm"]["objects_loaded"] == 3


def test_damaged_entries_are_ignored_logged_and_rebuilt(tmp_path):
    child(tmp_path)
    a, b, c = entries(tmp_path)
    a.write_bytes(a.read_bytes()[: len(a.read_bytes()) // 2])  # truncated
    raw = bytearray(b.read_bytes())
    raw[-10] ^= 0xFF  # a bit of its object code flipped
    b.write_bytes(bytes(raw))
    out = child(tmp_path)
    assert all(out["ok"]), out
    info = out["info"]
    assert info["rejected"] == 2 and info["hits"] == 1 and info["writes"] == 2
    assert out["stderr"].count("ignoring cache entry") == 2
    again = child(tmp_path)["info"]  # rebuilt: whole again
    assert again["hits"] == 3 and again["rejected"] == 0 and again["llvm"]["kernel_modules"] == 0


def test_a_directory_others_can_reach_is_not_used(tmp_path):
    d = tmp_path / "open"
    d.mkdir()
    d.chmod(0o755)
    out = child(d)
    assert all(out["ok"])
    assert not out["info"]["enabled"] and "gives group or others access" in out["info"]["reason"]
    assert out["stderr"].count("on-disk compile cache off") == 1
    assert entries(d) == []


def test_a_symlinked_directory_is_not_used(tmp_path):
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    (tmp_path / "link").symlink_to(real)
    out = child(tmp_path / "link")
    assert all(out["ok"]) and not out["info"]["enabled"]
    assert "symbolic link" in out["info"]["reason"] and entries(real) == []


def test_off_with_LOWERING_CACHE_0(tmp_path):
    out = child(tmp_path / "c", LOWERING_CACHE="0")
    assert all(out["ok"]) and not out["info"]["enabled"] and out["info"]["writes"] == 0
    assert not (tmp_path / "c").exists()


def test_two_processes_writing_the_same_entries(tmp_path):
    env = {**os.environ, "LOWERING_CACHE_DIR": str(tmp_path), "LOWERING_CACHE": "1"}
    procs = [subprocess.Popen([sys.executable, "-c", CHILD], cwd=ROOT, env=env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(2)]
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        assert all(json.loads(out.strip().splitlines()[-1])["ok"])
    assert len(entries(tmp_path)) == 3 and not list(tmp_path.glob(disk_cache.TEMP_PREFIX + "*"))
    info = child(tmp_path)["info"]
    assert info["hits"] == 3 and info["rejected"] == 0 and info["llvm"]["kernel_modules"] == 0


def test_cache_info_and_cache_clear(tmp_path, monkeypatch):
    monkeypatch.setenv("LOWERING_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(cpu_cache, "_suspended", False)

    def f(x):
        return np.tanh(x) * 3.0 - 1.25  # (a program no other test compiles)

    x = np.linspace(-2, 2, 37)
    np.testing.assert_allclose(lowering.compile(f)(x), f(x))
    info = lowering.cache_info()
    assert info["directory"] == str(tmp_path) and info["enabled"] and info["misses"] == 1
    assert info["writes"] == 1 and info["entries"] == 1 and info["bytes"] > 0
    assert lowering.cache_clear() == 1 and lowering.cache_info()["entries"] == 0
    pipeline.clear_programs()  # (and the disk cache left alone from then on)
    assert not lowering.cache_info()["enabled"]
    np.testing.assert_allclose(lowering.compile(f)(x), f(x))
    assert lowering.cache_info()["entries"] == 0
