"""The record of one kind of reduction in codegen (`ReduceKind`: its emitters, one per form of kernel), what they are
given, the lines they share, and the kinds of one result that combine by their own operation: sums, maxes and mins,
and the positions of maxes and mins. Mean-variance and softmax statistics are in `reduce_online.py`; the table that
looks a kind up by its `Op` is `reductions.KINDS`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

from rblock.codegen.emit import TL_DTYPE, extreme, round16
from rblock.ir import DType, KernelGraph

# (operand, its names per tile) -> (its names after a reduction, the lines that compute them)
Again = Callable[[int, list[str]], tuple[list[str], list[str]]]


@dataclass(frozen=True, slots=True)
class Tiles:
    """Single pass: the operand's values in each tile of a row (`reductions.single_pass`)."""

    vs: list[str]  # its names per tile
    masks: list[str | None]  # each tile's mask; None: the tile needs none
    rindexes: list[str]  # each tile's positions along r
    again: Again  # the operand once more, after a first step of a two-step reduction
    count: str  # the elements reduced: mean-variance divides by it

    def masked(self, ident: str, values: list[str] | None = None) -> list[str]:
        """`values` (default: the tiles' own) where each tile's mask holds, `ident` elsewhere."""
        return [where(m, v, ident) for m, v in zip(self.masks, self.vs if values is None else values)]


@dataclass(frozen=True, slots=True)
class Chunk:
    """Looped: how a chunk is folded into the accumulators (`reductions.acc_update`)."""

    group: int = 1  # a thread's contiguous elements per accumulator (`reductions.stats_group`)
    peeled: bool = False  # the pass's first chunk is taken before its loop (`reductions.peels_first_chunk`)
    first: bool = False  # this is that chunk
    reps: int = 1  # chunks of `width` folded as one tile
    width: str = "RBLOCK"

    @property
    def wide(self) -> str:
        """A tile of `reps` chunks, viewed as [XBLOCK, chunk, lane]."""
        return f"[XBLOCK, {self.reps}, {self.width} // {self.reps}]"


@dataclass(frozen=True, slots=True)
class Exchange:
    """split_row: where a program finds its row's partial results: slots `ws` of `parts` slices, loaded from the
    workspaces, or with `spins` (the wait's bound, 0: none) polled from the row's words (`ROW_WORDS`); `walked`:
    the slices are walked from the row's boundary (`rshift`)."""

    ws: list[int]
    parts: int
    spins: int | None
    walked: bool

    @property
    def axis(self) -> tuple[str, str]:
        """The axis the slices lie along, and what keeps a row's result [XBLOCK, 1]: polled words lie along one
        axis (one row per program), reduced to a scalar, fewer registers than a tile."""
        return ("1", "[:, None]") if self.spins is None else ("0", "")

    def gathered(self, t: str, ident: str) -> list[str]:
        """The slices' partial results as tiles {t}_q0 (and _q1), lanes past the last slice `ident` (and 0)."""
        ws, spins = self.ws, self.spins
        if spins is None:  # .cg: read past L1, which other SMs' writes do not update
            tile = 'tl.load(ws_ptr{k} + (xindex * parts + pindex), xmask & pmask, other={other}, cache_modifier=".cg")'
        else:
            wait = f"_words_wait(wrow + ((wset + {{k}}) * parts + pindex), pmask, epoch, sync_ptr, {spins})"
            tile = f"tl.where(pmask, {wait}, {{other}})"
        if spins is not None and len(ws) == 2:  # a program's two slots are consecutive: polled in one loop
            assert ws[1] == ws[0] + 1
            return [
                f"{t}_w0, {t}_w1 = _words_wait2(wrow + ((wset + {ws[0]}) * parts + pindex), parts, pmask, epoch, "
                f"sync_ptr, {spins})",
                f"{t}_q0 = tl.where(pmask, {t}_w0, {ident})",
                f"{t}_q1 = tl.where(pmask, {t}_w1, 0.0)",
            ]
        return [f"{t}_q{j} = {tile.format(k=k, other=ident if j == 0 else '0.0')}" for j, k in enumerate(ws)]


