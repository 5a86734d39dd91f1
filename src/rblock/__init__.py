"""rblock: PyTorch reductions (norms, softmax, cross-entropy, sums, variances) compiled to fused Triton kernels,
with the persistent-vs-looped decision made explicit, explained and measured."""

from __future__ import annotations

__version__ = "0.1.0"

from rblock.runtime import device as _device

_device.configure()  # before any kernel is defined: no CUDA device -> Triton's interpreter

from rblock.compiler import compile  # noqa: E402
from rblock.errors import (  # noqa: E402
    CompileFailed,
    InvalidArgument,
    InvalidDtype,
    InvalidType,
    RBlockError,
    UnsupportedOperation,
)
from rblock.explain import explain  # noqa: E402
from rblock.ops import (  # noqa: E402
    amax,
    amin,
    cross_entropy,
    fused_add_rms_norm,
    layer_norm,
    log_softmax,
    logsumexp,
    mean,
    rms_norm,
    softmax,
    std,
    sum,
    var,
)
from rblock.plan import Config, Heuristics  # noqa: E402
from rblock.settings import Settings, settings  # noqa: E402

__all__ = [
    "CompileFailed",
    "Config",
    "Heuristics",
    "InvalidArgument",
    "InvalidDtype",
    "InvalidType",
    "RBlockError",
    "Settings",
    "UnsupportedOperation",
    "amax",
    "amin",
    "compile",
    "cross_entropy",
    "explain",
    "fused_add_rms_norm",
    "layer_norm",
    "log_softmax",
    "logsumexp",
    "mean",
    "rms_norm",
    "settings",
    "softmax",
    "std",
    "sum",
    "var",
]
