"""Random shapes, layouts, dims and strategies against PyTorch (property tests)."""

from __future__ import annotations

import random
import warnings

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rblock
from conftest import assert_all_near, assert_near
from rblock.ops.registry import OPS as REGISTRY

OPS = {
    "sum": (lambda x, d: rblock.sum(x, d), lambda x, d: torch.sum(x, d)),
    "amax": (lambda x, d: rblock.amax(x, d), lambda x, d: torch.amax(x, d)),
    "var": (lambda x, d: rblock.var(x, d), lambda x, d: torch.var(x, d)),
    "logsumexp": (lambda x, d: rblock.logsumexp(x, d), lambda x, d: torch.logsumexp(x, d)),
    "softmax": (lambda x, d: rblock.softmax(x, d), lambda x, d: torch.softmax(x, d)),
    "log_softmax": (lambda x, d: rblock.log_softmax(x, d), lambda x, d: torch.log_softmax(x, d)),
}


@st.composite
def problems(draw):
    rank = draw(st.integers(1, 3))
    shape = [draw(st.integers(1, 40)) for _ in range(rank)]
    dim = draw(st.integers(-rank, rank - 1))
    permuted = draw(st.booleans()) and rank > 1
    sliced = draw(st.booleans())
    return {
        "op": draw(st.sampled_from(sorted(OPS))),
        "shape": shape,
        "dim": dim,
        "perm": draw(st.permutations(range(rank))) if permuted else list(range(rank)),
        "sliced": sliced,
        "strategy": draw(st.sampled_from(["persistent", "looped"])),
        "seed": draw(st.integers(0, 2**16)),
    }


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems())
def test_reductions_over_any_layout_match_pytorch(p):
    torch.manual_seed(p["seed"])
    base = torch.randn(*[s * (2 if p["sliced"] else 1) for s in p["shape"]])
    x = base[tuple(slice(None, None, 2) if p["sliced"] else slice(None) for _ in p["shape"])]
    x = x.permute(*p["perm"])
    ours, theirs = OPS[p["op"]]
    with rblock.settings(strategy=p["strategy"]):
        out = ours(x, p["dim"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch warns about the variance of one element
        ref = theirs(x.double(), p["dim"])
    n = x.shape[p["dim"]] if p["op"] == "sum" else 0  # the sum slack for sums alone
    assert_near(out, ref, sum_of=n, equal_nan=True)  # var of one element: nan


# Forced looped forms on the registry's ops (their float64 reference, inputs of the benchmarks' kind): cases drawn
# once from a seeded generator, so that every run covers the same walks. A walk's inner chunks run in programs
# before the one holding the last row, in rows of several chunks: most cases have both.


def _forced_loop_cases(count: int) -> list[dict]:
    rng = random.Random(2026)
    cases = []
    for k in range(count):
        width = rng.choice([8, 16, 64, 256])
        cases.append(
            {
                "op": rng.choice(sorted(REGISTRY)),
                "m": rng.choice([1, 2, 3, 5, 8]),
                "n": rng.randint(2 * width, 6 * width) if k % 4 else rng.randint(1, 1100),
                "dtype": rng.choice([torch.bfloat16, torch.float32]),
                "offset": rng.choice([0, 0, 1, 3, 5, 8]),  # elements of storage before the first row
                "config": rblock.Config(
                    "looped",
                    XBLOCK=rng.choice([1, 2, 4]),
                    RBLOCK=width,
                    num_warps=rng.choice([1, 2, 4]),
                    unroll=rng.choice([1, 1, 2, 4]),
                    align=rng.random() < 0.75,
                ),
                "seed": rng.randrange(2**16),
            }
        )
    return cases


@pytest.mark.parametrize("p", _forced_loop_cases(48), ids=lambda p: f"{p['op']}-{p['m']}x{p['n']}-{p['config']}")
def test_forced_loops_over_rows_of_any_length_and_start_match_float64(p):
    """Walked loops (rows off 16-byte boundaries, read from the boundary below), their chunks inside every row
    without masks, unrolled chunks, several rows a program and sums grouped by a thread's vectors: forced on
    contiguous rows of any length starting anywhere in their storage."""
    torch.manual_seed(p["seed"])
    spec = REGISTRY[p["op"]]
    x, *rest = spec.make_inputs(p["m"], p["n"], p["dtype"], "cpu")
    storage = torch.randn(x.numel() + p["offset"]).to(p["dtype"])
    x = storage[p["offset"] :].view(x.shape).copy_(x)
    with rblock.settings(config=p["config"], tune=False):
        out = spec.run([x, *rest], -1)
    assert_all_near(out, spec.reference([x, *rest], -1), sum_of=p["n"] if p["op"] == "sum" else 0)
