"""The on-disk cache's generic part (runtime/disk_cache.py): where it lives,
who may use it, entries that are whole or ignored."""

from __future__ import annotations

import logging
import os

import pytest

from runtime import disk_cache as D

KEY = "ab" * 32


def test_directory_from_the_environment(tmp_path):
    assert D.directory_from_env({"LOWERING_CACHE_DIR": str(tmp_path / "c")}) == tmp_path / "c"
    assert D.directory_from_env({"XDG_CACHE_HOME": str(tmp_path)}) == tmp_path / "lowering"
    home = D.directory_from_env({"HOME": str(tmp_path)})
    assert home.name == "lowering" and home.parent.name == ".cache"
    assert not D.enabled_from_env({"LOWERING_CACHE": "0"}) and D.enabled_from_env({})


def test_made_private_and_round_trips(tmp_path):
    c = D.DiskCache(tmp_path / "a" / "cache")
    assert c.get(KEY) is None and c.misses == 1
    assert c.put(KEY, {"x": [1, 2]}, b"\x00object")
    assert (os.stat(c.directory).st_mode & 0o777) == 0o700
    e = c.get(KEY)
    assert e is not None and e.meta["x"] == [1, 2] and e.data == b"\x00object" and c.hits == 1
    info = c.info()
    assert info["entries"] == 1 and info["bytes"] == os.path.getsize(c.path(KEY))
    assert c.clear() == 1 and c.info()["entries"] == 0


@pytest.mark.parametrize("damage", ["truncate", "flip", "garbage", "empty"])
def test_a_damaged_entry_is_ignored_and_logged(tmp_path, caplog, damage):
    c = D.DiskCache(tmp_path)
    c.put(KEY, {"x": 1}, b"data" * 100)
    raw = c.path(KEY).read_bytes()
    bad = {"truncate": raw[:-7], "flip": raw[:-3] + bytes([raw[-3] ^ 1]) + raw[-2:],
           "garbage": b"\x7fELF not an entry", "empty": b""}[damage]
    c.path(KEY).write_bytes(bad)
    with caplog.at_level(logging.WARNING, "lowering.cache"):
        assert c.get(KEY) is None
    assert c.rejected == 1 and "ignoring cache entry" in caplog.text
    assert c.put(KEY, {"x": 1}, b"data")  # rebuilt: overwritten
    assert c.get(KEY).data == b"data"


def test_an_entry_under_another_name_is_refused(tmp_path):
    c = D.DiskCache(tmp_path)
    c.put(KEY, {}, b"x")
    other = "cd" * 32
    c.path(KEY).rename(c.path(other))
    assert c.get(other) is None and c.rejected == 1


@pytest.mark.parametrize("mode", [0o755, 0o770, 0o701])
def test_a_directory_others_can_reach_turns_it_off(tmp_path, caplog, mode):
    d = tmp_path / "shared"
    d.mkdir()
    d.chmod(mode)
    c = D.DiskCache(d)
    with caplog.at_level(logging.WARNING, "lowering.cache"):
        assert not c.usable() and c.get(KEY) is None and not c.put(KEY, {}, b"x")
        assert not c.usable()
    assert [r.levelno for r in caplog.records] == [logging.WARNING]  # one warning
    assert "gives group or others access" in caplog.text and not list(d.iterdir())


def test_a_symlinked_directory_is_refused(tmp_path, caplog):
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    link = tmp_path / "link"
    link.symlink_to(real)
    with caplog.at_level(logging.WARNING, "lowering.cache"):
        c = D.DiskCache(link)
        assert not c.put(KEY, {}, b"x")
    assert "symbolic link" in c.reason and not list(real.iterdir())


def test_a_symlinked_entry_is_not_followed(tmp_path):
    c = D.DiskCache(tmp_path / "c")
    other = D.DiskCache(tmp_path / "elsewhere")
    other.put(KEY, {}, b"x")
    assert c.usable()
    c.path(KEY).symlink_to(other.path(KEY))
    assert c.get(KEY) is None and c.rejected == 1
    assert c.put(KEY, {}, b"y") and not c.path(KEY).is_symlink()  # replaced, not written through
    assert other.get(KEY).data == b"x"


def test_another_users_directory_is_refused(tmp_path, monkeypatch):
    c = D.DiskCache(tmp_path)
    monkeypatch.setattr(os, "getuid", lambda: os.stat(tmp_path).st_uid + 1)
    assert not c.usable() and "owned by uid" in c.reason


def test_off_by_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("LOWERING_CACHE_DIR", str(tmp_path / "c"))
    monkeypatch.setenv("LOWERING_CACHE", "0")
    c = D.current()
    assert not c.usable() and c.reason == "LOWERING_CACHE=0" and not c.put(KEY, {}, b"x")
    assert not (tmp_path / "c").exists()
    monkeypatch.delenv("LOWERING_CACHE")
    assert D.current().usable()  # the environment as it is now


def test_no_temporary_file_is_left(tmp_path):
    c = D.DiskCache(tmp_path)
    for i in range(3):
        c.put(KEY, {"i": i}, b"x" * i)
    assert sorted(p.name for p in tmp_path.iterdir()) == [KEY + D.SUFFIX]
    assert c.get(KEY).meta["i"] == 2
