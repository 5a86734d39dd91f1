"""The ops: each written as plain PyTorch (mirroring torch.nn.functional signatures) and compiled by rblock."""

from rblock.ops.norms import fused_add_rms_norm, layer_norm, rms_norm
from rblock.ops.reductions import amax, amin, logsumexp, mean, std, sum, var
from rblock.ops.softmax import cross_entropy, log_softmax, softmax

__all__ = [
    "amax",
    "amin",
    "cross_entropy",
    "fused_add_rms_norm",
    "layer_norm",
    "log_softmax",
    "logsumexp",
    "mean",
    "rms_norm",
    "softmax",
    "std",
    "sum",
    "var",
]
