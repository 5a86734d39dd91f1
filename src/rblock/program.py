"""The kernels that compute a graph with a config: one, or several over shared buffers (a split reduction's
partials and combine, a split row, sums over every row), as the `Program` the runtime launches."""

from __future__ import annotations

import functools
from dataclasses import replace

from rblock import settings as settings_mod
from rblock.codegen.kernel import generate
from rblock.codegen.reductions import exchanges_words, partial_slots
from rblock.codegen.totals import ShareTree
from rblock.ir import KernelGraph, query
from rblock.ir.passes import dead_code
from rblock.ir.split import split
from rblock.ir.verify import verify
from rblock.plan import DEFAULT, Config, Heuristics
from rblock.plan.feasible import combine_config
from rblock.runtime import device
from rblock.runtime.launch import Program, Stage
from rblock.trace import DTYPES

TORCH_DTYPES = {v: k for k, v in DTYPES.items()}


def make_program(
    g: KernelGraph,
    cfg: Config,
    header: tuple[str, ...] = (),
    interpret: bool | None = None,
    pdl: bool | None = None,
    h: Heuristics = DEFAULT,
) -> Program:
    """The kernels that compute `g` with `cfg`: one, or a partials kernel and a combine kernel (and, for full-size
    outputs, a kernel that writes them slice by slice). `interpret`: for
    Triton's interpreter (default: whether this process runs it); `pdl`: launched as programmatic dependents
    (default: whether this device does)."""
    interpret = device.interpreted() if interpret is None else interpret
    pdl = device.dependent_launches() if pdl is None else pdl
    gen = functools.partial(generate, interpret=interpret, pdl=pdl and not interpret)
    n_in, n_out = len(g.inputs), len(g.outputs)
    if cfg.kind == "split_row":
        slots = partial_slots(g)
        note = (f"split row: {cfg.split} programs per row, each holding a slice of {cfg.RBLOCK}",)
        spins = settings_mod.sync_spins()
        buffers = (*(("in", i) for i in range(n_in)), *(("out", j) for j in range(n_out)))
        if not interpret and exchanges_words(g):  # one launch; the words persist beside the counters
            stage = Stage(gen(g, cfg, header + note, max_spins=spins), (*buffers, ("sync", 1), ("sync", 0)), g.xnumel)
            return Program((stage,), words=2 * len(slots))
        args = (*buffers, *(("ws", k) for k in range(len(slots))), ("sync", 0))
        phases = ("partials", "finish") if interpret else ("all",)
        return Program(
            tuple(Stage(gen(g, cfg, header + note, phase=ph, max_spins=spins), args, g.xnumel) for ph in phases),
            tuple((g.xnumel * cfg.split, TORCH_DTYPES[dt]) for _, _, dt in slots),
        )
    if cfg.split == 1:
        args = (*(("in", i) for i in range(n_in)), *(("out", j) for j in range(n_out)))
        totals = query.totals(g)
        if not totals:
            return Program((Stage(gen(g, cfg, header), args, g.xnumel),))
        tree = ShareTree.of(g, cfg)
        args += (*(("sync", 1 + k) for k in range(len(totals))), ("sync", 0))
        shares = tuple((tree.numel, TORCH_DTYPES[g.nodes[t].dtype]) for t in totals)
        note = (f"sums over every row: each program's share, added in groups of {tree.group} by their last to arrive",)
        return Program((Stage(gen(g, cfg, header + note), args, g.xnumel),), shares=shares, counters=tree.counters)
    sk = split(g, cfg.split)
    first, second = verify(dead_code(sk.first)), verify(dead_code(sk.second))
    combine = combine_config(g.xnumel, cfg.split, h)
    ins, outs = tuple(("in", i) for i in range(n_in)), tuple(("out", j) for j in range(n_out))
    parts = tuple(("ws", k) for k in range(len(sk.partials)))
    rows = tuple(("ws", len(parts) + k) for k in range(len(sk.rows)))
    then = "a combine kernel" + (", then an output kernel over the slices" if sk.third else "")
    note = (f"split: {cfg.split} slices of {-(-g.rnumel // cfg.split)} per row, then {then}",)
    stages = [
        Stage(gen(first, replace(cfg, split=1), header + note), (*ins, *parts), first.xnumel),
        Stage(gen(second, combine, note), (*ins, *parts, *outs, *rows), second.xnumel),
    ]
    if sk.third:
        third = verify(dead_code(sk.third))
        stages.append(Stage(gen(third, replace(cfg, split=1), note), (*ins, *rows, *outs), third.xnumel))
    sizes = [(g.xnumel * cfg.split, b) for b in sk.partials] + [(g.xnumel, b) for b in sk.rows]
    return Program(tuple(stages), tuple((n, TORCH_DTYPES[b.dtype]) for n, b in sizes))
