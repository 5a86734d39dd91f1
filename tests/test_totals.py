"""Sums and means over every row of per-row values (a mean loss) are made by the kernel that computes the rows: each
program stores its rows' share, and the shares are added in a fixed tree by the last program of each group to
arrive. One kernel, the result of PyTorch, the same bits on every call."""

from __future__ import annotations

from unittest import mock

import pytest
import torch
import torch.nn.functional as F

import rblock
from conftest import check_against_torch, dtype_id
from rblock.codegen.totals import ShareTree
from rblock.compiler import recording
from rblock.ir import Op, Rank, query
from rblock.runtime import launch


def mean_square_loss(x):
    return x.float().pow(2).mean(-1).mean()


def rows_and_their_sum(x, w):
    rows = (x * w).sum(-1)
    return rows, rows.sum()


def weighted_mean(x, keep):
    loss = torch.logsumexp(x.float(), -1)
    kept = keep > 0
    return torch.where(kept, loss, 0.0).sum() / kept.sum()


def per_row_use_of_a_total(x):
    s = x.sum(-1)
    return s - s.mean()


def max_over_rows(x):
    return x.sum(-1).amax()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=dtype_id)
@pytest.mark.parametrize("m", [1, 5, 300])
def test_mean_of_per_row_values_matches_pytorch(m, dtype, strategy, make):
    x = make(m, 97, dtype=dtype)
    check_against_torch(rblock.compile(mean_square_loss), mean_square_loss, [x], strategy=strategy)


def test_rows_and_their_sum_together(strategy, make):
    x, w = make(40, 33), make(33)
    check_against_torch(
        rblock.compile(rows_and_their_sum), rows_and_their_sum, [x, w], strategy=strategy, sum_of=(33, 40 * 33)
    )


def test_a_ratio_of_two_sums_with_an_integer_count(strategy, make):
    x, keep = make(50, 64), make(50)
    check_against_torch(rblock.compile(weighted_mean), weighted_mean, [x, keep], strategy=strategy)


def test_one_kernel_with_a_sum_over_rows_and_no_splits(make):
    with recording(launch=False) as log:
        rblock.compile(mean_square_loss)(make(8, 4096))
    (c,) = log
    assert len(c.program.stages) == 1
    assert [n.rank for n in c.graph.nodes if n.op == Op.TOTAL_SUM] == [Rank.TOTAL]
    assert all(cand.config.split == 1 and cand.config.kind != "split_row" for cand in c.plan.candidates)
    assert "_last_to_arrive(" in c.specs[0].source


@pytest.mark.parametrize(("m", "warps", "levels"), [(100, 1, 1), (300, 1, 2), (300, 4, 1)])
def test_shares_added_over_levels_of_groups(m, warps, levels, make):
    """One program per row, groups of 128 shares per warp: 300 programs of one warp take two levels."""
    x = make(m, 16)
    cfg = rblock.Config("persistent", 1, 16, warps)
    with rblock.settings(config=cfg), recording() as log:
        out = rblock.compile(mean_square_loss)(x)
    assert len(ShareTree.of(log[0].graph, cfg).sizes) == levels
    check_against_torch(lambda v: out, mean_square_loss, [x])


def test_programs_looping_over_rows_add_their_rows(make):
    """30 rows over 4 programs that each take 7 or 8 rows (prefetch twins): four shares."""
    x = make(30, 1000)
    cfg = rblock.Config("persistent", 1, 1024, 4, prefetch=True)
    with mock.patch.object(launch, "co_resident_groups", lambda *a: 4), rblock.settings(config=cfg):
        with recording() as log:
            out = rblock.compile(mean_square_loss)(x)
        assert log[0].program.stages[0].grid([x]) == 4
    check_against_torch(lambda v: out, mean_square_loss, [x])


def test_the_same_bits_on_every_call_and_counters_reset(make):
    x = make(300, 16)
    f = rblock.compile(mean_square_loss)
    with rblock.settings(config=rblock.Config("persistent", 1, 16, 1)):
        first = f(x)
        again = [f(x) for _ in range(3)]
        (entry,) = f._entries.values()
    assert all(torch.equal(first, a) for a in again)
    counters = entry.program._held(x.device)[0][0]
    assert int(counters.abs().sum()) == 0  # every group's last arrival reset its counter


def cross_entropy_mean(logits, target):
    """A mean loss over the rows not ignored, written by hand: a gather, a logsumexp and two sums over rows."""
    valid = target != -100
    t = torch.where(valid, target, 0)
    lse = torch.logsumexp(logits.float(), dim=1)
    picked = torch.gather(logits, 1, t.unsqueeze(1)).squeeze(1).float()
    return torch.where(valid, lse - picked, 0.0).sum() / valid.sum()


def test_a_mean_loss_by_hand_is_one_kernel(strategy, make, make_target):
    x, t = make(64, 300), make_target(64, 300)
    t[::5] = -100
    with recording() as log:
        check_against_torch(rblock.compile(cross_entropy_mean), cross_entropy_mean, [x, t], strategy=strategy)
    assert len(log) == 1 and len(log[0].program.stages) == 1
    check_against_torch(lambda *a: cross_entropy_mean(*a), lambda a, b: F.cross_entropy(a, b), [x, t])


@pytest.mark.parametrize("fn", [mean_square_loss, rows_and_their_sum], ids=lambda f: f.__name__)
def test_no_rows(fn, strategy):
    """A sum over no rows is 0 and their mean NaN, as in PyTorch: the kernel runs one program for it."""
    inputs = [torch.randn(0, 8)] + ([torch.randn(8)] if fn is rows_and_their_sum else [])
    check_against_torch(rblock.compile(fn), fn, inputs, strategy=strategy, equal_nan=True)


@pytest.mark.parametrize(
    ("fn", "match"),
    [
        (per_row_use_of_a_total, "a sum over every row in a per-row or per-element value"),
        (max_over_rows, "reduces over different domains"),
    ],
    ids=["per_row_use", "max_over_rows"],
)
def test_what_needs_a_second_pass_over_rows_is_refused(fn, match, make):
    with pytest.raises(rblock.UnsupportedOperation, match=match):
        rblock.compile(fn)(make(4, 8))


def test_a_split_config_is_refused_for_sums_over_rows(make):
    with rblock.settings(config=rblock.Config("looped", 1, 64, 4, split=2)):
        with pytest.raises(rblock.InvalidArgument, match="splits"):
            rblock.compile(mean_square_loss)(make(4, 256))


def test_a_total_feeds_only_pointwise_ops_and_stores(make):
    with recording(launch=False) as log:
        rblock.compile(weighted_mean)(make(6, 32), make(6))
    g = log[0].graph
    (total_store,) = [n for n in g.nodes if n.op == Op.STORE and n.rank == Rank.TOTAL]
    assert not any(total_store.attr.x_strides + total_store.attr.r_strides)
    assert len(query.totals(g)) == 2  # the losses' sum and the count, one kernel
