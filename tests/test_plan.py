"""Analysis numbers and the planner's rules, on graphs traced from the ops (no kernel runs)."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

import rblock
from rblock.analysis import Hint, analyze
from rblock.compiler import recording
from rblock.ir.passes import dead_code, simplify_dims
from rblock.ir.verify import verify
from rblock.ops.registry import OPS
from rblock.plan import DEFAULT, Heuristics, plan
from rblock.plan.candidates import _read_twice_short_of_seed
from rblock.trace import trace


def planned(op: str, m: int, n: int, dim: int = -1, strategy: str = "auto"):
    """The Compiled entries an op builds for (m, n) bf16, without launching anything."""
    inputs = OPS[op].make_inputs(m, n, torch.bfloat16, "cpu")
    with rblock.settings(strategy=strategy), recording(launch=False) as log:
        OPS[op].run(inputs, dim)
    return log


def graph_of(fn, *args):
    lowered, _ = trace("t", fn, args, {})
    return verify(dead_code(simplify_dims(verify(lowered.graph))))


def test_rms_norm_looped_reads_the_row_twice():
    f = planned("rms_norm", 2048, 32768)[0].features
    assert f.persistent_bytes == 2 * 2048 * 32768 * 2 + 32768 * 2
    assert f.saved_bytes_ratio == pytest.approx(1.5, abs=1e-3)
    assert f.hint == Hint.INNER and f.mem_ops_per_thread == 3 and f.loads_and_reductions == 3


def test_column_sum_is_outer():
    (c,) = planned("sum", 4096, 4096, dim=0)
    assert c.features.hint == Hint.OUTER
    assert c.features.score_x > 0 and c.features.r_coalesce_ratio < 1


@pytest.mark.parametrize(
    ("m", "n", "splits"), [(13107, 5120, {64: {4, 8}, 32: {2, 4}}), (65536, 1024, {64: {32, 64}, 32: {16, 32}})]
)
def test_each_column_tile_is_split_for_its_own_programs(m, n, splits):
    """5120 columns: 80 tiles of 64 (4 per SM on 132 SMs asks 6.6 slices each: 4 and 8) and 160 of 32 (3.3: 2 and
    4). Rows of 65536 make no split-row candidates: a column's slice would be read one element per row."""
    (c,) = planned("sum", m, n, dim=0)
    got: dict[int, set[int]] = {}
    for cand in c.plan.candidates:
        assert cand.config.kind == "looped"
        if cand.config.split > 1:
            got.setdefault(cand.config.XBLOCK, set()).add(cand.config.split)
    assert got == splits


def test_short_rows_are_persistent_with_several_rows_per_program():
    (c,) = planned("rms_norm", 2048, 1024)
    assert c.plan.strategy == "persistent"
    (s,) = planned("softmax", 4096, 256)
    assert s.plan.candidates[0].config.XBLOCK > 1


def test_seed_candidate_for_rms_norm_32k():
    (c,) = planned("rms_norm", 2048, 32768)
    assert c.plan.strategy == "looped"
    seeds = [x.config for x in c.plan.candidates if x.config.kind == "persistent_rblock"]
    assert seeds  # one per num_warps the tuner should try
    assert {(s.RBLOCK, s.XBLOCK, s.no_rblock_scaling) for s in seeds} == {(32768, 1, True)}


def test_no_seed_candidate_beyond_32k():
    (c,) = planned("rms_norm", 64, 65536)
    assert all(x.config.kind != "persistent_rblock" for x in c.plan.candidates)


@pytest.mark.parametrize(
    ("rnumel", "expected"), [(2048, False), (2049, True), (4096, True), (32768, True), (32769, False)]
)
def test_seed_rnumel_boundaries(rnumel: int, expected: bool):
    f = analyze(graph_of(lambda x: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True)), torch.randn(4, rnumel)), DEFAULT)
    kinds = [c.config.kind for c in plan(f, DEFAULT).candidates]
    assert ("persistent_rblock" in kinds) == expected


