"""Every failure a user can see. Each message says what is allowed; context names the op and the argument."""

from __future__ import annotations


class RBlockError(Exception):
    """Base class of rblock's user-facing errors."""


class InvalidArgument(RBlockError, ValueError):
    """An op was called with an argument it does not accept."""

    def __init__(self, op: str, argument: str, problem: str) -> None:
        super().__init__(f"rblock.{op}: {argument} {problem}")
        self.op, self.argument = op, argument


class InvalidDtype(InvalidArgument, TypeError):
    """A tensor has a dtype the op does not support."""


class InvalidType(InvalidArgument, TypeError):
    """An argument is of a type the op does not take (a string where a bool belongs, a dict for a Config)."""


class UnsupportedOperation(RBlockError, NotImplementedError):
    """The traced function uses something rblock cannot put in one fused reduction kernel."""

    def __init__(self, fn: str, what: str) -> None:
        super().__init__(
            f"rblock.compile({fn}): {what}. rblock fuses pointwise ops around reductions over one set of dims "
            "of one shape; split the function or run this part in PyTorch."
        )


class CompileFailed(RBlockError, RuntimeError):
    """No candidate kernel could be compiled for this function."""


class SyncTimeout(RBlockError, RuntimeError):
    """Programs of a split-row kernel stopped waiting for each other (RBLOCK_DEBUG_SYNC): the launch was not
    co-resident."""


# a tensor that requires grad, under grad mode: rblock's kernels have no backward, so the result would leave the
# autograd graph without a word and every gradient through it would be missing
FORWARD_ONLY = (
    "requires grad, and rblock computes forward passes only: call it under torch.no_grad() or "
    "torch.inference_mode(), or pass a detached tensor"
)


def describe(value: object) -> str:
    """`value` as an error message shows it: never a tensor's or an array's data (which could be millions of
    numbers), but its shape and dtype; a number, a short string or a short sequence of them as written; a long one by
    its length; anything else by its type."""
    if value is None or isinstance(value, (bool, float, complex)):
        return repr(value)
    if isinstance(value, int):  # a 4,300-digit int has no str at all (sys.set_int_max_str_digits)
        return repr(value) if abs(value) < 10**18 else f"an int of {value.bit_length()} bits"
    module = type(value).__module__.partition(".")[0]
    shape, dtype = getattr(value, "shape", None), getattr(value, "dtype", None)
    if shape is not None and dtype is not None and not isinstance(shape, str):
        if module == "numpy" and shape == ():
            return repr(value)  # a NumPy number, np.int64(3)
        kind = "an array" if module == "numpy" else "a tensor"
        return f"{kind} of shape {list(shape)} and dtype {str(dtype).removeprefix('torch.')}"
    if isinstance(value, str):
        return repr(value) if len(value) <= 40 else f"{value[:30]!r}... ({len(value)} characters)"
    if isinstance(value, (tuple, list)):
        if len(value) > 8:
            return f"a {type(value).__name__} of {len(value)} items"
        items = ", ".join(describe(v) for v in value)
        return f"[{items}]" if isinstance(value, list) else f"({items}{',' if len(value) == 1 else ''})"
    if isinstance(value, type) or module in ("torch", "numpy"):
        return repr(value)  # a type, a dtype, a device
    name = type(value).__name__
    return f"{'an' if name[0] in 'aeiouAEIOU' else 'a'} {name}"
