"""User-owned settings: environment variables (read once, here) and the per-call overrides of `rblock.settings`.

Environment variables (also tabled in docs/env_vars.md):
- RBLOCK_CACHE_DIR: where generated kernels and tuning results live (default ~/.cache/rblock).
- RBLOCK_TUNE: 0 disables timing candidates on a GPU (the planner's first candidate runs), 1 enables it (default).
- RBLOCK_FORCE_INTERPRET: 1 runs kernels in Triton's CPU interpreter even when a GPU is present.
- RBLOCK_DEBUG_SYNC: N > 0 bounds the wait of split-row programs for the others of their row to N polls; a call
  whose programs gave up raises instead of hanging (default 0: wait until they arrive, which they do when the
  launch is co-resident).
- RBLOCK_PDL: 0 launches every kernel only after the one before it has finished; 1 (default) lets a kernel be
  scheduled while the one before it ends, on GPUs that can (compute capability 9.0 on).
- RBLOCK_DEBUG: 1 makes the `rblock` command print an error's traceback before its one-line message.
- RBLOCK_COMPILE_WORKERS: how many processes compile the tuner's candidates (default: the CPUs this process may run
  on, shared among the LOCAL_WORLD_SIZE processes a launcher such as torchrun starts on a machine, at most 16; none
  with one CPU); 0 compiles them on threads of this process.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
from collections.abc import Iterator
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Literal

from rblock.errors import InvalidArgument, InvalidType, describe
from rblock.plan.config import Config

Strategy = Literal["auto", "persistent", "looped"]
STRATEGIES = ("auto", "persistent", "looped")


def cache_dir() -> Path:
    return Path(os.environ.get("RBLOCK_CACHE_DIR") or Path.home() / ".cache" / "rblock")


def tune_enabled_by_env() -> bool:
    return os.environ.get("RBLOCK_TUNE", "1") != "0"


def force_interpret() -> bool:
    return os.environ.get("RBLOCK_FORCE_INTERPRET", "0") == "1"


def dependent_launches_by_env() -> bool:
    return os.environ.get("RBLOCK_PDL", "1") != "0"


def debug() -> bool:
    return os.environ.get("RBLOCK_DEBUG", "0") == "1"


def compile_workers() -> int:
    text = os.environ.get("RBLOCK_COMPILE_WORKERS")
    if text is None:
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        local = os.environ.get("LOCAL_WORLD_SIZE", "1")
        cpus //= max(int(local), 1) if local.isdigit() else 1
        return min(cpus, 16) if cpus > 1 else 0
    if not text.isdigit():
        raise ValueError(f"rblock: RBLOCK_COMPILE_WORKERS must be a number of processes >= 0, got {text!r}")
    return int(text)


def sync_spins() -> int:
    text = os.environ.get("RBLOCK_DEBUG_SYNC", "0")
    try:
        spins = int(text)
    except ValueError:
        spins = -1
    if spins < 0:
        raise ValueError(f"rblock: RBLOCK_DEBUG_SYNC must be a number of polls >= 0, got {text!r}")
    return spins


@dataclass(frozen=True, slots=True)
class Settings:
    """How rblock picks a kernel config. Part of every compiled-call cache key."""

    strategy: Strategy = "auto"  # restrict the planner's candidates to one strategy
    config: Config | None = None  # run exactly this config (skips planning and tuning)
    tune: bool = True  # time the candidates on a GPU and keep the fastest (disk-cached)

    def __post_init__(self) -> None:
        if not isinstance(self.strategy, str) or self.strategy not in STRATEGIES:
            error = InvalidArgument if isinstance(self.strategy, str) else InvalidType
            raise error(
                "settings", "strategy", f"must be 'auto', 'persistent' or 'looped', got {describe(self.strategy)}"
            )
        if self.config is not None and not isinstance(self.config, Config):
            raise InvalidType("settings", "config", f"must be an rblock.Config or None, got {describe(self.config)}")
        if not isinstance(self.tune, bool):  # "no", 0 or None would read as a truth value without a word
            raise InvalidType("settings", "tune", f"must be True or False, got {describe(self.tune)}")


_FIELDS = tuple(f.name for f in fields(Settings))
_current: contextvars.ContextVar[Settings] = contextvars.ContextVar("rblock_settings", default=Settings())


def current() -> Settings:
    return _current.get()


def settings(*positional: object, **overrides: object) -> contextlib.AbstractContextManager[Settings]:
    """Override settings inside a `with` block: `with rblock.settings(strategy="looped"): ...`. Every argument is
    checked at this call, so a bad one fails where it is written, not at the first kernel it would steer."""
    if positional:
        raise InvalidType(
            "settings",
            "arguments",
            f"are keywords ({', '.join(f'{n}=' for n in _FIELDS)}), got {len(positional)} positional",
        )
    for name in overrides:
        if name not in _FIELDS:
            raise InvalidArgument("settings", name, f"is not a setting; allowed: {', '.join(_FIELDS)}")
    replace(_current.get(), **overrides)  # Settings checks each value
    return _overridden(overrides)


@contextlib.contextmanager
def _overridden(overrides: dict[str, object]) -> Iterator[Settings]:
    new = replace(_current.get(), **overrides)
    token = _current.set(new)
    try:
        yield new
    finally:
        _current.reset(token)
