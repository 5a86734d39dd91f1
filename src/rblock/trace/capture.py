"""Capture: a torch function and example inputs -> an aten fx graph on fake tensors, plus its reduction domain."""

from __future__ import annotations

import operator
import threading
from dataclasses import dataclass

import torch
import torch.fx
from torch.func import functionalize
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
    mutated: tuple[int, ...] = ()  # inputs updated in place: their new values are the last outputs, in this order


# what make_fx says when the function reaches a tensor that is not one of its inputs
_NOT_AN_INPUT = "Please convert all Tensors to FakeTensors"


def capture(fn_name: str, flat_fn, tensors: list[torch.Tensor]) -> Captured:
    """Trace `flat_fn(*tensors)` (which returns a flat list of tensors) into aten ops on fake tensors. A function
    that updates tensors in place is traced again functionalized: its inputs' new values become extra outputs."""
    gm = _trace(fn_name, flat_fn, tensors)
    mutated: tuple[int, ...] = ()
    if any(_writes_input(n) for n in gm.graph.nodes):
        gm = _trace(fn_name, functionalize(flat_fn, remove="mutations"), tensors)
        mutated = _writebacks_as_outputs(fn_name, gm)
    domain, rdims, totals = _find_domain(fn_name, gm)
    return Captured(gm, domain, rdims, totals, mutated)


# make_fx patches torch.fx globals while it traces: two traces at once on two threads break each other
_TRACING = threading.Lock()


def _trace(fn_name: str, flat_fn, tensors: list[torch.Tensor]) -> torch.fx.GraphModule:
    try:
        with _TRACING:
            return make_fx(flat_fn, tracing_mode="fake")(*tensors)
    except Exception as e:  # the user's function failed on fake inputs: say so with its own message
        if _NOT_AN_INPUT in str(e):
            raise UnsupportedOperation(
                fn_name,
                "it uses a tensor that is neither an argument nor a variable it reads by name (an attribute, or an "
                "item of a list or dict, say); pass that tensor as an argument",
            ) from e
        raise UnsupportedOperation(fn_name, f"tracing failed: {type(e).__name__}: {e}") from e


def _writes_input(node: torch.fx.Node) -> bool:
    """Whether `node` writes into an input (or a view of one): what eager PyTorch would leave changed. Writes into
    values made inside the function need nothing more: the graph's later uses read the written node."""
    schema = getattr(node.target, "_schema", None) if node.op == "call_function" else None
    if schema is None or not schema.is_mutable:
        return False
    for i, arg in enumerate(schema.arguments):
        if arg.alias_info is not None and arg.alias_info.is_write:
            value = node.args[i] if i < len(node.args) else node.kwargs.get(arg.name)
            if isinstance(value, torch.fx.Node) and _base(value).op == "placeholder":
                return True
    return False


def _base(node: torch.fx.Node) -> torch.fx.Node:
    """The tensor whose memory `node` is (through views and in-place ops, whose results alias an argument)."""
    while node.op == "call_function":
        schema = getattr(node.target, "_schema", None)
        if schema is None or not schema.returns or schema.returns[0].alias_info is None:
            break
        node = node.args[0]
    return node


def _writebacks_as_outputs(fn_name: str, gm: torch.fx.GraphModule) -> tuple[int, ...]:
    """Turn a functionalized graph's closing `copy_(input, new value)` nodes into outputs appended to its list:
    the inputs they update, in order. The kernel computes the new values; the caller copies them back."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    out = next(n for n in gm.graph.nodes if n.op == "output")
    mutated, values = [], []
    for node in list(gm.graph.nodes):
        if node.op == "call_function" and node.target is aten.copy_.default and node.args[0] in placeholders:
            mutated.append(placeholders.index(node.args[0]))
            values.append(node.args[1])
            gm.graph.erase_node(node)
        elif _writes_input(node):
            raise UnsupportedOperation(fn_name, f"it updates an input in place with {node.target}")
    out.args = ([*out.args[0], *values],)
    gm.recompile()
    return tuple(mutated)


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
