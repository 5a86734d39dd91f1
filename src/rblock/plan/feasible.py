"""Which configs a graph can take beyond the planner's own candidates: a config the user forces, checked before
anything is generated, and the combine kernel of a split reduction."""

from __future__ import annotations

from rblock.errors import InvalidArgument
from rblock.ir import KernelGraph
from rblock.ir.query import can_split_row, misaligned_walk
from rblock.ir.split import can_split, no_empty_slice
from rblock.plan.config import Config
from rblock.plan.heuristics import Heuristics
from rblock.plan.sizes import next_pow2


def check_forced(name: str, g: KernelGraph, cfg: Config) -> Config:
    """`cfg`, if it can compute `g`; else an error that says why (`rblock.settings(config=...)`)."""
    walk = misaligned_walk(g) if cfg.align else None
    early = walk[1] - 1 if walk else 0  # a walk starts up to a vector before the row
    if cfg.kind == "split_row":
        covers = cfg.RBLOCK * (cfg.split - 1) < g.rnumel and g.rnumel + early <= cfg.RBLOCK * cfg.split
        if not can_split_row(g) or not covers:
            raise InvalidArgument(
                "settings",
                "config",
                f"splits {name}'s rows of {g.rnumel} over {cfg.split} programs of RBLOCK {cfg.RBLOCK}: not "
                "possible (one level of sum/max/min/mean-variance/softmax reductions, and every program "
                "holding part of the row" + (", walked from the 16-byte boundary below its start)" if walk else ")"),
            )
    elif cfg.split > 1 and not (can_split(g) and no_empty_slice(g.rnumel, cfg.split)):
        raise InvalidArgument(
            "settings",
            "config",
            f"splits {name}'s rows of {g.rnumel} in {cfg.split}: not possible (one level of sum, max, min, "
            "mean-variance or softmax reductions and no gathers; slices of equal length but a shorter last one, "
            "none of them empty)",
        )
    span = -(-g.rnumel // cfg.split) + early
    if cfg.single_pass and cfg.kind != "split_row" and cfg.RBLOCK * cfg.tiles < span:
        raise InvalidArgument(
            "settings",
            "config",
            f"is {cfg.kind} with {cfg.tiles} tile(s) of RBLOCK {cfg.RBLOCK}, but {name}'s rows need {span} "
            "elements" + (" (walked from the 16-byte boundary below their start)" if walk else ""),
        )
    return cfg


def combine_config(xnumel: int, split: int, h: Heuristics) -> Config:
    """The combine kernel of a split reduction: persistent over each row's partials (the split, to a power of
    two), as many rows a program as fit a tile of `combine_tile_elems`."""
    parts = next_pow2(split)
    rows = max(min(next_pow2(max(xnumel, 1)), h.combine_tile_elems // parts), 1)
    return Config("persistent", rows, parts, h.combine_num_warps)
