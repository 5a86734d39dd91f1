"""Looped bodies' chunk loops: one `for r0_offset` loop per pass, folding each chunk of the row into [XBLOCK,
RBLOCK] accumulators, then the reductions' results from them.

A pass with mean-variance takes its first chunk before the loop (`reductions.peels_first_chunk`): there each lane's
first element becomes its shift, and the loop from the second chunk on only subtracts, adds and squares. An unrolled
pass of grouped softmax statistics, or of sums and mean-variance, takes its unrolled chunks as one tile
(`ChunkLoop._wide_reps`).
"""

from __future__ import annotations

from rblock.codegen.reductions import KINDS, acc_finish, acc_init, acc_update, peels_first_chunk, stats_group
from rblock.ir import Rank, query
from rblock.ir.nodes import REDUCE_OPS
from rblock.ir.query import VECTOR_BYTES


class ChunkLoop:
    """Mixed into the kernel body (`codegen.kernel._Body`): reads its `scope` and emission state, uses its emitters."""

    def _loop(self, k: int, targets: list[int]) -> list[str]:
        """Pass k's lines: its loop (or loops) over the row's chunks, then its reductions' results."""
        g, out = self.scope.g, []
        self.pass_index = k
        for t in targets:  # per-row inputs of this pass come from earlier passes: define them up front
            for dep in query.full_cone(g, t):
                if g.nodes[dep].rank != Rank.FULL and g.nodes[dep].op not in REDUCE_OPS:
                    self.emit(dep, out)
        reductions = [t for t in targets if g.nodes[t].op in REDUCE_OPS]
        out.append(f"# pass {k + 1}: {', '.join(f'%{t}' for t in targets)}")
        uniform = self.scope.walk is None  # a walk's first chunk masks the lanes before each row's start
        groups = {r: stats_group(g, r, self.scope.cfg, aligned=not uniform) for r in reductions}
        peeled = peels_first_chunk(g, reductions, uniform)
        # a walk from the boundary below covers vec - 1 more
        u, end = self.scope.cfg.unroll, g.rnumel + self.scope.vec - 1
        reps = self._wide_reps(targets, groups, uniform, peeled)
        if reps > 1:  # a wide pass's sums fold its chunks lane by lane instead
            groups = {r: 1 if self._wide_lanes(r, peeled) else n for r, n in groups.items()}
        width = f"RBLOCK * {u}" if reps > 1 else "RBLOCK"
        out += [line for r in reductions for line in acc_init(g, r, groups[r], peeled, reps, width)]
        chunk, first = ("rwide", width) if reps > 1 else ("rbase", "RBLOCK")
        if reps > 1:
            wide = f"tl.arange(0, {width})[None, :]{'.to(tl.int64)' if g.index_bits == 64 else ''}"
            out += [f"rwide = {wide}  # {u} chunks a trip, folded in each thread: their loads go out together"]
        if peeled:  # a wide pass peels a whole tile: its names keep the widths the loop gives them
            out.append(f"# the first {'tile' if reps > 1 else 'chunk'}, before the loop: the lanes' shifts")
            self._chunk(out, chunk, targets, groups, peeled, first=True, reps=reps, width=width)
            self.peeled = True
        inner = self._inner_chunks()
        spans = [(f"{first if peeled else 0}, {end}, {width}", u, "", False)]  # (bounds, unroll, note, inside)
        if inner is not None:  # a walk's chunks inside every row need no masks: only its first and last ones do
            spans = [
                ("0, RBLOCK, RBLOCK", 1, "the first chunk: the lanes before each row's start masked", False),
                (f"RBLOCK, {inner}, RBLOCK", 1, "chunks inside every row: no masks", True),
                (f"{inner}, {end}, RBLOCK", 1, "the last chunks: the lanes past each row's end masked", False),
            ]
        for bounds, unroll, note, inside in spans:
            if unroll > 1 and reps == 1:
                loop = f"tl.range({bounds}, loop_unroll_factor={unroll})"
                note = f"{unroll} chunks' loads in flight"
            else:
                loop = f"range({bounds})"
            out.append(f"for r0_offset in {loop}:" + (f"  # {note}" if note else ""))
            body: list[str] = []
            self.inside = inside
            self._chunk(body, f"r0_offset + {chunk}", targets, groups, peeled, reps=reps, width=width)
            self.inside = False
            out += [f"    {line}" for line in body]
        self.local = {}
        for r in reductions:
            out += acc_finish(g, r, peeled)
            self.outer[(r, 0)] = f"tmp{r}"
        return out

    def _inner_chunks(self) -> int | None:
        """A walk over rows inside their tensors (`whole`, never peeled nor wide): where its chunks that lie inside
        every row end, when there is one. Its masks then hold only in the first chunk (the lanes before a row's
        start, less than a vector, so the chunk must span one) and the last ones; in between every position is the
        row's, and the per-element masks and selects (a third of the loop's instructions at cross_entropy's rows of
        50257) go. Not for unrolled loops: there the split ran slower on an H100 (cross_entropy (1335, 50257)'s
        1024 x 4 unrolled twice, 65.1 and 65.4 us against 59.7 and 60.5; benchmarks/NOTES.md, thirty-first day)."""
        w = self.scope.cfg.RBLOCK
        if not (self.scope.walk and self.whole) or self.scope.cfg.unroll > 1 or w < self.scope.vec:
            return None
        inner = self.scope.g.rnumel // w * w  # chunks wholly before the row's end, from the boundary below its start
        return inner if inner > w else None

    def _wide_reps(self, targets: list[int], groups: dict[int, int], uniform: bool, peeled: bool) -> int:
        """An unrolled pass, one row per program, of grouped softmax statistics alone, or of float sums and
        mean-variance (with any values it stores): its `unroll` chunks are one tile, folded within each thread
        before its accumulators take them (`acc_update`), so that the loads of all of them are in flight at once
        (unrolled by LLVM, ptxas issued one or two chunks' loads at a time, each used before the next went out).
        The thread's vectors per group (softmax statistics) or the chunks per tile (sums), or 1 (the pass keeps
        its form)."""
        cfg, g = self.scope.cfg, self.scope.g
        reductions = [t for t in targets if g.nodes[t].op in REDUCE_OPS]
        if cfg.unroll < 2 or cfg.XBLOCK != 1 or not uniform or not reductions:
            return 1
        # a first chunk taken before a loop leaves its names at function scope, where a loop of another width may
        # not assign them: a wide pass peels only as the last pass, and follows no pass that peeled
        if self.peeled or (peeled and self.pass_index < len(self.scope.loop_uses) - 1):
            return 1
        if all(t in groups and KINDS[g.nodes[t].op].wide_groups and groups[t] >= 2 for t in targets):
            return cfg.unroll * cfg.RBLOCK // (32 * cfg.num_warps * min(groups.values()))
        sums = all(self._wide_lanes(t, peeled) for t in reductions)
        # a chunk spans whole rounds of the threads' widest vectors: a thread's elements of every chunk of the tile
        # lie at the same lanes of its accumulators, so the fold needs no exchange between threads
        itemsize = min((g.nodes[j].dtype.itemsize for j in self.scope.loop_uses[self.pass_index]), default=4)
        rounds = cfg.RBLOCK % (32 * cfg.num_warps * VECTOR_BYTES // itemsize) == 0
        return cfg.unroll if sums and rounds else 1

    def _wide_lanes(self, r: int, peeled: bool) -> bool:
        """Whether reduction r's chunks in a wide pass are added lane by lane (float sums, peeled mean-variance)."""
        n = self.scope.g.nodes[r]
        return KINDS[n.op].wide_lanes(self.scope.g.nodes[n.args[0]].dtype, peeled)

    def _chunk(
        self,
        out: list[str],
        rindex: str,
        targets: list[int],
        groups: dict[int, int],
        peeled: bool,
        first: bool = False,
        reps: int = 1,
        width: str = "RBLOCK",
    ) -> None:
        """One chunk of a pass, appended to `out`: its values, folded into the accumulators."""
        g = self.scope.g
        self.local = {}
        out += self._r_header(rindex)
        for t in targets:
            if g.nodes[t].op in REDUCE_OPS:
                v = self.emit(g.nodes[t].args[0], out)
                out += acc_update(g, t, v, groups[t], peeled, first, reps, width)
            else:
                self.emit(t, out)
