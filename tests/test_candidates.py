"""Every candidate the planner proposes computes the right answer (run in Triton's interpreter on CPUs)."""

from __future__ import annotations

import pytest
import torch

import rblock
from rblock.compiler import recording
from rblock.ops.registry import OPS, max_rel_error

CASES = [
    ("rms_norm", 3, 4096, -1),  # looped by default, with the persistent_rblock candidate
    ("rms_norm", 5, 300, -1),
    ("softmax", 3, 4096, -1),
    ("softmax", 9, 100, -1),
    ("layer_norm", 3, 2500, -1),
    ("cross_entropy", 4, 3000, -1),
    ("fused_add_rms_norm", 3, 2100, -1),
    ("var", 6, 1500, -1),
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
        assert max_rel_error(out, ref) < 1e-5, cfg
