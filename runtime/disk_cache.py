"""The on-disk cache: compiled artifacts kept from one process to the next, so
that a new process that runs a program compiled before skips the compiler.

This module is the generic part — where the directory is and who may use it,
content addressing, integrity, atomic writes; what an entry holds (a CPU
program's object code and its plan) is decided by its user
(`lowering/backends/cpu_cache.py`).

Directory: `$LOWERING_CACHE_DIR`, else `$XDG_CACHE_HOME/lowering`, else
`~/.cache/lowering`, created with mode 0700. An entry is loaded as machine
code, so the directory must be the user's alone: when it is not owned by the
current user, grants any access to group or others, or is a symbolic link,
the cache is off for the process, with one warning (logger
`lowering.cache`), never an exception. `LOWERING_CACHE=0` turns it off.

An entry is one file, `<sha256 of its key>.entry`:

    lowering-cache-entry 1\\n
    <sha256 of the rest of the file, hex>\\n
    <length of the metadata>\\n
    <metadata: JSON, its "key" the file's name><data: bytes>

A file that does not parse, whose checksum does not match, or whose metadata
names another key is ignored (logged) and overwritten by the next write; a
symbolic link in place of an entry is never followed. Writers write a
temporary file in the directory and rename it over the entry (`os.replace`),
so that a reader, or a second writer of the same entry, sees the whole old
file or the whole new one.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import stat
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

MAGIC = b"lowering-cache-entry 1\n"
SUFFIX = ".entry"
TEMP_PREFIX = ".tmp-"

log = logging.getLogger("lowering.cache")


def directory_from_env(env=os.environ) -> Path:
    """Where the cache lives, from the environment (see the module's doc)."""
    if env.get("LOWERING_CACHE_DIR"):
        return Path(env["LOWERING_CACHE_DIR"]).expanduser()
    if env.get("XDG_CACHE_HOME"):
        return Path(env["XDG_CACHE_HOME"]).expanduser() / "lowering"
    return Path("~/.cache/lowering").expanduser()


def enabled_from_env(env=os.environ) -> bool:
    return env.get("LOWERING_CACHE", "1") != "0"


def digest(parts: dict) -> str:
    """The content address of a key: sha256 of its canonical JSON."""
    text = json.dumps(parts, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def refusal(path: Path) -> str | None:
    """Why `path` may not hold the cache (None: it may). It is made (0700,
    parents too) when missing."""
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = os.lstat(path)
    except OSError as e:
        return f"cannot create it ({e.strerror or e})"
    if stat.S_ISLNK(st.st_mode):
        return "it is a symbolic link"
    if not stat.S_ISDIR(st.st_mode):
        return "it is not a directory"
    if st.st_uid != os.getuid():
        return f"it is owned by uid {st.st_uid}, not by the current user ({os.getuid()})"
    if st.st_mode & 0o077:
        return (f"its mode {stat.S_IMODE(st.st_mode):04o} gives group or others access "
                f"(chmod 700 it)")
    return None


@dataclass
class Entry:
    meta: dict
    data: bytes


def encode(key: str, meta: dict, data: bytes) -> bytes:
    body = json.dumps({**meta, "key": key}, sort_keys=True).encode()
    rest = b"%d\n" % len(body) + body + data
    return MAGIC + hashlib.sha256(rest).hexdigest().encode() + b"\n" + rest


def decode(key: str, raw: bytes) -> Entry:
    """The entry in `raw`, or ValueError saying what is wrong with it."""
    if not raw.startswith(MAGIC):
        raise ValueError("not a cache entry of this format")
    head = len(MAGIC)
    checksum, rest = raw[head:head + 64], raw[head + 65:]
    if raw[head + 64:head + 65] != b"\n" or hashlib.sha256(rest).hexdigest().encode() != checksum:
        raise ValueError("checksum mismatch (truncated or corrupt)")
    length, _, rest = rest.partition(b"\n")
    n = int(length)
    meta = json.loads(rest[:n])
    if not isinstance(meta, dict) or meta.get("key") != key:
        raise ValueError("it belongs to another key")
    return Entry(meta, rest[n:])


class DiskCache:
    """One cache directory, checked on first use; its counters are this
    process's."""

    def __init__(self, directory: Path, enabled: bool = True):
        self.directory = Path(directory)
        self.requested = self.enabled = enabled
        self.reason = None if enabled else "LOWERING_CACHE=0"
        self._checked = not enabled
        self._lock = threading.Lock()
        self.hits = self.misses = self.writes = self.rejected = 0

    def usable(self) -> bool:
        """Whether the cache is on (the directory's policy checked once)."""
        if not self._checked:
            with self._lock:
                if not self._checked:
                    why = refusal(self.directory)
                    if why is not None:
                        self.off(f"cache directory {self.directory}: {why}")
                    self._checked = True
        return self.enabled

    def off(self, reason: str) -> None:
        """The cache off for the process, with one warning."""
        if self.enabled:
            self.enabled, self.reason = False, reason
            log.warning("lowering: on-disk compile cache off: %s", reason)

    def path(self, key: str) -> Path:
        return self.directory / (key + SUFFIX)

    def get(self, key: str) -> Entry | None:
        """The valid entry for `key`, or None (a miss; a bad entry is logged)."""
        if not self.usable():
            return None
        try:
            fd = os.open(self.path(key), os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        except FileNotFoundError:
            self.misses += 1
            return None
        except OSError as e:  # a symbolic link (ELOOP), unreadable
            return self.reject(key, f"cannot open it ({e.strerror or e})")
        try:
            with os.fdopen(fd, "rb") as f:
                if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                    return self.reject(key, "not a regular file")
                raw = f.read()
            entry = decode(key, raw)
        except (OSError, ValueError) as e:
            return self.reject(key, str(e))
        self.hits += 1
        log.debug("hit %s", key[:16])
        return entry

    def reject(self, key: str, why: str) -> None:
        """Count an entry that cannot be used as a miss, and say why; the
        next `put` overwrites it."""
        self.rejected += 1
        self.misses += 1
        log.warning("lowering: ignoring cache entry %s (%s); it will be rebuilt",
                    self.path(key), why)
        return None

    def put(self, key: str, meta: dict, data: bytes) -> bool:
        """Write the entry for `key` atomically; False (logged) when it could not."""
        if not self.usable():
            return False
        raw = encode(key, meta, data)
        tmp = None
        try:
            fd, tmp = tempfile.mkstemp(prefix=TEMP_PREFIX, suffix=SUFFIX, dir=self.directory)
            with os.fdopen(fd, "wb") as f:
                f.write(raw)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path(key))
        except OSError as e:
            log.warning("lowering: could not write cache entry %s: %s", self.path(key), e)
            if tmp is not None:
                with _quiet():
                    os.unlink(tmp)
            return False
        self.writes += 1
        log.debug("wrote %s (%d bytes)", key[:16], len(raw))
        return True

    def entries(self) -> list[Path]:
        if not self.usable():
            return []
        return sorted(p for p in self.directory.glob("*" + SUFFIX)
                      if not p.name.startswith(TEMP_PREFIX))

    def info(self) -> dict:
        files = self.entries()
        return {"directory": str(self.directory), "enabled": self.usable(),
                "reason": self.reason, "entries": len(files),
                "bytes": sum(_size(p) for p in files), "hits": self.hits,
                "misses": self.misses, "writes": self.writes, "rejected": self.rejected}

    def clear(self) -> int:
        """Remove every entry (and stale temporary files); how many entries."""
        if not self.usable():
            return 0
        n = 0
        for p in self.directory.glob("*" + SUFFIX):
            with _quiet():
                p.unlink()
                n += not p.name.startswith(TEMP_PREFIX)
        return n


def _size(p: Path) -> int:
    try:
        return p.lstat().st_size
    except OSError:
        return 0


class _quiet:
    """Ignore an OSError (a file another process removed first)."""

    def __enter__(self):
        return self

    def __exit__(self, kind, value, tb):
        return kind is not None and issubclass(kind, OSError)


_current: DiskCache | None = None
_current_lock = threading.Lock()


def current() -> DiskCache:
    """The process's cache, for the environment as it is now (a changed
    LOWERING_CACHE / LOWERING_CACHE_DIR / XDG_CACHE_HOME / HOME gives a
    fresh one, with fresh counters)."""
    global _current
    where, on = directory_from_env(), enabled_from_env()
    c = _current
    if c is None or c.directory != where or c.requested != on:
        with _current_lock:
            c = _current
            if c is None or c.directory != where or c.requested != on:
                c = _current = DiskCache(where, on)
    return c
