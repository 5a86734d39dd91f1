"""Read-only questions about a KernelGraph that several stages ask."""

from __future__ import annotations

from rblock.ir.nodes import REDUCE_OPS, DType, KernelGraph, Op, Rank
from rblock.ir.reductions import REDUCTIONS


def reduction_levels(g: KernelGraph) -> dict[int, int]:
    """Level of each reduction: 1 + the highest level among the reductions its input depends on."""
    level: dict[int, int] = {}
    below: list[int] = []
    for i, n in enumerate(g.nodes):
        dep = max((below[a] for a in n.args), default=0)
        if n.op in REDUCE_OPS:
            level[i] = dep + 1
        below.append(level.get(i, dep))
    return level


def full_cone(g: KernelGraph, i: int, stop: frozenset[int] = frozenset()) -> list[int]:
    """Nodes feeding `i` through full-rank values, stopping at (and including) per-row values and the nodes in
    `stop`; ascending."""
    seen: set[int] = set()
    stack = [i]
    while stack:
        j = stack.pop()
        for a in g.nodes[j].args:
            if a not in seen:
                seen.add(a)
                if g.nodes[a].rank == Rank.FULL and a not in stop:
                    stack.append(a)
    return sorted(seen)


def from_16_bit(g: KernelGraph, i: int) -> bool:
    """Whether full-size value i is a 16-bit load, widened or not: its values resolve 2^-8 (bf16) or 2^-11 (fp16) of
    their magnitude, far coarser than the rounding of an fp32 sum over a row. (Arithmetic in fp32 on the way, such
    as adding an offset, can make values as fine as fp32's own resolution.)"""
    while g.nodes[i].op == Op.CAST:
        i = g.nodes[i].args[0]
    n = g.nodes[i]
    return n.op == Op.LOAD and n.rank == Rank.FULL and n.dtype in (DType.BF16, DType.F16)


def softmax_numerators(g: KernelGraph) -> dict[int, int]:
    """Each exp(v - max) whose max is that of softmax statistics s over the same v (softmax's numerator), with s: a
    program that summed exp(v - m) over a slice with its own max m has these values up to a per-row factor."""
    out = {}
    for i, n in enumerate(g.nodes):
        if n.op != Op.EXP or g.nodes[n.args[0]].op != Op.SUB:
            continue
        v, m = g.nodes[n.args[0]].args
        if g.nodes[m].op != Op.GETITEM or g.nodes[m].attr != 0:  # not the max of multi-output statistics
            continue
        s = g.nodes[m].args[0]
        if g.nodes[s].op == Op.SOFTMAX_STATS and g.nodes[s].args[0] == v:
            out[i] = s
    return out


def looped_passes(g: KernelGraph) -> list[list[int]]:
    """What each loop over r computes when a kernel is looped: the reductions of one level per loop, in level
    order, then (if any) the full-size stores. The first loop also makes the stores of `stored_early`. Full-size
    values are recomputed, and so re-loaded, in every loop that needs them, unless `read_back` reads them."""
    levels = reduction_levels(g)
    passes = [[r for r in sorted(levels) if levels[r] == lv] for lv in sorted(set(levels.values()))]
    early = sorted(stored_early(g).values())
    if passes:
        passes[0] += early
    full_stores = [i for i, n in enumerate(g.nodes) if n.op == Op.STORE and n.rank == Rank.FULL and i not in early]
    return passes + ([full_stores] if full_stores else [])


def loads_in_pass(g: KernelGraph, targets: list[int], stop: frozenset[int] = frozenset()) -> set[int]:
    """The full-size loads that computing `targets` needs, and the values of `stop` it reaches (read back from an
    output instead of computed)."""
    return {
        j
        for t in targets
        for j in [*full_cone(g, t, stop), t]
        if (g.nodes[j].op == Op.LOAD and g.nodes[j].rank == Rank.FULL) or j in stop
    }


def _after_reduction(g: KernelGraph) -> list[bool]:
    """Per node: whether it depends on a reduction."""
    after: list[bool] = []
    for n in g.nodes:
        after.append(n.op in REDUCE_OPS or any(after[a] for a in n.args))
    return after


def stored_early(g: KernelGraph) -> dict[int, int]:
    """Full-size values (value -> its store) that a looped kernel with reductions stores in its first loop: those
    needing no reduction, made from row loads of more bytes than the value stored (an added residual: two tensors
    against one). Values are rounded to their dtype where computed, so the output holds exactly the value."""
    if not reduction_levels(g):
        return {}
    after = _after_reduction(g)
    early: dict[int, int] = {}
    for s, n in enumerate(g.nodes):
        if n.op != Op.STORE or n.rank != Rank.FULL or after[s] or n.args[0] in early:
            continue
        cone = [g.nodes[j] for j in [*full_cone(g, n.args[0]), n.args[0]]]
        row_bytes = sum(
            m.dtype.itemsize for m in cone if m.op == Op.LOAD and m.rank == Rank.FULL and any(m.attr.x_strides)
        )
        if row_bytes > n.dtype.itemsize:
            early[n.args[0]] = s
    return early


def independent_stores(g: KernelGraph) -> list[int]:
    """Stores of full-size values that need no reduction (fused_add_rms_norm's x + residual): a split row stores
    them before it waits for the row's partial results, so that they drain while it waits."""
    after = _after_reduction(g)
    return [s for s, n in enumerate(g.nodes) if n.op == Op.STORE and n.rank == Rank.FULL and not after[s]]


def read_back(g: KernelGraph) -> dict[int, int]:
    """The values of `stored_early` (value -> its store) that a later loop needs: it loads them from the output."""
    passes, early = looped_passes(g), stored_early(g)
    later = {j for p in passes[1:] for t in p for j in full_cone(g, t, frozenset(early))}
    return {v: s for v, s in early.items() if v in later}


def can_split_row(g: KernelGraph) -> bool:
    """Whether programs holding slices of a row can finish it from each other's partial results: one level of
    reductions, each with a combine of slice results (`Reduction.splits`), and no sums over rows."""
    levels = reduction_levels(g)
    one_level = bool(levels) and set(levels.values()) == {1}
    return one_level and all(REDUCTIONS[g.nodes[r].op].splits for r in levels) and not totals(g)


def totals(g: KernelGraph) -> list[int]:
    """The sums over every row (TOTAL_SUM), in order: each program adds its rows', the last to finish adds those."""
    return [i for i, n in enumerate(g.nodes) if n.op == Op.TOTAL_SUM]


VECTOR_BYTES = 16  # the widest load or store one thread issues


def misaligned_walk(g: KernelGraph) -> tuple[int, int] | None:
    """The full-size load whose rows do not start on 16-byte boundaries (x strides not a multiple of a vector), with
    rows contiguous along the one r dim, and its elements per vector: a kernel can walk its rows from the boundary
    below each row's start, so that this load (and every access at the same element offsets) is vectorized. None if
    there is none."""
    if len(g.r_sizes) != 1:
        return None
    for i, n in enumerate(g.nodes):
        if n.op == Op.LOAD and n.rank == Rank.FULL and n.attr.r_strides == (1,):
            v = VECTOR_BYTES // n.dtype.itemsize
            if any(st % v for st in n.attr.x_strides) or n.attr.offset % v:
                return i, v
    return None


def early_row_loads(g: KernelGraph) -> list[int]:
    """Per-row loads and gathers that need no reduction (a class index and its logit): cheap to hold."""
    after = _after_reduction(g)
    return [i for i, n in enumerate(g.nodes) if n.op in (Op.LOAD, Op.GATHER) and n.rank != Rank.FULL and not after[i]]
