"""Plain reductions over one or more dims, compiled by rblock."""

from __future__ import annotations

import math

import torch

from rblock.compiler import compile
from rblock.ops import checks

_sum = compile(torch.sum, name="sum")
_mean = compile(torch.mean, name="mean")
_amax = compile(torch.amax, name="amax")
_amin = compile(torch.amin, name="amin")
_var = compile(torch.var, name="var")
_std = compile(torch.std, name="std")
_logsumexp = compile(torch.logsumexp, name="logsumexp")


def _check(op: str, x: torch.Tensor, dim, keepdim: object) -> tuple[tuple[int, ...], bool]:
    """x's dims to reduce (None: every dim, as PyTorch takes it but for logsumexp) and keepdim."""
    checks.tensor(op, "x", x)
    ds = tuple(range(x.dim())) if dim is None and op != "logsumexp" else checks.dims(op, x, dim)
    return ds, checks.flag(op, "keepdim", keepdim)


def sum(x: torch.Tensor, dim=None, keepdim: bool = False, *, dtype: torch.dtype | None = None) -> torch.Tensor:  # noqa: A001
    """Like torch.sum(x, dim, keepdim, dtype=...); dim None reduces every dim."""
    ds, keep = _check("sum", x, dim, keepdim)
    if dtype is None:
        return _sum(x, ds, keepdim=keep)
    return _sum(x, ds, keepdim=keep, dtype=checks.float_dtype("sum", "dtype", dtype))


def mean(x: torch.Tensor, dim=None, keepdim: bool = False, *, dtype: torch.dtype | None = None) -> torch.Tensor:
    """Like torch.mean(x, dim, keepdim, dtype=...); dim None reduces every dim."""
    ds, keep = _check("mean", x, dim, keepdim)
    if dtype is None:
        return _mean(x, ds, keepdim=keep)
    return _mean(x, ds, keepdim=keep, dtype=checks.float_dtype("mean", "dtype", dtype))


def amax(x: torch.Tensor, dim=None, keepdim: bool = False) -> torch.Tensor:
    """Like torch.amax(x, dim, keepdim); dim None reduces every dim."""
    ds, keep = _check("amax", x, dim, keepdim)
    checks.nonempty_dims("amax", x, ds)
    return _amax(x, ds, keepdim=keep)


def amin(x: torch.Tensor, dim=None, keepdim: bool = False) -> torch.Tensor:
    """Like torch.amin(x, dim, keepdim); dim None reduces every dim."""
    ds, keep = _check("amin", x, dim, keepdim)
    checks.nonempty_dims("amin", x, ds)
    return _amin(x, ds, keepdim=keep)


def _correction(op: str, correction: object) -> int | float:
    """Any real number, as PyTorch takes it (0.5 too; None for 1); whole ones as ints, so 1 and 1.0 share a
    kernel."""
    c = checks.real(op, "correction", 1 if correction is None else correction)
    if math.isnan(c):  # one NaN object, so such calls find their compiled kernel (a NaN equals only itself)
        return math.nan
    return int(c) if c.is_integer() else c


def var(x: torch.Tensor, dim=None, keepdim: bool = False, correction: float = 1) -> torch.Tensor:
    """Like torch.var(x, dim, correction=..., keepdim=...); dim None reduces every dim."""
    ds, keep = _check("var", x, dim, keepdim)
    return _var(x, ds, correction=_correction("var", correction), keepdim=keep)


def std(x: torch.Tensor, dim=None, keepdim: bool = False, correction: float = 1) -> torch.Tensor:
    """Like torch.std(x, dim, correction=..., keepdim=...); dim None reduces every dim."""
    ds, keep = _check("std", x, dim, keepdim)
    return _std(x, ds, correction=_correction("std", correction), keepdim=keep)


def logsumexp(x: torch.Tensor, dim, keepdim: bool = False) -> torch.Tensor:
    """Like torch.logsumexp(x, dim, keepdim)."""
    ds, keep = _check("logsumexp", x, dim, keepdim)
    return _logsumexp(x, ds, keepdim=keep)
