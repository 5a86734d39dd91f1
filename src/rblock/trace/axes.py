"""Which domain axis each dim of each traced value runs along.

Broadcasting, keepdim/squeeze and views relate the dims of values to one another; the reductions tie their
operands' dims to the domain. Dims of size 1 are broadcast and belong to no axis. We join related dims with a
union-find and read each dim's axis off its class. A dim no relation reaches (a parameter that only meets other
parameters) falls back to PyTorch's right-aligned broadcast against the domain.
"""

from __future__ import annotations

import torch
import torch.fx

from rblock.errors import UnsupportedOperation
from rblock.trace.capture import REDUCTIONS, getitem_index, keepdim, reduction_dims

aten = torch.ops.aten

Dim = tuple[str, int]  # (fx node name, dim index); ("", a) is domain axis a

# Views whose output dims map to input dims by matching the non-1 sizes in order.
RESHAPES = {
    aten.view.default,
    aten._unsafe_view.default,
    aten.reshape.default,
    aten.unsqueeze.default,
    aten.squeeze.dim,
    aten.squeeze.dims,
    aten.squeeze.default,
    aten.alias.default,
    aten.clone.default,
    aten.detach.default,
    aten.lift_fresh_copy.default,
}
PERMUTES = {aten.permute.default, aten.t.default, aten.transpose.int}
EXPANDS = {aten.expand.default}
VIEWS = RESHAPES | PERMUTES | EXPANDS


class _UnionFind:
    def __init__(self) -> None:
        self.parent: dict[Dim, Dim] = {}

    def find(self, a: Dim) -> Dim:
        self.parent.setdefault(a, a)
        while self.parent[a] != a:
            self.parent[a] = self.parent[self.parent[a]]
            a = self.parent[a]
        return a

    def union(self, a: Dim, b: Dim) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            # keep domain axes as representatives
            if ra[0] == "":
                self.parent[rb] = ra
            else:
                self.parent[ra] = rb


def _shape(node: object) -> tuple[int, ...] | None:
    val = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
    return tuple(val.shape) if isinstance(val, torch.Tensor) else None


