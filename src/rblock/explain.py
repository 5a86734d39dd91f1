"""`rblock.explain`: the IR, the analysis, the candidates with their reasons, the chosen config and its source."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict

from rblock.compiler import Compiled, CompiledFunction, compile, recording
from rblock.errors import InvalidType, describe


def report(c: Compiled) -> dict:
    """Everything the planner saw and decided, as one JSON-ready object."""
    return {
        "strategy": c.plan.strategy,
        "hint": c.features.hint.value,
        "xnumel": c.features.xnumel,
        "rnumel": c.features.rnumel,
        "features": c.features.as_dict(),
        "register_intensive": c.plan.register_intensive,
        "candidates": [
            {
                **asdict(cand.config),  # every field of Config, as the tuning cache stores it
                "live_fp32_per_thread": (
                    c.features.live_fp32_per_thread(
                        cand.config.XBLOCK,
                        cand.config.RBLOCK * cand.config.tiles,
                        cand.config.num_warps,
                        cand.config.recompute,
                    )
                    if cand.config.single_pass
                    else None
                ),
                "reason": cand.reason,
            }
            for cand in c.plan.candidates
        ],
        "chosen": str(c.config),
        "chosen_kind": c.config.kind,
        "tuning": [t.as_dict() for t in c.trials],
        "from_cache": c.from_cache,
        "ir": str(c.graph),
        "source": "\n".join(spec.source for spec in c.specs),
    }


def recorded(call: Callable[[], object], launch: bool = True) -> tuple[object, list[Compiled]]:
    """What `call()` returns and the compiled kernels it ran, in order (with `launch` False, their outputs are left
    unwritten: the kernels are compiled and chosen, not run)."""
    with recording(launch=launch) as log:
        out = call()
    return out, list(log)


def combined(reports: list[dict]) -> dict:
    """One call's report: its kernel's, or, where it ran several (cross_entropy's rows, then their mean), the first
    kernel's keys and every kernel's report, in order, under "kernels"."""
    return reports[0] if len(reports) == 1 else {**reports[0], "kernels": reports}


def explain(fn, *args, **kwargs) -> dict:
    """Report the decisions behind `fn(*args, **kwargs)`. `fn` is an `rblock.compile` result (its kernel for these
    inputs, compiled and not run), a function that calls compiled kernels, such as rblock's ops (the kernels the call
    ran, see `combined`), or a plain PyTorch function (run once; where it ran no compiled kernel, compiled by
    `rblock.compile` as one kernel)."""
    if isinstance(fn, CompiledFunction):
        return report(fn.compiled_for(*args, **kwargs))
    if not callable(fn):
        raise InvalidType("explain", "fn", f"must be a function or an rblock.compile result, got {describe(fn)}")
    _, log = recorded(lambda: fn(*args, **kwargs))
    if log:
        return combined([report(c) for c in log])
    return report(compile(fn).compiled_for(*args, **kwargs))
