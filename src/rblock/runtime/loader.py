"""Generated source -> a Triton kernel: written once to the cache dir (atomically), imported, memoized."""

from __future__ import annotations

import hashlib
import importlib.util
import threading
from pathlib import Path

from rblock.codegen.spec import KernelSpec
from rblock.runtime import device, disk

_loaded: dict[str, object] = {}
_lock = threading.Lock()


def source_path(spec: KernelSpec) -> Path:
    return disk.folder("kernels") / f"{spec.name}_{_digest(spec)}.py"


def _digest(spec: KernelSpec) -> str:
    return hashlib.sha256(spec.source.encode()).hexdigest()[:20]


def load(spec: KernelSpec):
    """The @triton.jit function defined by `spec.source`. A cached file that differs from the source (damaged,
    or not a file at all) is written again, or written elsewhere when it cannot be (`disk.write_text`)."""
    device.check_interpreter()
    key = f"{spec.name}_{_digest(spec)}"
    fn = _loaded.get(key)
    if fn is not None:
        return fn
    with _lock:  # one import per kernel, however many threads first meet it
        if key not in _loaded:
            path = source_path(spec)
            text = disk.read_text(path)
            if text != spec.source:
                if text is not None:  # a file of the kernel's name and digest holds something else: damage
                    disk.warn_once(f"read {path}", f"rblock: cache entry {path} is damaged; it is made again")
                path = disk.write_text(path, spec.source)
            module_spec = importlib.util.spec_from_file_location(f"rblock_kernels.{key}", path)
            module = importlib.util.module_from_spec(module_spec)
            module_spec.loader.exec_module(module)
            _loaded[key] = getattr(module, spec.name)
        return _loaded[key]
