"""The disk cache's files: where they live, written atomically, read so that damage is a miss and never an error.

Every entry can be made again (a kernel's source from its spec, a tuning result by tuning), so nothing on disk may
break a call: a damaged entry is rewritten, and a cache directory that cannot be used gives way, with one warning
that names RBLOCK_CACHE_DIR, to a directory private to this process.
"""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import tempfile
import threading
import warnings
from pathlib import Path

from rblock.settings import cache_dir

_warned: set[str] = set()
_lock = threading.Lock()


def warn_once(key: str, message: str) -> None:
    with _lock:
        if key in _warned:
            return
        _warned.add(key)
    warnings.warn(message, stacklevel=3)


def atomic_write(path: Path, text: str) -> None:
    """Write via a temp file + rename, so concurrent readers see the old file or the new one, never half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@functools.cache
def _private() -> Path:
    path = Path(tempfile.mkdtemp(prefix="rblock-cache-"))
    atexit.register(shutil.rmtree, path, True)
    return path


def folder(name: str) -> Path:
    """`<cache>/<name>`, made if missing; where it cannot be made or written, the same folder in a directory
    private to this process (warned once)."""
    path = cache_dir() / name
    try:
        path.mkdir(parents=True, exist_ok=True)
        if os.access(path, os.W_OK | os.X_OK):
            return path
        problem = "is not writable"
    except OSError as e:
        problem = f"cannot be used ({type(e).__name__}: {e.strerror or e})"
    warn_once(
        f"dir {path}",
        f"rblock: the cache folder {path} {problem}; this process caches in a private temporary directory instead "
        "(set RBLOCK_CACHE_DIR to a writable directory to keep kernels and tuning results across runs)",
    )
    path = _private() / name
    path.mkdir(exist_ok=True)
    return path


def read_text(path: Path) -> str | None:
    """The file's text; None when it is missing or damaged (unreadable, not text, not a file: warned once)."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeError) as e:
        warn_once(
            f"read {path}",
            f"rblock: ignoring damaged cache entry {path} ({type(e).__name__}); it is made again "
            "(set RBLOCK_CACHE_DIR to move the cache)",
        )
        return None


def write_text(path: Path, text: str) -> Path:
    """Write `text` to `path` atomically and return the path; where that fails (a folder in its place, a full or
    read-only disk), to the same name in the private directory (warned once) and return that path."""
    try:
        atomic_write(path, text)
        return path
    except OSError as e:
        warn_once(
            f"write {path}",
            f"rblock: cannot write cache entry {path} ({type(e).__name__}: {e.strerror or e}); this process keeps it "
            "in a private temporary directory (set RBLOCK_CACHE_DIR to move the cache)",
        )
    fallback = _private() / path.parent.name / path.name
    atomic_write(fallback, text)
    return fallback
