"""The reductions of two results, each kept as running sums rescaled or shifted as they go: mean-variance (mean,
M2) and softmax statistics (max, sum of e^(v - max)). Their record is `reduce_kind.ReduceKind`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from rblock.codegen.reduce_kind import Chunk, Exchange, ReduceKind, Tiles, fold, slice_count, slice_elements
from rblock.ir import DType, KernelGraph
from rblock.ir.query import from_16_bit

# Single-pass mean-variance of 16-bit data (a whole row, or a split row's slice) takes M2 from the sum of squares
# while M2 is at least 1/CANCELLATION_LIMIT of it (log2 of it bits lost to cancellation at most); else it sums the
# squares about the mean.
CANCELLATION_LIMIT = 8.0

NINF = 'float("-inf")'


@dataclass(frozen=True, slots=True)
class Welford(ReduceKind):
    """Mean and M2 (the sum of squared deviations from the mean), as tmp{i}_0 and tmp{i}_1.

    Looped, each lane keeps the sums of its elements' differences from the lane's first element and of their
    squares: a subtraction, an add and a fused multiply-add per element, and no cancellation while a lane's elements
    lie near each other. Peeled (`reductions.peels_first_chunk`), the first chunk sets the shifts and the others
    fold without selecting them or counting; with `reps` > 1 it takes a tile of `reps` chunks and adds its chunks
    lane by lane (within each thread) before the accumulators do."""

    peels: ClassVar[bool] = True

    def wide_lanes(self, src: DType, peeled: bool) -> bool:
        return peeled

    def accumulators(self, src: DType, ridx: str, peeled: bool) -> list[tuple[str, str, str]]:
        counted = [] if peeled else [("_shift", "0", "tl.float32"), ("_n", "0", "tl.float32")]
        return [("_dsum", "0", "tl.float32"), ("_d2", "0", "tl.float32"), *counted]

    def update(self, g: KernelGraph, i: int, v: str, c: Chunk) -> list[str]:
        a = f"acc{i}"
        if c.first and c.reps == 1:
            return [f"{a}_shift = {v}  # each lane's first element: its differences are 0"]
        if c.reps > 1:  # peeled, a tile of `reps` chunks: each lane's shift is its element in the first chunk
            x, m = (f"tl.reshape(tl.broadcast_to({e}, [XBLOCK, {c.width}]), {c.wide})" for e in (v, "mask"))
            chunk0 = f"tl.arange(0, {c.reps})[None, :, None] == 0"
            first_of = f"{a}_shift = tl.sum(tl.where({chunk0}, {x}, 0.0), 1)  # each lane's first element"
            shift = [first_of] if c.first else []
            d, count, add = f"tl.where({m}, {x} - {a}_shift[:, None, :], 0.0)", [], "tl.sum({}, 1)"
        else:
            shift = [] if c.peeled else [f"{a}_shift = tl.where(mask & ({a}_n == 0.0), {v}, {a}_shift)  # the first"]
            count = [] if c.peeled else [f"{a}_n = {a}_n + tl.where(mask, 1.0, 0.0)"]
            d, add = f"tl.where(mask, {v} - {a}_shift, 0.0)", "{}"
        return [
            *shift,
            f"{a}_d = {d}",
            *count,
            f"{a}_dsum = {a}_dsum + {add.format(f'{a}_d')}",
            f"{a}_d2 = {a}_d2 + {add.format(f'{a}_d * {a}_d')}",
        ]

    def finish(self, g: KernelGraph, i: int, peeled: bool) -> list[str]:
        # each lane's mean and M2 (one division per lane), then across lanes two exchanges without divisions: the
        # row's sum and the lanes' M2, with the highest and lowest lane mean (lanes of one mean: a row without
        # spread keeps it exactly); then, about the mean from that sum, the lanes' weighted deviations (the sum's
        # error, corrected) and their squares: M2 = sum(M2_i + n_i * dev_i^2), exact for any counts. Lanes without
        # elements take no part. Only each lane's mean and count stay live across the first exchange
        a, t = f"acc{i}", f"tmp{i}"
        has, lmean, rough, cnt = f"{t}_has", f"{t}_lmean", f"{t}_rough", slice_count(g)
        chunks = f"({slice_count(g, to_float=False)} - rbase + RBLOCK - 1) // RBLOCK"
        counted = [f"{a}_n = ({chunks}).to(tl.float32)  # the chunks that held the lane's elements"] if peeled else []
        return counted + [
            f"{has} = {a}_n > 0.0",
            f"{t}_inv = 1.0 / tl.maximum({a}_n, 1.0)",
            f"{lmean} = {a}_shift + {a}_dsum * {t}_inv",
            f"{t}_lm2 = tl.maximum({a}_d2 - {a}_dsum * {a}_dsum * {t}_inv, 0.0)",
            f"{t}_lsum = tl.where({has}, {a}_shift * {a}_n + {a}_dsum, 0.0)",
            f"{t}_hi = tl.where({has}, {lmean}, {NINF})",
            f'{t}_lo = tl.where({has}, {lmean}, float("inf"))',
            f"{t}_sum, {t}_hi, {t}_lo, {t}_m2 = tl.reduce(({t}_lsum, {t}_hi, {t}_lo, {t}_lm2), 1, _add_max_min_add)",
            f"{rough} = tl.where(({t}_hi == {t}_lo)[:, None], {t}_hi[:, None], {t}_sum[:, None] / {cnt})",
            f"{t}_dev = tl.where({has}, {lmean} - {rough}, 0.0)",
            f"{t}_c, {t}_dev2 = tl.reduce(({a}_n * {t}_dev, {a}_n * {t}_dev * {t}_dev), 1, _add2)",
            f"{t}_c = {t}_c[:, None] / {cnt}  # the rough mean's error",
            f"{t}_0 = {rough} + {t}_c",
            f"{t}_1 = tl.maximum(({t}_m2 + {t}_dev2)[:, None] - {t}_c * {t}_c * {cnt}, 0.0)",
        ]

    def single(self, g: KernelGraph, i: int, x: Tiles) -> list[str]:
        t, arg, count = f"tmp{i}", g.nodes[i].args[0], x.count
        if from_16_bit(g, arg):
            # 16-bit data: one exchange for the sum and the sum of squares, M2 = sum(v^2) - sum(v) * mean. That loses
            # to cancellation the bits by which M2 falls short of sum(v^2): at most 3 (log2 of CANCELLATION_LIMIT),
            # while the mean lies within 2.6 standard deviations of 0: about 2^-20 of M2, far below the data's own
            # resolution. Past that, a second exchange for the residuals' squares about the mean, in the programs
            # whose rows need it alone
            sums = " + ".join(x.masked("0.0"))
            squares = " + ".join(x.masked("0.0", [f"{v} * {v}" for v in x.vs]))
            vs, redo = x.again(arg, x.vs)
            ds = [f"{t}_d"] if len(vs) == 1 else [f"{t}_d_t{j}" for j in range(len(vs))]
            return [
                f"{t}_s, {t}_q = tl.reduce(({sums}, {squares}), 1, _add2)",
                f"{t}_s, {t}_q = {t}_s[:, None], {t}_q[:, None]",
                f"{t}_0 = {t}_s / {count}",
                f"{t}_1 = tl.maximum({t}_q - {t}_s * {t}_0, 0.0)",
                *redo,
                f"if tl.max(tl.where({t}_1 * {CANCELLATION_LIMIT} < {t}_q, 1, 0)) > 0:",
                *(f"    {d} = {m}" for d, m in zip(ds, x.masked("0.0", [f"{v} - {t}_0" for v in vs]))),
                f"    {t}_1 = tl.sum({' + '.join(f'{d} * {d}' for d in ds)}, 1)[:, None]",
            ]
        # fp32 data: two-pass in registers, the mean corrected by the mean of the residuals
        total = " + ".join(x.masked("0.0"))
        vs, redo = x.again(arg, x.vs)
        ds = [f"{t}_d"] if len(vs) == 1 else [f"{t}_d_t{j}" for j in range(len(vs))]
        dsum, d2 = " + ".join(ds), " + ".join(f"{d} * {d}" for d in ds)
        return [
            f"{t}_shift = tl.sum({total}, 1)[:, None] / {count}",
            *redo,
            *(f"{d} = {m}" for d, m in zip(ds, x.masked("0.0", [f"{v} - {t}_shift" for v in vs]))),
            f"{t}_dsum, {t}_d2 = tl.reduce(({dsum}, {d2}), 1, _add2)  # one exchange for both sums",
            f"{t}_dsum = {t}_dsum[:, None]",
            f"{t}_0 = {t}_shift + {t}_dsum / {count}",
            f"{t}_1 = tl.maximum({t}_d2[:, None] - {t}_dsum * {t}_dsum / {count}, 0.0)",
        ]

    def partial(self, g: KernelGraph, i: int, v: str, walked: bool) -> list[str]:
        """The slice's mean and M2, as a single pass takes a whole row's."""
        t = f"tmp{i}"
        return [
            f"{t}_n = {slice_elements('part', 'rshift' if walked else '')}  # elements in this slice",
            *self.single(g, i, Tiles([v], ["mask"], [], lambda _, names: (names, []), f"{t}_n")),
            f"{t}_p0, {t}_p1 = {t}_0, {t}_1",
        ]

    def combine(self, g: KernelGraph, i: int, x: Exchange) -> list[str]:
        t = f"tmp{i}"
        if x.spins is not None:
            # Chan's combine over the polled words, M2 = sum(M2_p + n_p * (mean_p - mean)^2), in three reductions of
            # the [parts] tiles (picking each slice's values out of them took 3 * parts). The mean is the first
            # slice's plus a weighted correction (exact for a constant row); slices past the row's end count 0.
            shift = "tl.sum(tl.sum(rshift, 1), 0)" if x.walked else ""  # the row's shift as a scalar, like the words
            return x.gathered(t, "0.0") + [
                f"{t}_n = {slice_elements('pindex', shift)}  # elements in each slice",
                f"{t}_ref = tl.sum(tl.where(pindex == 0, {t}_q0, 0.0), 0)",
                f"{t}_0 = {t}_ref + tl.sum({t}_n * ({t}_q0 - {t}_ref), 0) / rnumel",
                f"{t}_dev = {t}_q0 - {t}_0",
                f"{t}_1 = tl.sum({t}_q1 + {t}_n * {t}_dev * {t}_dev, 0)",
            ]
        # Chan's combine over slices of unequal length, one slice at a time: over a [XBLOCK, parts] tile ptxas took
        # minutes from 4 slices on and spilled. The mean is the first slice's plus a weighted correction (exact for
        # a constant row).
        mean, m2 = (
            f'tl.load(ws_ptr{k} + (xindex * parts + {{p}}), xmask, other=0.0, cache_modifier=".cg")' for k in x.ws
        )
        cnt = slice_elements("p", "rshift" if x.walked else "")
        return [
            f"{t}_ref = {mean.format(p=0)}",
            f"{t}_0 = tl.zeros([XBLOCK, 1], tl.float32)",
            f"for p in tl.static_range({x.parts}):",
            f"    {t}_0 += {cnt} * ({mean.format(p='p')} - {t}_ref)",
            f"{t}_0 = {t}_ref + {t}_0 / rnumel",
            f"{t}_1 = tl.zeros([XBLOCK, 1], tl.float32)",
            f"for p in tl.static_range({x.parts}):",
            f"    {t}_dev = {mean.format(p='p')} - {t}_0",
            f"    {t}_1 += {m2.format(p='p')} + {cnt} * {t}_dev * {t}_dev",
        ]


@dataclass(frozen=True, slots=True)
class SoftmaxStats(ReduceKind):
    """A row's max and the sum of e^(v - max), as tmp{i}_0 and tmp{i}_1 (a row of -inf alone: max 0, sum 0).

    Looped in `group`s (`reductions.stats_group`): each group's max, then one rescale of its running sum and an
    exp, a multiply-add and an add per element. With `reps` > 1 a group is a thread's `reps` vectors of `group`
    elements in a chunk of `width` (viewed as [XBLOCK, reps, threads, group], Triton's layout of a row tile), so the
    group's max waits on all of them: their loads go out together."""

    wide_groups: ClassVar[bool] = True

    def grouped(self, src: DType) -> bool:
        return True

    def accumulators(self, src: DType, ridx: str, peeled: bool) -> list[tuple[str, str, str]]:
        return [("_m", NINF, "tl.float32"), ("_s", "0", "tl.float32")]

    def update(self, g: KernelGraph, i: int, v: str, c: Chunk) -> list[str]:
        a = f"acc{i}"
        if c.group > 1:
            x, new, ref, group, width = f"{a}_x", f"{a}_new", f"{a}_ref", c.group, c.width
            tile = f"tl.broadcast_to(tl.where(mask, {v}, {NINF}), [XBLOCK, {width}])"
            if c.reps > 1:
                return [
                    f"{x} = tl.reshape({tile}, [XBLOCK, {c.reps}, {width} // {c.reps * group}, {group}])",
                    f"{new} = _maximum({a}_m, tl.reduce(tl.reduce({x}, 3, _maximum), 1, _maximum))",
                    f"{ref} = tl.where({new} == {NINF}, 0.0, {new})  # groups without a value yet: exps of 0",
                    f"{a}_s = {a}_s * _exp_minus({a}_m, {ref}) "
                    f"+ tl.sum(tl.sum(_exp_minus({x}, {ref}[:, None, :, None]), 3), 1)",
                    f"{a}_m = {new}",
                ]
            return [
                f"{x} = tl.reshape({tile}, [XBLOCK, {width} // {group}, {group}])",
                f"{new} = _maximum({a}_m, tl.reduce({x}, 2, _maximum))",
                f"{ref} = tl.where({new} == {NINF}, 0.0, {new})  # groups without a value yet: exps of 0",
                f"{a}_s = {a}_s * _exp_minus({a}_m, {ref}) + tl.sum(_exp_minus({x}, {ref}[:, :, None]), 2)",
                f"{a}_m = {new}",
            ]
        # online softmax with one exp per element: of the two exps against the new max, one is e^0
        return [
            f"{a}_x = tl.where(mask, {v}, {NINF})",
            f"{a}_d = {a}_x - {a}_m",
            f"{a}_e = tl.where({a}_x == {NINF}, 0.0, _exp(-tl.abs({a}_d)))  # e^-(gap to the running max)",
            f"{a}_s = tl.where({a}_d > 0.0, {a}_s * {a}_e + 1.0, {a}_s + {a}_e)  # a new max rescales the sum",
            f"{a}_m = _maximum({a}_m, {a}_x)",
        ]

    def finish(self, g: KernelGraph, i: int, peeled: bool) -> list[str]:
        a, t = f"acc{i}", f"tmp{i}"
        return [
            f"{t}_max = tl.reduce({a}_m, 1, _maximum)[:, None]",
            f"{t}_0 = tl.where({t}_max == {NINF}, 0.0, {t}_max)",
            f"{t}_1 = tl.sum({a}_s * _exp_minus({a}_m, {t}_0), 1)[:, None]",
        ]

    def single(self, g: KernelGraph, i: int, x: Tiles) -> list[str]:
        t = f"tmp{i}"
        top = fold("_maximum", x.masked(NINF))
        vs, redo = x.again(g.nodes[i].args[0], x.vs)
        first = [f"{t}_max = tl.reduce({top}, 1, _maximum)[:, None]", *redo]
        exps = " + ".join(x.masked("0.0", [f"_exp_minus({v}, {t}_0)" for v in vs]))
        return first + [
            f"{t}_0 = tl.where({t}_max == {NINF}, 0.0, {t}_max)",
            f"{t}_1 = tl.sum({exps}, 1)[:, None]",
        ]

    def partial(self, g: KernelGraph, i: int, v: str, walked: bool) -> list[str]:
        t = f"tmp{i}"
        return [
            f"{t}_p0 = tl.reduce(tl.where(mask, {v}, {NINF}), 1, _maximum)[:, None]",
            f"{t}_shift = tl.where({t}_p0 == {NINF}, 0.0, {t}_p0)",
            f"{t}_e = tl.where(mask, _exp_minus({v}, {t}_shift), 0.0)",
            f"{t}_p1 = tl.sum({t}_e, 1)[:, None]",
        ]

    def combine(self, g: KernelGraph, i: int, x: Exchange) -> list[str]:
        t, (ax, keep) = f"tmp{i}", x.axis
        return x.gathered(t, NINF) + [
            f"{t}_max = tl.reduce({t}_q0, {ax}, _maximum){keep}",
            f"{t}_0 = tl.where({t}_max == {NINF}, 0.0, {t}_max)",
            f"{t}_1 = tl.sum(tl.where({t}_q0 == {NINF}, 0.0, {t}_q1 * _exp_minus({t}_q0, {t}_0)), {ax}){keep}",
        ]


def slice_exps_rescaled(i: int) -> str:
    """split_row: softmax's e^(v - max) from the slice's e^(v - its own max), kept from `SoftmaxStats.partial`, times
    one factor per row: one exp per element instead of two (a slice with no finite value has none: 0)."""
    t = f"tmp{i}"
    return f"{t}_e * tl.where({t}_p0 == {NINF}, 0.0, _exp_minus({t}_shift, {t}_0))"