def _many_loads(*ts):
    acc = ts[0]
    for t in ts[1:]:
        acc = acc + t
    return acc * torch.rsqrt(acc.pow(2).mean(-1, keepdim=True))


@pytest.mark.parametrize(("loads", "expected"), [(7, True), (8, False)])
def test_seed_needs_few_loads_and_reductions(loads: int, expected: bool):
    g = graph_of(_many_loads, *[torch.randn(4, 4096) for _ in range(loads)])
    f = analyze(g, DEFAULT)
    assert f.loads_and_reductions == loads + 1
    kinds = [c.config.kind for c in plan(f, DEFAULT).candidates]
    assert ("persistent_rblock" in kinds) == expected


def test_thresholds_are_overridable():
    f = analyze(graph_of(lambda x: x.sum(-1), torch.randn(4, 2048)), DEFAULT)
    assert plan(f, DEFAULT).strategy == "looped"
    assert plan(f, Heuristics(persistent_rnumel_inner=4096)).strategy == "persistent"


def test_register_intensive_halves_max_r0_block():
    g = graph_of(_many_loads, *[torch.randn(1024, 8192) for _ in range(9)])
    p = plan(analyze(g, DEFAULT), DEFAULT)
    assert p.register_intensive
    assert (
        max(c.config.RBLOCK for c in p.candidates if c.config.kind == "looped")
        == DEFAULT.max_r0_block_register_intensive
    )


def test_forced_strategies_restrict_candidates():
    (p,) = planned("softmax", 8, 3000, strategy="persistent")
    assert {c.config.kind for c in p.plan.candidates} == {"persistent"}
    (q,) = planned("softmax", 8, 300, strategy="looped")
    assert {c.config.kind for c in q.plan.candidates} == {"looped"}


def test_every_candidate_has_a_reason():
    for op in ("rms_norm", "softmax", "cross_entropy", "var"):
        for c in planned(op, 64, 5000):
            assert all(cand.reason for cand in c.plan.candidates)


def test_seed_adds_the_single_pass_and_the_inductor_form():
    (c,) = planned("rms_norm", 2048, 32768)
    whole_row = [x.config for x in c.plan.candidates if x.config.RBLOCK == 32768]
    assert {cfg.kind for cfg in whole_row} == {"persistent_rblock", "looped"}
    assert all(cfg.no_rblock_scaling for cfg in whole_row)


def test_looped_only_planning_has_no_seed_candidate():
    (c,) = planned("rms_norm", 2048, 32768, strategy="looped")
    assert max(x.config.RBLOCK for x in c.plan.candidates) <= DEFAULT.max_r0_block


@pytest.mark.parametrize(("op", "n", "expected"), [("cross_entropy", 8192, True), ("var", 32768, True),
                                                   ("cross_entropy", 65536, False), ("sum", 8192, False)])  # fmt: skip
def test_online_reductions_get_single_pass_candidates_up_to_32k(op: str, n: int, expected: bool):
    c = planned(op, 512, n)[0]  # more rows than SMs: no few-rows tile
    single = [cand.config for cand in c.plan.candidates if cand.config.kind in ("persistent", "persistent_rblock")]
    assert bool(single) == expected
    if op != "sum":  # above 32K the row may also be spread over programs (split_row)
        assert any(cand.config.kind == "split_row" for cand in c.plan.candidates) == (n > 32768)
    if expected:  # the row in one tile, held as loaded (recompute) or in fp32, at four warp counts
        assert {cfg.RBLOCK for cfg in single} == {n}
        assert {cfg.recompute for cfg in single} == {False, True}
        assert len({cfg.num_warps for cfg in single}) == 4


