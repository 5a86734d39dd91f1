"""Normalizations, written as plain PyTorch and compiled by rblock."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from rblock.compiler import op_kernel
from rblock.errors import InvalidDtype
from rblock.ops import checks


def _rms_norm(x, dims, weight, eps):
    xf = x.float()
    y = xf * torch.rsqrt(xf.pow(2).mean(dims, keepdim=True) + eps)
    if weight is not None:
        y = y * weight.float()
    return y.to(x.dtype)  # x's dtype whatever the weight's, as PyTorch 2.13 (earlier versions promoted)


def _fused_add_rms_norm(x, residual, weight, eps):
    h = x + residual
    return _rms_norm(h, (-1,), weight, eps), h


_rms_norm_kernel = op_kernel(_rms_norm, "rms_norm")
_layer_norm_kernel = op_kernel(F.layer_norm, "layer_norm")
_fused_add_rms_norm_kernel = op_kernel(_fused_add_rms_norm, "fused_add_rms_norm")


def rms_norm(
    x: torch.Tensor, normalized_shape, weight: torch.Tensor | None = None, eps: float | None = None
) -> torch.Tensor:
    """Like torch.nn.functional.rms_norm."""
    checks.tensor("rms_norm", "x", x)
    shape = checks.normalized_shape("rms_norm", x, normalized_shape)
    checks.param("rms_norm", "weight", weight, shape, x)
    # like PyTorch, the default is the fp32 compute type's eps
    eps = torch.finfo(torch.float32).eps if eps is None else checks.real("rms_norm", "eps", eps)
    dims = tuple(range(x.dim() - len(shape), x.dim()))
    return _rms_norm_kernel(x, dims, weight, eps)


def layer_norm(
    x: torch.Tensor,
    normalized_shape,
    weight: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
    eps: float = 1e-5,
) -> torch.Tensor:
    """Like torch.nn.functional.layer_norm."""
    checks.tensor("layer_norm", "x", x)
    shape = checks.normalized_shape("layer_norm", x, normalized_shape)
    checks.param("layer_norm", "weight", weight, shape, x)
    checks.param("layer_norm", "bias", bias, shape, x)
    if (weight is not None and weight.dtype is not x.dtype) or (bias is not None and bias.dtype is not x.dtype):
        _mixed_affine_dtypes(x, weight, bias)
    return _layer_norm_kernel(x, list(shape), weight, bias, checks.real("layer_norm", "eps", eps))


def _mixed_affine_dtypes(x: torch.Tensor, weight: torch.Tensor | None, bias: torch.Tensor | None) -> None:
    """What torch.nn.functional.layer_norm takes besides parameters of x's dtype: float32 parameters of a 16-bit x,
    both of one dtype. It refuses the rest (a bf16 weight of an fp32 x, a weight and bias of different dtypes), where
    the fused kernel would compute anything without a word."""
    name = checks.dtype_name
    allowed = ", ".join(dict.fromkeys((name(x.dtype), "float32")))
    for arg, t in (("weight", weight), ("bias", bias)):
        if t is not None and t.dtype not in (x.dtype, torch.float32):
            why = "x's dtype, or float32 for a 16-bit x, as in torch.nn.functional.layer_norm"
            problem = f"has dtype {name(t.dtype)} and x {name(x.dtype)}; allowed: {allowed} ({why})"
            raise InvalidDtype("layer_norm", arg, problem)
    if weight is not None and bias is not None and weight.dtype is not bias.dtype:
        problem = f"has dtype {name(bias.dtype)} and weight {name(weight.dtype)}; allowed: weight's dtype"
        raise InvalidDtype("layer_norm", "bias", problem)


def fused_add_rms_norm(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6
) -> tuple[torch.Tensor, torch.Tensor]:
    """(rms_norm(x + residual) * weight, x + residual), normalizing over the last dim."""
    op = "fused_add_rms_norm"
    checks.tensor(op, "x", x)
    checks.tensor(op, "residual", residual)
    if residual.shape != x.shape or residual.dtype != x.dtype:
        raise checks.InvalidArgument(
            op, "residual", f"is {residual.dtype} {list(residual.shape)}, expected x's {x.dtype} {list(x.shape)}"
        )
    checks.same_device(op, x=x, residual=residual)
    checks.param(op, "weight", weight, (x.shape[-1],), x)
    if weight is None:
        raise checks.InvalidArgument(op, "weight", "is required")
    return _fused_add_rms_norm_kernel(x, residual, weight, checks.real(op, "eps", eps))
