"""The kernel IR (nodes.py), its elementwise ops (elementwise.py), its invariants (verify.py) and IR -> IR rewrites
(passes.py)."""

from rblock.ir.elementwise import ELEMENTWISE, POINTWISE_OPS, Elementwise
from rblock.ir.nodes import (
    MEMORY_OPS,
    MULTI_OUTPUT_OPS,
    REDUCE_OPS,
    Access,
    Buffer,
    DType,
    KernelGraph,
    Node,
    Op,
    Rank,
)

__all__ = [
    "ELEMENTWISE",
    "MEMORY_OPS",
    "MULTI_OUTPUT_OPS",
    "POINTWISE_OPS",
    "REDUCE_OPS",
    "Access",
    "Buffer",
    "DType",
    "Elementwise",
    "KernelGraph",
    "Node",
    "Op",
    "Rank",
]
