"""Frontend: a plain PyTorch function -> KernelGraph (capture on fake tensors, axis assignment, lowering)."""

from __future__ import annotations

import torch
from torch.utils import _pytree as pytree

from rblock.trace.axes import assign_axes
from rblock.trace.capture import capture
from rblock.trace.lower import DTYPES, Lowered, lower

__all__ = ["DTYPES", "Lowered", "trace"]


def trace(fn_name: str, fn, args: tuple, kwargs: dict) -> tuple[Lowered, pytree.TreeSpec]:
    """Trace `fn(*args, **kwargs)`; tensors are inputs, every other leaf is baked into the kernel. Inputs that `fn`
    updates in place are `Lowered.mutated`: their new values are the last outputs."""
    leaves, spec = pytree.tree_flatten((args, kwargs))
    slots = [i for i, v in enumerate(leaves) if isinstance(v, torch.Tensor)]
    out_spec: list[pytree.TreeSpec] = []

    def flat_fn(*tensors: torch.Tensor) -> list[torch.Tensor]:
        filled = list(leaves)
        for i, t in zip(slots, tensors):
            filled[i] = t
        a, k = pytree.tree_unflatten(filled, spec)
        out_leaves, ospec = pytree.tree_flatten(fn(*a, **k))
        out_spec.append(ospec)
        return out_leaves

    cap = capture(fn_name, flat_fn, [leaves[i] for i in slots])
    axes = assign_axes(fn_name, cap.gm, cap.domain, cap.totals)
    return lower(fn_name, cap, axes), out_spec[0]
