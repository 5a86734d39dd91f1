"""Invariants every KernelGraph satisfies; each pass and the tracer's output are checked against them."""

from __future__ import annotations

from rblock.ir.elementwise import ELEMENTWISE, POINTWISE_OPS
from rblock.ir.nodes import MEMORY_OPS, MULTI_OUTPUT_OPS, REDUCE_OPS, Access, KernelGraph, Op, Rank

_ARITY = {
    **{op: e.arity for op, e in ELEMENTWISE.items()},
    **{op: 1 for op in REDUCE_OPS | {Op.CAST, Op.BROADCAST, Op.TOTAL_SUM}},
}


def verify(g: KernelGraph) -> KernelGraph:
    """Return `g` unchanged, or raise AssertionError naming the first broken invariant."""
    assert g.r_sizes, f"{g.name}: a kernel needs at least one r dim"
    stores = 0
    for i, n in enumerate(g.nodes):
        where = f"{g.name} %{i} = {n}"
        assert all(0 <= a < i for a in n.args), f"{where}: operands must come earlier"
        if n.op in _ARITY:
            assert len(n.args) == _ARITY[n.op], f"{where}: expected {_ARITY[n.op]} operands"
        if n.op in MEMORY_OPS:
            acc = n.attr
            assert isinstance(acc, Access), f"{where}: memory op without an Access"
            assert len(acc.x_strides) == len(g.x_sizes), f"{where}: x strides vs x dims {g.x_sizes}"
            assert len(acc.r_strides) == len(g.r_sizes), f"{where}: r strides vs r dims {g.r_sizes}"
            assert 0 <= acc.buffer < len(g.buffers), f"{where}: no buffer {acc.buffer}"
            assert g.buffers[acc.buffer].is_output == (n.op == Op.STORE), f"{where}: wrong buffer direction"
        if n.op == Op.LOAD:
            expected = Rank.FULL if n.attr.uses_r else Rank.ROW
            assert n.rank == expected, f"{where}: a load's rank follows its index, expected {expected}"
        if n.op == Op.GATHER:
            assert g.nodes[n.args[0]].rank != Rank.FULL, f"{where}: gather position must be per row"
        if n.op == Op.STORE:
            stores += 1
            assert not any(n.attr.r_strides) or g.nodes[n.args[0]].rank == Rank.FULL, f"{where}: full store of a row"
        if n.op in REDUCE_OPS:
            assert g.nodes[n.args[0]].rank == Rank.FULL, f"{where}: reductions take a full operand"
            assert n.rank == Rank.ROW, f"{where}: reductions give a row"
        if n.op == Op.TOTAL_SUM:
            assert g.nodes[n.args[0]].rank == Rank.ROW, f"{where}: a sum over rows takes a per-row operand"
            assert n.rank == Rank.TOTAL, f"{where}: a sum over rows gives a total"
        if Rank.TOTAL in (g.nodes[a].rank for a in n.args):
            # a total is known only once every program has added its rows: nothing per row can depend on it
            assert n.op in POINTWISE_OPS or n.op == Op.STORE, f"{where}: a total feeds only pointwise ops and stores"
            assert all(g.nodes[a].rank in (Rank.TOTAL, Rank.SCALAR) for a in n.args), f"{where}: a total with a row"
        if n.op == Op.STORE and n.rank == Rank.TOTAL:
            assert not any(n.attr.x_strides + n.attr.r_strides), f"{where}: a total is stored to one element"
        if n.op == Op.GETITEM:
            assert g.nodes[n.args[0]].op in MULTI_OUTPUT_OPS, f"{where}: getitem of a single-output op"
        if n.op in MULTI_OUTPUT_OPS:
            assert all(g.nodes[u].op == Op.GETITEM for u in g.users()[i]), f"{where}: read through getitem only"
        if n.op == Op.BROADCAST:
            assert n.rank == Rank.FULL, f"{where}: a broadcast gives a full value"
        elif n.op in _ARITY and n.op not in REDUCE_OPS and n.op != Op.TOTAL_SUM:
            top = max((g.nodes[a].rank.value for a in n.args), default=0)
            assert n.rank.value == top, f"{where}: pointwise rank must be its operands' widest"
    assert stores > 0, f"{g.name}: a kernel without stores computes nothing"
    return g
