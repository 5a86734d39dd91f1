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
