"""Launch a loaded kernel over its rows."""

from __future__ import annotations

import torch

from rblock.codegen.kernel import KernelSpec


def launch(kernel, spec: KernelSpec, buffers: list[torch.Tensor], xnumel: int) -> None:
    if xnumel == 0:
        return
    grid = ((xnumel + spec.XBLOCK - 1) // spec.XBLOCK,)
    kernel[grid](
        *buffers,
        xnumel,
        XBLOCK=spec.XBLOCK,
        RBLOCK=spec.RBLOCK,
        num_warps=spec.num_warps,
        num_stages=spec.num_stages,
    )
