"""Split reduction: one kernel over few rows becomes two or three, so that the whole GPU works on it.

Stage 1 walks `chunks` slices of every row in parallel (the slice index becomes an extra, outermost x dim,
so that neighbouring programs and lanes still walk neighbouring rows: a column sum stays coalesced) and stores each
reduction's partial result to a workspace; stage 2 reads the partials as rows of length `chunks`,
combines them, and runs everything that came after the reductions. The input is read once, plus
`chunks` floats per row and reduction. A kernel that also writes full-size outputs (a norm, a softmax) gets a
stage 3: stage 2 stores each row's combined results, and stage 3 walks the slices again to write those outputs,
reading the input a second time, as a looped kernel does. Slices are equal but for the last, which may be short (a
masked tail): the mean/M2 combine of Welford weighs it by its own count. Each reduction's combine is its record's
(`ir/reductions.py`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial

from rblock.ir.nodes import MULTI_OUTPUT_OPS, REDUCE_OPS, Access, Buffer, DType, KernelGraph, Node, Op, Rank
from rblock.ir.query import can_split_row, reduction_levels
from rblock.ir.reductions import REDUCTIONS, Slices


@dataclass(frozen=True, slots=True)
class SplitKernels:
    first: KernelGraph  # inputs -> partials
    second: KernelGraph  # inputs, partials -> per-row outputs (with `third`: and each row's combined results)
    third: KernelGraph | None  # inputs, combined results -> full-size outputs; None when there are none
    partials: tuple[Buffer, ...]  # workspaces of xnumel * chunks elements
    rows: tuple[Buffer, ...]  # each row's combined results, for `third`: workspaces of xnumel elements
    chunks: int


def can_split(g: KernelGraph) -> bool:
    """What a split row needs (`query.can_split_row`: one level of reductions that combine slice results, no sums
    over rows), with one r dim and no gathers (whose positions are along the whole row, not a slice)."""
    return len(g.r_sizes) == 1 and not any(n.op == Op.GATHER for n in g.nodes) and can_split_row(g)


def split_chunks(rnumel: int, wanted: int) -> int:
    """The largest power of two <= wanted that leaves no slice empty."""
    c = 1
    while c * 2 <= wanted and no_empty_slice(rnumel, c * 2):
        c *= 2
    return c


def no_empty_slice(rnumel: int, chunks: int) -> bool:
    """Slices of ceil(rnumel / chunks) leave none empty (5 in 4 would be 2, 2, 1 and nothing)."""
    return (chunks - 1) * -(-rnumel // chunks) < rnumel


def _contiguous(sizes: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(math.prod(sizes[k + 1 :]) for k in range(len(sizes)))


def split(g: KernelGraph, chunks: int) -> SplitKernels:
    assert can_split(g) and chunks > 1 and no_empty_slice(g.rnumel, chunks), (g.name, chunks)
    per_chunk = -(-g.rnumel // chunks)
    n_in = len(g.inputs)
    reductions = sorted(reduction_levels(g))
    parts = {r: REDUCTIONS[g.nodes[r].op].outputs for r in reductions}
    partials: list[Buffer] = []
    slot: dict[tuple[int, int], int] = {}  # (reduction, part) -> index among the partials (and combined results)
    for r in reductions:
        two = parts[r] == 2
        dt = DType.F32 if g.nodes[r].dtype.is_float or two else g.nodes[r].dtype
        for k in range(parts[r]):
            slot[(r, k)] = len(partials)
            partials.append(Buffer(f"part{len(partials)}", dt, True))
    full_out = any(n.op == Op.STORE and n.rank == Rank.FULL for n in g.nodes)
    rows = [replace(b, name=f"row{k}") for k, b in enumerate(partials)] if full_out else []
    x_part = _contiguous((chunks, *g.x_sizes))  # partials laid out as [chunks, rows...]
    r_extent = g.rnumel if g.rnumel % chunks else 0

    def sliced(n: Node, out_shift: int = 0) -> Node:
        """n over (slice, rows...) x per_chunk; outputs `out_shift` buffers further on."""
        if not isinstance(n.attr, Access):
            return n
        a = n.attr
        buf = a.buffer + out_shift if a.buffer >= n_in else a.buffer
        return replace(n, attr=replace(a, buffer=buf, x_strides=(a.r_strides[0] * per_chunk, *a.x_strides)))

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
        n = sliced(g.nodes[i])
        remap[i] = len(first)
        first.append(replace(n, args=tuple(remap[a] for a in n.args)))
    for r in reductions:
        values = [remap[r]]
        if parts[r] == 2:
            values = []
            for k in range(2):
                first.append(Node(Op.GETITEM, (remap[r],), DType.F32, Rank.ROW, k))
                values.append(len(first) - 1)
        for k, v in enumerate(values):
            acc = Access(n_in + slot[(r, k)], 0, x_part, (0,))
            first.append(Node(Op.STORE, (v,), partials[slot[(r, k)]].dtype, Rank.ROW, acc))
    stage1 = KernelGraph(
        f"{g.name}_partials",
        (chunks, *g.x_sizes),
        (per_chunk,),
        (*g.inputs, *partials),
        tuple(first),
        g.index_bits,
        r_extent,
    )

    # ---- stage 2: combine the partials, then the rest of the kernel's per-row work -----------------------------
    second: list[Node] = []

    def add(node: Node) -> int:
        second.append(node)
        return len(second) - 1

    def load_part(r: int, k: int) -> int:
        acc = Access(n_in + slot[(r, k)], 0, x_part[1:], (x_part[0],))
        return add(Node(Op.LOAD, (), partials[slot[(r, k)]].dtype, Rank.FULL, acc))

    def last_part(r: int, k: int) -> int:  # the row's last slice's partial result
        acc = Access(n_in + slot[(r, k)], (chunks - 1) * x_part[0], x_part[1:], (0,))
        return add(Node(Op.LOAD, (), partials[slot[(r, k)]].dtype, Rank.ROW, acc))

    def const(value: float) -> int:
        return add(Node(Op.CONST, (), DType.F32, Rank.SCALAR, value))

    combined: dict[int, int | tuple[int, int]] = {}
    short = chunks * per_chunk - g.rnumel
    for r in reductions:
        slices = Slices(add, partial(load_part, r), partial(last_part, r), const, per_chunk, short, g.rnumel)
        combined[r] = REDUCTIONS[g.nodes[r].op].combine(slices, g.nodes[r])
    out_shift = len(partials)  # outputs move behind the partials in the second kernel's buffers
    post: dict[int, int] = {}
    for i, n in enumerate(g.nodes):
        if i in combined and isinstance(combined[i], int):
            post[i] = combined[i]
            continue
        if i in combined or n.rank == Rank.FULL or n.op in REDUCE_OPS:
            continue  # full-size values and the reductions themselves live in stages 1 and 3
        if n.op == Op.GETITEM and g.nodes[n.args[0]].op in MULTI_OUTPUT_OPS:
            post[i] = combined[n.args[0]][n.attr]
            continue
        if isinstance(n.attr, Access) and n.attr.buffer >= n_in:
            n = replace(n, attr=replace(n.attr, buffer=n.attr.buffer + out_shift))
        post[i] = add(replace(n, args=tuple(post[a] for a in n.args)))
    first_row = len(g.buffers) + len(partials)  # the combined results follow the outputs
    for (r, k), j in slot.items() if full_out else ():
        value = combined[r] if parts[r] == 1 else combined[r][k]
        add(Node(Op.STORE, (value,), rows[j].dtype, Rank.ROW, Access(first_row + j, 0, x_part[1:], (0,))))
    stage2 = KernelGraph(
        f"{g.name}_combine",
        g.x_sizes,
        (chunks,),
        (*g.inputs, *(replace(b, is_output=False) for b in partials), *g.outputs, *rows),
        tuple(second),
        g.index_bits,
    )
    stage3 = _outputs_by_slice(g, chunks, rows, slot, sliced, r_extent) if full_out else None
    return SplitKernels(stage1, stage2, stage3, tuple(partials), tuple(rows), chunks)


def _outputs_by_slice(
    g: KernelGraph,
    chunks: int,
    rows: list[Buffer],
    slot: dict[tuple[int, int], int],
    sliced: Callable[..., Node],
    r_extent: int,
) -> KernelGraph:
    """Stage 3: the full-size outputs over (slice, rows...) x per_chunk, each reduction read from the row's
    combined results (the per-row work after it is done again: a few operations per row and slice)."""
    n_in = len(g.inputs)
    x_rows = (0, *_contiguous(g.x_sizes))  # one value per row, the same for each of its slices
    nodes: list[Node] = []
    remap: dict[int, int] = {}
    for i, n in enumerate(g.nodes):
        key = (n.args[0], n.attr) if n.op == Op.GETITEM else (i, 0)
        if key in slot and (n.op == Op.GETITEM or n.op not in MULTI_OUTPUT_OPS):  # a reduction's (part of) result
            acc = Access(n_in + slot[key], 0, x_rows, (0,))
            remap[i] = len(nodes)
            nodes.append(Node(Op.LOAD, (), rows[slot[key]].dtype, Rank.ROW, acc))
            continue
        if n.op in REDUCE_OPS or n.op == Op.STORE and n.rank != Rank.FULL:
            continue  # reductions are read back; per-row outputs were stored by stage 2
        n = sliced(n, out_shift=len(rows))
        remap[i] = len(nodes)
        nodes.append(replace(n, args=tuple(remap[a] for a in n.args)))
    return KernelGraph(
        f"{g.name}_outputs",
        (chunks, *g.x_sizes),
        (-(-g.rnumel // chunks),),
        (*g.inputs, *(replace(b, is_output=False) for b in rows), *g.outputs),
        tuple(nodes),
        g.index_bits,
        r_extent,
    )
