"""Every candidate the planner proposes computes the right answer (run in Triton's interpreter on CPUs)."""

from __future__ import annotations

import pytest
import torch

import rblock
from conftest import assert_all_near, assert_matches, assert_near, converted_as_kernels_do
from rblock.compiler import recording
from rblock.ops.registry import OPS
from rblock.program import make_program

CASES = [
    ("rms_norm", 3, 4096, -1),  # looped by default, with the persistent_rblock candidate
    ("rms_norm", 5, 300, -1),
    ("rms_norm", 3, 1500, -1),  # read twice by loops, short of the seed: single passes of its own
    ("softmax", 3, 4096, -1),
    ("softmax", 9, 100, -1),
    ("layer_norm", 3, 2500, -1),
    ("cross_entropy", 4, 3000, -1),
    ("fused_add_rms_norm", 3, 2100, -1),
    ("var", 6, 1500, -1),
    ("softmax", 5, 1001, -1),  # rows off 16-byte boundaries: aligned walks among the looped candidates
    ("sum", 40, 7, 0),  # column sum: OUTER candidates
    ("logsumexp", 3, 2200, -1),
]


@pytest.mark.parametrize(("op", "m", "n", "dim"), CASES, ids=[f"{c[0]}-{c[1]}x{c[2]}-d{c[3]}" for c in CASES])
def test_every_candidate_is_correct(op: str, m: int, n: int, dim: int):
    torch.manual_seed(m * n)
    spec = OPS[op]
    inputs = spec.make_inputs(m, n, torch.float32, "cpu")
    ref = spec.reference(inputs, dim)
    with recording(launch=False) as log:
        spec.run(inputs, dim)
    candidates = [c.config for c in log[0].plan.candidates]
    assert candidates
    for cfg in candidates:
        with rblock.settings(config=cfg):
            out = spec.run(inputs, dim)
        assert_all_near(out, ref, sum_of=inputs[0].shape[dim] if op == "sum" else 0, msg=str(cfg))


def test_every_candidate_of_cross_entropy_with_label_smoothing_is_correct():
    """The smoothed loss adds a sum of the row beside its logsumexp: every candidate reads both in one pass."""
    torch.manual_seed(11)
    logits, target = torch.randn(4, 3000) * 3, torch.randint(0, 3000, (4,))
    target[2] = -100

    def run():
        return rblock.cross_entropy(logits, target, reduction="none", label_smoothing=0.15)

    ref = torch.nn.functional.cross_entropy(logits.double(), target, reduction="none", label_smoothing=0.15)
    with recording(launch=False) as log:
        run()
    candidates = [c.config for c in log[0].plan.candidates]
    assert len(candidates) > 1
    for cfg in candidates:
        with rblock.settings(config=cfg):
            assert_near(run(), ref, msg=str(cfg))


RECOMPUTE_OPS = ["rms_norm", "softmax", "log_softmax", "layer_norm", "cross_entropy", "var", "fused_add_rms_norm"]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
@pytest.mark.parametrize("op", RECOMPUTE_OPS)
def test_recompute_form_matches_the_fp32_held_form(op: str, dtype: torch.dtype):
    """Holding 16-bit inputs as loaded and recomputing after each reduction gives the same numbers as holding fp32."""
    torch.manual_seed(7)
    spec = OPS[op]
    inputs = spec.make_inputs(3, 3000, dtype, "cpu")
    outs = []
    for recompute in (False, True):
        with rblock.settings(config=rblock.Config("persistent_rblock", 1, 4096, 4, recompute=recompute)):
            outs.append(spec.run(inputs, -1))
    a, b = (o if isinstance(o, (tuple, list)) else (o,) for o in outs)
    for x, y in zip(a, b):
        assert torch.equal(x, y), op
    assert_all_near(outs[1], spec.reference(inputs, -1))


