"""Bodies whose programs loop over rows; the grid is as many programs as run at once.

Split row: `parts` programs share each row, one RBLOCK slice each, held in registers. Each reduces its slice,
publishes the partial results ((epoch, value) words, or for 64-bit ones a workspace and the row group's barrier),
waits for the row's others, combines them and finishes its slice from registers: the row is read once. The launch
is cooperative, so the groups of programs that wait for each other are all running. Single pass with `prefetch`:
one program per row at a time, which loads its next row before reducing this one, so that memory keeps working
while an SM's one or two programs reduce.
"""

from __future__ import annotations

from rblock.codegen.access import load
from rblock.codegen.emit import TL_DTYPE, dim_vars
from rblock.codegen.reductions import partial_slots, split_row_combine, split_row_partial
from rblock.codegen.scope import walk_masks, walk_start, walk_whole
from rblock.ir import DType, KernelGraph, Op, Rank, query


def exchange_args(g: KernelGraph, words: bool) -> tuple[list[str], list[str], list[str]]:
    """split_row: the kernel's arguments after the buffers, their pointers' dtypes and their comments."""
    slots = [] if words else partial_slots(g)
    args = [f"ws_ptr{k}" for k in range(len(slots))] + ["words_ptr"] * words + ["sync_ptr"]
    dtypes = [dt.value for _, _, dt in slots] + [DType.I64.value] * words + [DType.I32.value]
    doc = [f"    # ws_ptr{k}: partial results {j} of %{r} ({dt.value})" for k, (r, j, dt) in enumerate(slots)]
    doc += ["    # words_ptr: each row group's (epoch, value) words, two sets, programs side by side (i64)"] * words
    doc.append(f"    # sync_ptr: [error flag, each row group's {'last epoch' if words else 'counter'}] (i32)")
    return args, dtypes, doc


