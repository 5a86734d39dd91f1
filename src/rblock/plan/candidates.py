"""Features -> candidate configs, each with the reason it exists. The first candidate runs when nothing is timed."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from rblock.analysis import Features, Hint
from rblock.plan.config import Candidate, Config
from rblock.plan.heuristics import Heuristics
from rblock.plan.sizes import next_pow2, warps_for
from rblock.plan.splits import COLUMN_TILES, split_candidates, split_row_candidates


@dataclass(frozen=True, slots=True)
class Plan:
    strategy: str  # "persistent" or "looped": what the default rules pick
    candidates: tuple[Candidate, ...]
    register_intensive: bool


def persistent_allowed(f: Features, h: Heuristics) -> bool:
    limit = h.persistent_rnumel_inner if f.hint == Hint.INNER else h.persistent_rnumel_other
    return f.rnumel <= limit


def seed_applies(f: Features, h: Heuristics) -> tuple[bool, str]:
    """PR 161055's rule for adding an RBLOCK == rnumel candidate to a looped kernel; the reason either way."""
    checks = [
        (f.is_2d, "the kernel is 2-D"),
        (
            f.saved_bytes_ratio >= h.seed_min_saved_bytes_ratio,
            f"saved_bytes_ratio {f.saved_bytes_ratio} >= {h.seed_min_saved_bytes_ratio}",
        ),
        (
            f.r_coalesce_ratio >= h.seed_min_r_coalesce_ratio,
            f"r_coalesce_ratio {f.r_coalesce_ratio:g} >= {h.seed_min_r_coalesce_ratio:g}",
        ),
        (
            h.seed_min_rnumel_exclusive < f.rnumel <= h.seed_max_rnumel,
            f"{h.seed_min_rnumel_exclusive} < rnumel {f.rnumel} <= {h.seed_max_rnumel}",
        ),
        (
            f.mem_ops_per_thread <= h.seed_max_mem_ops_per_thread,
            f"mem_ops_per_thread {f.mem_ops_per_thread} <= {h.seed_max_mem_ops_per_thread}",
        ),
        (
            f.loads_and_reductions <= h.seed_max_loads_and_reductions,
            f"loads_and_reductions {f.loads_and_reductions} <= {h.seed_max_loads_and_reductions}",
        ),
    ]
    failed = [text for ok, text in checks if not ok]
    if failed:
        return False, "not: " + "; not ".join(failed)
    return True, "; ".join(text for _, text in checks)


