"""Lines of Triton that reduce a row: in registers (single pass), through the accumulators of looped kernels, or
from the partial results that split-row programs exchange and combine.

Each kind of reduction is one record, looked up by its `Op` in `KINDS`: a `reduce_kind.ReduceKind` whose methods
write its lines for each form of kernel (sums, maxes and mins and their positions in `reduce_kind.py`; mean-variance
and softmax statistics in `reduce_online.py`). The functions here are what the kernel's body calls; each looks the
kind up once and adds what every kind shares. What the IR stages know of a kind (its results, whether and how
slices' results combine) is its record in `ir/reductions.py`, keyed by the same `Op`: the IR layer may not import
codegen, and has no use for Triton text. Both tables cover `REDUCE_OPS`.
"""

from __future__ import annotations

from rblock.codegen.reduce_kind import Again, ArgExtreme, Chunk, Exchange, Extreme, ReduceKind, Sum, Tiles, slice_count
from rblock.codegen.reduce_online import SoftmaxStats, Welford
from rblock.ir import REDUCE_OPS, DType, KernelGraph, Op, Rank
from rblock.ir.query import VECTOR_BYTES, full_cone, misaligned_walk, reduction_levels
from rblock.ir.reductions import REDUCTIONS
from rblock.plan.config import Config

KINDS: dict[Op, ReduceKind] = {
    Op.SUM: Sum(),
    Op.MAX: Extreme("_maximum", low=True),
    Op.MIN: Extreme("_minimum", low=False),
    Op.ARGMAX: ArgExtreme("_argmax", low=True),
    Op.ARGMIN: ArgExtreme("_argmin", low=False),
    Op.WELFORD: Welford(),
    Op.SOFTMAX_STATS: SoftmaxStats(),
}
assert set(KINDS) == REDUCE_OPS, set(KINDS) ^ REDUCE_OPS


def _kind(g: KernelGraph, i: int) -> ReduceKind:
    return KINDS[g.nodes[i].op]


def partial_slots(g: KernelGraph) -> tuple[tuple[int, int, DType], ...]:
    """(reduction, output index, dtype) of each partial result a split_row kernel exchanges, one workspace each."""
    slots = []
    for r in sorted(reduction_levels(g)):
        n, outputs = g.nodes[r], REDUCTIONS[g.nodes[r].op].outputs
        dt = DType.F32 if outputs == 2 or n.dtype.is_float else DType.I64
        slots += [(r, k, dt) for k in range(outputs)]
    return tuple(slots)


def exchanges_words(g: KernelGraph) -> bool:
    """Whether split_row's one-launch form exchanges the partial results as (epoch, value) words (`ROW_WORDS`): when
    all are 32-bit. Integer sums (64-bit) go through workspaces and the group's arrival counter (`ROW_BARRIER`)."""
    return all(dt == DType.F32 for _, _, dt in partial_slots(g))


def split_row_partial(g: KernelGraph, i: int, v: str, walked: bool = False) -> list[str]:
    """split_row: reduce this program's slice of the row (value `v`) to tmp{i}_p0 (and _p1); `walked`: the slices
    are walked from the row's boundary (`rshift`)."""
    return _kind(g, i).partial(g, i, v, walked)


def split_row_combine(
    g: KernelGraph, i: int, ws: list[int], parts: int, spins: int | None = None, walked: bool = False
) -> list[str]:
    """split_row: the row's result from every slice's partial results (slots `ws`) of `parts` slices: loaded from
    the workspaces, or with `spins` (the wait's bound, 0: none) polled from the row's words (`ROW_WORDS`);
    `walked`: the slices are walked from the row's boundary (`rshift`)."""
    head = f"# ir %{i}: {g.nodes[i].op.name.lower()}, from the partial results of the row's slices"
    return [head, *_kind(g, i).combine(g, i, Exchange(ws, parts, spins, walked))]


