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
    totals: frozenset[str] = frozenset()  # sums (and means) over every row of per-row values: fx node names


def capture(fn_name: str, flat_fn, tensors: list[torch.Tensor]) -> Captured:
    """Trace `flat_fn(*tensors)` (which returns a flat list of tensors) into aten ops on fake tensors."""
    try:
        gm = make_fx(flat_fn, tracing_mode="fake")(*tensors)
    except Exception as e:  # the user's function failed on fake inputs: say so with its own message
        raise UnsupportedOperation(fn_name, f"tracing failed: {type(e).__name__}: {e}") from e
    domain, rdims, totals = _find_domain(fn_name, gm)
    return Captured(gm, domain, rdims, totals)


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


TOTALS = {aten.sum.default, aten.sum.dim_IntList, aten.mean.default, aten.mean.dim}


def _find_domain(fn_name: str, gm: torch.fx.GraphModule) -> tuple[tuple[int, ...], tuple[int, ...], frozenset[str]]:
    """The shape the reductions walk and its reduced dims; and the totals: sums or means over every dim of a value
    with one element per row of that domain (a mean loss over per-row losses), computed by the same kernel."""
    found: dict[tuple[tuple[int, ...], tuple[int, ...]], list[torch.fx.Node]] = {}
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target in REDUCTIONS:
            shape = tuple(node.args[0].meta["val"].shape)
            found.setdefault((shape, reduction_dims(node)), []).append(node)
    totals: set[str] = set()
    if len(found) > 1:
        over_all = {k for k, nodes in found.items() if k[1] == tuple(range(len(k[0]))) and k[0]}
        rows = [k for k in found if k not in over_all]
        if len(rows) == 1:
            shape, rd = rows[0]
            per_row = [n for i, n in enumerate(shape) if i not in rd and n != 1]
            for k in over_all:
                if [n for n in k[0] if n != 1] == per_row and all(n.target in TOTALS for n in found[k]):
                    totals.update(n.name for n in found.pop(k))
    if len(found) > 1:
        listed = "; ".join(f"dims {list(d)} of {list(s)}" for s, d in sorted(found))
        raise UnsupportedOperation(
            fn_name,
            f"it reduces over different domains ({listed}); beyond one domain, only sums and means of per-row "
            "values over every row",
        )
    if found:
        return (*found.popitem()[0], frozenset(totals))
    # No reduction: a pointwise kernel over the largest output, walked along its last dim.
    outs = [n for n in gm.graph.nodes if n.op == "output"][0].args[0]
    shapes = [tuple(o.meta["val"].shape) for o in pytree.tree_leaves(outs) if isinstance(o, torch.fx.Node)]
    if not shapes:
        raise UnsupportedOperation(fn_name, "it returns no tensor")
    shape = max(shapes, key=lambda s: (len(s), s))
    return shape, ((len(shape) - 1,) if shape else ()), frozenset()


def getitem_index(node: torch.fx.Node) -> int | None:
    return node.args[1] if node.op == "call_function" and node.target is operator.getitem else None
