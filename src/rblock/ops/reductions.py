"""Plain reductions over one or more dims, compiled by rblock."""

from __future__ import annotations

import math

import torch

from rblock.compiler import op_kernel
from rblock.errors import InvalidArgument
from rblock.ops import checks

_sum = op_kernel(torch.sum, "sum")
_mean = op_kernel(torch.mean, "mean")
_amax = op_kernel(torch.amax, "amax")
_amin = op_kernel(torch.amin, "amin")
_var = op_kernel(torch.var, "var")
_std = op_kernel(torch.std, "std")
_logsumexp = op_kernel(torch.logsumexp, "logsumexp")


def _check(op: str, x: torch.Tensor, dim, keepdim: object, every: bool = True) -> tuple[tuple[int, ...], bool]:
    """x's dims to reduce (with `every`, None for all of them, as PyTorch takes it) and keepdim."""
    checks.tensor(op, "x", x)
    return checks.dims(op, x, dim, every), checks.flag(op, "keepdim", keepdim)


def sum(  # noqa: A001
    x: torch.Tensor, dim=None, keepdim: bool = False, *, dtype: torch.dtype | None = None
) -> torch.Tensor:
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


def _correction(op: str, correction: object, unbiased: object) -> int | float:
    """Any real number, as PyTorch takes it (0.5 too; None for 1, or for `unbiased`'s 1 or 0); whole ones as ints, so
    1 and 1.0 share a kernel."""
    if unbiased is not None:
        if correction is not None:
            raise InvalidArgument(op, "unbiased", "cannot be given with correction; allowed: one of the two")
        correction = int(checks.flag(op, "unbiased", unbiased))
    c = checks.real(op, "correction", 1 if correction is None else correction)
    if math.isnan(c):  # one NaN object, so such calls find their compiled kernel (a NaN equals only itself)
        return math.nan
    return int(c) if c.is_integer() and abs(c) < 2**53 else c  # past 2**53 an int could outgrow the kernel's int64


def var(x: torch.Tensor, dim=None, *, correction=None, keepdim: bool = False, unbiased=None) -> torch.Tensor:
    """Like torch.var(x, dim, correction=..., keepdim=...); dim None reduces every dim. keepdim is a keyword, as in
    PyTorch, whose older var(x, dim, unbiased) would read a third positional argument as `unbiased`."""
    ds, keep = _check("var", x, dim, keepdim)
    return _var(x, ds, correction=_correction("var", correction, unbiased), keepdim=keep)


def std(x: torch.Tensor, dim=None, *, correction=None, keepdim: bool = False, unbiased=None) -> torch.Tensor:
    """Like torch.std(x, dim, correction=..., keepdim=...); dim None reduces every dim; keepdim a keyword (see var)."""
    ds, keep = _check("std", x, dim, keepdim)
    return _std(x, ds, correction=_correction("std", correction, unbiased), keepdim=keep)


def logsumexp(x: torch.Tensor, dim, keepdim: bool = False) -> torch.Tensor:
    """Like torch.logsumexp(x, dim, keepdim)."""
    ds, keep = _check("logsumexp", x, dim, keepdim, every=False)  # torch.logsumexp takes no None
    return _logsumexp(x, ds, keepdim=keep)