def test_recompute_source_holds_the_row_as_loaded():
    inputs = OPS["softmax"].make_inputs(3, 3000, torch.bfloat16, "cpu")
    cfg = rblock.Config("persistent_rblock", 1, 4096, 4, recompute=True)
    with rblock.settings(config=cfg), recording(launch=False) as log:
        OPS["softmax"].run(inputs, -1)
    gpu = make_program(log[0].graph, cfg, interpret=False).stages[0].spec.source
    body = gpu[gpu.index("def _rblock") :]
    assert body.count("tl.load(") == 1  # read once
    assert body.count("_widen(tmp0_raw)") == 3  # before the max, before the sum of exps, for the output
    assert "tl.inline_asm_elementwise" in gpu and "is_pure=False" in gpu
    interp = make_program(log[0].graph, cfg, interpret=True).stages[0].spec.source
    assert "inline_asm" not in interp


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=["bf16", "fp32"])
@pytest.mark.parametrize("align", [False, True], ids=["plain", "aligned"])
def test_single_pass_gathers_the_class_logit_before_loading_the_row(dtype: torch.dtype, align: bool):
    """The class index and its logit are loaded before the row, so that their two round trips overlap the row's
    load, also for rows walked from the 16-byte boundary below them; ignored or out-of-range classes keep their
    meaning."""
    torch.manual_seed(7)
    logits = torch.randn(6, 1001, dtype=dtype)
    target = torch.randint(0, 1001, (6,))
    target[1], target[2], target[4] = -100, 1000, 0  # ignored, the last class, the first class
    cfg = rblock.Config("persistent", 1, 2048 if align else 1024, 4, align=align)
    with rblock.settings(config=cfg), recording() as log:
        loss = rblock.cross_entropy(logits, target, reduction="none")
    body = make_program(log[0].graph, cfg, interpret=False).stages[0].spec.source
    body = body[body.index("def _rblock") :]
    # the target, its logit, then the row (aligned: as whole vectors, then in the branch for a tensor's last row,
    # as whole vectors and its last partial vector)
    loads = [line for line in body.splitlines() if "tl.load(" in line]
    assert [line.count("tl.load(") for line in loads] == ([1, 1, 1, 1, 1, 2] if align else [1, 1, 1])
    assert "in_ptr0 + (x0)" in loads[0]  # the class index
    assert "in_ptr1" in loads[1] and "index" not in loads[1]  # its logit
    assert ("jindex" if align else "r0") in loads[2]  # the row
    expected = torch.nn.functional.cross_entropy(logits.double(), target, reduction="none")
    assert_near(loss, expected)
    with rblock.settings(config=cfg):
        bad = rblock.cross_entropy(logits, torch.tensor([0, 1, 2, 1001, 4, -5]), reduction="none")
    assert torch.isnan(bad[3]) and torch.isnan(bad[5]) and torch.isfinite(bad[[0, 1, 2, 4]]).all()


TILE_OPS = ["rms_norm", "softmax", "log_softmax", "layer_norm", "cross_entropy", "var", "amax", "logsumexp", "sum"]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=["bf16", "fp32"])
@pytest.mark.parametrize(("n", "tiles"), [(3000, 3), (5120, 5)])
@pytest.mark.parametrize("op", TILE_OPS)
def test_exact_tiles_compute_the_row_like_one_padded_tile(op: str, n: int, tiles: int, dtype: torch.dtype):
    torch.manual_seed(n + tiles)
    spec = OPS[op]
    inputs = spec.make_inputs(3, n, dtype, "cpu")
    ref = spec.reference(inputs, -1)
    for recompute in (False, True):
        with rblock.settings(config=rblock.Config("persistent", 1, 1024, 4, tiles=tiles, recompute=recompute)):
            out = spec.run(inputs, -1)
        assert_all_near(out, ref, sum_of=n if op == "sum" else 0, msg=f"recompute={recompute}")