@pytest.mark.parametrize(
    ("op", "n", "expected"),
    [("rms_norm", 2048, True), ("fused_add_rms_norm", 1500, True), ("rms_norm", 1025, True),
     ("rms_norm", 1024, False), ("rms_norm", 2049, False), ("sum", 2048, False), ("softmax", 1536, False)],
)  # fmt: skip
def test_rows_read_twice_short_of_the_seed_get_single_passes(op: str, n: int, expected: bool):
    """Rows above the single-pass limit (1024) and not above the seed's (2048) that a loop reads twice get single
    passes of their own and a loop of 8 rows a program: at 1024 the default is one already, above 2048 the seed's,
    a sum reads its row once, and softmax's online statistics get single passes by their own rule."""
    (c,) = planned(op, 512, n)
    ours = [cand.config for cand in c.plan.candidates if "too short for PR 161055's" in cand.reason]
    assert bool(ours) == expected
    if expected:  # the row in one tile (no row here is 3 * 512), two rows a program, held as loaded or in fp32
        assert {(cfg.kind, cfg.XBLOCK, cfg.RBLOCK) for cfg in ours} == {("persistent", 2, 2048)}
        assert {cfg.recompute for cfg in ours} == {False, True} and {cfg.num_warps for cfg in ours} == {4, 8}
        assert any(cand.config.kind == "looped" for cand in c.plan.candidates)  # the tuner measures both
    tall = [cand.config for cand in c.plan.candidates if "as max-autotune tries" in cand.reason]
    assert [(cfg.kind, cfg.XBLOCK, cfg.RBLOCK, cfg.num_warps) for cfg in tall] == ([("looped", 8, 2048, 4)] * expected)


def test_the_short_rows_rule_is_the_seeds_but_for_its_lower_bound():
    h = Heuristics()
    f = planned("rms_norm", 512, 2048)[0].features
    assert [_read_twice_short_of_seed(replace(f, rnumel=n), h) for n in (1024, 1025, 2048, 2049)] == [0, 1, 1, 0]
    for field, value in [("saved_bytes_ratio", 1.0), ("r_coalesce_ratio", 1.0), ("is_2d", False),
                         ("loads_and_reductions", h.seed_max_loads_and_reductions + 1),
                         ("mem_ops_per_thread", h.seed_max_mem_ops_per_thread + 1)]:  # fmt: skip
        assert not _read_twice_short_of_seed(replace(f, **{field: value}), h), field


def test_few_rows_get_a_row_per_program_in_one_tile():
    def whole_rows(m: int, n: int) -> list:
        c = planned("sum", m, n)[0]
        return [cand.config for cand in c.plan.candidates if "few rows" in cand.reason]

    assert {(cfg.kind, cfg.XBLOCK, cfg.RBLOCK, cfg.num_warps) for cfg in whole_rows(8, 3000)} == {
        ("persistent", 1, 4096, 32),
        ("persistent", 1, 4096, 16),
    }
    assert whole_rows(512, 3000) == []  # rows enough for every SM
    assert whole_rows(8, 65536) == []  # a row past one program's registers


def test_recompute_is_offered_for_16_bit_inputs_only():
    inputs = OPS["rms_norm"].make_inputs(64, 8192, torch.float32, "cpu")
    with recording(launch=False) as log:
        OPS["rms_norm"].run(inputs, -1)
    assert not any(c.config.recompute for c in log[0].plan.candidates)
    assert any(c.config.recompute for c in planned("rms_norm", 64, 8192)[0].plan.candidates)


@pytest.mark.parametrize(
    ("op", "m", "n", "dim", "unrolled"),
    [
        ("sum", 5461, 12288, 0, True),  # 1.5 programs per SM, 1 KB chunks
        ("softmax", 256, 262144, -1, True),  # 2 programs per SM
        ("sum", 4, 2**24, -1, True),  # the split candidates only: 4 programs cannot fill the SMs, split or not
        ("rms_norm", 16384, 4096, -1, False),  # many rows: every SM full
    ],
)
def test_few_programs_or_small_chunks_get_unrolled_twins(op: str, m: int, n: int, dim: int, unrolled: bool):
    cands = [c.config for c in planned(op, m, n, dim=dim, strategy="looped")[0].plan.candidates]
    twins = [c for c in cands if c.unroll > 1]
    assert bool(twins) == unrolled
    assert all(replace(c, unroll=1) in cands for c in twins)
    assert all(c.split > 1 for c in twins) or op != "sum" or dim != -1


