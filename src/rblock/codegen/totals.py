"""Sums over every row (TOTAL_SUM: a mean loss over per-row losses) in the kernel that computes the rows.

Each program adds its rows' values into a share; the programs' shares are added in a fixed tree (`ShareTree`): the
last program of each group to arrive on the group's counter adds the group's shares, stores that as a share of the
next level and arrives there, and the last at the top computes and stores what depends on the sums. The same result
on every run, whichever program comes last, and no launch of its own.
"""

from __future__ import annotations

from dataclasses import dataclass

from rblock.codegen.emit import TL_DTYPE
from rblock.ir import KernelGraph, Op, Rank, query
from rblock.plan.config import Config


@dataclass(frozen=True)
class ShareTree:
    """How a kernel's sums over rows add the programs' shares: in groups of `group` (4 per thread of a program, one
    16-byte load of fp32), level by level. Level 0 holds one share per program, each next level one per group of the
    level below, up to a level of one group. Each level's area of the workspace is padded with zeros to whole groups;
    each group has an arrival counter."""

    group: int
    sizes: tuple[int, ...]  # shares per level (level 0: the most programs a launch has)

    @staticmethod
    def of(g: KernelGraph, cfg: Config) -> ShareTree:
        group, sizes = 128 * cfg.num_warps, [max(-(-g.xnumel // cfg.XBLOCK), 1)]
        while sizes[-1] > group:
            sizes.append(-(-sizes[-1] // group))
        return ShareTree(group, tuple(sizes))

    def groups(self, level: int) -> int:
        return -(-self.sizes[level] // self.group)

    def offset(self, level: int) -> int:
        """Where a level's shares start in the workspace."""
        return sum(self.groups(k) * self.group for k in range(level))

    def counter(self, level: int) -> int:
        """Where a level's counters start among the sync counters (after the error flag)."""
        return 1 + sum(self.groups(k) for k in range(level))

    @property
    def numel(self) -> int:
        return self.offset(len(self.sizes))

    @property
    def counters(self) -> int:
        return self.counter(len(self.sizes))


class Totals:
    """Mixed into the kernel body (`codegen.kernel._Body`): reads its `scope` and emission state, uses its emitters."""

    def _shares(self, op: str, out: list[str]) -> list[str]:
        """The rows' values that the sums over every row add, per row (`op`: "=", or "+=" for programs that loop
        over rows); the values they need are appended to `out`."""
        lines = []
        for t in query.totals(self.scope.g):
            v = self.emit(self.scope.g.nodes[t].args[0], out)
            lines.append(f"share{t} {op} tl.where(xmask, {v}, 0).to({TL_DTYPE[self.scope.g.nodes[t].dtype]})")
        return lines

    def _totals(self) -> list[str]:
        """The sums over every row: each program stores its rows' share, then adds up its group's shares if it is
        the last of the group to arrive, and so on up `ShareTree`'s levels; the last at the top computes and stores
        what depends on the sums."""
        g, totals = self.scope.g, query.totals(self.scope.g)
        if not totals:
            return []
        tree = ShareTree.of(g, self.scope.cfg)
        G, top = tree.group, len(tree.sizes) - 1
        lines = [
            "# the sums over every row: this program's share, then each group's sum, added by its last to arrive",
            "i0 = tl.program_id(0)",
            "n0 = tl.num_programs(0)",
            *[f"tl.store(share_ptr{k} + i0, tl.sum(share{t}))" for k, t in enumerate(totals)],
        ]
        for lv in range(top + 1):
            pad = "    " * lv
            members = f"tl.minimum(n{lv} - i{lv} // {G} * {G}, {G})"
            lines.append(f"{pad}if _last_to_arrive(sync_ptr + {tree.counter(lv)} + i{lv} // {G}, {members}):")
            pad += "    "
            if lv < top:
                lines += [f"{pad}i{lv + 1} = i{lv} // {G}", f"{pad}n{lv + 1} = (n{lv} + {G - 1}) // {G}"]
                lines += [
                    f"{pad}tl.store(share_ptr{k} + {tree.offset(lv + 1)} + i{lv + 1}, "
                    f"_sum_of_group(share_ptr{k} + {tree.offset(lv)} + i{lv + 1} * {G}, {G}))"
                    for k in range(len(totals))
                ]
                continue
            body = []
            for k, t in enumerate(totals):
                body.append(f"tmp{t} = _sum_of_group(share_ptr{k} + {tree.offset(lv)}, {G})")
                self.outer[(t, 0)] = f"tmp{t}"
            for i, n in enumerate(g.nodes):
                if n.op == Op.STORE and n.rank == Rank.TOTAL:
                    self.emit(i, body)
            lines += [f"{pad}{line}" for line in body]
        return lines
