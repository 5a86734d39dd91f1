"""Lines of Triton that reduce a row: in registers (single pass), through the accumulators of looped kernels, or
from the partial results that split-row programs exchange and combine."""

from __future__ import annotations

from collections.abc import Callable

from rblock.codegen.emit import TL_DTYPE, extreme, round16
from rblock.ir import DType, KernelGraph, Op, Rank
from rblock.ir.query import VECTOR_BYTES, from_16_bit, full_cone, misaligned_walk, reduction_levels
from rblock.plan.config import Config

# Single-pass mean-variance of 16-bit data (a whole row, or a split row's slice) takes M2 from the sum of squares
# while M2 is at least 1/CANCELLATION_LIMIT of it (log2 of it bits lost to cancellation at most); else it sums the
# squares about the mean.
CANCELLATION_LIMIT = 8.0

# (operand, its names per tile) -> (its names after a reduction, the lines that compute them)
Again = Callable[[int, list[str]], tuple[list[str], list[str]]]


def _operand(g: KernelGraph, i: int) -> DType:
    return g.nodes[g.nodes[i].args[0]].dtype


def partial_slots(g: KernelGraph) -> tuple[tuple[int, int, DType], ...]:
    """(reduction, output index, dtype) of each partial result a split_row kernel exchanges, one workspace each."""
    slots = []
    for r in sorted(reduction_levels(g)):
        n = g.nodes[r]
        two = n.op in (Op.WELFORD, Op.SOFTMAX_STATS)
        dt = DType.F32 if two or n.dtype.is_float else DType.I64
        slots += [(r, k, dt) for k in range(2 if two else 1)]
    return tuple(slots)


def exchanges_words(g: KernelGraph) -> bool:
    """Whether split_row's one-launch form exchanges the partial results as (epoch, value) words (`ROW_WORDS`): when
    all are 32-bit. Integer sums (64-bit) go through workspaces and the group's arrival counter (`ROW_BARRIER`)."""
    return all(dt == DType.F32 for _, _, dt in partial_slots(g))


def _slice_count(p: str, walked: str) -> str:
    """Elements of the row in slice `p`; `walked`: the row's shift below its boundary (its first slice holds that
    many positions before the row), or "" where the slices start at the row's first element."""
    if not walked:
        return f"tl.minimum(tl.maximum(rnumel - {p} * RBLOCK, 0), RBLOCK).to(tl.float32)"
    end = f"tl.minimum(tl.maximum(rnumel + {walked} - {p} * RBLOCK, 0), RBLOCK)"
    return f"({end} - tl.where({p} == 0, {walked}, 0)).to(tl.float32)"


def split_row_partial(g: KernelGraph, i: int, v: str, walked: bool = False) -> list[str]:
    """split_row: reduce this program's slice of the row (value `v`) to tmp{i}_p0 (and _p1); `walked`: the slices
    are walked from the row's boundary (`rshift`)."""
    t, op = f"tmp{i}", g.nodes[i].op
    zero = "0.0" if g.nodes[g.nodes[i].args[0]].dtype.is_float else "0"
    if op == Op.SUM:
        widen = "" if zero == "0.0" else ".to(tl.int64)"  # torch sums bools and ints in int64
        return [f"{t}_p0 = tl.sum(tl.where(mask, {v}, {zero}){widen}, 1)[:, None]"]
    if op in (Op.MAX, Op.MIN):
        ident, fn = extreme(_operand(g, i), op == Op.MAX), "_maximum" if op == Op.MAX else "_minimum"
        return [f"{t}_p0 = tl.reduce(tl.where(mask, {v}, {ident}), 1, {fn})[:, None]"]
    if op == Op.WELFORD:  # the slice's mean and M2, as a single pass takes a whole row's
        count = f"{t}_n"
        return [
            f"{count} = {_slice_count('part', 'rshift' if walked else '')}  # elements in this slice",
            *single_pass(g, i, [v], ["mask"], [], lambda _, names: (names, []), count),
            f"{t}_p0, {t}_p1 = {t}_0, {t}_1",
        ]
    assert op == Op.SOFTMAX_STATS
    return [
        f'{t}_p0 = tl.reduce(tl.where(mask, {v}, float("-inf")), 1, _maximum)[:, None]',
        f'{t}_shift = tl.where({t}_p0 == float("-inf"), 0.0, {t}_p0)',
        f"{t}_e = tl.where(mask, _exp_minus({v}, {t}_shift), 0.0)",
        f"{t}_p1 = tl.sum({t}_e, 1)[:, None]",
    ]


