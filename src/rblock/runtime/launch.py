"""Launch generated kernels: one `Program` is the kernels of one compiled call, run in order over shared buffers."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from triton import knobs
from triton.runtime.driver import driver

from rblock.codegen.spec import KernelSpec
from rblock.errors import SyncTimeout
from rblock.runtime import device, workers
from rblock.runtime.loader import load

# Triton's interpreter swaps triton.language's functions for its own while a kernel runs and swaps them back after,
# so two kernels interpreted at once on two threads break each other: they run one at a time
_INTERPRETER = threading.Lock()


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
    if xnumel == 0 and not spec.totals:  # sums over rows are written even when there are no rows
        return
    grid = stage.grid(buffers)
    fast = stage.fast
    if fast is not None and _aligned(buffers):
        dev = driver.active.get_current_device()
        if dev == fast[0]:
            ck, stream = fast[1], driver.active.get_current_stream(dev)
            args = (*buffers, xnumel, spec.XBLOCK, spec.RBLOCK)
            enter, leave = _hook(knobs.runtime.launch_enter_hook), _hook(knobs.runtime.launch_exit_hook)
            meta = ck.launch_metadata((grid, 1, 1), stream, *args) if enter else None
            ck.run(grid, 1, 1, stream, ck.function, ck.packed_metadata, meta, enter, leave, *args)
            _check_sync(stage, buffers)
            return
    if device.interpreted():
        with _INTERPRETER:
            stage.kernel[(grid,)](*buffers, xnumel, **stage.options())
        _check_sync(stage, buffers)
        return
    ck = stage.kernel[(grid,)](*buffers, xnumel, **stage.options())
    if getattr(ck, "function", None) is not None and _aligned(buffers):  # a GPU kernel (the interpreter returns none)
        object.__setattr__(stage, "fast", (driver.active.get_current_device(), ck))
    _check_sync(stage, buffers)


def _check_sync(stage: Stage, buffers: list[torch.Tensor]) -> None:
    """With RBLOCK_DEBUG_SYNC, a split-row launch whose programs gave up waiting raises (its flag is cleared)."""
    if not stage.spec.max_spins:
        return
    flag = buffers[-1][:1]  # the sync counters, of which it is the first
    if flag.is_cuda and torch.cuda.is_current_stream_capturing():  # no host reads inside a capture
        return
    if int(flag.item()):
        flag.zero_()
        raise SyncTimeout(
            f"rblock: {stage.spec.name}: the {stage.spec.parts} programs of a row did not all arrive within "
            f"{stage.spec.max_spins} polls (RBLOCK_DEBUG_SYNC): the launch was not co-resident; its outputs are wrong"
        )


def co_resident_groups(spec: KernelSpec, n_regs: int, shared: int) -> int:
    """How many row groups of a kernel that loops over rows run at once on this device: programs per SM from
    registers, threads and shared memory, times the SMs, in whole groups (of one program but for split rows)."""
    p = device.device_properties()
    threads = 32 * spec.num_warps
    regs_per_program = -(-n_regs // 8) * 8 * threads  # registers are allocated in steps of 8 per thread
    per_sm = min(
        int(p["regs_per_sm"]) // max(regs_per_program, 1),
        int(p["threads_per_sm"]) // threads,
        int(p["smem_per_sm"]) // (shared + 1024),  # 1 KB per program is reserved by the hardware
        32,
    )
    return int(p["sm_count"]) * per_sm // spec.parts


@dataclass(frozen=True)
class Stage:
    spec: KernelSpec
    args: tuple[tuple[str, int], ...]  # each pointer argument: ("in" | "out" | "ws", index)
    xnumel: int
    kernel: object = None  # the loaded @triton.jit function; filled from `spec` when not given
    fast: tuple | None = field(default=None, compare=False)  # (device, compiled kernel) after an aligned launch
    groups: int | None = field(default=None, compare=False)  # split row: co-resident row groups, once compiled

    def __post_init__(self) -> None:
        if self.kernel is None:
            object.__setattr__(self, "kernel", load(self.spec))

    def options(self) -> dict:
        s = self.spec
        opts = {"XBLOCK": s.XBLOCK, "RBLOCK": s.RBLOCK, "num_warps": s.num_warps, "num_stages": s.num_stages}
        if s.waits and not device.interpreted():
            opts["launch_cooperative_grid"] = True  # the driver refuses a grid that cannot be co-resident
        if s.pdl:
            opts["launch_pdl"] = True
        if s.maxnreg:
            opts["maxnreg"] = s.maxnreg
        return opts

    def warmup(self, buffers: list[torch.Tensor]):
        return self.kernel.warmup(*buffers, self.xnumel, grid=(1,), **self.options())

    def compile(self, buffers: list[torch.Tensor]):
        """Build without running; the compiled kernel (None under the interpreter)."""
        if device.interpreted():
            self._set_groups(0, 0)
            return None
        ck = self.warmup(buffers)
        ck._init_handles()
        self._set_groups(int(ck.n_regs), int(ck.metadata.shared))
        return ck

    def _set_groups(self, n_regs: int, shared: int) -> None:
        if self.spec.loops_rows:
            groups = co_resident_groups(self.spec, n_regs, shared)
            if groups < 1:
                raise ValueError(f"{self.spec.name}: {self.spec.parts} programs per row cannot all run at once here")
            object.__setattr__(self, "groups", groups)

    def grid(self, buffers: list[torch.Tensor]) -> int:
        """Programs to launch: one per XBLOCK rows, or for kernels that loop over rows as many (whole groups of a
        split row) as run at once."""
        rows = max((self.xnumel + self.spec.XBLOCK - 1) // self.spec.XBLOCK, 1 if self.spec.totals else 0)
        if not self.spec.loops_rows:
            return rows
        if self.groups is None:
            self.compile(buffers)
        return min(rows, self.groups) * self.spec.parts


@dataclass(frozen=True)
class Program:
    stages: tuple[Stage, ...]
    workspace: tuple[tuple[int, torch.dtype], ...] = ()  # (numel, dtype) of each scratch buffer
    shares: tuple[tuple[int, torch.dtype], ...] = ()  # (numel, dtype) of the workspace of each sum over rows
    counters: int = 0  # the sync counters its kernels need, at least (split rows: one per possible row group)
    words: int = 0  # split rows exchanging (epoch, value) words: 64-bit words per program
    _sync: dict = field(default_factory=dict, compare=False)  # (device, stream or capture) -> `_held`'s buffers
    _lock: threading.Lock = field(default_factory=threading.Lock, compare=False, repr=False)  # one call's launches

    def _buffers(self, stage: Stage, inputs, outputs, held) -> list[torch.Tensor]:
        pools = {"in": inputs, "out": outputs, "sync": held[0], "ws": held[1]}
        return [pools[kind][i] for kind, i in stage.args]

    def _held(self, dev: torch.device) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """The buffers the kernels share beyond inputs and outputs: (sync buffers, workspace). The sync buffers are
        the counters (an error flag and one per row group, zeroed once: split rows never reset them, sums over rows
        reset theirs when done), then each sum over rows' shares, then split rows' words; the workspace holds a split
        reduction's partials from its first kernel to its combine. One set per stream, reused by every call: launches
        on one stream run in order (each kernel starts by waiting for the one before it), and `run` enqueues a call's
        kernels under a lock, so two threads' calls never interleave. A CUDA graph may be replayed on any stream,
        beside eager calls: each capture gets a set of its own, held as long as the program: one made (zeroed) with
        the first eager call, so that the graph holds no kernel to zero it, or else one made in the graph."""
        groups = int(device.device_properties()["sm_count"]) * 32  # at most 32 programs per SM

        def fresh() -> tuple[list[torch.Tensor], list[torch.Tensor]]:
            ws = [torch.empty(n, dtype=dt, device=dev) for n, dt in self.workspace]
            if not self._syncs:
                return [], ws
            counters = torch.zeros(max(1 + groups, self.counters), dtype=torch.int32, device=dev)
            shares = [torch.zeros(n, dtype=dt, device=dev) for n, dt in self.shares]  # padding stays 0
            words = [torch.zeros(groups * self.words, dtype=torch.int64, device=dev)] if self.words else []
            return [counters, *shares, *words], ws

        if dev.type == "cuda" and torch.cuda.is_current_stream_capturing():
            held = self._sync.pop((dev, "spare"), None) or fresh()
            self._sync[(dev, "graph", id(held[1]))] = held
            return held
        # the stream the launches go to (Triton's current one), read raw: no torch.cuda.Stream is made per call
        key = (dev, driver.active.get_current_stream(driver.active.get_current_device()) if dev.type == "cuda" else 0)
        if key not in self._sync:
            self._sync[key] = fresh()
            if dev.type == "cuda" and (dev, "spare") not in self._sync:
                self._sync[(dev, "spare")] = fresh()
                if self._syncs:
                    torch.cuda.current_stream(dev).synchronize()  # zeroed before any graph on any stream uses it
        return self._sync[key]

    def __post_init__(self) -> None:
        # the common case, one stage over the inputs then the outputs, needs no argument shuffling per call
        direct = (
            len(self.stages) == 1
            and not self.workspace
            and all((kind, i) == pair for (kind, i), pair in zip(self.stages[0].args, self._direct_order()))
        )
        object.__setattr__(self, "_direct", direct)
        object.__setattr__(self, "_syncs", any(kind == "sync" for st in self.stages for kind, _ in st.args))
        object.__setattr__(self, "_holds", self._syncs or bool(self.workspace))  # else a call looks nothing up

    def _direct_order(self) -> list[tuple[str, int]]:
        args = self.stages[0].args
        n_in = sum(1 for kind, _ in args if kind == "in")
        return [("in", i) for i in range(n_in)] + [("out", j) for j in range(len(args) - n_in)]

    def run(self, inputs: list[torch.Tensor], outputs: list[torch.Tensor]) -> None:
        if self._direct:
            launch(self.stages[0], inputs + outputs)
            return
        with self._lock:
            held = self._held(outputs[0].device) if self._holds else ([], [])
            for st in self.stages:
                launch(st, self._buffers(st, inputs, outputs, held))

    def warmups(self, inputs: list[torch.Tensor], outputs: list[torch.Tensor]) -> list[tuple[object, Callable]]:
        """Each stage's JIT kernel, and a warmup that builds it for these buffers (what the compile workers take)."""
        held = self._held(outputs[0].device)
        buffers = (self._buffers(st, inputs, outputs, held) for st in self.stages)
        return [(st.kernel, functools.partial(st.warmup, b)) for st, b in zip(self.stages, buffers)]

    def compile(
        self, inputs: list[torch.Tensor], outputs: list[torch.Tensor], in_workers: bool = False
    ) -> tuple[int, int]:
        """Build every stage without running it, `in_workers`: in the compile workers first, all stages at once;
        the most registers and spill bytes of any stage (Triton reports a kernel's local memory in 4-byte words)."""
        if in_workers and not device.interpreted():
            workers.precompile(self.warmups(inputs, outputs))
        held = self._held(outputs[0].device)
        buffers = [self._buffers(st, inputs, outputs, held) for st in self.stages]
        regs = spills = 0
        for st, b in zip(self.stages, buffers):
            compiled = st.compile(b)
            regs, spills = max(regs, int(compiled.n_regs)), max(spills, 4 * int(compiled.n_spills))
        return regs, spills
