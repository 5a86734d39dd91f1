"""Launch a loaded kernel over its rows."""

from __future__ import annotations

import torch

from rblock.codegen.kernel import KernelSpec
from rblock.runtime.device import device_properties


def launch(kernel, spec: KernelSpec, buffers: list[torch.Tensor], xnumel: int) -> None:
    if xnumel == 0:
        return
    blocks = (xnumel + spec.XBLOCK - 1) // spec.XBLOCK
    if spec.programs_per_sm:
        blocks = min(blocks, spec.programs_per_sm * int(device_properties()["sm_count"]))
    grid = (blocks,)
    kernel[grid](
        *buffers,
        xnumel,
        XBLOCK=spec.XBLOCK,
        RBLOCK=spec.RBLOCK,
        num_warps=spec.num_warps,
        num_stages=spec.num_stages,
    )
