"""Where kernels run: the CUDA GPU when there is one, else Triton's interpreter on the CPU."""

from __future__ import annotations

import functools
import os

import torch

from rblock.settings import force_interpret


@functools.cache
def interpreted() -> bool:
    """True when kernels run in Triton's interpreter (no CUDA device, or RBLOCK_FORCE_INTERPRET=1)."""
    return force_interpret() or not torch.cuda.is_available()


def configure() -> None:
    """Select the interpreter before any kernel is defined: Triton reads the variable in @triton.jit."""
    if interpreted():
        os.environ["TRITON_INTERPRET"] = "1"


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