class RowLoop:
    """Mixed into the kernel body (`codegen.kernel._Body`): reads its `scope` and emission state, uses its emitters."""

    def _row_loop_lines(self) -> list[str]:
        """The program's set-up, what comes before its loop over rows (the first row's loads when rows are loaded
        ahead, the running sums over every row, the words' epoch), the loop, and what follows it."""
        g, ahead = self.scope.g, self._prefetched()
        head, loop = self._row_loop_head(ahead)
        out = self._row_indices()
        before = self._first_row(ahead, out) if ahead else []
        for i in query.early_row_loads(g):  # this row's gathers go out before its reductions
            self.emit(i, out)
        if not self.scope.split_row:
            # the sums over every row: this program's rows, added up as they come
            before += [f"share{t} = tl.zeros([XBLOCK, 1], {TL_DTYPE[g.nodes[t].dtype]})" for t in query.totals(g)]
            body, tail = self._prefetch_row(ahead, out), []
        else:
            before += self._words_epoch()
            body, tail = self._split_row(ahead, out)
        return head + before + [loop] + [f"    {line}" for line in self._next_round(body)] + tail

    def _row_loop_head(self, ahead: list[int]) -> tuple[list[str], str]:
        """The program's set-up: its group of programs, its slice of the row; and the loop over the group's rows."""
        g, parts = self.scope.g, self.scope.cfg.split if self.scope.split_row else 1
        wide = g.index_bits == 64
        head = [
            f"rnumel = {g.rnumel}",
            f"parts = {parts}  # programs per row, one slice of RBLOCK each",
            f"pid = tl.program_id(0){'.to(tl.int64)' if wide else ''}",
            "group = pid // parts",
            "part = pid % parts",
            "groups = tl.num_programs(0) // parts",
        ]
        slice_ = "part * RBLOCK + tl.arange(0, RBLOCK)[None, :]"
        # a walk: the slice's positions in the walk from each row's boundary; its elements depend on the row
        if self.scope.walk:
            assert not ahead, "walks are not generated for rows loaded ahead"
            head += [f"jindex = {slice_}", f"jvec = jindex // {self.scope.vec} * {self.scope.vec}"]
        else:
            head += [f"rindex = {slice_}", "rmask = rindex < rnumel", *dim_vars("r", "rindex", g.r_sizes)]
        if self.scope.split_row:
            head += [
                f"pindex = tl.arange(0, {1 << (parts - 1).bit_length()}){'' if self.scope.words else '[None, :]'}"
                "  # the row's partial results",
                "pmask = pindex < parts",
            ]
        if self.scope.interpret:  # the interpreter's range() takes no tensor bounds; its `while` does
            return head + ["xoffset = group * XBLOCK"], "while xoffset < xnumel:  # this group's rows"
        return head, "for xoffset in range(group * XBLOCK, xnumel, groups * XBLOCK):  # this group's rows"

    def _row_indices(self) -> list[str]:
        """The start of the loop's body: the row's indices and masks."""
        return [
            "xindex = xoffset + tl.arange(0, XBLOCK)[:, None]",
            "xmask = xindex < xnumel",
            *dim_vars("x", "xindex", self.scope.g.x_sizes),
            *(
                [*walk_start(self.scope), *walk_masks(self.scope, every_vector=True), *walk_whole(self.scope)]
                if self.scope.walk
                else ["mask = xmask & rmask"]
            ),
            *(
                ["owner = xmask & (part == 0)  # the program that stores per-row outputs"]
                if self.scope.split_row
                else []
            ),
        ]

    def _first_row(self, ahead: list[int], out: list[str]) -> list[str]:
        """prefetch: the first row's loads, before the loop (returned); each round takes its row's from the loads
        made ahead (appended to `out`), and loads its next row while this one is reduced or waits."""
        g = self.scope.g
        before = [
            "xindex = group * XBLOCK + tl.arange(0, XBLOCK)[:, None]",
            *dim_vars("x", "xindex", g.x_sizes),
            "xmask = xindex < xnumel",
            "mask = xmask & rmask",
            *[f"tmp{i}_next = {self._load(i, g.nodes[i].attr, g.nodes[i].dtype, widen=False)}" for i in ahead],
        ]
        for i in ahead:
            n = g.nodes[i]
            out.append(f"# ir %{i}: load {n.attr}, loaded one round ahead")
            if self._holds_raw(n):  # widened where used
                out.append(f"tmp{i}_raw = tmp{i}_next")
                self.raw[(i, 0)] = f"tmp{i}_raw"
                continue
            wide = n.dtype in (DType.BF16, DType.F16)
            out.append(f"tmp{i} = _widen(tmp{i}_next)" if wide else f"tmp{i} = tmp{i}_next")
            self.outer[(i, 0)] = f"tmp{i}"
        return before

    def _prefetch_row(self, ahead: list[int], out: list[str]) -> list[str]:
        """A single pass over rows: the next row's loads go out before this row's reductions, then its stores and
        its shares of the sums over every row. The loop's body (`out`, appended to)."""
        g = self.scope.g
        out += self._next_row_loads(ahead)
        for i in (i for i, n in enumerate(g.nodes) if n.op == Op.STORE and n.rank != Rank.TOTAL):
            self.emit(i, out)
        out += self._shares("+=", out)
        return out

    def _words_epoch(self) -> list[str]:
        """split_row with words: before the loop, the group's epoch and its row's words."""
        if not self.scope.words:
            return []
        return [
            "epoch = tl.load(sync_ptr + 1 + group, volatile=True)  # the group's last, kept between launches",
            # the row's words: two sets of one slot per partial result, each slot the row's programs' words side
            # by side, so that a poll of the row's words loads whole sectors
            f"wrow = words_ptr + group * {2 * len(partial_slots(self.scope.g))} * parts",
        ]

    def _split_row(self, ahead: list[int], out: list[str]) -> tuple[list[str], list[str]]:
        """split_row: the slice's partial results, published; the wait for the row's others; their combination and
        the stores. The loop's body (`out`, appended to) and the lines after the loop."""
        g, parts = self.scope.g, self.scope.cfg.split
        reductions = sorted(query.reduction_levels(g))
        slots = partial_slots(g)
        words = self.scope.words
        for r in reductions:  # the finish needs a slice's softmax statistics whose exps it rescales
            if self.scope.phase != "finish" or r in self.scope.kept_exps.values():
                n = self.scope.g.nodes[r]
                out.append(f"# ir %{r}: {n.op.name.lower()} %{n.args[0]}, this slice")
                out += split_row_partial(g, r, self.emit(n.args[0], out), walked=bool(self.scope.walk))
        if self.scope.phase != "finish":
            if words:
                # the sets alternate by round: a program may publish its next round while another reads this one's
                # words, but not the round after, which needs the other's next words
                out += ["epoch += 1", f"wset = (epoch & 1) * {len(slots)}"]
                out += [
                    f"_word_put(wrow + ((wset + {k}) * parts + part), tmp{r}_p{j}, epoch)"
                    for k, (r, j, _) in enumerate(slots)
                ]
            else:
                for k, (r, j, _) in enumerate(slots):
                    out.append(f"tl.store(ws_ptr{k} + (xindex * parts + part), tmp{r}_p{j}, xmask)")
        early = query.independent_stores(g)
        if words:
            out += self._next_row_loads(ahead)  # polled below, after the next row's loads have gone out
        elif self.scope.phase == "all":
            # the next row's loads go out after arriving, so that the arrival's release fence (a MEMBAR) does
            # not wait for them; the wait's polls do not
            out.append(f"arrived = _row_arrive(sync_ptr, group, part == 0, {2**31 - (parts - 1)})")
            out += self._next_row_loads(ahead)
            out.append(f"_row_wait(sync_ptr, group, arrived, {self.scope.max_spins})")
        else:
            out += self._next_row_loads(ahead)
        if self.scope.phase != "finish":  # what needs no partial result is stored while the others' come
            for i in early:
                self.emit(i, out)
        if self.scope.phase == "partials":
            return out, []
        self._next_epoch()  # recompute: full-size values are widened again after the barrier, not held across it
        for r in reductions:
            ws = [k for k, s in enumerate(slots) if s[0] == r]
            out += split_row_combine(g, r, ws, parts, self.scope.max_spins if words else None, bool(self.scope.walk))
            self.outer[(r, 0)] = f"tmp{r}"
        for i, n in enumerate(g.nodes):
            if n.op == Op.STORE and i not in early:
                self.emit(i, out)
        tail = ["if part == 0:", "    tl.store(sync_ptr + 1 + group, epoch)  # for the group's next launch"]
        return out, tail if words else []

    def _next_row_loads(self, ahead: list[int]) -> list[str]:
        """prefetch: the loads of this program's next row (masked past the last row)."""
        if not ahead:
            return []
        lines = ["xnext = xindex + groups * XBLOCK", *dim_vars("xn", "xnext", self.scope.g.x_sizes)]
        lines += ["xmask_next = xnext < xnumel", "mask_next = xmask_next & rmask"]
        for i in ahead:
            n = self.scope.g.nodes[i]
            at = {"sfx": self._sfx(), "whole": self.whole, "pass_index": self.pass_index}
            text = load(
                self.scope, i, n.attr, n.dtype, **at, widen=False, x="xn", row_mask="mask_next", x_mask="xmask_next"
            )
            lines.append(f"tmp{i}_next = {text}")
        return lines

    def _next_round(self, out: list[str]) -> list[str]:
        """The row loop's body `out`, stepping its own offset in the interpreter's `while` form."""
        return out + (["xoffset += groups * XBLOCK"] if self.scope.interpret else [])

    def _prefetched(self) -> list[int]:
        """prefetch: the row's own loads (not those shared by all rows): full-size ones, and per-row ones that need
        no reduction (a class index, so that its logit's gather goes out as soon as the row's turn comes)."""
        if not self.scope.cfg.prefetch:
            return []
        early = set() if self.scope.split_row else set(query.early_row_loads(self.scope.g))
        return [
            i
            for i, n in enumerate(self.scope.g.nodes)
            if n.op == Op.LOAD and any(n.attr.x_strides) and (n.rank == Rank.FULL or i in early)
        ]
