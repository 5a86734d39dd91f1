"""The kernel IR (nodes.py), its invariants (verify.py) and IR -> IR rewrites (passes.py)."""

from rblock.ir.nodes import (
    BINARY_OPS,
    COMPARE_OPS,
    MEMORY_OPS,
    MULTI_OUTPUT_OPS,
    POINTWISE_OPS,
    REDUCE_OPS,
    UNARY_OPS,
    Access,
    Buffer,
    DType,
    KernelGraph,
    Node,
    Op,
    Rank,
)

__all__ = [
    "BINARY_OPS",
    "COMPARE_OPS",
    "MEMORY_OPS",
    "MULTI_OUTPUT_OPS",
    "POINTWISE_OPS",
    "REDUCE_OPS",
    "UNARY_OPS",
    "Access",
    "Buffer",
    "DType",
    "KernelGraph",
    "Node",
    "Op",
    "Rank",
]