def assign_axes(
    fn_name: str, gm: torch.fx.GraphModule, domain: tuple[int, ...], totals: frozenset[str] = frozenset()
) -> dict[str, tuple[int | None, ...] | str]:
    """For every tensor-valued node: the domain axis of each of its dims (None for broadcast dims). `totals` (sums
    over every row) relate no dims: their operands' dims are placed by what made them."""
    uf = _UnionFind()

    def link(a: torch.fx.Node, i: int, b: torch.fx.Node | None, j: int) -> None:
        sa = _shape(a)
        if sa is None or sa[i] == 1:
            return
        if b is None:  # b is the domain itself
            uf.union(("", j), (a.name, i))
        elif _shape(b) is not None and _shape(b)[j] != 1:
            uf.union((a.name, i), (b.name, j))

    def link_right_aligned(a: torch.fx.Node, b: torch.fx.Node) -> None:
        sa, sb = _shape(a), _shape(b)
        for k in range(1, min(len(sa), len(sb)) + 1):
            link(a, len(sa) - k, b, len(sb) - k)

    def link_by_sizes(src: torch.fx.Node, dst: torch.fx.Node) -> bool:
        s, d = _shape(src), _shape(dst)
        si = [i for i, n in enumerate(s) if n != 1]
        di = [i for i, n in enumerate(d) if n != 1]
        if [s[i] for i in si] != [d[i] for i in di][: len(si)] or len(si) != len(di):
            return False
        for i, j in zip(si, di):
            link(src, i, dst, j)
        return True

    for node in gm.graph.nodes:
        if node.op != "call_function" or (_shape(node) is None and node.target not in REDUCTIONS):
            continue
        if node.name in totals:
            continue
        args = [a for a in node.args if _shape(a) is not None]
        target = node.target
        k = getitem_index(node)
        if k is not None:
            _link_multi_output(node, k, link, link_right_aligned)
        elif target in REDUCTIONS:
            src = node.args[0]
            rd = reduction_dims(node)
            for i in range(len(domain)):
                link(src, i, None, i)
            if target in (aten._softmax.default, aten._log_softmax.default):
                for i in range(len(domain)):
                    link(node, i, src, i)
            elif target not in (aten.max.dim, aten.min.dim, aten.var_mean.correction, aten.native_layer_norm.default):
                _link_reduced(node, src, rd, keepdim(node), link)
            if target == aten.native_layer_norm.default:
                for p in node.args[2:4]:
                    if _shape(p) is not None:
                        link_right_aligned(p, src)
        elif target in PERMUTES:
            perm = _permutation(node)
            for i, p in enumerate(perm):
                link(node, i, node.args[0], p)
        elif target in EXPANDS:
            link_right_aligned(node.args[0], node)
        elif target in RESHAPES:
            if not link_by_sizes(node.args[0], node) and not _is_source(node.args[0]):
                raise UnsupportedOperation(fn_name, f"{target} reshapes an intermediate value across dims")
        elif target == aten.gather.default:
            src, dim, index = node.args[0], node.args[1] % len(_shape(node)), node.args[2]
            for i in range(len(_shape(node))):
                link(node, i, index, i)
                if i != dim:
                    link(node, i, src, i)
        else:  # pointwise: operands broadcast right-aligned against the result
            for a in args:
                link_right_aligned(a, node)

    # A value whose dims cannot be placed gets the reason instead; it is an error only if the value is loaded
    # or stored (an input reshaped before use never is).
    axes: dict[str, tuple[int | None, ...] | str] = {}
    for node in gm.graph.nodes:
        shape = _shape(node)
        if shape is None:
            continue
        dims: list[int | None] = []
        for i, n in enumerate(shape):
            root = uf.find((node.name, i))
            j = len(domain) - len(shape) + i
            if n == 1:
                dims.append(None)
            elif root[0] == "":
                dims.append(root[1])
            elif j >= 0 and domain[j] == n:  # unreached: PyTorch's own rule, right-aligned against the domain
                dims.append(j)
            else:
                dims = (
                    f"cannot place dim {i} (size {n}) of {node.name} {list(shape)} on the reduced shape {list(domain)}"
                )
                break
        axes[node.name] = dims if isinstance(dims, str) else tuple(dims)
    return axes


def _is_source(node: object) -> bool:
    """A placeholder or a chain of views of one: loaded straight from memory with its own strides."""
    while isinstance(node, torch.fx.Node) and node.op == "call_function" and node.target in VIEWS:
        if node.target in (aten.clone.default, aten.lift_fresh_copy.default):
            return False
        node = node.args[0]
    return isinstance(node, torch.fx.Node) and node.op == "placeholder"


def _permutation(node: torch.fx.Node) -> list[int]:
    n = len(_shape(node))
    if node.target == aten.permute.default:
        return [p % n for p in node.args[1]]
    if node.target == aten.t.default:
        return list(range(n))[::-1]
    a, b = node.args[1] % n, node.args[2] % n
    perm = list(range(n))
    perm[a], perm[b] = perm[b], perm[a]
    return perm


def _link_reduced(node, src, rd, keep, link) -> None:
    out_i = 0
    for i in range(len(_shape(src))):
        if i in rd:
            out_i += 1 if keep else 0
            continue
        link(node, out_i, src, i)
        out_i += 1


def _link_multi_output(node, k, link, link_right_aligned) -> None:
    producer = node.args[0]
    src = producer.args[0]
    rd = reduction_dims(producer) if producer.target in REDUCTIONS else ()
    if producer.target == aten.native_layer_norm.default:
        if k == 0:
            for i in range(len(_shape(src))):
                link(node, i, src, i)
        else:
            _link_reduced(node, src, rd, True, link)
    elif producer.target in (aten.max.dim, aten.min.dim, aten.var_mean.correction):
        _link_reduced(node, src, rd, keepdim(producer), link)
