"""Where kernels run: the CUDA GPU when there is one, else Triton's interpreter on the CPU."""

from __future__ import annotations

import functools
import os
import sys

import torch

from rblock.errors import RBlockError
from rblock.settings import dependent_launches_by_env, force_interpret


@functools.cache
def interpreted() -> bool:
    """True when kernels run in Triton's interpreter (no CUDA device, or RBLOCK_FORCE_INTERPRET=1)."""
    return force_interpret() or not torch.cuda.is_available()


def configure() -> None:
    """Select the interpreter before any kernel is defined: Triton reads the variable in @triton.jit, its own
    library's functions (the combines of tl.sum, tl.max) included, which exist once triton is imported."""
    global _interpreter_too_late
    if interpreted():
        _interpreter_too_late = "triton" in sys.modules and not _triton_interprets()
        os.environ["TRITON_INTERPRET"] = "1"


def _triton_interprets() -> bool:
    """Whether the imported triton made its own library functions for the interpreter."""
    try:
        from triton.language import standard
        from triton.runtime.interpreter import InterpretedFunction
    except ImportError:
        return True  # another layout of triton: let it speak for itself
    return isinstance(getattr(standard, "_sum_combine", None), InterpretedFunction)


_interpreter_too_late = False


def check_interpreter() -> None:
    """Raise, rather than fail inside Triton, when the interpreter was asked for after triton was imported."""
    if _interpreter_too_late:
        raise RBlockError(
            "rblock: without a CUDA GPU rblock runs its kernels in Triton's interpreter, which Triton turns on only "
            "when TRITON_INTERPRET=1 is set before triton is first imported, and triton was imported before "
            "rblock: import rblock first, or set TRITON_INTERPRET=1 in the environment"
        )


@functools.cache
def dependent_launches() -> bool:
    """Whether kernels launch as programmatic dependents of the one before them: compute capability 9.0 on (the
    instructions exist from sm_90), unless RBLOCK_PDL=0."""
    return not interpreted() and dependent_launches_by_env() and torch.cuda.get_device_capability()[0] >= 9


@functools.cache
def kernel_device_type() -> str:
    return "cpu" if interpreted() else "cuda"


def kernel_device() -> torch.device:
    return torch.device("cpu") if interpreted() else torch.device("cuda", torch.cuda.current_device())


@functools.cache
def device_name(index: int = 0) -> str:
    if interpreted():
        return "triton-interpreter (cpu)"
    return torch.cuda.get_device_name(index)


@functools.cache
def device_properties() -> dict[str, int | str]:
    """Facts the planner and tuner use; fixed numbers under the interpreter (an H100-class default)."""
    if interpreted():
        return {
            "name": device_name(),
            "capability": "interp",
            "sm_count": 132,
            "regs_per_sm": 65536,
            "threads_per_sm": 2048,
            "smem_per_sm": 233472,
        }
    p = torch.cuda.get_device_properties(torch.cuda.current_device())
    return {
        "name": p.name,
        "capability": f"{p.major}.{p.minor}",
        "sm_count": p.multi_processor_count,
        "regs_per_sm": getattr(p, "regs_per_multiprocessor", 65536),
        "threads_per_sm": getattr(p, "max_threads_per_multi_processor", 2048),
        "smem_per_sm": getattr(p, "shared_memory_per_multiprocessor", 233472),
    }