@dataclass(frozen=True, slots=True)
class ReduceKind:
    """How codegen reduces a row with one kind of reduction: node i of g, tmp{i} its result, acc{i} its accumulators.
    Looped kernels: `accumulators` (their suffixes, initial values and types), `update` (one chunk folded into
    them), `finish` (the result after the loop). Single pass: `single`, from the row's tiles in registers. Split row
    (the kinds whose `ir.reductions.Reduction.splits`): `partial` (a slice's results, tmp{i}_p0 and _p1) and
    `combine` (the row's, from every slice's). `grouped`, `peels`, `wide_groups` and `wide_lanes` are what a
    looped pass's layout asks of a kind (`chunk_loop.ChunkLoop`)."""

    peels: ClassVar[bool] = False  # mean-variance: a pass's first chunk, taken before the loop, sets each lane's shift
    wide_groups: ClassVar[bool] = False  # `update` takes a tile of `reps` chunks in groups of a thread's vectors

    def grouped(self, src: DType) -> bool:
        """Whether a thread's contiguous elements of a chunk may share one accumulator (`reductions.stats_group`)."""
        return False

    def wide_lanes(self, src: DType, peeled: bool) -> bool:
        """Whether `update` takes a tile of `reps` chunks, adding them lane by lane (in groups of 1)."""
        return False

    def accumulators(self, src: DType, ridx: str, peeled: bool) -> list[tuple[str, str, str]]:
        raise NotImplementedError

    def update(self, g: KernelGraph, i: int, v: str, c: Chunk) -> list[str]:
        raise NotImplementedError

    def finish(self, g: KernelGraph, i: int, peeled: bool) -> list[str]:
        raise NotImplementedError

    def single(self, g: KernelGraph, i: int, x: Tiles) -> list[str]:
        raise NotImplementedError

    def partial(self, g: KernelGraph, i: int, v: str, walked: bool) -> list[str]:
        raise AssertionError(f"%{i} ({g.nodes[i].op.name}) has no split form")

    def combine(self, g: KernelGraph, i: int, x: Exchange) -> list[str]:
        raise AssertionError(f"%{i} ({g.nodes[i].op.name}) has no split form")


def operand(g: KernelGraph, i: int) -> DType:
    return g.nodes[g.nodes[i].args[0]].dtype


def zero_of(dt: DType) -> str:
    return "0.0" if dt.is_float else "0"


def widen(dt: DType) -> str:
    """What makes a sum of `dt` values 64-bit: torch sums bools and ints in int64."""
    return "" if dt.is_float else ".to(tl.int64)"


def value_type(dt: DType) -> str:
    """The type a max, a min or their positions' values are held in."""
    return "tl.float32" if dt.is_float else TL_DTYPE[dt] if dt != DType.B1 else "tl.int32"


def where(m: str | None, v: str, ident: str) -> str:
    return v if m is None else f"tl.where({m}, {v}, {ident})"


def fold(fn: str, terms: list[str]) -> str:
    out = terms[0]
    for term in terms[1:]:
        out = f"{fn}({out}, {term})"
    return out


def slice_count(g: KernelGraph, to_float: bool = True) -> str:
    """The elements each row of a kernel reduces: rnumel, but the short last slice of a row split unevenly (rows of
    r_extent elements, x dim 0 the slice) holds what is left of its row."""
    if not g.r_extent:
        return "rnumel"
    return f"tl.minimum(rnumel, {g.r_extent} - x0 * rnumel)" + (".to(tl.float32)" if to_float else "")


def slice_elements(p: str, walked: str) -> str:
    """split_row: elements of the row in slice `p`; `walked`: the row's shift below its boundary (its first slice
    holds that many positions before the row), or "" where the slices start at the row's first element."""
    if not walked:
        return f"tl.minimum(tl.maximum(rnumel - {p} * RBLOCK, 0), RBLOCK).to(tl.float32)"
    end = f"tl.minimum(tl.maximum(rnumel + {walked} - {p} * RBLOCK, 0), RBLOCK)"
    return f"({end} - tl.where({p} == 0, {walked}, 0)).to(tl.float32)"


@dataclass(frozen=True, slots=True)
class Sum(ReduceKind):
    """Float sums in fp32 (rounded to a 16-bit result's dtype), bools and ints in int64."""

    def grouped(self, src: DType) -> bool:
        return src.is_float

    def wide_lanes(self, src: DType, peeled: bool) -> bool:
        return src.is_float

    def accumulators(self, src: DType, ridx: str, peeled: bool) -> list[tuple[str, str, str]]:
        return [("", "0", "tl.float32" if src.is_float else "tl.int64")]

    def update(self, g: KernelGraph, i: int, v: str, c: Chunk) -> list[str]:
        a = f"acc{i}"
        if c.reps > 1 or c.group > 1:  # added within each thread first: a tile's chunks, or groups
            tile = f"tl.broadcast_to(tl.where(mask, {v}, 0.0), [XBLOCK, {c.width}])"
            shape, axis = (c.wide, 1) if c.reps > 1 else (f"[XBLOCK, {c.width} // {c.group}, {c.group}]", 2)
            return [f"{a} = {a} + tl.sum(tl.reshape({tile}, {shape}), {axis})"]
        src = operand(g, i)
        return [f"{a} = {a} + tl.where(mask, {v}, {zero_of(src)})" + widen(src)]

    def finish(self, g: KernelGraph, i: int, peeled: bool) -> list[str]:
        return [f"tmp{i} = {round16(g.nodes[i], f'tl.sum(acc{i}, 1)[:, None]')}"]

    def single(self, g: KernelGraph, i: int, x: Tiles) -> list[str]:
        src = operand(g, i)
        terms = " + ".join(m + widen(src) for m in x.masked(zero_of(src)))
        return [f"tmp{i} = {round16(g.nodes[i], f'tl.sum({terms}, 1)[:, None]')}"]

    def partial(self, g: KernelGraph, i: int, v: str, walked: bool) -> list[str]:
        src = operand(g, i)
        return [f"tmp{i}_p0 = tl.sum(tl.where(mask, {v}, {zero_of(src)}){widen(src)}, 1)[:, None]"]

    def combine(self, g: KernelGraph, i: int, x: Exchange) -> list[str]:
        t, n, (ax, keep) = f"tmp{i}", g.nodes[i], x.axis
        return x.gathered(t, zero_of(n.dtype)) + [f"{t} = {round16(n, f'tl.sum({t}_q0, {ax}){keep}')}"]


