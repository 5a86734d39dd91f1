"""Split-row kernels: programs holding slices of one row finish it from each other's partial results.

Triton's interpreter runs programs one after another, so a barrier between them would wait forever: there the
kernel runs as two launches (store the partials; combine and finish), which exercises the slicing, the workspace
layout, the combines and the loop over rows. The exchange itself (words or barrier) runs on the GPU
(benchmarks/check_candidates.py); here it is run only to show that a bounded wait fails with a clear error instead
of hanging.
"""

from __future__ import annotations

from unittest import mock

import pytest
import torch

import rblock
from conftest import assert_all_near, assert_near
from rblock.codegen.kernel import generate
from rblock.codegen.spec import KernelSpec
from rblock.compiler import recording
from rblock.errors import InvalidArgument, SyncTimeout
from rblock.ops.registry import OPS
from rblock.program import make_program
from rblock.runtime import launch
from rblock.runtime.launch import Program, Stage, co_resident_groups

OPS_SPLIT = [
    "rms_norm",
    "softmax",
    "log_softmax",
    "layer_norm",
    "fused_add_rms_norm",
    "var",
    "sum",
    "logsumexp",
    "amax",
]


def _check(op: str, out, ref, n: int) -> None:
    """Each output element by element against its float64 reference (conftest.assert_near); the sum slack for a
    sum of the row's n elements alone."""
    assert_all_near(out, ref, sum_of=n if op == "sum" else 0)


FORMS = [  # (dtype, form): recompute only matters for 16-bit inputs, the walk for rows off 16-byte boundaries
    (torch.float32, ""),
    (torch.bfloat16, ""),
    (torch.float32, "prefetch"),
    (torch.bfloat16, "recompute"),
    (torch.bfloat16, "prefetch+recompute"),
    (torch.bfloat16, "align"),
    (torch.bfloat16, "align+recompute"),
]


@pytest.mark.parametrize(("dtype", "form"), FORMS, ids=[f"{str(d)[6:]}-{f or 'plain'}" for d, f in FORMS])
@pytest.mark.parametrize("op", OPS_SPLIT)
def test_split_row_matches_pytorch(op: str, dtype: torch.dtype, form: str):
    """2500 = 4 slices of 512 + one of 452; 30 rows over 26 row groups (132 SMs / 5): some groups take two rows, and
    with prefetch some load a row past the last (masked). bf16 rows of 2500 start off 16-byte boundaries but for
    every fourth: with `align` each is walked from the boundary below its start, in the same 5 slices."""
    torch.manual_seed(len(op))
    spec = OPS[op]
    inputs = spec.make_inputs(30, 2500, dtype, "cpu")
    inputs[0] = inputs[0] + 3.0  # a mean far from zero exercises the mean/M2 combine
    flags = {k: k in form for k in ("prefetch", "recompute", "align")}
    cfg = rblock.Config("split_row", 1, 512, 4, split=5, **flags)
    with rblock.settings(config=cfg), recording() as log:
        out = spec.run(inputs, -1)
    assert log[0].config == cfg
    assert ("_walk_load(" in log[0].program.stages[0].spec.source) == cfg.align
    _check(op, out, spec.reference(inputs, -1), inputs[0].shape[-1])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("op", OPS_SPLIT + ["cross_entropy"])
def test_walked_split_rows_where_the_last_row_ends_inside_a_vector(op: str, dtype: torch.dtype):
    """13 rows of 2501: the tensor ends 1 element into a 16-byte vector, so its last row loads its last partial vector
    element by element (the other rows whole vectors, reading up to 7 elements of their neighbours, which every
    reduction and store leaves out). Every row's slices hold a different count of its elements: the first slice
    loses the row's shift below its boundary, which mean-variance weighs."""
    torch.manual_seed(len(op) + 1)
    spec = OPS[op]
    inputs = spec.make_inputs(13, 2501, dtype, "cpu")
    far = (40.0 * (torch.arange(2501) >= 2048)).to(dtype)  # the last slice's elements far from the rest
    inputs[0] = inputs[0] + far
    cfg = rblock.Config("split_row", 1, 512, 4, split=5, align=True)
    if op == "cross_entropy":  # its row kernel alone: the mean over rows takes no split_row config
        inputs[1][3] = -100
        with rblock.settings(config=cfg), recording() as log:
            out = rblock.ops.cross_entropy(*inputs, reduction="none")
        ref = torch.nn.functional.cross_entropy(inputs[0].double(), inputs[1], reduction="none")
    else:
        with rblock.settings(config=cfg), recording() as log:
            out = spec.run(inputs, -1)
        ref = spec.reference(inputs, -1)
    source = log[0].program.stages[0].spec.source
    assert "_walk_load(" in source and "else:" in source.split("def _walk_load")[1].split("@triton.jit")[0]
    _check(op, out, ref, 2501)


