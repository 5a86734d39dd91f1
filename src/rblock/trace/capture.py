"""Capture: a torch function and example inputs -> an aten fx graph on fake tensors, plus its reduction domain."""

from __future__ import annotations

import operator
from dataclasses import dataclass

import torch
import torch.fx
from torch.fx.experimental.proxy_tensor import make_fx
from torch.utils import _pytree as pytree

from rblock.errors import UnsupportedOperation

aten = torch.ops.aten

# aten reductions rblock lowers: op -> (index of its dims argument, or -1 for "every dim"; index of its keepdim
# argument, or None when it has none or takes it as a keyword). A missing or empty dims argument means every dim.
REDUCTIONS: dict[object, tuple[int, int | None]] = {
    aten.sum.dim_IntList: (1, 2),
    aten.sum.default: (-1, None),
    aten.mean.dim: (1, 2),
    aten.mean.default: (-1, None),
    aten.amax.default: (1, 2),
    aten.amin.default: (1, 2),
    aten.max.dim: (1, 2),
    aten.min.dim: (1, 2),
    aten.argmax.default: (1, 2),
    aten.argmin.default: (1, 2),
    aten.var.correction: (1, None),
    aten.std.correction: (1, None),
    aten.var_mean.correction: (1, None),
    aten.logsumexp.default: (1, 2),
    aten._softmax.default: (1, None),
    aten._log_softmax.default: (1, None),
    aten.native_layer_norm.default: (1, None),
}


@dataclass(frozen=True)
class Captured:
    gm: torch.fx.GraphModule
    domain: tuple[int, ...]  # shape of the tensor the reductions walk
    rdims: tuple[int, ...]  # the reduced dims of `domain`, ascending


def capture(fn_name: str, flat_fn, tensors: list[torch.Tensor]) -> Captured:
    """Trace `flat_fn(*tensors)` (which returns a flat list of tensors) into aten ops on fake tensors."""
    try:
        gm = make_fx(flat_fn, tracing_mode="fake")(*tensors)
    except Exception as e:  # the user's function failed on fake inputs: say so with its own message
        raise UnsupportedOperation(fn_name, f"tracing failed: {type(e).__name__}: {e}") from e
    domain, rdims = _find_domain(fn_name, gm)
    return Captured(gm, domain, rdims)


def reduction_dims(node: torch.fx.Node) -> tuple[int, ...]:
    """The dims (non-negative, ascending) that a reduction node reduces over its first argument."""
    src = node.args[0].meta["val"]
    dims_idx = REDUCTIONS[node.target][0]
    if node.target == aten.native_layer_norm.default:
        n = len(node.args[1])
        return tuple(range(src.dim() - n, src.dim()))
    dims = None if dims_idx < 0 or len(node.args) <= dims_idx else node.args[dims_idx]
    if dims is None:
        dims = node.kwargs.get("dim")
    if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
        return tuple(range(src.dim()))
    if isinstance(dims, int):
        dims = [dims]
    return tuple(sorted({d % max(src.dim(), 1) for d in dims}))


def keepdim(node: torch.fx.Node) -> bool:
    idx = REDUCTIONS[node.target][1]
    if idx is not None and len(node.args) > idx:
        return bool(node.args[idx])
    return bool(node.kwargs.get("keepdim", False))


def _find_domain(fn_name: str, gm: torch.fx.GraphModule) -> tuple[tuple[int, ...], tuple[int, ...]]:
    found: set[tuple[tuple[int, ...], tuple[int, ...]]] = set()
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target in REDUCTIONS:
            shape = tuple(node.args[0].meta["val"].shape)
            found.add((shape, reduction_dims(node)))
    if len(found) > 1:
        listed = "; ".join(f"dims {list(d)} of {list(s)}" for s, d in sorted(found))
        raise UnsupportedOperation(fn_name, f"it reduces over different domains ({listed})")
    if found:
        return found.pop()
    # No reduction: a pointwise kernel over the largest output, walked along its last dim.
    outs = [n for n in gm.graph.nodes if n.op == "output"][0].args[0]
    shapes = [tuple(o.meta["val"].shape) for o in pytree.tree_leaves(outs) if isinstance(o, torch.fx.Node)]
    if not shapes:
        raise UnsupportedOperation(fn_name, "it returns no tensor")
    shape = max(shapes, key=lambda s: (len(s), s))
    return shape, ((len(shape) - 1,) if shape else ())


def getitem_index(node: torch.fx.Node) -> int | None:
    return node.args[1] if node.op == "call_function" and node.target is operator.getitem else None