def slice_exps_rescaled(i: int) -> str:
    """split_row: e^(v - max) from the slice's e^(v - its own max), kept from split_row_partial, times one factor per
    row: one exp per element instead of two (a slice with no finite value has none: 0)."""
    t = f"tmp{i}"
    return f'{t}_e * tl.where({t}_p0 == float("-inf"), 0.0, _exp_minus({t}_shift, {t}_0))'


def split_row_combine(
    g: KernelGraph, i: int, ws: list[int], parts: int, spins: int | None = None, walked: bool = False
) -> list[str]:
    """split_row: the row's result from every slice's partial results (slots `ws`) of `parts` slices: loaded from
    the workspaces, or with `spins` (the wait's bound, 0: none) polled from the row's words (`ROW_WORDS`);
    `walked`: the slices are walked from the row's boundary (`rshift`)."""
    t, n = f"tmp{i}", g.nodes[i]
    zero = "0.0" if n.op != Op.SUM or n.dtype.is_float else "0"
    ident = {
        Op.MAX: extreme(_operand(g, i), True),
        Op.MIN: extreme(_operand(g, i), False),
        Op.SOFTMAX_STATS: 'float("-inf")',
    }.get(n.op, zero)
    if spins is None:  # .cg: read past L1, which other SMs' writes do not update
        tile = 'tl.load(ws_ptr{k} + (xindex * parts + pindex), xmask & pmask, other={other}, cache_modifier=".cg")'
    else:
        wait = f"_words_wait(wrow + ((wset + {{k}}) * parts + pindex), pmask, epoch, sync_ptr, {spins})"
        tile = f"tl.where(pmask, {wait}, {{other}})"
    # polled words lie along one axis (one row per program): reduced to a scalar, fewer registers than a tile
    ax, keep = ("1", "[:, None]") if spins is None else ("0", "")
    lines = [f"# ir %{i}: {n.op.name.lower()}, from the partial results of the row's slices"]
    if spins is not None and len(ws) == 2:  # a program's two slots are consecutive: polled in one loop
        assert ws[1] == ws[0] + 1
        lines += [
            f"{t}_w0, {t}_w1 = _words_wait2(wrow + ((wset + {ws[0]}) * parts + pindex), parts, pmask, epoch, sync_ptr,"
            f" {spins})",
            f"{t}_q0 = tl.where(pmask, {t}_w0, {ident})",
            f"{t}_q1 = tl.where(pmask, {t}_w1, 0.0)",
        ]
    elif n.op != Op.WELFORD or spins is not None:
        lines += [f"{t}_q{j} = {tile.format(k=k, other=ident if j == 0 else '0.0')}" for j, k in enumerate(ws)]
    if n.op == Op.SUM:
        return lines + [f"{t} = {round16(n, f'tl.sum({t}_q0, {ax}){keep}')}"]
    if n.op in (Op.MAX, Op.MIN):
        return lines + [f"{t} = tl.reduce({t}_q0, {ax}, {'_maximum' if n.op == Op.MAX else '_minimum'}){keep}"]
    if n.op == Op.WELFORD and spins is not None:
        # Chan's combine over the polled words, M2 = sum(M2_p + n_p * (mean_p - mean)^2), in three reductions of the
        # [parts] tiles (picking each slice's values out of them took 3 * parts). The mean is the first slice's plus
        # a weighted correction (exact for a constant row); slices past the row's end count 0.
        shift = "tl.sum(tl.sum(rshift, 1), 0)" if walked else ""  # the row's shift as a scalar, like the words
        return lines + [
            f"{t}_n = {_slice_count('pindex', shift)}  # elements in each slice",
            f"{t}_ref = tl.sum(tl.where(pindex == 0, {t}_q0, 0.0), 0)",
            f"{t}_0 = {t}_ref + tl.sum({t}_n * ({t}_q0 - {t}_ref), 0) / rnumel",
            f"{t}_dev = {t}_q0 - {t}_0",
            f"{t}_1 = tl.sum({t}_q1 + {t}_n * {t}_dev * {t}_dev, 0)",
        ]
    if n.op == Op.WELFORD:
        # Chan's combine over slices of unequal length, one slice at a time: over a [XBLOCK, parts] tile ptxas took
        # minutes from 4 slices on and spilled. The mean is the first slice's plus a weighted correction (exact for
        # a constant row).
        mean, m2 = (
            f'tl.load(ws_ptr{k} + (xindex * parts + {{p}}), xmask, other=0.0, cache_modifier=".cg")' for k in ws
        )
        cnt = _slice_count("p", "rshift" if walked else "")
        return lines + [
            f"{t}_ref = {mean.format(p=0)}",
            f"{t}_0 = tl.zeros([XBLOCK, 1], tl.float32)",
            f"for p in tl.static_range({parts}):",
            f"    {t}_0 += {cnt} * ({mean.format(p='p')} - {t}_ref)",
            f"{t}_0 = {t}_ref + {t}_0 / rnumel",
            f"{t}_1 = tl.zeros([XBLOCK, 1], tl.float32)",
            f"for p in tl.static_range({parts}):",
            f"    {t}_dev = {mean.format(p='p')} - {t}_0",
            f"    {t}_1 += {m2.format(p='p')} + {cnt} * {t}_dev * {t}_dev",
        ]
    return lines + [
        f"{t}_max = tl.reduce({t}_q0, {ax}, _maximum){keep}",
        f'{t}_0 = tl.where({t}_max == float("-inf"), 0.0, {t}_max)',
        f'{t}_1 = tl.sum(tl.where({t}_q0 == float("-inf"), 0.0, {t}_q1 * _exp_minus({t}_q0, {t}_0)), {ax}){keep}',
    ]


