"""On-disk cache of tuning winners. One JSON file per key; atomic writes; corrupt files are ignored with a warning."""

from __future__ import annotations

import hashlib
import json
import warnings
from dataclasses import asdict, dataclass

import torch
import triton

from rblock.plan.config import Config
from rblock.runtime.loader import atomic_write
from rblock.settings import cache_dir

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
    return cache_dir() / "tuning" / f"{key.digest()}.json"


def lookup(key: TuneKey) -> tuple[Config, dict] | None:
    path = _path(key)
    try:
        data = json.loads(path.read_text())
        if data["key"] != asdict(key):
            raise ValueError("key mismatch")
        return Config(**data["config"]), data
    except FileNotFoundError:
        return None
    except Exception as e:  # a damaged entry must never break a call: re-tune and overwrite it
        warnings.warn(
            f"rblock: ignoring unreadable tuning cache entry {path} ({e}); set RBLOCK_CACHE_DIR to move the cache",
            stacklevel=2,
        )
        return None


def store(key: TuneKey, config: Config, timings: list[dict]) -> None:
    data = {"key": asdict(key), "config": asdict(config), "timings": timings}
    atomic_write(_path(key), json.dumps(data, indent=1, sort_keys=True))
