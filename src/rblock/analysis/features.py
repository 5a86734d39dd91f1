"""Memory traffic per strategy, coalescing and register pressure of one kernel, as plain data."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from enum import Enum

from rblock.ir import KernelGraph, Op, Rank
from rblock.ir.nodes import REDUCE_OPS, Access
from rblock.ir.query import can_split_row, loads_in_pass, looped_passes, misaligned_walk
from rblock.ir.split import can_split


class Hint(Enum):
    INNER = "INNER"  # r is the contiguous dim: walk rows
    OUTER = "OUTER"  # x is the contiguous dim: walk columns, many rows per program
    OUTER_TINY = "OUTER_TINY"  # outer with a tiny r (a second stage): one small tile
    DEFAULT = "DEFAULT"  # mixed: offer every shape


@dataclass(frozen=True, slots=True)
class Features:
    xnumel: int
    rnumel: int
    persistent_bytes: int  # reads + writes when each input element is read once
    persistent_read_bytes: int
    looped_bytes: int  # reads + writes when inputs needed after a reduction are read again per loop
    looped_read_bytes: int
    write_bytes: int
    saved_bytes_ratio: float  # looped_bytes / persistent_bytes
    score_x: int  # bytes of accesses contiguous along x (writes count twice)
    score_r: int  # bytes of accesses contiguous along r (writes count twice)
    r_coalesce_ratio: float  # score_r / max(score_x, 1)
    hint: Hint
    mem_ops_per_thread: int  # distinct load/store indices
    loads_and_reductions: int
    full_tiles: int  # full-size values a persistent tile keeps live across its reductions
    online_reductions: int  # softmax statistics and Welford: looped, they update per element (exps, divisions)
    narrow_loads: bool  # some full-size input is 16-bit: a single-pass tile can hold it at half the registers
    prefetch_bytes: int  # bytes per row element of the full-size inputs, twice for those that differ by row: what a
    # prefetching program holds (this row's and the next's; a weight's once)
    is_2d: bool  # both more than one row and more than one element per row
    splittable: bool  # the reductions can be split over row slices and combined by a second kernel
    row_splittable: bool  # programs holding slices of a row can finish it from each other's partial results
    misaligned_vector: int  # a full-size input's rows start off 16-byte boundaries: its elements per vector (else 0)
    gathers: bool  # a per-row value is read at a loaded position (a class's logit): two dependent loads per row

    def __post_init__(self) -> None:
        assert self.persistent_bytes >= 0 and self.looped_bytes >= self.persistent_bytes, self

    def live_fp32_per_thread(self, xblock: int, rblock: int, num_warps: int, recompute: bool = False) -> float:
        """Registers (fp32 values) one thread holds for a persistent [xblock, rblock] tile; holding 16-bit inputs
        as loaded (recompute) halves them."""
        return xblock * rblock * self.full_tiles / (32 * num_warps) / (2 if recompute else 1)

    def as_dict(self) -> dict:
        d = asdict(self)
        d["hint"] = self.hint.value
        return d


def _elements(g: KernelGraph, acc: Access) -> int:
    xs = math.prod(s for s, st in zip(g.x_sizes, acc.x_strides) if st)
    rs = math.prod(s for s, st in zip(g.r_sizes, acc.r_strides) if st)
    return xs * rs


def analyze(g: KernelGraph, heuristics) -> Features:
    mem = [(i, n) for i, n in enumerate(g.nodes) if n.op in (Op.LOAD, Op.GATHER, Op.STORE)]
    size = {
        i: _elements(g, n.attr) * n.dtype.itemsize if n.op != Op.GATHER else g.xnumel * n.dtype.itemsize for i, n in mem
    }
    reads = sum(size[i] for i, n in mem if n.op != Op.STORE)
    writes = sum(size[i] for i, n in mem if n.op == Op.STORE)
    passes = looped_passes(g)
    rereads = 0
    # a full load is issued once per loop that needs it, as Inductor counts it, whose seed rule reads this ratio
    # (rblock's looped kernels read some values back from an output instead: query.read_back)
    for i, n in mem:
        if n.op == Op.LOAD and n.rank == Rank.FULL:
            uses = sum(1 for p in passes if i in loads_in_pass(g, p))
            rereads += size[i] * max(uses - 1, 0)
    score_x = score_r = 0
    for i, n in mem:
        weight = 2 if n.op == Op.STORE else 1
        acc = n.attr
        inner_r = next((st for st in reversed(acc.r_strides) if st), 0)
        inner_x = next((st for st in reversed(acc.x_strides) if st), 0)
        if n.op == Op.GATHER:
            continue
        if inner_r == 1 or (inner_r == 0 and inner_x != 1):
            score_r += size[i] * weight
        elif inner_x == 1:
            score_x += size[i] * weight
    ratio = score_r / max(score_x, 1)
    if ratio >= heuristics.inner_coalesce_ratio:
        hint = Hint.INNER
    elif score_x > score_r:
        hint = Hint.OUTER_TINY if g.rnumel <= heuristics.outer_tiny_rnumel else Hint.OUTER
    else:
        hint = Hint.DEFAULT
    persistent = reads + writes
    full_loads = sum(1 for _, n in mem if n.op == Op.LOAD and n.rank == Rank.FULL)
    return Features(
        xnumel=g.xnumel,
        rnumel=g.rnumel,
        persistent_bytes=persistent,
        persistent_read_bytes=reads,
        looped_bytes=persistent + rereads,
        looped_read_bytes=reads + rereads,
        write_bytes=writes,
        saved_bytes_ratio=round((persistent + rereads) / max(persistent, 1), 4),
        score_x=score_x,
        score_r=score_r,
        r_coalesce_ratio=round(ratio, 4),
        hint=hint,
        mem_ops_per_thread=len({(n.attr.buffer, n.attr) for _, n in mem}),
        loads_and_reductions=sum(1 for _, n in mem if n.op != Op.STORE) + sum(1 for n in g.nodes if n.op in REDUCE_OPS),
        full_tiles=full_loads + 1,
        online_reductions=sum(1 for n in g.nodes if n.op in (Op.SOFTMAX_STATS, Op.WELFORD)),
        narrow_loads=any(n.op == Op.LOAD and n.rank == Rank.FULL and n.dtype.itemsize == 2 for _, n in mem),
        prefetch_bytes=sum(
            n.dtype.itemsize * (2 if any(n.attr.x_strides) else 1)
            for n in {n.attr: n for _, n in mem if n.op == Op.LOAD and n.rank == Rank.FULL}.values()
        ),
        is_2d=g.xnumel > 1 and g.rnumel > 1,
        splittable=can_split(g),
        row_splittable=can_split_row(g),
        misaligned_vector=(misaligned_walk(g) or (0, 0))[1],
        gathers=any(n.op == Op.GATHER for n in g.nodes),
    )
