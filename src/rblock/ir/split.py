"""Split reduction: one kernel over few rows becomes two, so that the whole GPU works on it.

Stage 1 walks `chunks` slices of every row in parallel (the slice index becomes an extra, outermost x dim,
so that neighbouring programs and lanes still walk neighbouring rows: a column sum stays coalesced) and stores each
reduction's partial result to a workspace; stage 2 reads the partials as rows of length `chunks`,
combines them, and runs everything that came after the reductions. The input is read once, plus
`chunks` floats per row and reduction. Slices are equal, except for sums, maxima and minima, where the last may
be short (a masked tail): the mean/M2 combine of Welford assumes equal slices.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from rblock.ir.nodes import Access, Buffer, DType, KernelGraph, Node, Op, Rank
from rblock.ir.query import reduction_levels

SPLITTABLE = frozenset({Op.SUM, Op.MAX, Op.MIN, Op.WELFORD})


@dataclass(frozen=True, slots=True)
class SplitKernels:
    first: KernelGraph  # inputs -> partials
    second: KernelGraph  # inputs, partials -> outputs
    workspace: tuple[Buffer, ...]  # the partials, each xnumel * chunks elements
    chunks: int


def can_split(g: KernelGraph) -> bool:
    """One r dim, one level of SUM/MAX/MIN/WELFORD reductions, only per-row outputs, and no gathers (whose
    positions are along the whole row, not a slice)."""
    levels = reduction_levels(g)
    return (
        len(g.r_sizes) == 1
        and not any(n.op == Op.GATHER for n in g.nodes)
        and bool(levels)
        and set(levels.values()) == {1}
        and all(g.nodes[r].op in SPLITTABLE for r in levels)
        and all(n.rank != Rank.FULL for n in g.nodes if n.op == Op.STORE)
    )


def uneven_ok(g: KernelGraph) -> bool:
    """Whether the slices of a split may differ in length (no Welford, whose combine weighs slices equally)."""
    return all(g.nodes[r].op != Op.WELFORD for r in reduction_levels(g))


def split_chunks(rnumel: int, wanted: int, uneven: bool = False) -> int:
    """The largest power of two <= wanted that divides rnumel (1 if none but 1 does); with `uneven`, the largest
    power of two <= wanted that leaves no slice empty."""
    c = 1
    while c * 2 <= wanted and (rnumel % (c * 2) == 0 or (uneven and no_empty_slice(rnumel, c * 2))):
        c *= 2
    return c


def no_empty_slice(rnumel: int, chunks: int) -> bool:
    """Slices of ceil(rnumel / chunks) leave none empty (5 in 4 would be 2, 2, 1 and nothing)."""
    return (chunks - 1) * -(-rnumel // chunks) < rnumel


def _contiguous(sizes: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(math.prod(sizes[k + 1 :]) for k in range(len(sizes)))


def split(g: KernelGraph, chunks: int) -> SplitKernels:
    assert can_split(g) and chunks > 1 and no_empty_slice(g.rnumel, chunks), (g.name, chunks)
    assert g.rnumel % chunks == 0 or uneven_ok(g), (g.name, chunks)
    per_chunk = -(-g.rnumel // chunks)
    n_in = len(g.inputs)
    reductions = sorted(reduction_levels(g))
    parts = {r: (2 if g.nodes[r].op == Op.WELFORD else 1) for r in reductions}
    workspace: list[Buffer] = []
    slot: dict[tuple[int, int], int] = {}  # (reduction, part) -> workspace index
    for r in reductions:
        dt = DType.F32 if g.nodes[r].dtype.is_float or g.nodes[r].op == Op.WELFORD else g.nodes[r].dtype
        for k in range(parts[r]):
            slot[(r, k)] = len(workspace)
            workspace.append(Buffer(f"part{len(workspace)}", dt, True))
    x_part = _contiguous((chunks, *g.x_sizes))  # partials laid out as [chunks, rows...]

    # ---- stage 1: every node the reductions need, over (rows, chunks) x per_chunk --------------------------
    needed: set[int] = set()
    stack = list(reductions)
    while stack:  # every ancestor of a reduction (none is itself a reduction: one level)
        j = stack.pop()
        if j not in needed:
            needed.add(j)
            stack.extend(g.nodes[j].args)
    remap: dict[int, int] = {}
    first: list[Node] = []
    for i in sorted(needed):
        n = g.nodes[i]
        if isinstance(n.attr, Access):
            a = n.attr
            step = a.r_strides[0] * per_chunk
            n = replace(n, attr=replace(a, x_strides=(step, *a.x_strides)))
        remap[i] = len(first)
        first.append(replace(n, args=tuple(remap[a] for a in n.args)))
    for r in reductions:
        values = [remap[r]]
        if g.nodes[r].op == Op.WELFORD:
            values = []
            for k in range(2):
                first.append(Node(Op.GETITEM, (remap[r],), DType.F32, Rank.ROW, k))
                values.append(len(first) - 1)
        for k, v in enumerate(values):
            buf = n_in + slot[(r, k)]
            acc = Access(buf, 0, x_part, (0,))
            first.append(Node(Op.STORE, (v,), workspace[slot[(r, k)]].dtype, Rank.ROW, acc))
    stage1 = KernelGraph(
        f"{g.name}_partials",
        (chunks, *g.x_sizes),
        (per_chunk,),
        (*g.inputs, *workspace),
        tuple(first),
        g.index_bits,
        g.rnumel if g.rnumel % chunks else 0,
    )

    # ---- stage 2: combine the partials, then the rest of the kernel -----------------------------------------
    second: list[Node] = []

    def add(node: Node) -> int:
        second.append(node)
        return len(second) - 1

    def load_part(r: int, k: int) -> int:
        buf = n_in + slot[(r, k)]
        acc = Access(buf, 0, x_part[1:], (x_part[0],))
        return add(Node(Op.LOAD, (), workspace[slot[(r, k)]].dtype, Rank.FULL, acc))

    combined: dict[int, int | tuple[int, int]] = {}
    for r in reductions:
        op = g.nodes[r].op
        if op != Op.WELFORD:
            combined[r] = add(Node(op, (load_part(r, 0),), g.nodes[r].dtype, Rank.ROW))
            continue
        # equal-sized chunks: mean = mean of means; m2 = sum of m2 + per_chunk * sum((mean_c - mean)^2)
        means, m2s = load_part(r, 0), load_part(r, 1)
        n_chunks = add(Node(Op.CONST, (), DType.F32, Rank.SCALAR, float(chunks)))
        mean = add(Node(Op.DIV, (add(Node(Op.SUM, (means,), DType.F32, Rank.ROW)), n_chunks), DType.F32, Rank.ROW))
        dev = add(Node(Op.SUB, (means, mean), DType.F32, Rank.FULL))
        spread = add(Node(Op.SUM, (add(Node(Op.MUL, (dev, dev), DType.F32, Rank.FULL)),), DType.F32, Rank.ROW))
        size = add(Node(Op.CONST, (), DType.F32, Rank.SCALAR, float(per_chunk)))
        within = add(Node(Op.SUM, (m2s,), DType.F32, Rank.ROW))
        m2 = add(Node(Op.ADD, (within, add(Node(Op.MUL, (spread, size), DType.F32, Rank.ROW))), DType.F32, Rank.ROW))
        combined[r] = (mean, m2)
    out_shift = len(workspace)  # outputs move behind the partials in the second kernel's buffers
    post: dict[int, int] = {}
    for i, n in enumerate(g.nodes):
        if i in combined and isinstance(combined[i], int):
            post[i] = combined[i]
            continue
        if i in combined or (n.rank == Rank.FULL and n.op != Op.STORE) or n.op in SPLITTABLE:
            continue  # full-size values and the reductions themselves live in stage 1
        if n.op == Op.GETITEM and g.nodes[n.args[0]].op == Op.WELFORD:
            post[i] = combined[n.args[0]][n.attr]
            continue
        if isinstance(n.attr, Access) and n.attr.buffer >= n_in:
            n = replace(n, attr=replace(n.attr, buffer=n.attr.buffer + out_shift))
        post[i] = add(replace(n, args=tuple(post[a] for a in n.args)))
    stage2 = KernelGraph(
        f"{g.name}_combine",
        g.x_sizes,
        (chunks,),
        (*g.inputs, *(replace(b, is_output=False) for b in workspace), *g.outputs),
        tuple(second),
        g.index_bits,
    )
    return SplitKernels(stage1, stage2, tuple(workspace), chunks)
