"""Split reductions: a partials kernel over row slices plus a combine kernel compute what one kernel does."""

from __future__ import annotations

import pytest
import torch

import rblock
from conftest import assert_matches, assert_near, check_against_torch
from rblock.analysis import analyze
from rblock.codegen.reduce_kind import ReduceKind
from rblock.codegen.reductions import KINDS
from rblock.compiler import recording
from rblock.ir import REDUCE_OPS
from rblock.ir.passes import dead_code, simplify_dims
from rblock.ir.reductions import REDUCTIONS
from rblock.ir.split import can_split, split, split_chunks
from rblock.ir.verify import verify
from rblock.plan import DEFAULT, plan
from rblock.plan.sizes import next_pow2
from rblock.trace import trace


def graph_of(fn, *args):
    lowered, _ = trace("t", fn, args, {})
    return verify(dead_code(simplify_dims(verify(lowered.graph))))


CASES = [
    ("sum rows", lambda x: x.sum(-1), (3, 4096)),
    ("sum one row", lambda x: x.sum(-1), (1, 8192)),
    ("column sum", lambda x: x.sum(0), (4096, 5)),
    ("mean", lambda x: x.mean(-1, keepdim=True), (2, 2048)),
    ("amax", lambda x: x.amax(-1), (3, 2048)),
    ("amin of columns", lambda x: x.amin(0), (2048, 3)),
    ("var", lambda x: torch.var(x, -1), (3, 4096)),
    ("std of columns", lambda x: torch.std(x, 0), (2048, 7)),
    ("var_mean", lambda x: torch.var_mean(x, -1, correction=0), (2, 2048)),
    ("scaled sum", lambda x: (x * 2.0).sum(-1) + 1.0, (2, 4096)),
    ("count", lambda x: (x > 0).sum(-1), (2, 4096)),
]
SUM_TERMS = {"sum rows": 4096, "sum one row": 8192, "column sum": 4096, "scaled sum": 4096}  # conftest.assert_near