@pytest.mark.parametrize(
    ("op", "n", "dim", "twins"),
    [
        ("softmax", 50257, -1, True),
        ("rms_norm", 1001, -1, True),
        ("softmax", 1001, -1, True),  # single pass: 1001 + 7 fits the tile of 1024
        ("softmax", 50256, -1, False),  # a multiple of 8 elements: aligned already
        ("sum", 50257, 0, False),  # column sums: rows are not contiguous
    ],
)
def test_rows_off_16_byte_boundaries_get_aligned_twins(op: str, n: int, dim: int, twins: bool):
    cands = [c.config for c in planned(op, 64, n, dim=dim)[0].plan.candidates]
    aligned = [c for c in cands if c.align]
    assert bool(aligned) == twins
    assert all(replace(c, align=False) in cands for c in aligned)
    forms = [(c.kind, c.no_rblock_scaling, c.recompute, c.unroll > 1) for c in aligned]
    assert len(forms) == len(set(forms))  # one twin per form
    assert not any(c.prefetch or c.kind == "split_row" for c in aligned)


def test_unrolled_loops_get_aligned_twins_of_their_own_and_split_rows_none():
    cands = [c.config for c in planned("cross_entropy", 1335, 50257)[0].plan.candidates]
    unrolled = next(c for c in cands if c.unroll > 1 and not c.align)
    looped = next(c for c in cands if c.kind == "looped" and c.unroll == 1 and not c.align)
    assert {c for c in cands if c.align} == {replace(unrolled, align=True), replace(looped, align=True)}
    assert any(c.kind == "split_row" for c in cands)


def test_a_single_pass_gets_an_aligned_twin_only_if_its_tile_covers_the_walk():
    cands = [c.config for c in planned("softmax", 64, 1023)[0].plan.candidates]  # 1023 + 7 > 1024
    assert cands and all(c.single_pass for c in cands) and not any(c.align for c in cands)


def test_align_needs_one_tile_and_no_split():
    rblock.Config("persistent", 1, 1024, 4, align=True)
    with pytest.raises(ValueError, match="align"):
        rblock.Config("looped", 1, 1024, 4, align=True, split=2)
    with pytest.raises(ValueError, match="align"):
        rblock.Config("persistent", 1, 1024, 4, align=True, tiles=3)
    with pytest.raises(ValueError, match="align"):
        rblock.Config("split_row", 1, 1024, 4, align=True, split=3, prefetch=True)
    assert rblock.Config("split_row", 1, 1024, 4, align=True, split=3).align


def test_unroll_needs_a_looped_kind():
    with pytest.raises(ValueError, match="unroll"):
        rblock.Config("persistent", 1, 1024, 4, unroll=2)
    with pytest.raises(ValueError, match="unroll must be a power of two"):
        rblock.Config("looped", 1, 1024, 4, unroll=3)


def test_recompute_needs_a_single_pass_kind():
    with pytest.raises(ValueError, match="recompute"):
        rblock.Config("looped", 1, 1024, 4, recompute=True)


@pytest.mark.parametrize(("n", "expected"), [(5120, (5, 1024)), (12288, (3, 4096)), (24576, (3, 8192)),
                                             (4096, None), (3000, None), (7168, None)])  # fmt: skip
def test_exact_tiles_for_padded_rows(n: int, expected):
    cands = [c.config for c in planned("layer_norm", 64, n)[0].plan.candidates]
    tiled = {(c.tiles, c.RBLOCK) for c in cands if c.tiles > 1}
    assert tiled == ({expected} if expected else set())