def _persistent(f: Features, h: Heuristics, kind: str = "persistent") -> list[Candidate]:
    rblock = next_pow2(max(f.rnumel, 1))
    xmax = max(h.max_persistent_elems // rblock, 1)
    xmax = min(xmax, next_pow2(max(f.xnumel, 1)))
    out = []
    for xblock in dict.fromkeys([xmax, max(xmax // 4, 1)]):
        elems = xblock * rblock
        base = warps_for(h, elems, h.elems_per_warp_single_pass)
        for warps in dict.fromkeys([base, max(base // 2, 1), min(base * 2, h.max_warps)]):
            why = (
                f"row of {f.rnumel} fits one tile (RBLOCK {rblock}); {xblock} row(s) per program"
                f" ({'several rows for short rows' if xblock > 1 else 'one row'}), {warps} warps"
            )
            out.append(Candidate(Config(kind, xblock, rblock, warps), why))
    return out


def _single_pass(
    f: Features, h: Heuristics, kind: str, xblock: int, why: str, fewer_warps: bool = False
) -> list[Candidate]:
    """A row-sized tile at two warp counts (four with `fewer_warps`: online reductions, where each row's exchanges
    between warps cost more than the row's elements per thread; cross_entropy on the H200, trials_run9.json: 2 of
    8 warps fastest at 4096, 16 of 32 at 32768); where 16-bit inputs are held across a reduction, also in the form
    that holds them as loaded and recomputes after each reduction."""
    rblock = next_pow2(f.rnumel)
    base = warps_for(h, xblock * rblock, h.elems_per_warp_single_pass)
    fewer = [max(base // 4, 1), max(base // 8, 1)] if fewer_warps else []
    counts = list(dict.fromkeys([base, max(base // 2, 1), *fewer]))
    out = []
    for warps in counts:
        cfg = Config(kind, xblock, rblock, warps, no_rblock_scaling=kind == "persistent_rblock")
        out.append(Candidate(cfg, f"{why}; {warps} warps"))
    if f.narrow_loads and (f.saved_bytes_ratio > 1 or f.online_reductions):
        for warps in counts:
            cfg = Config(kind, xblock, rblock, warps, no_rblock_scaling=kind == "persistent_rblock", recompute=True)
            out.append(
                Candidate(cfg, f"{why}; {warps} warps; 16-bit inputs held as loaded, recomputed after reductions")
            )
    tiles = exact_tiles(f.rnumel, h)
    if tiles:  # the same as exact tiles instead of one padded tile, with warps sized to one tile
        k, chunk = tiles
        warps = min(max(chunk // (h.exact_tile_elems_per_thread * 32), h.min_warps), h.max_warps)
        for c in [c for c in out if c.config.num_warps == counts[0]]:
            held = "; 16-bit inputs held as loaded, recomputed after reductions" if c.config.recompute else ""
            why_tiles = f"{why}; {k} tiles of {chunk} instead of one padded to {rblock}; {warps} warps{held}"
            out.append(Candidate(replace(c.config, RBLOCK=chunk, tiles=k, num_warps=warps), why_tiles))
    return out


def exact_tiles(rnumel: int, h: Heuristics) -> tuple[int, int] | None:
    """(k, 2^j) when a row of k * 2^j elements (k = 3, 5, 7) pads to its power of two by enough to matter."""
    if rnumel <= 0 or next_pow2(rnumel) < h.exact_tiles_min_padding * rnumel:
        return None
    for k in (3, 5, 7):
        chunk = rnumel // k
        if rnumel % k == 0 and chunk & (chunk - 1) == 0:
            return k, chunk
    return None


# (XBLOCK, RBLOCK, warps) of a column reduction's tiles. The tall one reads 16 KB per trip, so that few programs
# keep enough loads in flight unsplit (max-autotune's pick): sum over dim 0 of (5461, 12288), 192 programs of it,
# took 56.4 us against 58.4 for the others' best on an H100 (benchmarks/results/runs_2026-12-14/ab_tall/)


def _elem_bytes(f: Features) -> float:
    """Bytes per element of the full-size inputs, on average."""
    return f.persistent_read_bytes / max(f.xnumel * f.rnumel, 1)


def _looped(f: Features, h: Heuristics, register_intensive: bool) -> list[Candidate]:
    max_r = h.max_r0_block_register_intensive if register_intensive else h.max_r0_block
    rp2 = next_pow2(max(f.rnumel, 1))
    contiguous_r = min(rp2, max_r)
    contiguous_x = 1 if f.rnumel > 2048 else 2
    contiguous = Candidate(
        Config("looped", contiguous_x, contiguous_r, warps_for(h, contiguous_x * contiguous_r)),
        f"contiguous: walk the row in chunks of {contiguous_r}"
        + (" (register intensive: MAX_R0_BLOCK halved)" if register_intensive else ""),
    )
    wider = Candidate(
        Config("looped", contiguous_x, max(contiguous_r // 2, 1), warps_for(h, contiguous_x * contiguous_r // 2)),
        f"contiguous, smaller chunks of {max(contiguous_r // 2, 1)}: more programs in flight",
    )
    columns = [
        Candidate(Config("looped", x, min(r, rp2), w), f"outer: {x} columns per program, read {r} rows at a time")
        for x, r, w in COLUMN_TILES
    ]
    tiny_x = 2 * (256 // f.rnumel) if 0 < f.rnumel <= 256 else 1
    tiny_x = min(next_pow2(tiny_x), 1024)
    tiny_r = min(rp2, max_r)
    tiny = Candidate(
        Config("looped", tiny_x, tiny_r, warps_for(h, tiny_x * tiny_r)), f"tiny: {tiny_x} rows per program"
    )
    # rows no program holds, and rows a plain loop reads once (a persistent form saves nothing): chunks as long as
    # torch.compile's max-autotune tries. For sum at 8192-32768 it took 4096 x 32 warps, 4096 x 16 or 2048 x 16, and
    # ran 2-5% ahead of rblock's 2048 x 8 and 1024 x 4 (H100, benchmarks/NOTES.md, twenty-seventh day)
    reads_once = f.looped_read_bytes == f.persistent_read_bytes and not f.online_reductions
    long_enough = f.rnumel > h.seed_max_rnumel or reads_once
    long_rows = [
        Candidate(
            Config("looped", 1, r, warps_for(h, r)),
            f"contiguous, long chunks of {r} for a row of {f.rnumel}: fewer loop trips, as max-autotune tries",
        )
        for r in (4096, 8192)
        if long_enough and contiguous_r < r < rp2 and r <= h.long_row_max_r0_block and not register_intensive
    ]
    # rows that split rows serve: the looped kernel is their fallback, at its long chunks alone. On an H100, in 43
    # tunings above 32K (16 op and shape pairs), the 5 that a looped form won took 8192 x 32 warps or 4096 x 16
    # unrolled; each candidate less shortens a first call, which is mostly compiling (benchmarks/NOTES.md). Rows
    # that gather keep every chunk: cross_entropy (441, 151936) took 59.9 us at 2048 x 8 unrolled, 64.5 without it
    split_served = f.row_splittable and f.rnumel > h.split_row_min_rnumel and not f.gathers
    by_hint = {
        Hint.INNER: long_rows if split_served and long_rows else [contiguous, wider, *long_rows],
        Hint.OUTER: columns,
        Hint.OUTER_TINY: [tiny],
        Hint.DEFAULT: [contiguous, columns[0], tiny],
    }
    return list(dict.fromkeys(by_hint[f.hint]))


def _unrolled(f: Features, h: Heuristics, cands: list[Candidate], sm_count: int) -> list[Candidate]:
    """Looped candidates whose resident programs load too few bytes per loop trip to cover the memory latency,
    again with the chunk loop unrolled so that several chunks' loads are in flight."""
    elem_bytes = _elem_bytes(f)
    out = []
    for c in cands:
        cfg = c.config
        chunk_bytes = cfg.XBLOCK * cfg.RBLOCK * elem_bytes
        if cfg.kind != "looped" or cfg.unroll > 1 or chunk_bytes == 0:  # nothing loaded per chunk: empty tensors
            continue
        programs = math.ceil(f.xnumel / cfg.XBLOCK) * cfg.split
        if not programs or programs < h.split_below_sm_fraction * sm_count:  # SMs idle whatever each loads: split
            continue
        per_sm = min(programs / sm_count, h.max_threads_per_sm // (32 * cfg.num_warps))
        in_flight = per_sm * chunk_bytes
        unroll = min(next_pow2(math.ceil(h.looped_bytes_in_flight_per_sm / in_flight)), h.looped_max_unroll)
        trips = math.ceil(math.ceil(f.rnumel / cfg.split) / cfg.RBLOCK)
        if unroll >= 2 and trips >= 2 * unroll:
            why = (
                f"{c.reason}; the chunk loop unrolled {unroll}x: {per_sm:.1f} programs per SM load "
                f"{unroll * in_flight / 1024:.0f} KB per trip"
            )
            out.append(Candidate(replace(cfg, unroll=unroll), why))
    return out


def _aligned(f: Features, cands: list[Candidate]) -> list[Candidate]:
    """Rows that start off 16-byte boundaries: the first candidate of each form again, walking each row from the
    boundary below its start, so that its loads and stores are whole 16-byte vectors but for the row's two ends (a
    single pass needs its tile to cover the row from there). One twin per form keeps the tuning short; a loop
    unrolled is a form of its own (cross_entropy (1335, 50257) on an H100: 63.7 µs walked and unrolled, 67.6 for the
    walked loop the tuner had). Split rows, which can walk too (`Config(align=True)`), get no twin: walked, their
    masks and positions took 127-255 registers a thread, and they ran 1.5-5.4x the picks' time at 50257."""
    if not f.misaligned_vector:
        return []
    why = "; rows walked from the 16-byte boundary below their start, in whole vectors"
    forms: dict[tuple, Candidate] = {}
    for c in cands:
        cfg = c.config
        fits = not cfg.single_pass or cfg.RBLOCK >= f.rnumel + f.misaligned_vector - 1
        plain = cfg.split == 1 and cfg.tiles == 1 and not cfg.prefetch
        if cfg.kind != "split_row" and plain and fits:
            forms.setdefault((cfg.kind, cfg.no_rblock_scaling, cfg.recompute, cfg.unroll > 1), c)
    return [Candidate(replace(c.config, align=True), c.reason + why) for c in forms.values()]


def _prefetching(f: Features, h: Heuristics, cands: list[Candidate], sm_count: int) -> list[Candidate]:
    """Rows enough for each program to take several, and rows so long that one or two programs fill an SM: the
    first single pass of one tile again, at each of its warp counts, its programs looping over rows and loading the
    next one before reducing this one (16-bit inputs held as loaded, so that two rows fit). Rows that gather (a
    per-row index, then the value at it: two dependent loads) get the twin of every single pass of one tile,
    whatever its size: the index is loaded a row ahead, so the gather goes out with the row's turn."""
    if f.xnumel < 2 * sm_count:
        return []
    why = "; programs loop over rows, each loading its next row before reducing this one"
    twins: dict[Config, Candidate] = {}
    first = None
    for c in cands:
        cfg = c.config
        one_tile = cfg.kind != "split_row" and cfg.tiles == 1 and not cfg.align
        if not (cfg.single_pass and one_tile and (f.gathers or cfg.XBLOCK * cfg.RBLOCK >= h.prefetch_min_tile)):
            continue
        first = first or cfg
        if f.gathers or (cfg.kind, cfg.XBLOCK, cfg.RBLOCK) == (first.kind, first.XBLOCK, first.RBLOCK):
            twin = replace(cfg, prefetch=True, recompute=f.narrow_loads or cfg.recompute)
            twins.setdefault(twin, Candidate(twin, c.reason + why))
    return list(twins.values())


def _whole_rows(f: Features, h: Heuristics, sm_count: int) -> list[Candidate]:
    """Fewer rows than SMs, each within one program's registers: a row per program in one tile, whose loads all go
    out at once, where a loop waits on each chunk's load in turn (a mean over a batch's per-row losses)."""
    if f.xnumel >= sm_count or f.rnumel > h.seed_max_rnumel or persistent_allowed(f, h):
        return []
    why = f"few rows ({f.xnumel} for {sm_count} SMs): one row per program in one tile, its loads issued at once"
    rblock = next_pow2(f.rnumel)
    top = min(max(rblock // h.few_rows_elems_per_warp, h.min_warps), h.max_warps)
    return [Candidate(Config("persistent", 1, rblock, w), f"{why}; {w} warps") for w in dict.fromkeys([top, top // 2])]


def _narrow_columns(f: Features, xblock: int) -> bool:
    """A column reduction's tile of `xblock` columns reads less than a 32-byte sector of each row it spans."""
    return f.hint in (Hint.OUTER, Hint.OUTER_TINY) and xblock * _elem_bytes(f) < 32


def _read_twice_short_of_seed(f: Features, h: Heuristics) -> bool:
    """Rows the seed rule would give a single pass but for their length: above the single-pass limit and not above
    the seed's lower bound, so that neither rule offers one. On an H100, in three runs, fused_add_rms_norm's single
    passes of two rows ran 181.2-182.3 us at (43690, 1536) and (32768, 2048), where its pick, a loop, ran
    183.6-184.4 (benchmarks/NOTES.md, twenty-ninth day)."""
    shorter = replace(h, seed_min_rnumel_exclusive=h.persistent_rnumel_inner)
    return f.rnumel <= h.seed_min_rnumel_exclusive and seed_applies(f, shorter)[0]


def _unique(cands: list[Candidate]) -> tuple[Candidate, ...]:
    """Each config once, with the first reason given for it (rows of one element make some forms coincide)."""
    first: dict[Config, Candidate] = {}
    for c in cands:
        first.setdefault(c.config, c)
    return tuple(first.values())


def plan(f: Features, h: Heuristics, strategy: str = "auto", sm_count: int = 132) -> Plan:
    """Candidates for a kernel with features `f` on a device with `sm_count` SMs. `strategy` restricts them to
    persistent or looped ones."""
    register_intensive = (
        f.xnumel >= h.register_intensive_xnumel and f.loads_and_reductions >= h.register_intensive_loads_and_reductions
    )
    default = "persistent" if persistent_allowed(f, h) else "looped"
    if strategy == "persistent":
        persistent = _persistent(f, h)
        persistent += _prefetching(f, h, persistent, sm_count)
        return Plan("persistent", _unique(persistent + _aligned(f, persistent)), register_intensive)
    if strategy == "looped":
        looped = _looped(f, h, register_intensive)
        looped += split_candidates(f, h, looped[0].config, sm_count)
        looped += _unrolled(f, h, looped, sm_count)
        return Plan("looped", _unique(looped + _aligned(f, looped)), register_intensive)
    if default == "persistent":
        persistent = _persistent(f, h)
        persistent += _prefetching(f, h, persistent, sm_count)
        return Plan(default, _unique(persistent + _aligned(f, persistent)), register_intensive)
    cands = _looped(f, h, register_intensive)
    ok, why = seed_applies(f, h)
    rblock = next_pow2(f.rnumel)
    xblock = max(h.seed_tile_elems // rblock, 1)
    if ok:
        why = f"persistent RBLOCK: {why}; one pass, the row read once"
        cands += _single_pass(f, h, "persistent_rblock", xblock, why)
        base = warps_for(h, xblock * rblock)
        for warps in dict.fromkeys([base, max(base // 2, 1)]):
            cands.append(  # the same candidate in the form Inductor emits it: the tuner measures which pays
                Candidate(
                    Config("looped", xblock, rblock, warps, no_rblock_scaling=True),
                    "persistent RBLOCK as Inductor emits it: one chunk per pass, the second pass re-reads the row "
                    f"from L2 and no register holds it across the reduction; {warps} warps",
                )
            )
        if rblock > h.max_r0_block:
            cands.append(
                Candidate(
                    Config("looped", xblock, rblock // 2, base, no_rblock_scaling=True),
                    "persistent RBLOCK after Inductor's tuner halves it when registers limit occupancy: two chunks "
                    f"of {rblock // 2} per pass, {base} warps",
                )
            )
    elif f.online_reductions and f.rnumel <= h.online_single_pass_max_rnumel and not _narrow_columns(f, xblock):
        why = "one pass: looped, the online reduction costs more per element"
        cands += _single_pass(f, h, "persistent", xblock, why, fewer_warps=True)
    elif _read_twice_short_of_seed(f, h):
        why = (
            f"one pass: every loop reads a row of {f.rnumel} twice, too long for a single pass by default "
            f"({h.persistent_rnumel_inner}) and too short for PR 161055's (above {h.seed_min_rnumel_exclusive})"
        )
        cands += _single_pass(f, h, "persistent", xblock, why)
        tall = Config("looped", h.short_row_tall_xblock, rblock, h.short_row_tall_warps)
        why = f"{tall.XBLOCK} rows per program, each in one chunk, {tall.num_warps} warps: many loads in flight"
        cands.append(Candidate(tall, why + ", as max-autotune tries"))
    cands += _prefetching(f, h, cands, sm_count)
    cands += _whole_rows(f, h, sm_count)
    cands += split_row_candidates(f, h, sm_count)
    cands += split_candidates(f, h, cands[0].config, sm_count)
    cands += _unrolled(f, h, cands, sm_count)
    return Plan(default, _unique(cands + _aligned(f, cands)), register_intensive)
