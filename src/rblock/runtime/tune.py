"""Autotuner: compile the candidates in parallel, drop failures and spillers, time the rest, keep the fastest."""

from __future__ import annotations

import concurrent.futures
import os
from dataclasses import dataclass, replace

import torch

from rblock.codegen.kernel import KernelSpec
from rblock.plan.config import Candidate, Config
from rblock.plan.heuristics import Heuristics
from rblock.runtime.launch import launch
from rblock.runtime.loader import load


@dataclass(frozen=True, slots=True)
class Trial:
    config: Config
    reason: str
    median_us: float | None  # None: not timed
    n_regs: int | None
    n_spills: int | None
    note: str  # why it was dropped, or ""

    def as_dict(self) -> dict:
        return {
            "config": str(self.config),
            "kind": self.config.kind,
            "reason": self.reason,
            "median_us": self.median_us,
            "n_regs": self.n_regs,
            "n_spills": self.n_spills,
            "note": self.note,
        }


def _compile(kernel, spec: KernelSpec, buffers: list[torch.Tensor], xnumel: int):
    compiled = kernel.warmup(
        *buffers,
        xnumel,
        XBLOCK=spec.XBLOCK,
        RBLOCK=spec.RBLOCK,
        num_warps=spec.num_warps,
        num_stages=spec.num_stages,
        grid=(1,),
    )
    compiled._init_handles()
    return compiled


def tune(
    candidates: list[Candidate],
    specs: dict[Config, KernelSpec],
    make_spec,
    buffers: list[torch.Tensor],
    xnumel: int,
    h: Heuristics,
    regs_per_sm: int,
    progress=None,
) -> tuple[Config, list[Trial]]:
    import triton.testing

    kernels = {c.config: load(specs[c.config]) for c in candidates}
    trials: list[Trial] = []
    resources: dict[Config, tuple[int, int] | Exception] = {}

    def build(cfg: Config):
        try:
            compiled = _compile(kernels[cfg], specs[cfg], buffers, xnumel)
            return cfg, (int(compiled.n_regs), int(compiled.n_spills))
        except Exception as e:  # out of resources, or a Triton bug: the candidate is skipped, not fatal
            return cfg, e

    workers = max(1, min(len(candidates), os.cpu_count() or 1))
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        resources.update(pool.map(lambda c: build(c.config), candidates))

    todo = list(candidates)
    for c in candidates:  # Inductor's _dynamic_scale_rblock: offer RBLOCK/2 when registers limit occupancy
        res = resources[c.config]
        if isinstance(res, Exception) or c.config.no_rblock_scaling or c.config.single_pass or c.config.RBLOCK == 1:
            continue
        threads = 32 * c.config.num_warps
        if regs_per_sm // max(res[0] * threads, 1) < h.min_blocks_per_sm:
            half = replace(c.config, RBLOCK=c.config.RBLOCK // 2)
            if half not in resources:
                specs[half] = make_spec(half)
                kernels[half] = load(specs[half])
                resources[half] = build(half)[1]
                todo.append(Candidate(half, f"RBLOCK halved: {res[0]} registers/thread limit occupancy"))

    best: tuple[float, Config] | None = None
    for c in todo:
        res = resources[c.config]
        if isinstance(res, Exception):
            trials.append(
                Trial(c.config, c.reason, None, None, None, f"compile failed: {type(res).__name__}: {res}"[:300])
            )
            continue
        regs, spills = res
        if spills > h.max_spill_bytes:
            trials.append(Trial(c.config, c.reason, None, regs, spills, f"spills {spills} bytes"))
            continue
        spec = specs[c.config]
        kern = kernels[c.config]
        us = 1000 * triton.testing.do_bench(
            lambda: launch(kern, spec, buffers, xnumel), warmup=5, rep=20, return_mode="median"
        )
        trials.append(Trial(c.config, c.reason, us, regs, spills, ""))
        if best is None or us < best[0]:
            best = (us, c.config)
        if progress is not None:
            progress()
    if best is None:  # everything spilled: take the least-spilling candidate that compiled
        ok = [t for t in trials if t.n_regs is not None]
        if not ok:
            from rblock.errors import CompileFailed

            raise CompileFailed("no candidate compiled: " + "; ".join(t.note for t in trials))
        return min(ok, key=lambda t: t.n_spills).config, trials
    return best[1], trials