def stats_group(g: KernelGraph, i: int, cfg: Config, aligned: bool) -> int:
    """Looped softmax statistics and float sums (`ReduceKind.grouped`): how many of a thread's contiguous elements
    of a chunk share one accumulator (`acc_update`): for the statistics one running max, so that a new max costs one
    rescale per group, not per element; for a sum one running total, the group added up within the thread first, so
    that its lanes take a register each group, not each element. A thread's elements are contiguous by whole 16-byte
    vectors of the narrowest load feeding the reduction, when every such load is contiguous along the row and rows
    start on vector boundaries (or are walked from them); 1 otherwise (a column softmax's vectors run across its
    rows)."""
    grouped = _kind(g, i).grouped(g.nodes[g.nodes[i].args[0]].dtype)
    if not grouped or not (aligned or misaligned_walk(g) is None):
        return 1
    loads = [g.nodes[j] for j in (*full_cone(g, i), i) if g.nodes[j].op == Op.LOAD and g.nodes[j].rank == Rank.FULL]
    if not loads or any(n.attr.r_strides != (1,) for n in loads):
        return 1
    per_thread = cfg.XBLOCK * cfg.RBLOCK // (32 * cfg.num_warps)
    group = min([VECTOR_BYTES // n.dtype.itemsize for n in loads] + [per_thread, cfg.RBLOCK])  # within one chunk
    return group if group >= 2 else 1


def peels_first_chunk(g: KernelGraph, reductions: list[int], uniform: bool) -> bool:
    """Looped: whether a pass's first chunk is taken before its loop, so that mean-variance sets each lane's shift
    there, once, and the loop neither selects it nor counts the lane's elements (`acc_finish` counts them from the
    lane's position). `uniform`: a lane masked in one chunk is masked in every later one (rows end, they do not
    start, inside a chunk), so every lane meets its first element in the first chunk."""
    return uniform and any(_kind(g, r).peels for r in reductions)


def acc_init(
    g: KernelGraph, i: int, group: int = 1, peeled: bool = False, reps: int = 1, width: str = "RBLOCK"
) -> list[str]:
    """Looped: the [XBLOCK, RBLOCK] accumulators of reduction i ([XBLOCK, width // (reps * group)]: grouped
    statistics or sums over chunks of `width`, see `acc_update`; `peeled`: mean-variance's shift comes from the
    first chunk and its count from the lanes' positions)."""
    shape = "[XBLOCK, RBLOCK]" if group == 1 else f"[XBLOCK, {width} // {reps * group}]"
    ridx = "tl.int64" if g.index_bits == 64 else "tl.int32"
    init = _kind(g, i).accumulators(g.nodes[g.nodes[i].args[0]].dtype, ridx, peeled)
    return [f"acc{i}{suffix} = tl.full({shape}, {value}, {t})" for suffix, value, t in init]


def acc_update(
    g: KernelGraph,
    i: int,
    v: str,
    group: int = 1,
    peeled: bool = False,
    first: bool = False,
    reps: int = 1,
    width: str = "RBLOCK",
) -> list[str]:
    """Looped: fold one chunk (value `v`) into reduction i's accumulators: in `group`s of a thread's elements
    (`stats_group`), `peeled` (`peels_first_chunk`: the `first` chunk sets mean-variance's shifts), and with `reps`
    > 1 a tile of `reps` chunks of `width` at once (each kind's `update` says how). Float sums in groups add each
    group within the thread, then once to its lane; sums and mean-variance with `reps` > 1 add the tile's chunks
    lane by lane (within each thread) before the accumulators do, which waits on all of them: their loads go out
    together."""
    n = g.nodes[i]
    lines = [f"# ir %{i}: {n.op.name.lower()} %{n.args[0]}"]
    return lines + _kind(g, i).update(g, i, v, Chunk(group, peeled, first, reps, width))


def acc_finish(g: KernelGraph, i: int, peeled: bool = False) -> list[str]:
    """Looped: reduction i's result from its accumulators, after the loop (`peeled`: see `acc_init`)."""
    return _kind(g, i).finish(g, i, peeled)


def single_pass(
    g: KernelGraph,
    i: int,
    vs: list[str],
    masks: list[str | None],
    rindexes: list[str],
    again: Again,
    count: str = "",
) -> list[str]:
    """Single pass: reduce the per-tile values `vs` (masked by `masks`; None: the tile needs no mask) along r. The
    tiles are combined element by element first, so a row of several tiles costs one exchange between threads, like
    a row of one. Two-step reductions get their operand once more from `again` (recomputed after the first step, or
    the same names). Mean-variance divides by `count`, the elements reduced (a split row's slice: fewer; default
    `slice_count`)."""
    return _kind(g, i).single(g, i, Tiles(vs, masks, rindexes, again, count or slice_count(g)))
