"""Each kind of reduction as one record, looked up by its `Op` in `REDUCTIONS`: what the IR stages know of it.

A record says how many results the reduction has and how a row's result comes from the partial results of its
slices (`combine`). That one fact decides whether a row can be split, between the programs of one kernel
(`query.can_split_row`) or between kernels (`split.can_split`), and `ir/split.py` builds its combining kernel from
it. How a kind is written in Triton is codegen's: `codegen/reductions.py` keeps a table of emitters keyed by the same
`Op` (the IR layer may not import codegen, and Triton text has no place in the IR). Both tables cover `REDUCE_OPS`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from rblock.ir.nodes import MULTI_OUTPUT_OPS, REDUCE_OPS, DType, Node, Op, Rank


@dataclass(frozen=True, slots=True)
class Slices:
    """What a combine reads and where it writes (stage 2 of `ir/split.py`): a row's partial results over its
    slices, each `per_chunk` elements long but the last, `short` fewer, and the kernel it adds its nodes to."""

    add: Callable[[Node], int]  # appends a node to the combining kernel: its index
    part: Callable[[int], int]  # partial result k of every slice of the row, loaded along r (one slice a position)
    last: Callable[[int], int]  # partial result k of the row's last slice, loaded per row
    const: Callable[[float], int]  # an f32 constant
    per_chunk: int
    short: int
    rnumel: int


# (the slices, the reduction) -> the row's result, or its two results
Combine = Callable[[Slices, Node], "int | tuple[int, int]"]


@dataclass(frozen=True, slots=True)
class Reduction:
    op: Op
    combine: Combine | None  # the row's result from its slices'; None: a slice's result alone cannot give it

    @property
    def outputs(self) -> int:
        """Its results: two (read with GETITEM) for mean-variance and softmax statistics."""
        return 2 if self.op in MULTI_OUTPUT_OPS else 1

    @property
    def splits(self) -> bool:
        """Whether a row's slices can be reduced apart and their partial results combined."""
        return self.combine is not None


def _same_op(s: Slices, n: Node) -> int:
    """Sums, maxes and mins: the same reduction over the slices' results."""
    return s.add(Node(n.op, (s.part(0),), n.dtype, Rank.ROW))


def _mean_m2(s: Slices, n: Node) -> tuple[int, int]:
    """Slices of n_c = per_chunk elements but the last, `short` fewer: mean = sum(n_c * mean_c) / rnumel,
    m2 = sum(m2_c) + sum(n_c * (mean_c - mean)^2), the last slice's terms taken `short` times less."""
    add, const = s.add, s.const
    means, m2s = s.part(0), s.part(1)
    total = add(Node(Op.SUM, (means,), DType.F32, Rank.ROW))
    weighted = add(Node(Op.MUL, (total, const(float(s.per_chunk))), DType.F32, Rank.ROW))
    if s.short:
        last = s.last(0)
        less = add(Node(Op.MUL, (last, const(float(s.short))), DType.F32, Rank.ROW))
        weighted = add(Node(Op.SUB, (weighted, less), DType.F32, Rank.ROW))
    mean = add(Node(Op.DIV, (weighted, const(float(s.rnumel))), DType.F32, Rank.ROW))
    dev = add(Node(Op.SUB, (means, mean), DType.F32, Rank.FULL))
    spread = add(Node(Op.SUM, (add(Node(Op.MUL, (dev, dev), DType.F32, Rank.FULL)),), DType.F32, Rank.ROW))
    spread = add(Node(Op.MUL, (spread, const(float(s.per_chunk))), DType.F32, Rank.ROW))
    if s.short:
        off = add(Node(Op.SUB, (last, mean), DType.F32, Rank.ROW))
        off2 = add(Node(Op.MUL, (off, off), DType.F32, Rank.ROW))
        less = add(Node(Op.MUL, (off2, const(float(s.short))), DType.F32, Rank.ROW))
        spread = add(Node(Op.SUB, (spread, less), DType.F32, Rank.ROW))
    within = add(Node(Op.SUM, (m2s,), DType.F32, Rank.ROW))
    return mean, add(Node(Op.ADD, (within, spread), DType.F32, Rank.ROW))


def _max_sum_exp(s: Slices, n: Node) -> tuple[int, int]:
    """Each slice's (max, sum of e^(v - max)), its max 0 when it holds -inf alone (its sum then 0: any other slice
    holds e^0 = 1); the row's: the largest max, the sums scaled to it."""
    add, const = s.add, s.const
    maxes, sums = s.part(0), s.part(1)
    ninf, zero = const(-math.inf), const(0.0)
    empty = add(Node(Op.EQ, (sums, zero), DType.B1, Rank.FULL))
    maxes = add(Node(Op.WHERE, (empty, ninf, maxes), DType.F32, Rank.FULL))
    top = add(Node(Op.MAX, (maxes,), DType.F32, Rank.ROW))
    none = add(Node(Op.EQ, (top, ninf), DType.B1, Rank.ROW))
    shift = add(Node(Op.WHERE, (none, zero, top), DType.F32, Rank.ROW))
    gap = add(Node(Op.SUB, (maxes, shift), DType.F32, Rank.FULL))
    terms = add(Node(Op.MUL, (sums, add(Node(Op.EXP, (gap,), DType.F32, Rank.FULL))), DType.F32, Rank.FULL))
    return shift, add(Node(Op.SUM, (terms,), DType.F32, Rank.ROW))


REDUCTIONS: dict[Op, Reduction] = {
    r.op: r
    for r in (
        Reduction(Op.SUM, _same_op),
        Reduction(Op.MAX, _same_op),
        Reduction(Op.MIN, _same_op),
        Reduction(Op.ARGMAX, None),  # positions along the whole row, not a slice
        Reduction(Op.ARGMIN, None),
        Reduction(Op.WELFORD, _mean_m2),
        Reduction(Op.SOFTMAX_STATS, _max_sum_exp),
    )
}
assert set(REDUCTIONS) == REDUCE_OPS, set(REDUCTIONS) ^ REDUCE_OPS
