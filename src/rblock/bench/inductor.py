"""torch.compile scopes for the benchmark: a fresh Inductor cache per point, and Inductor with its
persistent-RBLOCK candidate for looped reductions ("more aggressive persistent reduction") turned off.

That candidate is announced by the generated kernel's `inductor_meta["add_persistent_rblock"]` and turned into
an extra config by `triton_heuristics._reduction_configs`. Torch versions differ in where the decision lives, so
the first mechanism found wins:
1. an Inductor config flag whose name mentions `persistent_rblock` (patched to False);
2. the codegen hook `TritonKernel.add_persistent_rblock` (torch 2.13: a cached_property), forced to False;
3. the runtime side: `_reduction_configs` is wrapped to never see the key, with in-process compilation so the
   wrapper is the one that runs (torch 2.11 sets the key inline in `codegen_kernel`, so this is its way).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass

import torch

KEY = "add_persistent_rblock"


@contextlib.contextmanager
def fresh_compile(keep_in: str | None = None) -> Iterator[None]:
    """Reset Dynamo and use an empty Inductor/Triton cache dir, so a first call compiles and configs don't leak.
    `keep_in`: the cache dir is made inside this existing folder and kept (its kernels and autotuned configs)."""
    import torch._inductor.utils as inductor_utils

    fresh = getattr(inductor_utils, "fresh_cache", None) or inductor_utils.fresh_inductor_cache
    torch._dynamo.reset()
    try:
        with fresh(dir=keep_in, delete=keep_in is None):
            yield
    finally:
        torch._dynamo.reset()


@dataclass(frozen=True)
class Mechanism:
    description: str
    scope: Callable[[], AbstractContextManager[None]]


def _config_flags() -> dict[str, bool]:
    from torch._inductor import config

    return {
        key: False
        for key, value in config.get_config_copy().items()
        if "persistent_rblock" in key and "matmul" not in key and value is True
    }


@contextlib.contextmanager
def _class_attr(owner: type, name: str, value: object) -> Iterator[None]:
    original = owner.__dict__[name]
    setattr(owner, name, value)
    try:
        yield
    finally:
        setattr(owner, name, original)


def _codegen_hook() -> Callable[[], AbstractContextManager[None]] | None:
    try:
        from torch._inductor.codegen.triton import TritonKernel
    except ImportError:
        return None
    if not isinstance(TritonKernel.__dict__.get(KEY), (property, functools.cached_property)):
        return None
    # A property is a data descriptor, so it also wins over values a cached_property already stored on instances.
    return lambda: _class_attr(TritonKernel, KEY, property(lambda self: False))


def _runtime_hook() -> Callable[[], AbstractContextManager[None]] | None:
    try:
        from torch._inductor import config
        from torch._inductor.runtime import triton_heuristics
    except ImportError:
        return None
    original = getattr(triton_heuristics, "_reduction_configs", None)
    if original is None:
        return None
    try:
        if KEY not in inspect.getsource(original):
            return None
        signature = inspect.signature(original)
    except (OSError, TypeError, ValueError):
        return None
    if "inductor_meta" not in signature.parameters:
        return None

    def without_candidate(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        meta = bound.arguments.get("inductor_meta")
        if meta and KEY in meta:
            bound.arguments["inductor_meta"] = {k: v for k, v in meta.items() if k != KEY}
        return original(*bound.args, **bound.kwargs)

    @contextlib.contextmanager
    def scope() -> Iterator[None]:
        # Compile workers are other processes that would run the unwrapped function.
        with config.patch(compile_threads=1):
            triton_heuristics._reduction_configs = without_candidate
            try:
                yield
            finally:
                triton_heuristics._reduction_configs = original

    return scope


def no_persistent_rblock() -> Mechanism | None:
    """How to compile without the persistent-RBLOCK candidate in this torch, or None when no way is known."""
    flags = _config_flags()
    if flags:
        from torch._inductor import config

        return Mechanism(f"inductor config {', '.join(sorted(flags))} = False", lambda: config.patch(flags))
    hook = _codegen_hook()
    if hook is not None:
        return Mechanism(f"codegen: TritonKernel.{KEY} forced to False", hook)
    hook = _runtime_hook()
    if hook is not None:
        return Mechanism(f"runtime: triton_heuristics._reduction_configs called without '{KEY}'", hook)
    return None
