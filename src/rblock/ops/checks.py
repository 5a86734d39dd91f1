"""Argument checks shared by the ops. Each failure names the op and the argument, and says what is allowed."""

from __future__ import annotations

import numbers

import torch

from rblock.errors import FORWARD_ONLY, InvalidArgument, InvalidDtype, describe
from rblock.runtime import device

FLOATS = (torch.float32, torch.float16, torch.bfloat16)


def dtype_name(dtype: torch.dtype) -> str:
    """float32, not torch.float32."""
    return str(dtype).removeprefix("torch.")


def tensor(op: str, name: str, t: object, dtypes: tuple[torch.dtype, ...] = FLOATS, min_dim: int = 1) -> torch.Tensor:
    if not isinstance(t, torch.Tensor):
        raise InvalidArgument(op, name, f"must be a torch.Tensor, got {describe(t)}")
    if t.requires_grad and torch.is_grad_enabled():
        raise InvalidArgument(op, name, FORWARD_ONLY)
    if t.dtype not in dtypes:
        allowed = ", ".join(str(d).replace("torch.", "") for d in dtypes)
        raise InvalidDtype(op, name, f"has dtype {str(t.dtype).replace('torch.', '')}; allowed: {allowed}")
    if t.is_neg() or t.layout is not torch.strided or t.is_nested:  # ~0.1 us: a silently wrong sign is worse
        raise InvalidArgument(op, name, _not_dense(t))
    want = device.kernel_device_type()
    if not (t.is_cuda if want == "cuda" else t.is_cpu):  # flags: a device's type costs more than the rest of a check
        where = "a CUDA GPU" if want == "cuda" else "the CPU (no CUDA GPU here: Triton's interpreter)"
        raise InvalidArgument(op, name, f"is on {t.device}; rblock runs on {where}, so pass a {want} tensor")
    if t.dim() < min_dim:
        raise InvalidArgument(op, name, f"has {t.dim()} dims, expected at least {min_dim}")
    return t


def _not_dense(t: torch.Tensor) -> str:
    """Why rblock's kernels cannot read `t` as it is: they load plain strided memory, as data_ptr() and strides give
    it."""
    if t.is_neg():  # a view whose values are its memory negated: read as memory, every sign would be wrong
        return "is a negative view (the .imag of a conjugated complex tensor): pass t.resolve_neg()"
    if t.is_nested:
        return "is a nested tensor; rblock takes dense tensors of one shape"
    return f"has layout {str(t.layout).removeprefix('torch.')}; rblock takes dense (strided) tensors: pass t.to_dense()"


def real(op: str, name: str, value: object) -> float:
    """A real-number argument (eps, correction) as a float; a string, a tensor or None is refused by name, where
    float() would take "1e-5" or a one-element tensor without a word."""
    # builtins first: the ABC check costs ~0.5 us, on every call of an op
    if type(value) is not float and type(value) is not int and not isinstance(value, numbers.Real):
        raise InvalidArgument(op, name, f"must be a real number, got {describe(value)}")
    try:
        return float(value)
    except OverflowError:  # an int past float's range (~1.8e308)
        raise InvalidArgument(op, name, f"is {describe(value)}, too large for a float") from None


def flag(op: str, name: str, value: object) -> bool:
    """A bool argument; bool() would take 0, None or "no" without a word, where PyTorch raises."""
    if not isinstance(value, bool):
        raise InvalidArgument(op, name, f"must be a bool, got {describe(value)}")
    return value


def float_dtype(op: str, name: str, dtype: object) -> torch.dtype:
    """An output dtype asked for: one of the float types rblock computes in."""
    if not isinstance(dtype, torch.dtype):
        raise InvalidArgument(op, name, f"must be a torch.dtype, got {describe(dtype)}")
    if dtype not in FLOATS:
        allowed = ", ".join(str(d).replace("torch.", "") for d in FLOATS)
        raise InvalidDtype(op, name, f"is {str(dtype).replace('torch.', '')}; allowed: {allowed}")
    return dtype


def same_device(op: str, **tensors: torch.Tensor | None) -> None:
    devs = {n: t.device for n, t in tensors.items() if t is not None}
    if len(set(devs.values())) > 1:
        listed = ", ".join(f"{n} on {d}" for n, d in devs.items())
        raise InvalidArgument(op, "tensors", f"must be on one device, got {listed}")


def dims(
    op: str, x: torch.Tensor, dim: int | tuple[int, ...] | list[int] | None, every: bool = False
) -> tuple[int, ...]:
    """Normalize `dim` (an int or a sequence of ints; with `every`, None for all of x's dims) to sorted non-negative
    dims of x."""
    if every and dim is None:
        return tuple(range(x.dim()))
    seq = (dim,) if isinstance(dim, int) else tuple(dim) if isinstance(dim, (tuple, list)) else None
    if seq is None or not seq or not all(isinstance(d, int) and not isinstance(d, bool) for d in seq):
        allowed = "an int, a non-empty tuple of ints or None" if every else "an int or a non-empty tuple of ints"
        raise InvalidArgument(op, "dim", f"must be {allowed}, got {describe(dim)}")
    n = x.dim()
    for d in seq:
        if not -n <= d < n:
            raise InvalidArgument(op, "dim", f"is {d}, but x has {n} dims (allowed: {-n} to {n - 1})")
    out = tuple(sorted({d % n for d in seq}))
    if len(out) != len(seq):
        raise InvalidArgument(op, "dim", f"repeats a dim: {describe(dim)}")
    return out


def single_dim(op: str, x: torch.Tensor, dim: int) -> int:
    if not isinstance(dim, int) or isinstance(dim, bool):
        raise InvalidArgument(op, "dim", f"must be an int, got {describe(dim)}")
    return dims(op, x, dim)[0]


def normalized_shape(
    op: str, x: torch.Tensor, shape: int | tuple[int, ...] | list[int] | torch.Size
) -> tuple[int, ...]:
    ok = isinstance(shape, int) or (
        isinstance(shape, (tuple, list, torch.Size))
        and all(isinstance(s, int) and not isinstance(s, bool) for s in shape)  # (True,) is no shape, as in PyTorch
    )
    if not ok or isinstance(shape, bool):
        raise InvalidArgument(op, "normalized_shape", f"must be an int or a sequence of ints, got {describe(shape)}")
    shp = (shape,) if isinstance(shape, int) else tuple(shape)
    if not shp or len(shp) > x.dim() or tuple(x.shape[-len(shp) :]) != shp:
        raise InvalidArgument(
            op,
            "normalized_shape",
            f"is {describe(list(shp))}, but x has shape {list(x.shape)}: it must match x's last dims",
        )
    return shp


def param(op: str, name: str, t: torch.Tensor | None, shape: tuple[int, ...], x: torch.Tensor) -> None:
    if t is None:
        return
    tensor(op, name, t)
    if tuple(t.shape) != shape:
        raise InvalidArgument(op, name, f"has shape {tuple(t.shape)}, expected {shape}")
    same_device(op, x=x, **{name: t})


def nonempty_dims(op: str, x: torch.Tensor, ds: tuple[int, ...]) -> None:
    if any(x.shape[d] == 0 for d in ds):
        raise InvalidArgument(op, "dim", f"reduces over an empty dim of shape {list(x.shape)}; {op} has no identity")
