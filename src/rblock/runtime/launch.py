"""Launch generated kernels: one `Program` is the kernels of one compiled call, run in order over shared buffers."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from triton import knobs
from triton.runtime.driver import driver

from rblock.codegen.kernel import KernelSpec
from rblock.runtime.loader import load


def _aligned(buffers: list[torch.Tensor]) -> bool:
    for b in buffers:
        if b.data_ptr() & 15:
            return False
    return True


def _hook(chain):
    """Triton's launch hook, or None when no profiler is listening (the launcher then skips it)."""
    return chain if getattr(chain, "calls", chain) else None


def launch(stage: Stage, buffers: list[torch.Tensor]) -> None:
    """Run one stage. Once Triton has compiled it for 16-byte aligned buffers on this device, later calls with aligned
    buffers go straight to the compiled kernel's launcher: Triton's dispatch (argument binding, specialization and
    cache lookup) costs more host time than a small kernel runs."""
    spec, xnumel = stage.spec, stage.xnumel
    if xnumel == 0:
        return
    grid = (xnumel + spec.XBLOCK - 1) // spec.XBLOCK
    fast = stage.fast
    if fast is not None and _aligned(buffers):
        dev = driver.active.get_current_device()
        if dev == fast[0]:
            ck, stream = fast[1], driver.active.get_current_stream(dev)
            args = (*buffers, xnumel, spec.XBLOCK, spec.RBLOCK)
            enter, leave = _hook(knobs.runtime.launch_enter_hook), _hook(knobs.runtime.launch_exit_hook)
            meta = ck.launch_metadata((grid, 1, 1), stream, *args) if enter else None
            ck.run(grid, 1, 1, stream, ck.function, ck.packed_metadata, meta, enter, leave, *args)
            return
    ck = stage.kernel[(grid,)](
        *buffers,
        xnumel,
        XBLOCK=spec.XBLOCK,
        RBLOCK=spec.RBLOCK,
        num_warps=spec.num_warps,
        num_stages=spec.num_stages,
    )
    if getattr(ck, "function", None) is not None and _aligned(buffers):  # a GPU kernel (the interpreter returns none)
        object.__setattr__(stage, "fast", (driver.active.get_current_device(), ck))


@dataclass(frozen=True)
class Stage:
    spec: KernelSpec
    args: tuple[tuple[str, int], ...]  # each pointer argument: ("in" | "out" | "ws", index)
    xnumel: int
    kernel: object = None  # the loaded @triton.jit function; filled from `spec` when not given
    fast: tuple | None = field(default=None, compare=False)  # (device, compiled kernel) after an aligned launch

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

    def __post_init__(self) -> None:
        # the common case, one stage over the inputs then the outputs, needs no argument shuffling per call
        direct = (
            len(self.stages) == 1
            and not self.workspace
            and all((kind, i) == pair for (kind, i), pair in zip(self.stages[0].args, self._direct_order()))
        )
        object.__setattr__(self, "_direct", direct)

    def _direct_order(self) -> list[tuple[str, int]]:
        args = self.stages[0].args
        n_in = sum(1 for kind, _ in args if kind == "in")
        return [("in", i) for i in range(n_in)] + [("out", j) for j in range(len(args) - n_in)]

    def _workspace(self, device: torch.device) -> list[torch.Tensor]:
        return [torch.empty(n, dtype=dt, device=device) for n, dt in self.workspace]

    def run(self, inputs: list[torch.Tensor], outputs: list[torch.Tensor]) -> None:
        if self._direct:
            launch(self.stages[0], inputs + outputs)
            return
        ws = self._workspace(outputs[0].device) if self.workspace else []
        for st in self.stages:
            launch(st, self._buffers(st, inputs, outputs, ws))

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