def test_walked_split_rows_inside_longer_rows():
    """Rows of 2500 inside rows of 2503 (a slice of a wider tensor): the walk follows each row's own start."""
    torch.manual_seed(5)
    x = torch.randn(9, 2503, dtype=torch.bfloat16)[:, :2500] * 3
    with rblock.settings(config=rblock.Config("split_row", 1, 512, 4, split=5, align=True)):
        got = (rblock.ops.softmax(x, -1), rblock.ops.var(x, -1))
    assert_near(got[0], torch.softmax(x.double(), -1))
    assert_near(got[1], torch.var(x.double(), -1))


def test_walked_split_rows_must_cover_the_walk():
    """2557 elements in 5 slices of 512 (2560): a row starting up to 7 elements past its boundary would not fit."""
    x = torch.randn(3, 2557, dtype=torch.bfloat16)
    with rblock.settings(config=rblock.Config("split_row", 1, 512, 4, split=5, align=True)):
        with pytest.raises(InvalidArgument, match="walked from the 16-byte boundary"):
            rblock.ops.softmax(x, -1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_split_row_cross_entropy_per_row(dtype: torch.dtype):
    """The row kernel of cross_entropy (its mean is a second, small kernel that takes no split_row config)."""
    torch.manual_seed(3)
    logits = (torch.randn(30, 2500) * 3).to(dtype)
    target = torch.randint(0, 2500, (30,))
    target[4] = -100
    with rblock.settings(config=rblock.Config("split_row", 1, 512, 4, split=5)):
        out = rblock.ops.cross_entropy(logits, target, reduction="none")
    assert_near(out, torch.nn.functional.cross_entropy(logits.double(), target, reduction="none"))


def test_one_row_spread_over_many_programs():
    torch.manual_seed(0)
    x = torch.randn(1, 8192) * 4
    with rblock.settings(config=rblock.Config("split_row", 1, 256, 2, split=32)):
        out = rblock.ops.softmax(x, -1)
    assert_near(out, torch.softmax(x.double(), -1))


def test_slices_without_finite_values_and_nan_rows():
    """A slice of -inf contributes nothing to a softmax, even where the row's max is so far below 0 that the factor
    rescaling that slice's exps would overflow; a NaN anywhere in a row makes it NaN, like PyTorch."""
    x = torch.randn(5, 2048)
    x[0, :1024] = float("-inf")  # the first two of four slices
    x[1, 5] = float("nan")
    x[2, :] = float("-inf")
    x[3] -= 200.0
    x[3, 512:1024] = float("-inf")
    x[4, :512] += 60.0  # the other slices' exps rescaled by about e^-60
    with rblock.settings(config=rblock.Config("split_row", 1, 512, 4, split=4)):
        out = rblock.ops.softmax(x, -1)
    assert_near(out, torch.softmax(x.double(), -1), equal_nan=True)


@pytest.mark.parametrize(("dtype", "form"), FORMS, ids=[f"{str(d)[6:]}-{f or 'plain'}" for d, f in FORMS])
def test_split_row_cross_entropy_gathers_along_the_whole_row(dtype: torch.dtype, form: str):
    """Every program of a row reads the class's logit at its position in the whole row, wherever its slice is."""
    torch.manual_seed(3)
    x = torch.randn(30, 2500, dtype=dtype) + 3.0
    target = torch.randint(0, 2500, (30,))
    target[4], target[7], target[8] = -100, 2499, 0  # ignored, in the short last slice, in the first slice
    cfg = rblock.Config("split_row", 1, 512, 4, split=5, prefetch="prefetch" in form, recompute="recompute" in form)
    with rblock.settings(config=cfg):
        loss = rblock.cross_entropy(x, target, reduction="none")
    assert_near(loss, torch.nn.functional.cross_entropy(x.double(), target, reduction="none"))


@pytest.mark.parametrize(("dtype", "form"), FORMS, ids=[f"{str(d)[6:]}-{f or 'plain'}" for d, f in FORMS])
def test_split_row_cross_entropy_with_label_smoothing(dtype: torch.dtype, form: str):
    """The row's sum for the smoothing term combines over the slices beside its max and sum of exps."""
    torch.manual_seed(5)
    x = torch.randn(30, 2500, dtype=dtype) * 2 - 1.0
    target = torch.randint(0, 2500, (30,))
    target[4] = -100
    flags = {f: f in form for f in ("prefetch", "recompute", "align")}
    cfg = rblock.Config("split_row", 1, 512, 4, split=5, **flags)
    with rblock.settings(config=cfg):
        loss = rblock.cross_entropy(x, target, reduction="none", label_smoothing=0.3)
    assert_near(loss, torch.nn.functional.cross_entropy(x.double(), target, reduction="none", label_smoothing=0.3))


def test_constant_rows_have_no_variance_over_uneven_slices():
    """Slices of 512 and a shorter last one: the combined mean of a constant row is that constant exactly, so its
    variance is 0 and layer_norm gives the bias (a mean combined as a weighted sum of slice means is off by an ulp
    for about one row in ten)."""
    torch.manual_seed(0)
    for _ in range(30):
        c = float(torch.randn(()) * 10 ** torch.randint(-3, 4, ()).item())
        n = int(torch.randint(1030, 2500, ()))
        x = torch.full((2, n), c)
        b = torch.linspace(-1, 1, n)
        with rblock.settings(config=rblock.Config("split_row", 1, 512, 4, split=-(-n // 512))):
            assert (rblock.var(x, -1) == 0).all(), (c, n)
            assert torch.equal(rblock.layer_norm(x, (n,), None, b), torch.nn.functional.layer_norm(x, (n,), None, b))


def test_planner_offers_split_rows_for_long_rows_only():
    x = torch.randn(4, 65536, dtype=torch.bfloat16)
    with recording(launch=False) as log:
        rblock.ops.rms_norm(x, 65536, torch.randn(65536, dtype=torch.bfloat16))
    split_rows = [c for c in log[0].plan.candidates if c.config.kind == "split_row"]
    assert {(c.config.RBLOCK, c.config.split, c.config.num_warps, c.config.prefetch, c.config.recompute)
            for c in split_rows} == {
        (16384, 4, 8, False, False),  # 64 elements per thread
        (16384, 4, 4, True, True),  # prefetching at half the warps; bf16: both slices held as loaded
        (8192, 8, 4, False, False),
        (8192, 8, 2, True, True),
    }  # fmt: skip
    assert all("read once" in c.reason for c in split_rows)
    long = torch.randn(2, 262144, dtype=torch.bfloat16)
    with recording(launch=False) as log:
        rblock.ops.rms_norm(long, 262144, torch.randn(262144, dtype=torch.bfloat16))
    # slices of 8192 would spread a row over 32 programs, past split_row_max_parts
    assert {c.config.split for c in log[0].plan.candidates if c.config.kind == "split_row"} == {16}
    with recording(launch=False) as log:
        rblock.ops.rms_norm(x[:, :4096], 4096, torch.randn(4096, dtype=torch.bfloat16))
    assert not any(c.config.kind == "split_row" for c in log[0].plan.candidates)
    with rblock.settings(strategy="looped"), recording(launch=False) as log:
        rblock.ops.rms_norm(x, 65536, torch.randn(65536, dtype=torch.bfloat16))
    assert not any(c.config.kind == "split_row" for c in log[0].plan.candidates)


def test_prefetching_twins_hold_at_most_768_bytes_of_inputs_per_thread():
    """At half the plain form's warps a thread holds 128 elements of each input, two rows of those that differ by
    row: bf16 softmax 512 bytes and rms_norm (x twice, its weight once) 768 keep half the warps; layer_norm (a
    bias too), fused_add_rms_norm (x and residual) and fp32 rms_norm would exceed 768, so their twins keep the
    plain form's warps."""
    n = 131072
    x, r = (torch.randn(2, n, dtype=torch.bfloat16) for _ in range(2))
    w, b = (torch.randn(n, dtype=torch.bfloat16) for _ in range(2))
    runs = {
        "softmax": (lambda: rblock.ops.softmax(x, -1), 4),
        "rms_norm": (lambda: rblock.ops.rms_norm(x, n, w), 6),
        "layer_norm": (lambda: rblock.ops.layer_norm(x, n, w, b), 8),
        "fused_add_rms_norm": (lambda: rblock.ops.fused_add_rms_norm(x, r, w), 10),
        "rms_norm fp32": (lambda: rblock.ops.rms_norm(x.float(), n, w.float()), 12),
    }
    twins = {}
    for name, (run, held) in runs.items():
        with recording(launch=False) as log:
            run()
        assert log[0].features.prefetch_bytes == held, name
        twins[name] = {(c.config.RBLOCK, c.config.num_warps) for c in log[0].plan.candidates if c.config.prefetch}
    half, plain = {(16384, 4), (8192, 2)}, {(16384, 8), (8192, 4)}
    assert twins == {"softmax": half, "rms_norm": half, "layer_norm": plain, "fused_add_rms_norm": plain,
                     "rms_norm fp32": plain}  # fmt: skip


def test_argmax_rows_are_not_split():
    """An index reduction has no combine of slice results here: no split_row candidate, and a clear error."""
    f = rblock.compile(lambda x: x.argmax(-1), name="argmax")
    x = torch.randn(2, 40000)
    with recording(launch=False) as log:
        f(x)
    assert not any(c.config.kind == "split_row" for c in log[0].plan.candidates)
    with rblock.settings(config=rblock.Config("split_row", 1, 32768, 4, split=2)), pytest.raises(InvalidArgument):
        f(x)


@pytest.mark.parametrize(
    ("rblock_", "split"), [(512, 4), (512, 6), (256, 5)], ids=["too-few", "empty-slice", "too-small"]
)
def test_slices_must_cover_the_row_exactly(rblock_: int, split: int):
    x = torch.randn(2, 2500)
    with rblock.settings(config=rblock.Config("split_row", 1, rblock_, 4, split=split)):
        with pytest.raises(InvalidArgument, match="split_row|splits"):
            rblock.ops.softmax(x, -1)


@pytest.mark.parametrize(
    "kwargs",
    [dict(split=1), dict(split=3, XBLOCK=2), dict(split=3, tiles=3)],
    ids=["one-part", "xblock", "tiles"],
)
def test_config_rejects_what_split_rows_cannot_do(kwargs):
    base = dict(kind="split_row", XBLOCK=1, RBLOCK=512, num_warps=4)
    with pytest.raises(ValueError, match="split_row"):
        rblock.Config(**{**base, **kwargs})


def test_split_row_may_have_any_number_of_slices_but_a_two_kernel_split_may_not():
    assert rblock.Config("split_row", 1, 512, 4, split=5).split == 5
    with pytest.raises(ValueError, match="power of two"):
        rblock.Config("looped", 1, 512, 4, split=5)


@pytest.mark.parametrize(
    ("name", "fn", "dtype", "waits"),
    [
        (
            "softmax",
            lambda x: torch.softmax(x, -1),
            torch.float32,
            "_words_wait2(wrow + ((wset + 0) * parts + pindex), parts, pmask, epoch, sync_ptr, 3)",  # polled together
        ),
        ("int_sum", lambda x: x.sum(-1), torch.int32, "_row_wait(sync_ptr, group, arrived, 3)"),
    ],
)
def test_a_bounded_wait_fails_clearly_instead_of_hanging(monkeypatch, name, fn, dtype, waits):
    """The GPU form under the interpreter: the first program of a row waits for the others, which run only after
    it. With RBLOCK_DEBUG_SYNC it gives up, and the call raises. 32-bit partial results are exchanged as
    (epoch, value) words, integer sums (64-bit) through workspaces and the group's arrival counter."""
    monkeypatch.setenv("RBLOCK_DEBUG_SYNC", "3")
    x = torch.randn(2, 1024) if dtype.is_floating_point else torch.randint(-9, 9, (2, 1024), dtype=dtype)
    f = rblock.compile(fn, name=f"{name}_wait")
    with rblock.settings(config=rblock.Config("split_row", 1, 512, 4, split=2)):
        compiled = f.compiled_for(x)
    gpu = make_program(compiled.graph, compiled.config, interpret=False)
    stage = gpu.stages[0]
    assert waits in stage.spec.source
    assert ("_row_arrive(" in stage.spec.source) == (name == "int_sum")
    assert (gpu.words, len(gpu.workspace)) == (
        (4, 0) if name == "softmax" else (0, 1)
    )  # softmax: two sets of max and sum
    # the same one-launch form with the interpreter's row loop
    spec = generate(compiled.graph, compiled.config, interpret=True, phase="all", max_spins=3)
    program = Program((Stage(spec, stage.args, stage.xnumel),), gpu.workspace, words=gpu.words)
    out = torch.empty(2, 1024) if name == "softmax" else torch.empty(2, dtype=torch.int64)
    with pytest.raises(SyncTimeout, match="2 programs of a row did not all arrive within 3 polls"):
        program.run([x], [out])


def test_debug_sync_must_be_a_count(monkeypatch):
    monkeypatch.setenv("RBLOCK_DEBUG_SYNC", "soon")
    x = torch.randn(2, 1024)
    f = rblock.compile(lambda x: torch.softmax(x, -1), name="softmax_bad_env")
    with rblock.settings(config=rblock.Config("split_row", 1, 512, 4, split=2)):
        with pytest.raises(ValueError, match="RBLOCK_DEBUG_SYNC"):
            f(x)


def _spec(warps: int, parts: int) -> KernelSpec:
    return KernelSpec("k", "", (), 1, 1024, warps, 1, parts=parts, loops_rows=True, waits=True)


def test_co_resident_groups_follow_registers_threads_and_shared_memory():
    # 132 SMs, 64K registers, 2048 threads, 228 KB shared memory per SM (the interpreter's H100-class numbers)
    assert co_resident_groups(_spec(32, 4), n_regs=64, shared=0) == 33  # one 1024-thread program per SM
    assert co_resident_groups(_spec(32, 4), n_regs=65, shared=0) == 0  # 72 registers x 1024 threads do not fit
    assert co_resident_groups(_spec(8, 4), n_regs=32, shared=0) == 132 * 8 // 4  # threads allow 8 per SM
    assert co_resident_groups(_spec(8, 4), n_regs=32, shared=100_000) == 132 * 2 // 4  # shared memory allows 2


def test_prefetch_only_for_split_rows_and_single_passes_of_one_tile():
    for bad in (
        dict(kind="looped"),
        dict(kind="persistent", tiles=2),
        dict(kind="persistent", align=True),
        dict(kind="persistent", split=2),
    ):
        with pytest.raises(ValueError, match="prefetch"):
            rblock.Config(**(dict(XBLOCK=1, RBLOCK=512, num_warps=4, prefetch=True) | bad))
    assert rblock.Config("persistent_rblock", 1, 512, 4, prefetch=True).prefetch


LOOP_OPS = ["rms_norm", "softmax", "log_softmax", "layer_norm", "cross_entropy", "fused_add_rms_norm", "var", "sum"]


@pytest.mark.parametrize(
    ("dtype", "recompute"), [(torch.float32, False), (torch.bfloat16, False), (torch.bfloat16, True)]
)
@pytest.mark.parametrize("op", LOOP_OPS)
def test_single_pass_looping_over_rows_with_the_next_row_ahead(op: str, dtype: torch.dtype, recompute: bool):
    """30 rows over 4 programs: each takes 7 or 8 rows, loading its next one (past the last: masked) before
    reducing this one."""
    torch.manual_seed(len(op))
    spec = OPS[op]
    inputs = spec.make_inputs(30, 1000, dtype, "cpu")
    inputs[0] = inputs[0] + 3.0
    cfg = rblock.Config("persistent", 1, 1024, 4, prefetch=True, recompute=recompute)
    with mock.patch.object(launch, "co_resident_groups", lambda *a: 4), rblock.settings(config=cfg):
        with recording() as log:
            out = spec.run(inputs, -1)
        assert log[0].program.stages[0].grid(inputs) == 4
    _check(op, out, spec.reference(inputs, -1), inputs[0].shape[-1])
    src = make_program(log[0].graph, cfg, interpret=False).stages[0].spec.source
    body = src[src.index("for xoffset") :]
    reduced = min(body.index(k) for k in ("tl.sum(", "tl.reduce(", "_maximum") if k in body)
    assert body.index("_next = tl.load(") < reduced  # the next row is on its way before this one is reduced
    assert "_row_arrive(" not in src and "ws_ptr" not in src


def test_planner_offers_looping_single_passes_for_long_rows_of_many_rows():
    def prefetching(m: int, n: int) -> list:
        with recording(launch=False) as log:
            rblock.softmax(torch.randn(m, n, dtype=torch.bfloat16), -1)
        return [c.config for c in log[0].plan.candidates if c.config.prefetch]

    twins = prefetching(300, 20000)  # one per warp count of the first single pass
    assert len({cfg.num_warps for cfg in twins}) == len(twins) >= 2
    assert all(cfg.single_pass and cfg.kind != "split_row" and cfg.recompute and cfg.RBLOCK == 32768 for cfg in twins)
    assert prefetching(100, 20000) == []  # fewer rows than programs that run at once: nothing to loop over
    assert prefetching(300, 8192) == []  # two rows fit an SM's registers: its programs overlap already


def test_rows_that_gather_get_looping_twins_of_every_single_pass_at_any_length():
    """cross_entropy's class index is loaded a row ahead, so that its logit's gather goes out with the row's turn
    instead of after a round trip of its own."""
    logits, target = torch.randn(300, 4096, dtype=torch.bfloat16), torch.randint(0, 4096, (300,))
    with recording(launch=False) as log:
        rblock.cross_entropy(logits, target)
    cands = [c.config for c in log[0].plan.candidates]
    singles = {c.num_warps for c in cands if c.single_pass and c.tiles == 1 and not c.prefetch and not c.align}
    twins = [c for c in cands if c.prefetch]
    assert singles and {c.num_warps for c in twins} == singles and all(c.RBLOCK == 4096 for c in twins)
    src = make_program(log[0].graph, twins[0], interpret=False).stages[0].spec.source
    head, body = src[: src.index("for xoffset")], src[src.index("for xoffset") :]
    assert "tmp0_next = tl.load(in_ptr0 + (x0), xmask, other=0)" in head  # the first row's class index
    assert "tmp0_next = tl.load(in_ptr0 + (xn0), xmask_next, other=0)" in body  # the next row's
    reduced = min(body.index(k) for k in ("tl.sum(", "tl.reduce(") if k in body)
    assert body.index("# ir %20: gather") < body.index("tmp10_next = tl.load(") < reduced


def test_prefetch_loads_the_next_row_between_publishing_and_waiting():
    x = torch.randn(4, 1024)
    w = torch.randn(1024)
    f = rblock.compile(lambda x, w: x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-6) * w, name="rms_ahead")
    with rblock.settings(config=rblock.Config("split_row", 1, 512, 4, split=2, prefetch=True)):
        compiled = f.compiled_for(x, w)
    src = make_program(compiled.graph, compiled.config, interpret=False).stages[0].spec.source
    body = src[src.index("for xoffset") :]
    next_load = body.index("tmp0_next = tl.load(in_ptr0 + (xn0 * 1024 + r0), mask_next")
    assert body.index("_word_put(wrow + ((wset + 0) * parts + part), ") < next_load < body.index("_words_wait(")
    assert "tmp0_next = tl.load(in_ptr0 + (x0 * 1024 + r0), mask" in src[: src.index("for xoffset")]
    ahead = [line for line in src.splitlines() if "_next = tl.load" in line]
    assert ahead and not any("in_ptr1" in line for line in ahead)  # the weight, shared by all rows, is not ahead


def test_values_needing_no_reduction_are_stored_before_the_wait():
    """fused_add_rms_norm's x + residual goes out while the row's partial results come, not after them."""
    x, r, w = torch.randn(2, 1024), torch.randn(2, 1024), torch.randn(1024)
    f = rblock.compile(lambda x, r, w: ((s := x + r) * torch.rsqrt((s * s).mean(-1, keepdim=True) + 1e-6) * w, s),
                       name="fused_add_early")  # fmt: skip
    with rblock.settings(config=rblock.Config("split_row", 1, 512, 4, split=2)):
        compiled = f.compiled_for(x, r, w)
    src = make_program(compiled.graph, compiled.config, interpret=False).stages[0].spec.source
    body = src[src.index("for xoffset") :]
    early = [line for line in body.splitlines() if "tl.store(out_ptr" in line and ", tmp2, " in line]  # x + r
    assert len(early) == 1
    assert body.index("_word_put(") < body.index(early[0].strip()) < body.index("_words_wait(")
    assert body.count("tl.store(out_ptr") == 2  # once each