def stats_group(g: KernelGraph, i: int, cfg: Config, aligned: bool) -> int:
    """Looped softmax statistics and float sums: how many of a thread's contiguous elements of a chunk share one
    accumulator (`acc_update`): for the statistics one running max, so that a new max costs one rescale per group,
    not per element; for a sum one running total, the group added up within the thread first, so that its lanes
    take a register each group, not each element. A thread's elements are contiguous by whole 16-byte vectors of
    the narrowest load feeding the reduction, when every such load is contiguous along the row and rows start on
    vector boundaries (or are walked from them); 1 otherwise (a column softmax's vectors run across its rows)."""
    node = g.nodes[i]
    grouped = node.op == Op.SOFTMAX_STATS or (node.op == Op.SUM and g.nodes[node.args[0]].dtype.is_float)
    if not grouped or not (aligned or misaligned_walk(g) is None):
        return 1
    loads = [g.nodes[j] for j in (*full_cone(g, i), i) if g.nodes[j].op == Op.LOAD and g.nodes[j].rank == Rank.FULL]
    if not loads or any(n.attr.r_strides != (1,) for n in loads):
        return 1
    per_thread = cfg.XBLOCK * cfg.RBLOCK // (32 * cfg.num_warps)
    group = min([VECTOR_BYTES // n.dtype.itemsize for n in loads] + [per_thread, cfg.RBLOCK])  # within one chunk
    return group if group >= 2 else 1


def slice_count(g: KernelGraph, to_float: bool = True) -> str:
    """The elements each row of a kernel reduces: rnumel, but the short last slice of a row split unevenly (rows of
    r_extent elements, x dim 0 the slice) holds what is left of its row."""
    if not g.r_extent:
        return "rnumel"
    return f"tl.minimum(rnumel, {g.r_extent} - x0 * rnumel)" + (".to(tl.float32)" if to_float else "")


def peels_first_chunk(g: KernelGraph, reductions: list[int], uniform: bool) -> bool:
    """Looped: whether a pass's first chunk is taken before its loop, so that mean-variance sets each lane's shift
    there, once, and the loop neither selects it nor counts the lane's elements (`acc_finish` counts them from the
    lane's position). `uniform`: a lane masked in one chunk is masked in every later one (rows end, they do not
    start, inside a chunk), so every lane meets its first element in the first chunk."""
    return uniform and any(g.nodes[r].op == Op.WELFORD for r in reductions)


def acc_init(
    g: KernelGraph, i: int, group: int = 1, peeled: bool = False, reps: int = 1, width: str = "RBLOCK"
) -> list[str]:
    """Looped: the [XBLOCK, RBLOCK] accumulators of reduction i ([XBLOCK, width // (reps * group)]: grouped
    statistics or sums over chunks of `width`, see `acc_update`; `peeled`: mean-variance's shift comes from the
    first chunk and its count from the lanes' positions)."""
    op, src = g.nodes[i].op, g.nodes[g.nodes[i].args[0]]
    shape = "[XBLOCK, RBLOCK]" if group == 1 else f"[XBLOCK, {width} // {reps * group}]"
    ridx = "tl.int64" if g.index_bits == 64 else "tl.int32"
    acc_t = "tl.float32" if src.dtype.is_float else "tl.int64"  # torch sums bools and ints in int64
    val_t = "tl.float32" if src.dtype.is_float else TL_DTYPE[src.dtype] if src.dtype != DType.B1 else "tl.int32"
    low, high = extreme(src.dtype, True), extreme(src.dtype, False)
    init = {
        Op.SUM: [("", "0", acc_t)],
        Op.MAX: [("", low, val_t)],
        Op.MIN: [("", high, val_t)],
        Op.ARGMAX: [("_v", low, val_t), ("_i", "0", ridx)],
        Op.ARGMIN: [("_v", high, val_t), ("_i", "0", ridx)],
        Op.WELFORD: [("_dsum", "0", "tl.float32"), ("_d2", "0", "tl.float32")]
        + ([] if peeled else [("_shift", "0", "tl.float32"), ("_n", "0", "tl.float32")]),
        Op.SOFTMAX_STATS: [("_m", 'float("-inf")', "tl.float32"), ("_s", "0", "tl.float32")],
    }[op]
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
    """Looped: fold one chunk (value `v`) into reduction i's accumulators. Mean-variance keeps, per lane, the sums
    of its elements' differences from the lane's first element and of their squares: a subtraction, an add and a
    fused multiply-add per element, and no cancellation while a lane's elements lie near each other. `peeled`
    (`peels_first_chunk`): the `first` chunk sets the shifts, the others fold without selecting them or counting.
    Softmax statistics in `group`s (`stats_group`): each group's max, then one rescale of its running sum and an
    exp, a multiply-add and an add per element. Float sums in `group`s: each group's total, added within the thread,
    then one add to its lane. With `reps` > 1 a group is a thread's `reps` vectors of `group`
    elements in a chunk of `width` (viewed as [XBLOCK, reps, threads, group], Triton's layout of a row tile), so
    the group's max waits on all of them: their loads go out together. Sums and mean-variance with `reps` > 1 take
    a tile of `reps` chunks and add its chunks lane by lane (within each thread) before the accumulators do, which
    waits on all of them alike."""
    n = g.nodes[i]
    a = f"acc{i}"
    zero = "0.0" if g.nodes[n.args[0]].dtype.is_float else "0"
    lines = [f"# ir %{i}: {n.op.name.lower()} %{n.args[0]}"]
    wide = f"[XBLOCK, {reps}, {width} // {reps}]"  # sums over a tile of `reps` chunks: [XBLOCK, chunk, lane]
    if n.op == Op.SUM and (reps > 1 or group > 1):  # added within each thread first: a tile's chunks, or groups
        tile = f"tl.broadcast_to(tl.where(mask, {v}, 0.0), [XBLOCK, {width}])"
        shape, axis = (wide, 1) if reps > 1 else (f"[XBLOCK, {width} // {group}, {group}]", 2)
        return lines + [f"{a} = {a} + tl.sum(tl.reshape({tile}, {shape}), {axis})"]
    if n.op == Op.SUM:
        return lines + [f"{a} = {a} + tl.where(mask, {v}, {zero})" + ("" if zero == "0.0" else ".to(tl.int64)")]
    if n.op in (Op.MAX, Op.MIN):
        ident, fn = extreme(_operand(g, i), n.op == Op.MAX), "_maximum" if n.op == Op.MAX else "_minimum"
        return lines + [f"{a} = {fn}({a}, tl.where(mask, {v}, {ident}))"]
    if n.op in (Op.ARGMAX, Op.ARGMIN):
        ident, fn = extreme(_operand(g, i), n.op == Op.ARGMAX), "_argmax" if n.op == Op.ARGMAX else "_argmin"
        # masked lanes lose every tie: an aligned walk's head lanes have negative positions
        idx = "tl.broadcast_to(tl.where(mask, rindex, rnumel), [XBLOCK, RBLOCK])"
        return lines + [f"{a}_v, {a}_i = {fn}({a}_v, {a}_i, tl.where(mask, {v}, {ident}), {idx})"]
    if n.op == Op.WELFORD and first and reps == 1:
        return lines + [f"{a}_shift = {v}  # each lane's first element: its differences are 0"]
    if n.op == Op.WELFORD:
        if reps > 1:  # peeled, a tile of `reps` chunks: each lane's shift is its element in the first chunk
            x, m = (f"tl.reshape(tl.broadcast_to({e}, [XBLOCK, {width}]), {wide})" for e in (v, "mask"))
            chunk0 = f"tl.arange(0, {reps})[None, :, None] == 0"
            first_of = f"{a}_shift = tl.sum(tl.where({chunk0}, {x}, 0.0), 1)  # each lane's first element"
            shift = [first_of] if first else []
            d, count, fold = f"tl.where({m}, {x} - {a}_shift[:, None, :], 0.0)", [], "tl.sum({}, 1)"
        else:
            shift = [] if peeled else [f"{a}_shift = tl.where(mask & ({a}_n == 0.0), {v}, {a}_shift)  # the first"]
            count = [] if peeled else [f"{a}_n = {a}_n + tl.where(mask, 1.0, 0.0)"]
            d, fold = f"tl.where(mask, {v} - {a}_shift, 0.0)", "{}"
        return lines + [
            *shift,
            f"{a}_d = {d}",
            *count,
            f"{a}_dsum = {a}_dsum + {fold.format(f'{a}_d')}",
            f"{a}_d2 = {a}_d2 + {fold.format(f'{a}_d * {a}_d')}",
        ]
    assert n.op == Op.SOFTMAX_STATS
    if group > 1:
        x, new, ref = f"{a}_x", f"{a}_new", f"{a}_ref"
        tile = f'tl.broadcast_to(tl.where(mask, {v}, float("-inf")), [XBLOCK, {width}])'
        if reps > 1:
            return lines + [
                f"{x} = tl.reshape({tile}, [XBLOCK, {reps}, {width} // {reps * group}, {group}])",
                f"{new} = _maximum({a}_m, tl.reduce(tl.reduce({x}, 3, _maximum), 1, _maximum))",
                f'{ref} = tl.where({new} == float("-inf"), 0.0, {new})  # groups without a value yet: exps of 0',
                f"{a}_s = {a}_s * _exp_minus({a}_m, {ref}) "
                f"+ tl.sum(tl.sum(_exp_minus({x}, {ref}[:, None, :, None]), 3), 1)",
                f"{a}_m = {new}",
            ]
        return lines + [
            f"{x} = tl.reshape({tile}, [XBLOCK, {width} // {group}, {group}])",
            f"{new} = _maximum({a}_m, tl.reduce({x}, 2, _maximum))",
            f'{ref} = tl.where({new} == float("-inf"), 0.0, {new})  # groups without a value yet: exps of 0',
            f"{a}_s = {a}_s * _exp_minus({a}_m, {ref}) + tl.sum(_exp_minus({x}, {ref}[:, :, None]), 2)",
            f"{a}_m = {new}",
        ]
    # online softmax with one exp per element: of the two exps against the new max, one is e^0
    return lines + [
        f'{a}_x = tl.where(mask, {v}, float("-inf"))',
        f"{a}_d = {a}_x - {a}_m",
        f'{a}_e = tl.where({a}_x == float("-inf"), 0.0, _exp(-tl.abs({a}_d)))  # e^-(gap to the running max)',
        f"{a}_s = tl.where({a}_d > 0.0, {a}_s * {a}_e + 1.0, {a}_s + {a}_e)  # a new max rescales the sum",
        f"{a}_m = _maximum({a}_m, {a}_x)",
    ]


def acc_finish(g: KernelGraph, i: int, peeled: bool = False) -> list[str]:
    """Looped: reduction i's result from its accumulators, after the loop (`peeled`: see `acc_init`)."""
    n = g.nodes[i]
    a, t = f"acc{i}", f"tmp{i}"
    if n.op == Op.SUM:
        return [f"{t} = {round16(n, f'tl.sum({a}, 1)[:, None]')}"]
    if n.op in (Op.MAX, Op.MIN):
        return [f"{t} = tl.reduce({a}, 1, {'_maximum' if n.op == Op.MAX else '_minimum'})[:, None]"]
    if n.op in (Op.ARGMAX, Op.ARGMIN):
        fn = "_argmax" if n.op == Op.ARGMAX else "_argmin"
        return [f"_, {t} = tl.reduce(({a}_v, {a}_i), 1, {fn})", f"{t} = {t}[:, None]"]
    if n.op == Op.WELFORD:
        # each lane's mean and M2 (one division per lane), then across lanes two exchanges without divisions: the
        # row's sum and the lanes' M2, with the highest and lowest lane mean (lanes of one mean: a row without
        # spread keeps it exactly); then, about the mean from that sum, the lanes' weighted deviations (the sum's
        # error, corrected) and their squares: M2 = sum(M2_i + n_i * dev_i^2), exact for any counts. Lanes without
        # elements take no part. Only each lane's mean and count stay live across the first exchange
        has, lmean, rough, cnt = f"{t}_has", f"{t}_lmean", f"{t}_rough", slice_count(g)
        chunks = f"({slice_count(g, to_float=False)} - rbase + RBLOCK - 1) // RBLOCK"
        counted = [f"{a}_n = ({chunks}).to(tl.float32)  # the chunks that held the lane's elements"] if peeled else []
        return counted + [
            f"{has} = {a}_n > 0.0",
            f"{t}_inv = 1.0 / tl.maximum({a}_n, 1.0)",
            f"{lmean} = {a}_shift + {a}_dsum * {t}_inv",
            f"{t}_lm2 = tl.maximum({a}_d2 - {a}_dsum * {a}_dsum * {t}_inv, 0.0)",
            f"{t}_lsum = tl.where({has}, {a}_shift * {a}_n + {a}_dsum, 0.0)",
            f'{t}_hi = tl.where({has}, {lmean}, float("-inf"))',
            f'{t}_lo = tl.where({has}, {lmean}, float("inf"))',
            f"{t}_sum, {t}_hi, {t}_lo, {t}_m2 = tl.reduce(({t}_lsum, {t}_hi, {t}_lo, {t}_lm2), 1, _add_max_min_add)",
            f"{rough} = tl.where(({t}_hi == {t}_lo)[:, None], {t}_hi[:, None], {t}_sum[:, None] / {cnt})",
            f"{t}_dev = tl.where({has}, {lmean} - {rough}, 0.0)",
            f"{t}_c, {t}_dev2 = tl.reduce(({a}_n * {t}_dev, {a}_n * {t}_dev * {t}_dev), 1, _add2)",
            f"{t}_c = {t}_c[:, None] / {cnt}  # the rough mean's error",
            f"{t}_0 = {rough} + {t}_c",
            f"{t}_1 = tl.maximum(({t}_m2 + {t}_dev2)[:, None] - {t}_c * {t}_c * {cnt}, 0.0)",
        ]
    return [
        f"{t}_max = tl.reduce({a}_m, 1, _maximum)[:, None]",
        f'{t}_0 = tl.where({t}_max == float("-inf"), 0.0, {t}_max)',
        f"{t}_1 = tl.sum({a}_s * _exp_minus({a}_m, {t}_0), 1)[:, None]",
    ]


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
    n = g.nodes[i]
    count = count or slice_count(g)
    zero = "0.0" if g.nodes[n.args[0]].dtype.is_float else "0"
    t = f"tmp{i}"
    op = n.op

    def where(m: str | None, v: str, ident: str) -> str:
        return v if m is None else f"tl.where({m}, {v}, {ident})"

    def masked(values: list[str], ident: str) -> list[str]:
        return [where(m, v, ident) for m, v in zip(masks, values)]

    def fold(fn: str, terms: list[str]) -> str:
        out = terms[0]
        for term in terms[1:]:
            out = f"{fn}({out}, {term})"
        return out

    if op == Op.SUM:
        terms = " + ".join(m + ("" if zero == "0.0" else ".to(tl.int64)") for m in masked(vs, zero))
        return [f"{t} = {round16(n, f'tl.sum({terms}, 1)[:, None]')}"]
    if op in (Op.MAX, Op.MIN):
        ident, fn = extreme(_operand(g, i), op == Op.MAX), "_maximum" if op == Op.MAX else "_minimum"
        return [f"{t} = tl.reduce({fold(fn, masked(vs, ident))}, 1, {fn})[:, None]"]
    if op in (Op.ARGMAX, Op.ARGMIN):
        ident, fn = extreme(_operand(g, i), op == Op.ARGMAX), "_argmax" if op == Op.ARGMAX else "_argmin"
        # masked lanes lose every tie (an aligned walk's head lanes have negative positions)
        idxs = [f"tl.broadcast_to({where(m, r, 'rnumel')}, [XBLOCK, RBLOCK])" for m, r in zip(masks, rindexes)]
        values = masked(vs, ident)
        lines = [f"{t}_v, {t}_i = {values[0]}, {idxs[0]}"]
        lines += [f"{t}_v, {t}_i = {fn}({t}_v, {t}_i, {v}, {x})" for v, x in zip(values[1:], idxs[1:])]
        return lines + [f"_, {t} = tl.reduce(({t}_v, {t}_i), 1, {fn})", f"{t} = {t}[:, None]"]
    if op == Op.WELFORD and from_16_bit(g, n.args[0]):
        # 16-bit data: one exchange for the sum and the sum of squares, M2 = sum(v^2) - sum(v) * mean. That loses
        # to cancellation the bits by which M2 falls short of sum(v^2): at most 3 (log2 of CANCELLATION_LIMIT),
        # while the mean lies within 2.6 standard deviations of 0: about 2^-20 of M2, far below the data's own
        # resolution. Past that, a second exchange for the residuals' squares about the mean, in the programs
        # whose rows need it alone
        sums = " + ".join(masked(vs, "0.0"))
        squares = " + ".join(masked([f"{v} * {v}" for v in vs], "0.0"))
        vs, redo = again(n.args[0], vs)
        ds = [f"{t}_d"] if len(vs) == 1 else [f"{t}_d_t{j}" for j in range(len(vs))]
        return [
            f"{t}_s, {t}_q = tl.reduce(({sums}, {squares}), 1, _add2)",
            f"{t}_s, {t}_q = {t}_s[:, None], {t}_q[:, None]",
            f"{t}_0 = {t}_s / {count}",
            f"{t}_1 = tl.maximum({t}_q - {t}_s * {t}_0, 0.0)",
            *redo,
            f"if tl.max(tl.where({t}_1 * {CANCELLATION_LIMIT} < {t}_q, 1, 0)) > 0:",
            *(f"    {d} = {where(m, f'{v} - {t}_0', '0.0')}" for d, m, v in zip(ds, masks, vs)),
            f"    {t}_1 = tl.sum({' + '.join(f'{d} * {d}' for d in ds)}, 1)[:, None]",
        ]
    if op == Op.WELFORD:  # fp32 data: two-pass in registers, the mean corrected by the mean of the residuals
        total = " + ".join(masked(vs, "0.0"))
        vs, redo = again(n.args[0], vs)
        ds = [f"{t}_d"] if len(vs) == 1 else [f"{t}_d_t{j}" for j in range(len(vs))]
        dsum, d2 = " + ".join(ds), " + ".join(f"{d} * {d}" for d in ds)
        return [
            f"{t}_shift = tl.sum({total}, 1)[:, None] / {count}",
            *redo,
            *(f"{d} = {where(m, f'{v} - {t}_shift', '0.0')}" for d, m, v in zip(ds, masks, vs)),
            f"{t}_dsum, {t}_d2 = tl.reduce(({dsum}, {d2}), 1, _add2)  # one exchange for both sums",
            f"{t}_dsum = {t}_dsum[:, None]",
            f"{t}_0 = {t}_shift + {t}_dsum / {count}",
            f"{t}_1 = tl.maximum({t}_d2[:, None] - {t}_dsum * {t}_dsum / {count}, 0.0)",
        ]
    assert op == Op.SOFTMAX_STATS
    top = fold("_maximum", masked(vs, 'float("-inf")'))
    vs, redo = again(n.args[0], vs)
    first = [f"{t}_max = tl.reduce({top}, 1, _maximum)[:, None]", *redo]
    exps = " + ".join(where(m, f"_exp_minus({v}, {t}_0)", "0.0") for m, v in zip(masks, vs))
    return first + [
        f'{t}_0 = tl.where({t}_max == float("-inf"), 0.0, {t}_max)',
        f"{t}_1 = tl.sum({exps}, 1)[:, None]",
    ]
