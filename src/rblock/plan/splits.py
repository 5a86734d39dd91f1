"""Candidates that spread a reduction over more programs than rows: a split over two kernels (slices of every row,
then a combine) where the rows would leave SMs idle, and a split row (co-resident programs sharing a row too long
for one program's registers)."""

from __future__ import annotations

import math

from rblock.analysis import Features, Hint
from rblock.ir.split import split_chunks
from rblock.plan.config import Candidate, Config
from rblock.plan.heuristics import Heuristics
from rblock.plan.sizes import next_pow2, warps_for

# column reductions' tiles: (XBLOCK columns, RBLOCK rows, warps)
COLUMN_TILES = ((64, 8, 8), (32, 16, 4), (64, 32, 4), (64, 128, 16))


def split_candidates(f: Features, h: Heuristics, first: Config, sm_count: int) -> list[Candidate]:
    """Split candidates when the kernel would leave SMs idle: few rows, or few blocks of columns (each column tile
    split for its own number of programs)."""
    if not f.splittable:
        return []
    if f.hint in (Hint.OUTER, Hint.OUTER_TINY):
        out = []
        for x, r, w in COLUMN_TILES:
            programs = -(-max(f.xnumel, 1) // x)
            if programs < h.split_outer_programs_per_sm * sm_count:
                below = 2 ** math.floor(math.log2(h.split_outer_programs_per_sm * sm_count / programs))
                for wanted in (below, 2 * below):  # the powers of two around the aim: the tuner measures which pays
                    out += _split_as(f, programs, _chunks(f, h, wanted), sm_count, [(x, r, w)])
        return out
    programs = -(-max(f.xnumel, 1) // first.XBLOCK)
    if programs >= h.split_below_sm_fraction * sm_count:
        return []
    chunks = _chunks(f, h, -(-h.split_programs_per_sm * sm_count // programs))
    r = min(next_pow2(-(-f.rnumel // chunks)), h.max_r0_block)
    shapes = [(1, r, warps_for(h, r)), (1, max(r // 2, 1), warps_for(h, r // 2))]
    return _split_as(f, programs, chunks, sm_count, shapes)


def _chunks(f: Features, h: Heuristics, wanted: int) -> int:
    return split_chunks(f.rnumel, min(wanted, f.rnumel // max(h.split_min_chunk, 1)))


def _split_as(f: Features, programs: int, chunks: int, sm_count: int, shapes: list) -> list[Candidate]:
    """`shapes` ((XBLOCK, RBLOCK, warps) each) split into `chunks` slices per row, none if fewer than 2."""
    why = (
        f"{programs} program(s) for {sm_count} SMs: {chunks} slices of {-(-f.rnumel // chunks)} per row, then a "
        "combine kernel (and one writing full-size outputs slice by slice)"
    )
    return [Candidate(Config("looped", x, r, w, split=chunks), why) for x, r, w in shapes] if chunks >= 2 else []


def split_row_candidates(f: Features, h: Heuristics, sm_count: int) -> list[Candidate]:
    """Rows too long for one program: a slice per program, each of the slice sizes the heuristics allow. Not for
    column reductions, whose slices would be read one element per row."""
    if not f.row_splittable or f.rnumel <= h.split_row_min_rnumel or f.hint in (Hint.OUTER, Hint.OUTER_TINY):
        return []
    out = []
    rblock = h.split_row_max_slice
    while rblock >= h.split_row_min_slice:
        parts = -(-f.rnumel // rblock)
        if 2 <= parts <= min(h.split_row_max_parts, h.split_row_max_parts_per_sm * sm_count):
            warps = warps_for(h, rblock, h.split_row_elems_per_warp)
            what = (
                f"split row: {parts} co-resident programs per row, each holding a slice of {rblock} in registers, "
                "exchange partial results and finish their slice; the row is read once"
            )
            ahead = "; the next row's slice is loaded while waiting for this row's partial results" + (
                "; 16-bit inputs held as loaded, recomputed after the exchange" if f.narrow_loads else ""
            )
            out.append(Candidate(Config("split_row", 1, rblock, warps, split=parts), f"{what}; {warps} warps"))
            # prefetching at half the warps, each thread holding two slices of 64 elements, or at more warps where
            # its inputs' values would exceed split_row_prefetch_max_bytes per thread
            w = max(warps // 2, h.min_warps)
            while w < warps and f.prefetch_bytes * rblock > h.split_row_prefetch_max_bytes * 32 * w:
                w *= 2
            cfg = Config("split_row", 1, rblock, w, split=parts, prefetch=True, recompute=f.narrow_loads)
            out.append(Candidate(cfg, f"{what}; {w} warps{ahead}"))
        rblock //= 2
    return out
