"""Autotuner: compile the candidates in parallel, drop failures, spillers and slow compiles, time the rest, keep the
fastest."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

import torch

from rblock.errors import CompileFailed
from rblock.plan.config import Candidate, Config
from rblock.plan.heuristics import Heuristics
from rblock.runtime.launch import Program


@dataclass(frozen=True, slots=True)
class Trial:
    config: Config
    reason: str
    median_us: float | None  # None: not timed
    n_regs: int | None
    spill_bytes: int | None
    note: str  # why it was dropped, or ""

    def as_dict(self) -> dict:
        return {
            "config": str(self.config),
            "kind": self.config.kind,
            "reason": self.reason,
            "median_us": self.median_us,
            "n_regs": self.n_regs,
            "spill_bytes": self.spill_bytes,
            "note": self.note,
        }


def tune(
    candidates: list[Candidate],
    make_program: Callable[[Config], Program],
    inputs: list[torch.Tensor],
    outputs: list[torch.Tensor],
    h: Heuristics,
    regs_per_sm: int,
) -> tuple[Config, list[Trial]]:
    import triton.testing

    programs = {c.config: make_program(c.config) for c in candidates}

    def build(cfg: Config) -> tuple[Config, tuple[int, int] | Exception]:
        try:
            return cfg, programs[cfg].compile(inputs, outputs, in_workers=True)
        except Exception as e:  # out of resources, or a Triton bug: the candidate is skipped, not fatal
            return cfg, e

    resources = compile_all([c.config for c in candidates], build, h.compile_wait_s)

    todo = list(candidates)
    for c in candidates:  # Inductor's _dynamic_scale_rblock: offer RBLOCK/2 when registers limit occupancy
        res = resources.get(c.config)
        if not isinstance(res, tuple) or c.config.no_rblock_scaling or c.config.single_pass or c.config.RBLOCK == 1:
            continue
        if regs_per_sm // max(res[0] * 32 * c.config.num_warps, 1) < h.min_blocks_per_sm:
            half = replace(c.config, RBLOCK=c.config.RBLOCK // 2)
            if half not in programs:
                programs[half] = make_program(half)
                resources[half] = build(half)[1]
                todo.append(Candidate(half, f"RBLOCK halved: {res[0]} registers/thread limit occupancy"))

    trials: list[Trial] = []
    for c in todo:
        res = resources.get(c.config)
        if res is None:
            trials.append(Trial(c.config, c.reason, None, None, None, f"compile abandoned after {h.compile_wait_s} s"))
            continue
        if isinstance(res, Exception):
            note = f"compile failed: {type(res).__name__}: {res}"[:300]
            trials.append(Trial(c.config, c.reason, None, None, None, note))
            continue
        regs, spills = res
        timed = spills <= h.max_spill_bytes or all(  # if everything spills, time the spillers too
            isinstance(r, Exception) or r[1] > h.max_spill_bytes for r in resources.values()
        )
        us, note = None, "" if timed else f"spills {spills} bytes"
        if timed:
            prog = programs[c.config]
            try:
                ms = triton.testing.do_bench(lambda: prog.run(inputs, outputs), warmup=5, rep=20, return_mode="median")
                us = 1000 * ms
            except Exception as e:  # refused at launch (a split row's grid cannot be co-resident): skipped
                note = f"launch failed: {type(e).__name__}: {e}"[:300]
        trials.append(Trial(c.config, c.reason, us, regs, spills, note))
    timed_trials = [t for t in trials if t.median_us is not None]
    if not timed_trials:
        raise CompileFailed("no candidate compiled: " + "; ".join(t.note for t in trials))
    return min(timed_trials, key=lambda t: t.median_us).config, trials


def compile_all(
    configs: list[Config], build: Callable[[Config], tuple[Config, object]], wait_s: float
) -> dict[Config, object]:
    """`build` every config on a thread of its own (each waits on its compile workers, or compiles here). Past
    `wait_s` seconds, the configs still compiling are left out once one has compiled; their daemon threads finish
    unobserved."""
    configs = list(dict.fromkeys(configs))  # two candidates may share a config: one compile, one result
    results: dict[Config, object] = {}
    changed = threading.Condition()

    def work(cfg: Config) -> None:
        res = build(cfg)[1]
        with changed:
            results[cfg] = res
            changed.notify_all()

    for cfg in configs:
        threading.Thread(target=work, args=(cfg,), daemon=True, name=f"rblock-compile {cfg}").start()
    deadline = time.monotonic() + wait_s
    with changed:
        while len(results) < len(configs):
            compiled = any(not isinstance(r, Exception) for r in results.values())
            left = deadline - time.monotonic()
            if compiled and left <= 0:
                break
            changed.wait(left if compiled else None)
        return dict(results)
