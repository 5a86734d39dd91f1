"""Looped bodies' chunk loops: one `for r0_offset` loop per pass, folding each chunk of the row into [XBLOCK,
RBLOCK] accumulators, then the reductions' results from them.

A pass with mean-variance takes its first chunk before the loop (`reductions.peels_first_chunk`): there each lane's
first element becomes its shift, and the loop from the second chunk on only subtracts, adds and squares. An unrolled
pass of grouped softmax statistics takes its unrolled chunks as one tile (`ChunkLoop._wide_reps`).
"""

from __future__ import annotations

from rblock.codegen.reductions import acc_finish, acc_init, acc_update, peels_first_chunk, stats_group
from rblock.ir import Op, Rank, query
from rblock.ir.nodes import REDUCE_OPS


class ChunkLoop:
    """Mixed into the kernel body (`codegen.kernel._Body`), whose state and emitters it uses."""

    def _loop(self, k: int, targets: list[int]) -> None:
        g = self.g
        self.pass_index = k
        for t in targets:  # per-row inputs of this pass come from earlier passes: define them up front
            for dep in query.full_cone(g, t):
                if g.nodes[dep].rank != Rank.FULL and g.nodes[dep].op not in REDUCE_OPS:
                    self.emit(dep)
        reductions = [t for t in targets if g.nodes[t].op in REDUCE_OPS]
        self.out.append(f"# pass {k + 1}: {', '.join(f'%{t}' for t in targets)}")
        uniform = self.walk is None  # a walk's first chunk masks the lanes before each row's start
        groups = {r: stats_group(g, r, self.cfg, aligned=not uniform) for r in reductions}
        peeled = peels_first_chunk(g, reductions, uniform)
        u, end = self.cfg.unroll, g.rnumel + self.vec - 1  # a walk from the boundary below covers vec - 1 more
        reps = self._wide_reps(targets, groups, uniform)
        width = f"RBLOCK * {u}" if reps > 1 else "RBLOCK"
        self.out += [line for r in reductions for line in acc_init(g, r, groups[r], peeled, reps, width)]
        if peeled:
            self.out.append("# the first chunk, before the loop: the lanes' shifts")
            self._chunk("rbase", targets, groups, peeled, first=True)
        bounds = f"{'RBLOCK' if peeled else 0}, {end}, RBLOCK"
        unroll = f"tl.range({bounds}, loop_unroll_factor={u}):  # {u} chunks' loads in flight"
        if reps > 1:
            wide = f"tl.arange(0, {width})[None, :]{'.to(tl.int64)' if g.index_bits == 64 else ''}"
            self.out += [f"rwide = {wide}  # {u} chunks a trip, one group per thread: their loads go out together"]
            unroll = f"range(0, {end}, {width}):"
        self.out.append(f"for r0_offset in {unroll if u > 1 else f'range({bounds}):'}")
        saved, self.out = self.out, []
        self._chunk(f"r0_offset + {'rwide' if reps > 1 else 'rbase'}", targets, groups, peeled, reps=reps, width=width)
        self.out = saved + [f"    {line}" for line in self.out]
        self.local = {}
        for r in reductions:
            self.out += acc_finish(g, r, peeled)
            self.outer[(r, 0)] = f"tmp{r}"

    def _wide_reps(self, targets: list[int], groups: dict[int, int], uniform: bool) -> int:
        """An unrolled pass of grouped softmax statistics alone, one row per program: its `unroll` chunks are one
        tile, each thread's vectors of it one group (`acc_update`), so that the loads of all of them are in flight
        at once (unrolled by LLVM, ptxas issued them two at a time, each used before the next went out). The
        thread's vectors per group, or 1 (the pass keeps its form)."""
        cfg = self.cfg
        if cfg.unroll < 2 or cfg.XBLOCK != 1 or not uniform or not targets:
            return 1
        if any(self.g.nodes[t].op != Op.SOFTMAX_STATS or groups[t] < 2 for t in targets):
            return 1
        group = min(groups.values())
        return cfg.unroll * cfg.RBLOCK // (32 * cfg.num_warps * group)

    def _chunk(
        self,
        rindex: str,
        targets: list[int],
        groups: dict[int, int],
        peeled: bool,
        first: bool = False,
        reps: int = 1,
        width: str = "RBLOCK",
    ) -> None:
        """One chunk of a pass: its values, folded into the accumulators."""
        g = self.g
        self.local = {}
        self._r_header(rindex)
        for t in targets:
            if g.nodes[t].op in REDUCE_OPS:
                v = self.emit(g.nodes[t].args[0])
                self.out += acc_update(g, t, v, groups[t], peeled, first, reps, width)
            else:
                self.emit(t)
