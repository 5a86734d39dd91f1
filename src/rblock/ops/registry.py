"""The ops by name, with random inputs of a given shape and an fp64 PyTorch reference: for the CLI and benchmarks."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

import rblock.ops as ops


@dataclass(frozen=True)
class OpSpec:
    name: str
    run: Callable  # (inputs, dim) -> outputs, through rblock
    reference: Callable  # (inputs, dim) -> outputs, PyTorch on fp64 copies of the inputs
    make_inputs: Callable  # (M, N, dtype, device) -> list of tensors
    reduces_rows: bool = True  # False: --dim selects the reduced dim


def _x(m, n, dt, dev):
    return [torch.randn(m, n, dtype=dt, device=dev)]


def _x_w(m, n, dt, dev):
    return [torch.randn(m, n, dtype=dt, device=dev), torch.randn(n, dtype=dt, device=dev)]


def _x_w_b(m, n, dt, dev):
    return _x_w(m, n, dt, dev) + [torch.randn(n, dtype=dt, device=dev)]


def _logits(m, n, dt, dev):
    return [torch.randn(m, n, dtype=dt, device=dev), torch.randint(0, n, (m,), device=dev)]


def _x_r_w(m, n, dt, dev):
    return [
        torch.randn(m, n, dtype=dt, device=dev),
        torch.randn(m, n, dtype=dt, device=dev),
        torch.randn(n, dtype=dt, device=dev),
    ]


def _d(ts):
    return [t.double() if t.is_floating_point() else t for t in ts]


def _reduction(name: str) -> OpSpec:
    return OpSpec(
        name,
        lambda t, dim: getattr(ops, name)(t[0], dim),
        lambda t, dim: getattr(torch, name)(t[0].double(), dim),
        _x,
        reduces_rows=False,
    )


OPS: dict[str, OpSpec] = {
    "rms_norm": OpSpec(
        "rms_norm",
        lambda t, dim: ops.rms_norm(t[0], (t[0].shape[-1],), t[1], 1e-6),
        lambda t, dim: F.rms_norm(*_d(t[:1]), (t[0].shape[-1],), _d(t[1:])[0], 1e-6),
        _x_w,
    ),
    "layer_norm": OpSpec(
        "layer_norm",
        lambda t, dim: ops.layer_norm(t[0], (t[0].shape[-1],), t[1], t[2], 1e-5),
        lambda t, dim: F.layer_norm(_d(t)[0], (t[0].shape[-1],), *_d(t)[1:], 1e-5),
        _x_w_b,
    ),
    "softmax": OpSpec(
        "softmax", lambda t, dim: ops.softmax(t[0], dim), lambda t, dim: torch.softmax(t[0].double(), dim), _x, False
    ),
    "log_softmax": OpSpec(
        "log_softmax",
        lambda t, dim: ops.log_softmax(t[0], dim),
        lambda t, dim: torch.log_softmax(t[0].double(), dim),
        _x,
        False,
    ),
    "cross_entropy": OpSpec(
        "cross_entropy",
        lambda t, dim: ops.cross_entropy(t[0], t[1]),
        lambda t, dim: F.cross_entropy(t[0].double(), t[1]),
        _logits,
    ),
    "fused_add_rms_norm": OpSpec(
        "fused_add_rms_norm",
        lambda t, dim: ops.fused_add_rms_norm(t[0], t[1], t[2], 1e-6),
        lambda t, dim: (
            F.rms_norm(t[0].double() + t[1].double(), (t[0].shape[-1],), t[2].double(), 1e-6),
            t[0].double() + t[1].double(),
        ),
        _x_r_w,
    ),
    **{n: _reduction(n) for n in ("sum", "mean", "amax", "amin", "var", "std", "logsumexp")},
}


def max_rel_error(out, ref) -> float:
    """max |out - ref| / max |ref| over every output; inf when the outputs' number or shapes differ, or when NaN
    appears in one and not the other."""
    outs = out if isinstance(out, (tuple, list)) else (out,)
    refs = ref if isinstance(ref, (tuple, list)) else (ref,)
    if len(outs) != len(refs):
        return float("inf")
    worst = 0.0
    for o, r in zip(outs, refs):
        if not isinstance(o, torch.Tensor) or o.shape != r.shape:
            return float("inf")
        if o.numel() == 0:
            continue
        o, r = o.double().cpu(), r.double().cpu()
        if bool(torch.isnan(o).any()) != bool(torch.isnan(r).any()):
            return float("inf")
        finite = torch.isfinite(r)
        if not finite.any():
            continue
        err = (o[finite] - r[finite]).abs().max().item()
        worst = max(worst, err / max(r[finite].abs().max().item(), 1e-30))
    return worst
