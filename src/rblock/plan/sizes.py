"""Sizes the planner derives: powers of two, warps for a tile."""

from __future__ import annotations

from rblock.plan.heuristics import Heuristics


def next_pow2(n: int) -> int:
    return 1 << max(n - 1, 0).bit_length()


def warps_for(h: Heuristics, elems: int, per_warp: int | None = None) -> int:
    """num_warps for a tile of `elems` at `per_warp` elements per warp (default: a looped tile's), clamped."""
    per_warp = per_warp or h.elems_per_warp
    return min(max(next_pow2(max(elems // per_warp, 1)), h.min_warps), h.max_warps)
