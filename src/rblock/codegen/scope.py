"""What a kernel body's emitters read and never change (`Scope`, built before emission), and the lines and names
that follow from it alone: buffer pointers, index expressions, the align walk's starts and masks."""

from __future__ import annotations

from dataclasses import dataclass

from rblock.codegen.emit import dim_vars
from rblock.codegen.reductions import exchanges_words
from rblock.codegen.spec import Phase
from rblock.ir import Access, KernelGraph, Op, Rank, query
from rblock.plan.config import Config


@dataclass(frozen=True)
class Scope:
    """A body's graph and config, and what follows from them."""

    g: KernelGraph
    cfg: Config
    phase: Phase  # split_row: the phases this kernel runs
    max_spins: int  # split_row: a bounded wait for the row's other programs (0: unbounded)
    interpret: bool  # for Triton's interpreter (no inline PTX, no tensor bounds in range())
    looped: bool
    split_row: bool
    words: bool  # split_row: partial results exchanged as (epoch, value) words, else workspaces and a barrier
    recompute: bool
    kept_exps: dict[int, int]  # split_row: softmax numerators from the slice's exps, held
    writes_rows: bool  # the kernel stores full-size values
    reread: dict[int, int]  # looped: value -> the first loop's store of it
    passes: list[list[int]]  # looped: what each loop computes
    loop_uses: list[set[int]]  # looped: the full-size loads (and read back values) each loop needs
    tiles: int  # single pass: the row as this many [XBLOCK, RBLOCK] tiles
    walk: Access | None  # align: the access whose rows are walked
    vec: int  # align: the walked access's elements per 16-byte vector
    rounded_by_store: frozenset[int]  # casts whose only users are stores of the same type: the store rounds

    @staticmethod
    def of(g: KernelGraph, config: Config, phase: Phase, max_spins: int, interpret: bool) -> Scope:
        looped, split_row = not config.single_pass, config.kind == "split_row"
        reread = query.read_back(g) if looped else {}
        passes = query.looped_passes(g) if looped else []
        stop = frozenset(reread)
        walk = query.misaligned_walk(g) if config.align else None
        users = g.users()
        return Scope(
            g,
            config,
            phase,
            max_spins,
            interpret,
            looped,
            split_row,
            split_row and phase == "all" and exchanges_words(g),
            config.recompute,
            # (recompute holds the 16-bit inputs instead)
            query.softmax_numerators(g) if split_row and not config.recompute else {},
            any(n.op == Op.STORE and n.rank == Rank.FULL for n in g.nodes),
            reread,
            passes,
            [query.loads_in_pass(g, p, stop if k else frozenset()) for k, p in enumerate(passes)],
            config.tiles,
            g.nodes[walk[0]].attr if walk else None,
            walk[1] if walk else 1,
            frozenset(
                i
                for i, n in enumerate(g.nodes)
                if n.op == Op.CAST and users[i] and all(g.nodes[u].op == Op.STORE for u in users[i])
            ),
        )


def ordinal(g: KernelGraph, i: int) -> int:
    return sum(1 for b in g.buffers[:i] if b.is_output == g.buffers[i].is_output)


def ptr(g: KernelGraph, buffer: int) -> str:
    b = g.buffers[buffer]
    return f"{'out' if b.is_output else 'in'}_ptr{ordinal(g, buffer)}"


def index(acc: Access, sfx: str, with_r: bool = True, x: str = "x") -> tuple[str, bool, bool]:
    """`acc`'s element index in the tile of suffix `sfx` (`x`: the name of the row's x dims), and whether it has x
    and r terms."""
    terms = [f"{x}{k}" if s == 1 else f"{x}{k} * {s}" for k, s in enumerate(acc.x_strides) if s]
    has_x = bool(terms)
    r_terms = [f"r{k}{sfx}" if s == 1 else f"r{k}{sfx} * {s}" for k, s in enumerate(acc.r_strides) if s]
    r_terms = r_terms if with_r else []
    if acc.offset:
        terms.insert(0, str(acc.offset))
    return " + ".join(terms + r_terms) or "0", has_x, bool(r_terms)


def tile_names(s: Scope, name: str) -> list[str]:
    return [name] if s.tiles == 1 else [f"{name}_t{j}" for j in range(s.tiles)]


def inside_rows(s: Scope, tile: int) -> bool:
    """Whether a tile of a single pass lies inside every row, so that its reductions need no mask (one select
    per element fewer): its lanes of rows past xnumel load 0 and are never stored. Not for split rows, whose
    programs exchange per-row results, nor walks and short last slices, whose lanes start or end inside a tile."""
    exact = (tile + 1) * s.cfg.RBLOCK <= s.g.rnumel
    return exact and not (s.split_row or s.walk or s.g.r_extent)


def walks(s: Scope, acc: Access) -> bool:
    """align: whether `acc` is at the walked access's element offsets (so at xalign + jindex)."""
    w = s.walk
    return w is not None and acc.r_strides == (1,) and (acc.x_strides, acc.offset) == (w.x_strides, w.offset)


def walk_start(s: Scope) -> list[str]:
    """align: each row's boundary at or below its start, and how far below (the rows' x dims in scope)."""
    xoff, v = index(s.walk, "", with_r=False)[0], s.vec
    return [f"xalign = ({xoff}) // {v} * {v}", f"rshift = {xoff} - xalign"]


def walk_whole(s: Scope) -> list[str]:
    """align: `whole`, whether the last vector of every row in `xmask` lies inside the tensors."""
    g, w, v = s.g, s.walk, s.vec
    extent = w.offset + sum((size - 1) * st for size, st in zip(g.x_sizes, w.x_strides)) + g.rnumel
    return [
        f"rend = xalign + (rshift + rnumel + {v - 1}) // {v} * {v}  # the end of each row's last vector",
        f"whole = tl.max(tl.max(tl.where(xmask, rend, 0), 1), 0) <= {extent}  # all inside the tensors",
    ]


def walk_masks(s: Scope, every_vector: bool, inside: bool = False) -> list[str]:
    """align: the row's element indices and masks at the walk's positions `jindex` (`jvec`: their vectors'
    first); `every_vector`: also `wmask`, for loads of whole vectors; `inside`: a chunk inside every row, whose
    masks are the rows' alone (constants Triton folds away when every row exists)."""
    v = s.vec
    if inside:  # only in programs whose rows' vectors all lie inside the tensors: every vector is whole
        return [
            "rindex = jindex - rshift",
            "rmask = tl.full([1, RBLOCK], True, tl.int1)",
            *dim_vars("r", "rindex", s.g.r_sizes),
            "mask = xmask & rmask",
            "smask = mask",
            "wmask = mask",
        ]
    return [
        "rindex = jindex - rshift",
        "rmask = (rindex >= 0) & (rindex < rnumel)",
        *dim_vars("r", "rindex", s.g.r_sizes),
        "mask = xmask & rmask",
        f"vmask = xmask & (jvec + {v} <= rnumel + rshift)  # whole vectors of the row's span",
        "smask = vmask & (jvec >= rshift)  # ... and of the row alone",
        *(["wmask = xmask & (jvec < rnumel + rshift)  # every vector holding part of the row"] if every_vector else []),
    ]
