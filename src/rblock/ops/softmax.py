"""Softmax, log-softmax and cross-entropy, written as plain PyTorch and compiled by rblock."""

from __future__ import annotations

import math
import numbers

import torch

from rblock.compiler import op_kernel
from rblock.errors import InvalidArgument, describe
from rblock.ops import checks

_softmax_kernel = op_kernel(torch.softmax, "softmax")
_log_softmax_kernel = op_kernel(torch.log_softmax, "log_softmax")


def softmax(x: torch.Tensor, dim: int, dtype: torch.dtype | None = None) -> torch.Tensor:
    """Like torch.softmax."""
    checks.tensor("softmax", "x", x)
    d = checks.single_dim("softmax", x, dim)
    if dtype is None:
        return _softmax_kernel(x, d)
    return _softmax_kernel(x, d, dtype=checks.float_dtype("softmax", "dtype", dtype))


def log_softmax(x: torch.Tensor, dim: int, dtype: torch.dtype | None = None) -> torch.Tensor:
    """Like torch.log_softmax."""
    checks.tensor("log_softmax", "x", x)
    d = checks.single_dim("log_softmax", x, dim)
    if dtype is None:
        return _log_softmax_kernel(x, d)
    return _log_softmax_kernel(x, d, dtype=checks.float_dtype("log_softmax", "dtype", dtype))


def _cross_entropy_rows(logits, target, ignore_index, out_dtype, smoothing=0.0):
    """Per-row loss: logsumexp(row) - row[target]; 0 where ignored, NaN where the target is out of range or the row
    holds +inf (as PyTorch's log-softmax makes such a row, inf - inf, where lse - picked would give inf). With label
    smoothing s, (1 - s) of that plus s times the mean over classes of -log_softmax, logsumexp(row) - mean(row): one
    more sum of the row, read in the same pass. s is a constant of the trace, so without it the kernel is unchanged."""
    valid = target != ignore_index
    in_range = (target >= 0) & (target < logits.shape[1])
    t = torch.where(valid & in_range, target, 0)
    lse = torch.logsumexp(logits.float(), dim=1)
    picked = torch.gather(logits, 1, t.unsqueeze(1)).squeeze(1).float()
    nll = lse - picked
    if smoothing:
        nll = (1.0 - smoothing) * nll + smoothing * (lse - logits.float().mean(dim=1))
    loss = torch.where(valid, torch.where(in_range & (lse != math.inf), nll, math.nan), 0.0)
    return loss.to(out_dtype)


def _mean_of_valid(loss, target, ignore_index, out_dtype):
    """The mean over the rows not ignored; their count from the targets (no per-row flags to allocate and store)."""
    return (loss.sum() / (target != ignore_index).sum()).to(out_dtype)


def _sum_all(loss, out_dtype):
    return loss.sum().to(out_dtype)


_mean_kernel = op_kernel(_mean_of_valid, "cross_entropy_mean")
_sum_kernel = op_kernel(_sum_all, "cross_entropy_sum")


def _losses_like(logits: torch.Tensor) -> torch.Tensor:
    """What the rows' kernel returns for the mean and the sum: one fp32 loss per row, as the kernel after it sees."""
    return torch.empty(logits.shape[0], dtype=torch.float32, device=logits.device)


# The reductions' kernels are prepared on the rows' first call, so the two kernels' candidates compile together.
_rows_kernel = op_kernel(_cross_entropy_rows, "cross_entropy")
_rows_then_mean = op_kernel(
    _cross_entropy_rows,
    name="cross_entropy",
    ahead=lambda logits, target, ignore_index, *_: _mean_kernel.prepare(
        _losses_like(logits), target, ignore_index, logits.dtype
    ),
)
_rows_then_sum = op_kernel(
    _cross_entropy_rows,
    name="cross_entropy",
    ahead=lambda logits, target, ignore_index, *_: _sum_kernel.prepare(_losses_like(logits), logits.dtype),
)


def _smoothing(op: str, value: object) -> float:
    """A label smoothing in [0, 1]; the default 0.0 without a check (every call pays for it)."""
    if type(value) is float and value == 0.0:
        return 0.0
    s = checks.real(op, "label_smoothing", value)
    if not 0.0 <= s <= 1.0:
        raise InvalidArgument(op, "label_smoothing", f"is {describe(value)}; allowed: 0.0 to 1.0")
    return s


def cross_entropy(
    logits: torch.Tensor,
    target: torch.Tensor,
    ignore_index: int = -100,
    reduction: str = "mean",
    *,
    weight: torch.Tensor | None = None,
    label_smoothing: float = 0.0,
) -> torch.Tensor:
    """Like torch.nn.functional.cross_entropy for (M, C) logits and (M,) class indices, without class weights.

    A target outside [0, C) that is not ignore_index gives NaN (PyTorch raises; checking would cost a sync). Each
    label_smoothing value is a constant of its own kernel, compiled and tuned on its first call, as eps is for the
    norms."""
    op = "cross_entropy"
    if weight is not None:
        raise InvalidArgument(op, "weight", "(class weights) is not supported; allowed: None")
    checks.tensor(op, "logits", logits, min_dim=2)
    if logits.dim() != 2:
        raise InvalidArgument(op, "logits", f"has shape {list(logits.shape)}; rblock takes (batch, classes) logits")
    checks.tensor(op, "target", target, dtypes=(torch.int64, torch.int32))
    if target.shape != logits.shape[:1]:
        raise InvalidArgument(op, "target", f"has shape {list(target.shape)}, expected [{logits.shape[0]}]")
    checks.same_device(op, logits=logits, target=target)
    if reduction not in ("mean", "sum", "none"):
        raise InvalidArgument(op, "reduction", f"is {describe(reduction)}; allowed: 'mean', 'sum', 'none'")
    if logits.shape[1] == 0:
        raise InvalidArgument(op, "logits", "has no classes")
    # an int or a NumPy int; never a float truncated, a bool, or a tensor (whose value would cost a sync)
    if type(ignore_index) is not int:  # the usual call skips the ABC check (~0.4 us)
        if isinstance(ignore_index, (bool, torch.Tensor)) or not isinstance(ignore_index, numbers.Integral):
            hint = " (class weights go by the keyword weight=)" if isinstance(ignore_index, torch.Tensor) else ""
            raise InvalidArgument(op, "ignore_index", f"must be an int, got {describe(ignore_index)}{hint}")
        ignore_index = int(ignore_index)
    if not -(2**63) <= ignore_index < 2**63:  # compared with int64 targets in the kernel
        raise InvalidArgument(op, "ignore_index", f"is {describe(ignore_index)}; allowed: -2^63 to 2^63-1 (int64)")
    smoothing = _smoothing(op, label_smoothing)
    smooth = (smoothing,) if smoothing else ()  # without it, the plain kernel under its usual key
    if reduction == "none":
        return _rows_kernel(logits, target, ignore_index, logits.dtype, *smooth)
    if reduction == "sum":
        return _sum_kernel(_rows_then_sum(logits, target, ignore_index, torch.float32, *smooth), logits.dtype)
    loss = _rows_then_mean(logits, target, ignore_index, torch.float32, *smooth)
    return _mean_kernel(loss, target, ignore_index, logits.dtype)