@pytest.mark.parametrize("strategy", ["auto", "looped", "persistent"])
@pytest.mark.parametrize(
    ("op", "m", "n"), [("sum", 1, 1), ("cross_entropy", 1, 100), ("var", 3, 1), ("rms_norm", 8, 3000)]
)
def test_each_candidate_config_is_offered_once(op: str, m: int, n: int, strategy: str):
    """Rows of one element make some forms coincide: the tuner would time the same kernel twice."""
    with rblock.settings(strategy=strategy), recording(launch=False) as log:
        OPS[op].run(OPS[op].make_inputs(m, n, torch.float32, "cpu"), -1)
    for compiled in log:
        configs = [c.config for c in compiled.plan.candidates]
        assert len(configs) == len(set(configs)), configs


@pytest.mark.parametrize(("op", "m", "n"), [("layer_norm", 2048, 32768), ("softmax", 4096, 16384)])
def test_long_rows_get_prefetching_twins_at_each_warp_count(op: str, m: int, n: int):
    cands = [c.config for c in planned(op, m, n)[0].plan.candidates]
    twins = [c for c in cands if c.prefetch]
    singles = [c for c in cands if c.single_pass and c.kind != "split_row" and not c.prefetch and c.tiles == 1]
    assert {c.num_warps for c in twins} == {c.num_warps for c in singles if not c.align} and len(twins) >= 2
    assert all(c.recompute and c.RBLOCK == singles[0].RBLOCK for c in twins)
    assert all(replace(c, prefetch=False) in cands for c in twins)  # each the twin of an offered single pass


def test_short_tiles_get_no_prefetching_twin():
    assert not any(c.config.prefetch for c in planned("rms_norm", 16384, 4096)[0].plan.candidates)


def _plain_loops(compiled) -> set[tuple[int, int]]:
    """(RBLOCK, warps) of a kernel's plain looped candidates: no split, no unrolling, not the seed's forms."""
    cfgs = [c.config for c in compiled.plan.candidates]
    plain = [c for c in cfgs if c.kind == "looped" and c.split == 1 and c.unroll == 1 and not c.no_rblock_scaling]
    return {(c.RBLOCK, c.num_warps) for c in plain}


@pytest.mark.parametrize("n", [4096, 6144, 8192, 12288, 32768])
def test_rows_a_plain_loop_reads_once_also_loop_in_long_chunks(n: int):
    """sum reads each element once, looped or not: chunks of 4096 where the row is longer than 4096, and of 8192
    where it is longer than 8192, beside 2048 and 1024, each with the warps of its length. rms_norm (reads its row
    twice looped) and var (an online reduction) get no long chunks below 32K."""
    short = {(2048, 8), (1024, 4)}
    long_ones = {(r, r // 256) for r in (4096, 8192) if n > r}
    assert _plain_loops(planned("sum", 2**26 // n, n)[0]) == short | long_ones
    assert _plain_loops(planned("rms_norm", 2**26 // n, n)[0]) == short
    assert _plain_loops(planned("var", 2**26 // n, n)[0]) == short


def test_cross_entropy_mean_over_its_rows_loops_in_long_chunks_and_its_rows_do_not():
    rows, mean = planned("cross_entropy", 5461, 12288)
    assert _plain_loops(rows) == {(2048, 8), (1024, 4)}
    assert _plain_loops(mean) == {(2048, 8), (1024, 4), (4096, 16)}  # a mean over 5461 losses


def test_rows_that_split_rows_serve_loop_in_long_chunks_unless_they_gather():
    """Above 32K the looped kernel is split rows' fallback, at chunks of 4096 and 8192 alone; cross_entropy, whose
    rows gather a class's logit, keeps its shorter chunks too."""
    looped = {
        op: {c.config.RBLOCK for c in planned(op, m, n)[0].plan.candidates if c.config.kind == "looped"}
        for op, m, n in (("layer_norm", 512, 131072), ("softmax", 441, 151936), ("cross_entropy", 441, 151936))
    }
    assert looped["layer_norm"] == looped["softmax"] == {4096, 8192}
    assert {4096, 8192} < looped["cross_entropy"] and min(looped["cross_entropy"]) < 4096