def test_argmax_over_tiles_keeps_the_first_index_of_a_tie():
    x = torch.zeros(2, 3072)
    x[0, [5, 1500, 3000]] = 7.0  # the same maximum in the first, second and third tile
    x[1, [2100, 2999]] = 3.0
    with rblock.settings(config=rblock.Config("persistent", 1, 1024, 4, tiles=3)):
        got = rblock.compile(lambda t: t.argmax(-1))(x)
    assert got.tolist() == [5, 2100]


def test_tiles_too_small_for_the_row_is_a_clear_error():
    x = torch.randn(2, 5000)
    with (
        rblock.settings(config=rblock.Config("persistent", 1, 1024, 4, tiles=4)),
        pytest.raises(rblock.InvalidArgument, match="4 tile"),
    ):
        rblock.softmax(x, dim=-1)


@pytest.mark.parametrize(
    ("shape", "dim", "baked"), [((40, 3000), 0, True), ((40, 4096), 0, False), ((3000, 40), 1, False)]
)
def test_column_sums_of_odd_widths_know_their_row_count(shape, dim, baked):
    """Loads contiguous along x are masked by xindex < xnumel: Triton vectorizes them only if it knows xnumel divides
    by the vector width, which for an argument it knows only for multiples of 16."""
    with recording(launch=False) as log:
        rblock.sum(torch.randn(*shape), dim)
    source = make_program(log[0].graph, log[0].plan.candidates[0].config).stages[0].spec.source
    assert (f"xnumel = {log[0].graph.xnumel}" in source) == baked


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=["bf16", "fp32"])
@pytest.mark.parametrize(
    "cfg",
    [
        rblock.Config("looped", 1, 512, 4),
        rblock.Config("looped", 2, 256, 2, unroll=2),
        rblock.Config("looped", 1, 1024, 4, align=True),
    ],
    ids=["plain", "two-rows-unrolled", "aligned"],
)
def test_looped_kernel_reads_a_stored_sum_back_instead_of_its_inputs(dtype: torch.dtype, cfg: rblock.Config):
    """fused_add_rms_norm looped: the first loop stores x + residual, the second reads that one tensor back (after
    a barrier) instead of reloading x and the residual; rows off 16-byte boundaries too."""
    torch.manual_seed(11)
    m, n = 5, 2999
    x, res = (torch.randn(m, n + 2, dtype=dtype)[:, 1:-1] for _ in range(2))  # rows start off 16-byte boundaries
    w = torch.randn(n, dtype=dtype)
    with rblock.settings(config=cfg), recording() as log:
        out, h = rblock.fused_add_rms_norm(x, res, w, 1e-6)
    body = make_program(log[0].graph, cfg, interpret=False).stages[0].spec.source
    loops = body.split("# pass ")[1:]  # aligned: the loops of both branches (whole vectors, a tensor's last row)
    assert [loop[0] for loop in loops] == (["1", "2"] * (2 if cfg.align else 1))
    for first, second in zip(loops[::2], loops[1::2]):
        assert "tl.debug_barrier()" in first
        assert "in_ptr0" not in second and "in_ptr1" not in second and "tl.load(out_ptr1" in second
    expected_h = x + res  # PyTorch rounds the sum to the input dtype before normalizing it
    ref = torch.nn.functional.rms_norm(expected_h.double(), (n,), w.double(), 1e-6)
    assert_matches(h, expected_h, x.double() + res.double())
    assert_matches(out, torch.nn.functional.rms_norm(x + res, (n,), w, 1e-6), ref)


