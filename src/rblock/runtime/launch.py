"""Launch generated kernels: one `Program` is the kernels of one compiled call, run in order over shared buffers."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from rblock.codegen.kernel import KernelSpec
from rblock.runtime.loader import load


def launch(kernel, spec: KernelSpec, buffers: list[torch.Tensor], xnumel: int) -> None:
    if xnumel == 0:
        return
    kernel[((xnumel + spec.XBLOCK - 1) // spec.XBLOCK,)](
        *buffers,
        xnumel,
        XBLOCK=spec.XBLOCK,
        RBLOCK=spec.RBLOCK,
        num_warps=spec.num_warps,
        num_stages=spec.num_stages,
    )


@dataclass(frozen=True)
class Stage:
    spec: KernelSpec
    args: tuple[tuple[str, int], ...]  # each pointer argument: ("in" | "out" | "ws", index)
    xnumel: int
    kernel: object = None  # the loaded @triton.jit function; filled from `spec` when not given

    def __post_init__(self) -> None:
        if self.kernel is None:
            object.__setattr__(self, "kernel", load(self.spec))


@dataclass(frozen=True)
class Program:
    stages: tuple[Stage, ...]
    workspace: tuple[tuple[int, torch.dtype], ...] = ()  # (numel, dtype) of each scratch buffer

    def _buffers(self, stage: Stage, inputs, outputs, ws) -> list[torch.Tensor]:
        pools = {"in": inputs, "out": outputs, "ws": ws}
        return [pools[kind][i] for kind, i in stage.args]

    def _workspace(self, device: torch.device) -> list[torch.Tensor]:
        return [torch.empty(n, dtype=dt, device=device) for n, dt in self.workspace]

    def run(self, inputs: list[torch.Tensor], outputs: list[torch.Tensor]) -> None:
        ws = self._workspace(outputs[0].device) if self.workspace else []
        for st in self.stages:
            launch(st.kernel, st.spec, self._buffers(st, inputs, outputs, ws), st.xnumel)

    def compile(self, inputs: list[torch.Tensor], outputs: list[torch.Tensor]) -> tuple[int, int]:
        """Build every stage without running it; the most registers and spill bytes of any stage."""
        ws = self._workspace(outputs[0].device) if self.workspace else []
        regs = spills = 0
        for st in self.stages:
            s = st.spec
            compiled = st.kernel.warmup(
                *self._buffers(st, inputs, outputs, ws),
                st.xnumel,
                XBLOCK=s.XBLOCK,
                RBLOCK=s.RBLOCK,
                num_warps=s.num_warps,
                num_stages=s.num_stages,
                grid=(1,),
            )
            compiled._init_handles()
            regs, spills = max(regs, int(compiled.n_regs)), max(spills, int(compiled.n_spills))
        return regs, spills