@dataclass(frozen=True, slots=True)
class Extreme(ReduceKind):
    """Max (`low`: its identity is the dtype's lowest value) and min, through the jit helper `fn`."""

    fn: str
    low: bool

    def accumulators(self, src: DType, ridx: str, peeled: bool) -> list[tuple[str, str, str]]:
        return [("", extreme(src, self.low), value_type(src))]

    def update(self, g: KernelGraph, i: int, v: str, c: Chunk) -> list[str]:
        a = f"acc{i}"
        return [f"{a} = {self.fn}({a}, tl.where(mask, {v}, {extreme(operand(g, i), self.low)}))"]

    def finish(self, g: KernelGraph, i: int, peeled: bool) -> list[str]:
        return [f"tmp{i} = tl.reduce(acc{i}, 1, {self.fn})[:, None]"]

    def single(self, g: KernelGraph, i: int, x: Tiles) -> list[str]:
        terms = x.masked(extreme(operand(g, i), self.low))
        return [f"tmp{i} = tl.reduce({fold(self.fn, terms)}, 1, {self.fn})[:, None]"]

    def partial(self, g: KernelGraph, i: int, v: str, walked: bool) -> list[str]:
        ident = extreme(operand(g, i), self.low)
        return [f"tmp{i}_p0 = tl.reduce(tl.where(mask, {v}, {ident}), 1, {self.fn})[:, None]"]

    def combine(self, g: KernelGraph, i: int, x: Exchange) -> list[str]:
        t, (ax, keep) = f"tmp{i}", x.axis
        return x.gathered(t, extreme(operand(g, i), self.low)) + [f"{t} = tl.reduce({t}_q0, {ax}, {self.fn}){keep}"]


@dataclass(frozen=True, slots=True)
class ArgExtreme(ReduceKind):
    """The position of the max (`low`, as `Extreme`) or the min, through the jit helper `fn`: the first on ties.
    Masked lanes lose every tie (an aligned walk's head lanes have negative positions)."""

    fn: str
    low: bool

    def accumulators(self, src: DType, ridx: str, peeled: bool) -> list[tuple[str, str, str]]:
        return [("_v", extreme(src, self.low), value_type(src)), ("_i", "0", ridx)]

    def update(self, g: KernelGraph, i: int, v: str, c: Chunk) -> list[str]:
        a, ident = f"acc{i}", extreme(operand(g, i), self.low)
        idx = "tl.broadcast_to(tl.where(mask, rindex, rnumel), [XBLOCK, RBLOCK])"
        return [f"{a}_v, {a}_i = {self.fn}({a}_v, {a}_i, tl.where(mask, {v}, {ident}), {idx})"]

    def finish(self, g: KernelGraph, i: int, peeled: bool) -> list[str]:
        a, t = f"acc{i}", f"tmp{i}"
        return [f"_, {t} = tl.reduce(({a}_v, {a}_i), 1, {self.fn})", f"{t} = {t}[:, None]"]

    def single(self, g: KernelGraph, i: int, x: Tiles) -> list[str]:
        t, fn = f"tmp{i}", self.fn
        idxs = [f"tl.broadcast_to({p}, [XBLOCK, RBLOCK])" for p in x.masked("rnumel", x.rindexes)]
        values = x.masked(extreme(operand(g, i), self.low))
        lines = [f"{t}_v, {t}_i = {values[0]}, {idxs[0]}"]
        lines += [f"{t}_v, {t}_i = {fn}({t}_v, {t}_i, {v}, {p})" for v, p in zip(values[1:], idxs[1:])]
        return lines + [f"_, {t} = tl.reduce(({t}_v, {t}_i), 1, {fn})", f"{t} = {t}[:, None]"]