def test_a_value_read_back_twice_stays_in_l2_until_its_last_loop():
    """Three loops (mean, variance, output): the stored sum is read back in the second and third; the second keeps
    it in L2 for the third. A kernel that reads nothing back gets no barrier."""

    def norm_and_sum(x, r):
        h = x + r
        m = h.float().mean(-1, keepdim=True)
        v = ((h.float() - m) ** 2).mean(-1, keepdim=True)
        return ((h.float() - m) / (v + 1e-5).sqrt()).to(x.dtype), h

    torch.manual_seed(3)
    x, r = torch.randn(4, 3000, dtype=torch.bfloat16), torch.randn(4, 3000, dtype=torch.bfloat16)
    cfg = rblock.Config("looped", 1, 512, 4)
    with rblock.settings(config=cfg), recording() as log:
        out, h = rblock.compile(norm_and_sum, name="norm_and_sum")(x, r)
    body = make_program(log[0].graph, cfg, interpret=False).stages[0].spec.source
    reads = [line for line in body.splitlines() if "tl.load(out_ptr1" in line]
    assert len(reads) == 2 and "evict_last" in reads[0] and "evict_first" in reads[1]
    assert "in_ptr0" not in body[body.index("# pass 2") :]
    assert_matches(h, x + r, x.double() + r.double())
    # PyTorch normalizes x + r rounded to bf16, and the kernel the sum it stores: the reference normalizes that sum
    # (to nearest; truncated in Triton's interpreter), where x + r cancels its mean to far below its rounding
    h_ref = converted_as_kernels_do(x.float() + r.float(), torch.bfloat16).double()  # x + r is exact in fp32
    m = h_ref.mean(-1, keepdim=True)
    v = ((h_ref - m) ** 2).mean(-1, keepdim=True)
    assert_matches(out, norm_and_sum(x, r)[0], (h_ref - m) / (v + 1e-5).sqrt())

    with rblock.settings(config=cfg), recording() as log:
        rblock.compile(lambda x, y: (torch.softmax(x, -1), x * y), name="softmax_and_product")(x, r)
    assert "tl.debug_barrier()" not in make_program(log[0].graph, cfg, interpret=False).stages[0].spec.source


def test_a_single_pass_that_writes_only_per_row_results_reads_its_rows_first_out_of_l2():
    """var's rows are dead once loaded: evict_first. softmax writes rows as well: no policy on its loads."""
    torch.manual_seed(4)
    x = torch.randn(6, 3000, dtype=torch.bfloat16) * 2 + 1
    cfg = rblock.Config("persistent", 1, 4096, 4)
    bodies = {}
    with rblock.settings(config=cfg):
        for name, fn in (("var", lambda t: t.float().var(-1)), ("softmax", lambda t: torch.softmax(t.float(), -1))):
            with recording() as log:
                got = rblock.compile(fn, name=name)(x)
            assert_matches(got, fn(x), fn(x.double()))
            bodies[name] = make_program(log[0].graph, cfg, interpret=False).stages[0].spec.source
    loads = {k: [line for line in b.splitlines() if "tl.load(in_ptr0" in line] for k, b in bodies.items()}
    assert loads["var"] and all("evict_first" in line for line in loads["var"])
    assert loads["softmax"] and not any("evict" in line for line in loads["softmax"])


def test_reductions_over_tiles_inside_every_row_select_no_lanes():
    """Exact tiles reduce unmasked, a padded tile keeps its mask; rows past the last (a program of 4 rows over 6)
    load zeros and are not stored, so every row matches, including mean-variance and softmax statistics."""
    torch.manual_seed(5)

    def norm(t):
        return torch.nn.functional.layer_norm(t.float(), (t.shape[-1],)) + torch.softmax(t.float(), -1)

    for n, cfg in (
        (1024, rblock.Config("persistent", 4, 512, 4, tiles=2)),  # two tiles inside every row
        (1000, rblock.Config("persistent", 4, 512, 4, tiles=2)),  # the second tile padded
    ):
        x = torch.randn(6, n, dtype=torch.bfloat16) * 3 + 1
        with rblock.settings(config=cfg), recording() as log:
            got = rblock.compile(norm, name="norm")(x)
        assert_matches(got, norm(x), norm(x.double()))
        body = make_program(log[0].graph, cfg, interpret=False).stages[0].spec.source
        masked = [line for line in body.splitlines() if "tl.where(mask_t" in line]
        assert bool(masked) == (n % 512 != 0), (n, masked)
