"""Generated source -> a Triton kernel: written once to the cache dir (atomically), imported, memoized."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import tempfile
from pathlib import Path

from rblock.codegen.spec import KernelSpec
from rblock.runtime import device
from rblock.settings import cache_dir

_loaded: dict[str, object] = {}


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


def source_path(spec: KernelSpec) -> Path:
    digest = hashlib.sha256(spec.source.encode()).hexdigest()[:20]
    return cache_dir() / "kernels" / f"{spec.name}_{digest}.py"


def load(spec: KernelSpec):
    """The @triton.jit function defined by `spec.source`."""
    device.check_interpreter()
    path = source_path(spec)
    key = str(path)
    if key in _loaded:
        return _loaded[key]
    if not path.exists() or path.read_text() != spec.source:
        atomic_write(path, spec.source)
    module_spec = importlib.util.spec_from_file_location(f"rblock_kernels.{path.stem}", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    _loaded[key] = getattr(module, spec.name)
    return _loaded[key]
