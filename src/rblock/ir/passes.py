"""IR -> IR rewrites. Each is pure and keeps `verify` true."""

from __future__ import annotations

import math
from dataclasses import replace

from rblock.ir.nodes import Access, DType, KernelGraph, Node, Op, Rank


def simplify_dims(g: KernelGraph) -> KernelGraph:
    """Drop size-1 dims, then merge adjacent dims that every access walks as one flat dim."""
    for axis in ("x", "r"):
        sizes = getattr(g, f"{axis}_sizes")
        all_strides = [getattr(n.attr, f"{axis}_strides") for n in g.nodes if isinstance(n.attr, Access)]
        keep = [k for k, s in enumerate(sizes) if s != 1] or ([len(sizes) - 1] if axis == "r" else [])
        groups: list[list[int]] = []  # runs of kept dims with outer stride == inner stride * inner size
        for k in keep:
            if groups and all(st[groups[-1][-1]] == st[k] * sizes[k] for st in all_strides):
                groups[-1].append(k)
            else:
                groups.append([k])
        new_sizes = tuple(math.prod(sizes[k] for k in grp) for grp in groups)

        def merged(st: tuple[int, ...], _groups=groups) -> tuple[int, ...]:
            return tuple(st[grp[-1]] for grp in _groups)

        nodes = tuple(
            replace(n, attr=replace(n.attr, **{f"{axis}_strides": merged(getattr(n.attr, f"{axis}_strides"))}))
            if isinstance(n.attr, Access)
            else n
            for n in g.nodes
        )
        g = replace(g, nodes=nodes, **{f"{axis}_sizes": new_sizes})
    return g


def dead_code(g: KernelGraph) -> KernelGraph:
    """Remove nodes no store depends on, renumbering the rest."""
    live: set[int] = set()
    for i in reversed(range(len(g.nodes))):
        if g.nodes[i].op == Op.STORE or i in live:
            live.add(i)
            live.update(g.nodes[i].args)
    new_index = {old: new for new, old in enumerate(sorted(live))}
    nodes = tuple(replace(g.nodes[i], args=tuple(new_index[a] for a in g.nodes[i].args)) for i in sorted(live))
    return replace(g, nodes=nodes)


def reciprocal_row_divisors(g: KernelGraph) -> KernelGraph:
    """x / row -> x * (1 / row): one division per row instead of one per element (at most one extra rounding)."""
    nodes = list(g.nodes)
    out: list[Node] = []
    remap: dict[int, int] = {}
    for i, n in enumerate(nodes):
        n = replace(n, args=tuple(remap.get(a, a) for a in n.args))
        if n.op == Op.DIV and n.rank == Rank.FULL and n.dtype == DType.F32 and out[n.args[1]].rank != Rank.FULL:
            one = len(out)
            out.append(Node(Op.CONST, (), DType.F32, Rank.SCALAR, 1.0))
            out.append(Node(Op.DIV, (one, n.args[1]), DType.F32, out[n.args[1]].rank))
            n = replace(n, op=Op.MUL, args=(n.args[0], one + 1))
        remap[i] = len(out)
        out.append(n)
    return replace(g, nodes=tuple(out))
