"""On-disk cache of tuning winners. One JSON file per key; atomic writes; a damaged entry is a miss (warned once)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass

import torch
import triton

from rblock.plan.config import Config
from rblock.runtime import disk

CACHE_VERSION = 1


@dataclass(frozen=True, slots=True)
class TuneKey:
    graph: str  # the KernelGraph (row count erased), printed: dtypes, strides and the ops are all in it
    xnumel_bucket: int  # next power of two of the row count
    strategy: str
    device: str
    capability: str
    torch_version: str = torch.__version__
    triton_version: str = triton.__version__
    rblock_version: str = ""
    cache_version: int = CACHE_VERSION

    def digest(self) -> str:
        return hashlib.sha256(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()[:32]


def _path(key: TuneKey):
    return disk.folder("tuning") / f"{key.digest()}.json"


def lookup(key: TuneKey) -> tuple[Config, dict] | None:
    path = _path(key)
    text = disk.read_text(path)
    if text is None:
        return None
    try:
        data = json.loads(text)
        if data["key"] != asdict(key):
            raise ValueError("key mismatch")
        return Config(**data["config"]), data
    except Exception as e:  # a damaged entry must never break a call: re-tune and overwrite it
        disk.warn_once(
            f"read {path}",
            f"rblock: ignoring unreadable tuning cache entry {path} ({e}); set RBLOCK_CACHE_DIR to move the cache",
        )
        return None


def store(key: TuneKey, config: Config, timings: list[dict]) -> None:
    data = {"key": asdict(key), "config": asdict(config), "timings": timings}
    disk.write_text(_path(key), json.dumps(data, indent=1, sort_keys=True))
