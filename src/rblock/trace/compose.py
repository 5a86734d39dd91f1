"""Pointwise aten ops that lower to several IR ops, or to one with its operands rearranged: each a function of the
lowering under way (`lw`), the fx node and its result's type. Aten ops that are one elementwise IR op each come from
their records (`ir/elementwise.py`) instead."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import torch.fx

from rblock.errors import UnsupportedOperation
from rblock.ir import DType, Op

if TYPE_CHECKING:
    from rblock.trace.lower import _Lowering


def where(lw: _Lowering, node: torch.fx.Node, dt: DType) -> int:
    c, a, b = (lw.value(x) for x in node.args)
    return lw.add(Op.WHERE, (c, lw.cast(a, dt), lw.cast(b, dt)), dt)


def masked_fill(lw: _Lowering, node: torch.fx.Node, dt: DType) -> int:
    x, m, v = (lw.value(a) for a in node.args)
    return lw.add(Op.WHERE, (m, lw.cast(v, dt), x), dt)


def power(lw: _Lowering, node: torch.fx.Node, dt: DType) -> int:
    x, e = node.args
    if not isinstance(e, (int, float)) or isinstance(x, (int, float)):
        raise UnsupportedOperation(lw.fn, "pow with a tensor exponent")
    v = lw.value(x)
    if e == 0.5:
        return lw.add(Op.SQRT, (v,), dt)
    if e == -0.5:
        return lw.add(Op.RSQRT, (v,), dt)
    if float(e).is_integer() and 1 <= abs(e) <= 8:
        out = v
        for _ in range(int(abs(e)) - 1):
            out = lw.add(Op.MUL, (out, v), dt)
        return lw.add(Op.DIV, (lw.const(1.0), out), dt) if e < 0 else out
    raise UnsupportedOperation(lw.fn, f"pow with exponent {e} (integers up to 8 and +-0.5 are supported)")


def rsub(lw: _Lowering, node: torch.fx.Node, dt: DType) -> int:
    a, b = lw.value(node.args[0]), lw.value(node.args[1])
    alpha = node.kwargs.get("alpha", 1)
    if alpha != 1:
        a = lw.add(Op.MUL, (a, lw.const(alpha)), lw.nodes[a].dtype)
    return lw.add(Op.SUB, (b, a), dt)


def scalar_tensor(lw: _Lowering, node: torch.fx.Node, dt: DType) -> int:
    return lw.cast(lw.const(node.args[0]), dt)


def copy(lw: _Lowering, node: torch.fx.Node, dt: DType) -> int:  # a functionalized `dst.copy_(src)`: src as dst's type
    return lw.cast(lw.value(node.args[1]), dt)


def reciprocal(lw: _Lowering, node: torch.fx.Node, dt: DType) -> int:
    return lw.add(Op.DIV, (lw.const(1.0), lw.value(node.args[0])), dt)


def square(lw: _Lowering, node: torch.fx.Node, dt: DType) -> int:
    v = lw.value(node.args[0])
    return lw.add(Op.MUL, (v, v), dt)


def sigmoid(lw: _Lowering, node: torch.fx.Node, dt: DType) -> int:
    v = lw.f32(lw.value(node.args[0]))
    e = lw.add(Op.EXP, (lw.add(Op.NEG, (v,), DType.F32),), DType.F32)
    return lw.cast(lw.add(Op.DIV, (lw.const(1.0), lw.add(Op.ADD, (lw.const(1.0), e), DType.F32)), DType.F32), dt)


def silu(lw: _Lowering, node: torch.fx.Node, dt: DType) -> int:
    v = lw.value(node.args[0])
    return lw.cast(lw.add(Op.MUL, (lw.f32(v), sigmoid(lw, node, DType.F32)), DType.F32), dt)


def relu(lw: _Lowering, node: torch.fx.Node, dt: DType) -> int:
    return lw.add(Op.MAXIMUM, (lw.value(node.args[0]), lw.const(0.0)), dt)


def clamp_min(lw: _Lowering, node: torch.fx.Node, dt: DType) -> int:
    return lw.add(Op.MAXIMUM, (lw.value(node.args[0]), lw.value(node.args[1])), dt)


def clamp_max(lw: _Lowering, node: torch.fx.Node, dt: DType) -> int:
    return lw.add(Op.MINIMUM, (lw.value(node.args[0]), lw.value(node.args[1])), dt)


# aten op (every overload) -> its lowering
COMPOSED: dict[str, Callable[[_Lowering, torch.fx.Node, DType], int]] = {
    "where": where,
    "masked_fill": masked_fill,
    "pow": power,
    "rsub": rsub,
    "scalar_tensor": scalar_tensor,
    "copy": copy,
    "reciprocal": reciprocal,
    "square": square,
    "sigmoid": sigmoid,
    "silu": silu,
    "relu": relu,
    "clamp_min": clamp_min,
    "clamp_max": clamp_max,
}