@pytest.mark.parametrize(("name", "fn", "shape"), CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("chunks", [2, 16])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_split_matches_pytorch(name, fn, shape, chunks, dtype):
    torch.manual_seed(chunks)
    x = (torch.randn(*shape) + 3.0).to(dtype)  # a mean far from zero exercises the variance combine
    cfg = rblock.Config("looped", 1, 256, 4, split=chunks)
    with rblock.settings(config=cfg), recording() as log:
        check_against_torch(rblock.compile(fn, name=name.replace(" ", "_")), fn, [x], sum_of=SUM_TERMS.get(name, 0))
    assert len(log[0].program.stages) == 2


def test_split_reads_each_input_once_plus_partials():
    g = graph_of(lambda x: torch.var(x, -1), torch.randn(4, 8192))
    sk = split(g, 8)
    assert verify(sk.first).x_sizes == (8, 4) and sk.first.r_sizes == (1024,)  # slices outermost
    assert verify(sk.second).r_sizes == (8,)
    assert [b.name for b in sk.partials] == ["part0", "part1"]  # welford: means and m2s
    assert sk.third is None and not sk.rows  # per-row outputs only: the combine kernel writes them


def test_what_cannot_be_split():
    assert not can_split(graph_of(lambda x: torch.argmax(x, -1), torch.randn(2, 64)))
    x = torch.randn(2, 64)
    assert not can_split(graph_of(lambda x: (x - x.mean(-1, keepdim=True)).abs().sum(-1), x))  # two levels
    assert split_chunks(4096, 100) == 64 and split_chunks(50257, 64) == 64 and split_chunks(3, 64) == 2


def test_each_reduction_kind_has_one_record_per_layer():
    """The IR's and codegen's records cover every reduction; the kinds whose slices combine have split-row forms."""
    assert set(REDUCTIONS) == set(KINDS) == REDUCE_OPS
    for op in REDUCE_OPS:
        kind = type(KINDS[op])
        forms = (kind.partial is not ReduceKind.partial, kind.combine is not ReduceKind.combine)
        assert forms == (REDUCTIONS[op].splits,) * 2, op


def test_planner_splits_few_rows_and_column_sums():
    few_rows = plan(analyze(graph_of(lambda x: x.sum(-1), torch.randn(4, 2**16)), DEFAULT), DEFAULT)
    assert any(c.config.split > 1 for c in few_rows.candidates)
    assert few_rows.candidates[0].config.split == 1  # untuned runs take the single kernel
    cols = plan(analyze(graph_of(lambda x: x.sum(0), torch.randn(2**14, 256)), DEFAULT), DEFAULT)
    assert any(c.config.split > 1 for c in cols.candidates)
    many_rows = plan(analyze(graph_of(lambda x: x.sum(-1), torch.randn(4096, 2048)), DEFAULT), DEFAULT)
    assert all(c.config.split == 1 for c in many_rows.candidates)


def test_a_row_that_gathers_is_not_split():
    """A gather's position is along the whole row: a slice would read at the wrong place, so it is not split."""
    x = torch.randn(3, 64)
    i = torch.tensor([[1], [40], [63]])

    def f(x, i):
        return (x - x.gather(1, i)).sum(-1)

    assert not can_split(graph_of(f, x, i))
    with rblock.settings(config=rblock.Config("looped", 1, 16, 4, split=2)):
        with pytest.raises(rblock.InvalidArgument, match="splits"):
            rblock.compile(f)(x, i)
    check_against_torch(rblock.compile(f), f, [x, i], sum_of=64)


def test_impossible_split_is_refused():
    with rblock.settings(config=rblock.Config("looped", 1, 64, 4, split=4)):
        with pytest.raises(rblock.InvalidArgument, match="splits"):
            rblock.compile(lambda x: x.argmax(-1), name="argmax_split")(torch.randn(2, 64))
        with pytest.raises(rblock.InvalidArgument, match="none of them empty"):
            rblock.softmax(torch.randn(2, 5), -1)


def test_column_sum_slices_keep_neighbouring_lanes_on_neighbouring_columns():
    g = graph_of(lambda x: x.float().sum(0), torch.randn(4096, 256))
    sk = split(g, 16)
    load = next(n for n in sk.first.nodes if n.op.name == "LOAD")
    assert load.attr.x_strides[-1] == 1  # the innermost x dim is the column: coalesced


UNEVEN = [
    ("column sum of 3001 rows", lambda x: x.sum(0), (3001, 7)),
    ("row max of 2501", lambda x: x.amax(-1), (3, 2501)),
    ("column min of 1501", lambda x: x.amin(0), (1501, 33)),
    ("count of 1001", lambda x: (x > 0).sum(-1), (2, 1001)),
]


@pytest.mark.parametrize(("name", "fn", "shape"), UNEVEN, ids=[c[0] for c in UNEVEN])
@pytest.mark.parametrize("chunks", [2, 16])
def test_uneven_slices_mask_the_short_last_one(name, fn, shape, chunks):
    torch.manual_seed(chunks)
    x = torch.randn(*shape) - 3.0  # negative: padding read as 0 would show in a max
    with rblock.settings(config=rblock.Config("looped", 1, 128, 4, split=chunks)), recording() as log:
        out = rblock.compile(fn, name=name.replace(" ", "_"))(x)
    assert len(log[0].program.stages) == 2 and log[0].program.stages[0].spec.source.count(
        "rmask = (rindex < rnumel) & (x0"
    )
    assert_matches(out, fn(x), fn(x.double()), sum_of=shape[0] if name.startswith("column sum") else 0)


def test_uneven_slices_are_never_empty():
    # 5 in 4 slices of 2 would leave the last one empty; 8 in 4 does not
    assert split_chunks(5, 4) == 2 and split_chunks(7, 4) == 4
    with rblock.settings(config=rblock.Config("looped", 1, 128, 4, split=4)):
        with pytest.raises(rblock.InvalidArgument, match="none of them empty"):
            rblock.compile(lambda x: x.amax(-1), name="amax_empty_slice")(torch.randn(3, 5))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize(("shape", "dim", "chunks"), [((3001, 7), 0, 16), ((3, 2501), -1, 4), ((1001, 5), 0, 2)])
@pytest.mark.parametrize("single", [False, True])
def test_mean_variance_in_uneven_slices(shape, dim, chunks, single, dtype, make):
    """The short last slice's mean and M2 count its own elements, and the combine weighs it by them: var, std and
    mean against float64. The short slice's elements lie 40 standard deviations above the rest, so that a wrong
    count or weight shows in the mean and in M2. Single passes hold each slice in one tile."""
    x = make(*shape)
    short = shape[dim] - (chunks - 1) * -(-shape[dim] // chunks)
    x.narrow(dim, shape[dim] - short, short).add_(40.0)
    x = x.to(dtype)
    per = -(-shape[0 if dim == 0 else 1] // chunks)
    cfg = rblock.Config("persistent" if single else "looped", 1, next_pow2(per) if single else 128, 4, split=chunks)
    var, std_mean = (lambda x: torch.var(x, dim)), (lambda x: (torch.std(x, dim), torch.mean(x, dim)))
    with rblock.settings(config=cfg), recording() as log:
        check_against_torch(rblock.compile(var, name="var_uneven"), var, [x])
        check_against_torch(rblock.compile(std_mean, name="std_mean_uneven"), std_mean, [x])
    assert len(log) == 2 and all(len(c.program.stages) == 2 for c in log)


def test_planner_splits_column_variances_of_any_row_count():
    """22369 rows split unevenly; no single pass of one column per program (a sector read per element)."""
    cols = plan(analyze(graph_of(lambda x: torch.var(x, 0), torch.randn(22369, 3000)), DEFAULT), DEFAULT)
    assert any(c.config.split > 1 for c in cols.candidates)
    assert all(c.config.XBLOCK >= 32 for c in cols.candidates)


def test_planner_splits_column_sums_of_any_row_count():
    cols = plan(analyze(graph_of(lambda x: x.sum(0), torch.randn(22369, 3000)), DEFAULT), DEFAULT)
    assert any(c.config.split > 1 for c in cols.candidates)


FULL = [
    ("rms_norm", lambda x, w: torch.nn.functional.rms_norm(x, (x.shape[-1],), w, 1e-6), (3, 4096)),
    ("layer_norm", lambda x, w: torch.nn.functional.layer_norm(x, (x.shape[-1],), w, w, 1e-5), (2, 4096)),
    ("softmax", lambda x, w: torch.softmax(x, -1), (3, 4096)),
    ("log_softmax", lambda x, w: torch.log_softmax(x, -1), (2, 4096)),
    ("add and norm", lambda x, w: (torch.nn.functional.rms_norm(x + w, (x.shape[-1],), w, 1e-6), x + w), (2, 4096)),
]


@pytest.mark.parametrize(("name", "fn", "shape"), FULL, ids=[c[0] for c in FULL])
@pytest.mark.parametrize("chunks", [2, 16])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_full_size_outputs_split_in_three_kernels(name, fn, shape, chunks, dtype):
    """A norm or softmax of few rows: partials, a combine that stores each row's results, and the outputs written
    slice by slice from them."""
    torch.manual_seed(chunks)
    x = (torch.randn(*shape) * 2.0 + 3.0).to(dtype)
    w = torch.randn(shape[-1]).to(dtype)
    with rblock.settings(config=rblock.Config("looped", 1, 128, 4, split=chunks)), recording() as log:
        out = rblock.compile(fn, name=name.replace(" ", "_"))(x, w)
    assert [st.spec.name for st in log[0].program.stages] == [
        f"_rblock_{name.replace(' ', '_')}_{stage}" for stage in ("partials", "combine", "outputs")
    ]
    outs, exps, refs = (v if isinstance(v, tuple) else (v,) for v in (out, fn(x, w), fn(x.double(), w.double())))
    for o, e, r in zip(outs, exps, refs):
        assert o.dtype == dtype
        assert_matches(o, e, r)


def test_split_softmax_statistics_keep_infinities_and_nan():
    """Slices of -inf alone (their max reads 0, their sum 0) must not lift the row's max; NaN and +inf spread like
    in one kernel."""
    x = torch.randn(6, 1024) - 200.0  # every e^v underflows unless the max is right
    x[0, :512] = float("-inf")  # the first slice of two holds -inf alone
    x[1] = float("-inf")
    x[2, 700] = float("nan")
    x[3, 5] = float("inf")
    x[4, :1000] = float("-inf")
    with rblock.settings(config=rblock.Config("looped", 1, 128, 4, split=2)):
        lse = rblock.compile(lambda x: torch.logsumexp(x, -1), name="lse_split")(x)
        soft = rblock.compile(lambda x: torch.softmax(x, -1), name="softmax_split")(x)
    assert_near(lse, torch.logsumexp(x.double(), -1), equal_nan=True)
    assert_near(soft, torch.softmax(x.double(), -1), equal_nan=True)


@pytest.mark.parametrize("op", ["softmax", "rms_norm"])
def test_full_size_outputs_in_uneven_slices(op):
    x = torch.randn(3, 2501) - 3.0
    w = torch.randn(2501)
    fn = {
        "softmax": lambda x, w: torch.softmax(x, -1),
        "rms_norm": lambda x, w: torch.nn.functional.rms_norm(x, (2501,), w, 1e-6),
    }[op]
    with rblock.settings(config=rblock.Config("looped", 1, 128, 4, split=16)), recording() as log:
        out = rblock.compile(fn, name=f"{op}_uneven")(x, w)
    assert len(log[0].program.stages) == 3
    assert_matches(out, fn(x, w), fn(x.double(), w.double()))


def test_planner_splits_norms_of_few_huge_rows():
    g = graph_of(lambda x: torch.softmax(x, -1), torch.randn(4, 2**16))
    assert any(c.config.split > 1 for c in plan(analyze(g, DEFAULT), DEFAULT).candidates)


def test_split_calls_reuse_one_workspace_and_stay_right():
    """The partials' workspace is made once per stream and reused: every call, on new inputs, is still right."""
    f = rblock.compile(lambda x: torch.var(x, -1), name="var_reused")
    cfg = rblock.Config("looped", 1, 256, 4, split=4)
    with rblock.settings(config=cfg):
        for seed in range(3):
            torch.manual_seed(seed)
            x = torch.randn(3, 4096) * (seed + 1) + seed
            assert_near(f(x), torch.var(x.double(), -1))
        (entry,) = f._entries.values()
    held = [v for k, v in entry.program._sync.items() if k[1] != "spare"]
    assert len(held) == 1 and [t.numel() for t in held[0][1]] == [n for n, _ in entry.program.workspace]


def test_split_calls_from_threads_stay_right():
    """Calls from several threads share the workspace of their stream; each call's kernels run as one."""
    import concurrent.futures

    f = rblock.compile(lambda x: x.sum(-1), name="sum_threads")
    cfg = rblock.Config("looped", 1, 256, 4, split=4)
    torch.manual_seed(0)
    xs = [torch.randn(2, 2048) + i for i in range(8)]

    def call(x):
        with rblock.settings(config=cfg):
            return f(x)

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        outs = list(pool.map(call, xs))
    for x, out in zip(xs, outs):
        assert_near(out, x.double().sum(-1), sum_of=2048)
