"""Random shapes, layouts, dims and strategies against PyTorch (property tests)."""

from __future__ import annotations

import warnings

import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rblock

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
    assert out.shape == ref.shape
    torch.testing.assert_close(out.double(), ref, rtol=1e-4, atol=1e-4, equal_nan=True)  # var of one element: nan
