"""The kernel IR: one fused reduction kernel over a 2-D iteration space.

`x` enumerates independent rows (xnumel of them), `r` walks the reduction axis (rnumel elements).
Either may be the flattening of several tensor dims (`x_sizes`, `r_sizes`, outermost first); every
memory access is affine in those dims. Nodes are listed in topological order and refer to their
operands by index, so a graph is a plain hashable value.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum, auto


class DType(Enum):
    """Element types a kernel can touch. Compute happens in fp32 for all float types."""

    F32 = "f32"
    F16 = "f16"
    BF16 = "bf16"
    I64 = "i64"
    I32 = "i32"
    B1 = "b1"

    @property
    def itemsize(self) -> int:
        return {"f32": 4, "f16": 2, "bf16": 2, "i64": 8, "i32": 4, "b1": 1}[self.value]

    @property
    def is_float(self) -> bool:
        return self in (DType.F32, DType.F16, DType.BF16)


class Op(Enum):
    # memory
    LOAD = auto()  # attr: Access
    GATHER = auto()  # attr: Access; args: (r position,) -> one element per row
    STORE = auto()  # attr: Access; args: (value,)
    # leaves
    CONST = auto()  # attr: python scalar
    # pointwise (the elementwise ops, all but CAST and BROADCAST, have their records in elementwise.py), unary
    NEG = auto()
    EXP = auto()
    LOG = auto()
    RSQRT = auto()
    SQRT = auto()
    ABS = auto()
    NOT = auto()
    ISNAN = auto()
    TANH = auto()
    CAST = auto()  # to node.dtype
    BROADCAST = auto()  # a per-row (or scalar) value repeated along r, so that it can be reduced
    # pointwise, binary
    ADD = auto()
    SUB = auto()
    MUL = auto()
    DIV = auto()
    MAXIMUM = auto()
    MINIMUM = auto()
    EQ = auto()
    NE = auto()
    LT = auto()
    LE = auto()
    GT = auto()
    GE = auto()
    AND = auto()
    OR = auto()
    # pointwise, ternary
    WHERE = auto()  # args: (cond, a, b)
    # reductions over r: FULL operand -> ROW result
    SUM = auto()
    MAX = auto()
    MIN = auto()
    ARGMAX = auto()
    ARGMIN = auto()
    WELFORD = auto()  # -> (mean, m2); read with GETITEM
    SOFTMAX_STATS = auto()  # -> (max, sum(exp(v - max))); read with GETITEM
    GETITEM = auto()  # attr: output index of a multi-output reduction
    # a reduction over rows: ROW operand -> TOTAL result, the sum over every row of the launch
    TOTAL_SUM = auto()


REDUCE_OPS = frozenset({Op.SUM, Op.MAX, Op.MIN, Op.ARGMAX, Op.ARGMIN, Op.WELFORD, Op.SOFTMAX_STATS})
MULTI_OUTPUT_OPS = frozenset({Op.WELFORD, Op.SOFTMAX_STATS})
MEMORY_OPS = frozenset({Op.LOAD, Op.GATHER, Op.STORE})


class Rank(Enum):
    """How a value varies over the iteration space."""

    SCALAR = 0  # neither x nor r (a constant)
    ROW = 1  # one value per row: [XBLOCK, 1]
    FULL = 2  # one value per element: [XBLOCK, RBLOCK]
    TOTAL = 3  # one value for the whole kernel (a sum over rows): known once every program has added its rows'


@dataclass(frozen=True, slots=True)
class Access:
    """Element (x, r) of buffer `buffer` lives at offset + sum(x_k * x_strides[k]) + sum(r_k * r_strides[k])."""

    buffer: int  # kernel argument index (inputs first, then outputs)
    offset: int
    x_strides: tuple[int, ...]  # one per graph x dim; 0 = broadcast
    r_strides: tuple[int, ...]  # one per graph r dim; 0 = broadcast

    @property
    def uses_r(self) -> bool:
        return any(self.r_strides)

    def __str__(self) -> str:
        terms = [f"x{k}*{s}" if s != 1 else f"x{k}" for k, s in enumerate(self.x_strides) if s]
        terms += [f"r{k}*{s}" if s != 1 else f"r{k}" for k, s in enumerate(self.r_strides) if s]
        if self.offset:
            terms.insert(0, str(self.offset))
        return f"buf{self.buffer}[{' + '.join(terms) or '0'}]"


@dataclass(frozen=True, slots=True)
class Node:
    op: Op
    args: tuple[int, ...]
    dtype: DType
    rank: Rank
    attr: object = None  # Access for memory ops, scalar for CONST, index for GETITEM

    def __str__(self) -> str:
        parts = [self.op.name.lower()]
        if self.attr is not None:
            parts.append(str(self.attr))
        parts += [f"%{a}" for a in self.args]
        return f"{' '.join(parts)} : {self.dtype.value} {self.rank.name.lower()}"


@dataclass(frozen=True, slots=True)
class Buffer:
    name: str  # in0, in1, ..., out0, ...
    dtype: DType
    is_output: bool


@dataclass(frozen=True, slots=True)
class KernelGraph:
    name: str  # used to name the generated kernel: _rblock_<name>
    x_sizes: tuple[int, ...]  # outermost first; their product is xnumel
    r_sizes: tuple[int, ...]  # outermost first; their product is rnumel
    buffers: tuple[Buffer, ...]
    nodes: tuple[Node, ...]
    index_bits: int = 32  # 64 when some tensor spans >= 2**31 elements
    r_extent: int = 0  # > 0: a split's slices of a row this long; x dim 0 is the slice, valid while x0*rnumel+r < it

    @property
    def xnumel(self) -> int:
        return math.prod(self.x_sizes)

    @property
    def rnumel(self) -> int:
        return math.prod(self.r_sizes)

    @property
    def inputs(self) -> tuple[Buffer, ...]:
        return tuple(b for b in self.buffers if not b.is_output)

    @property
    def outputs(self) -> tuple[Buffer, ...]:
        return tuple(b for b in self.buffers if b.is_output)

    def users(self) -> dict[int, list[int]]:
        out: dict[int, list[int]] = {i: [] for i in range(len(self.nodes))}
        for i, n in enumerate(self.nodes):
            for a in n.args:
                out[a].append(i)
        return out

    def shape_key(self) -> KernelGraph:
        """The graph with the outermost row count erased: kernels are shared across row counts."""
        if not self.x_sizes:
            return self
        from dataclasses import replace

        return replace(self, x_sizes=(-1, *self.x_sizes[1:]))

    def __str__(self) -> str:
        bufs = ", ".join(f"buf{i}={b.name}:{b.dtype.value}" for i, b in enumerate(self.buffers))
        head = f"kernel {self.name}  x={list(self.x_sizes)} r={list(self.r_sizes)}  {bufs}"
        return "\n".join([head] + [f"  %{i} = {n}" for i, n in enumerate(self.nodes)])
