"""`rblock.explain`: the IR, the analysis, the candidates with their reasons, the chosen config and its source."""

from __future__ import annotations

from rblock.compiler import Compiled, CompiledFunction, compile


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
                "kind": cand.config.kind,
                "XBLOCK": cand.config.XBLOCK,
                "RBLOCK": cand.config.RBLOCK,
                "num_warps": cand.config.num_warps,
                "num_stages": cand.config.num_stages,
                "no_rblock_scaling": cand.config.no_rblock_scaling,
                "split": cand.config.split,
                "recompute": cand.config.recompute,
                "tiles": cand.config.tiles,
                "prefetch": cand.config.prefetch,
                "unroll": cand.config.unroll,
                "align": cand.config.align,
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


def explain(fn, *args, **kwargs) -> dict:
    """Compile `fn` (a plain function or an `rblock.compile` result) for these inputs and report the decision."""
    compiled = fn if isinstance(fn, CompiledFunction) else compile(fn)
    return report(compiled.compiled_for(*args, **kwargs))
