"""Lowering: the captured aten graph -> a KernelGraph, one aten op at a time."""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass

import torch
import torch.fx

from rblock.errors import UnsupportedOperation, describe
from rblock.ir import ELEMENTWISE, Access, Buffer, DType, Elementwise, KernelGraph, Node, Op, Rank
from rblock.ir.nodes import MULTI_OUTPUT_OPS, REDUCE_OPS
from rblock.trace.axes import VIEWS, _is_source
from rblock.trace.capture import Captured, reduction_dims
from rblock.trace.compose import COMPOSED

aten = torch.ops.aten

# a tensor whose elements span this many positions or more is indexed in 64 bits (int32 offsets would overflow)
WIDE_INDEX_SPAN = 2**31

DTYPES = {
    torch.float32: DType.F32,
    torch.float16: DType.F16,
    torch.bfloat16: DType.BF16,
    torch.int64: DType.I64,
    torch.int32: DType.I32,
    torch.bool: DType.B1,
}

# the aten ops of the elementwise records: one overload ("neg.default"), or every overload of an op ("add")
_ONE_OVERLOAD = {
    getattr(getattr(aten, name.partition(".")[0]), name.partition(".")[2]): e
    for e in ELEMENTWISE.values()
    for name in e.aten
    if "." in name
}
_EVERY_OVERLOAD = {name: e for e in ELEMENTWISE.values() for name in e.aten if "." not in name}
_CASTS = {aten._to_copy.default, aten.to.dtype, torch.ops.prims.convert_element_type.default}
_IDENTITY = {aten.clone.default, aten.alias.default, aten.detach.default, aten.contiguous.default}


@dataclass(frozen=True)
class Lowered:
    graph: KernelGraph
    input_order: tuple[int, ...]  # for each input buffer, the index of the traced tensor it reads
    outputs: tuple[tuple[tuple[int, ...], tuple[int, ...], torch.dtype], ...]  # shape, stride, dtype per output
    mutated: tuple[int, ...] = ()  # traced tensors updated in place, whose new values are the last outputs
    traced: int = 0  # how many tensors were traced (those no load reads have no buffer)


def lower(fn_name: str, cap: Captured, axes: dict[str, tuple[int | None, ...]]) -> Lowered:
    return _Lowering(fn_name, cap, axes).run()


def _dtype(fn_name: str, t: torch.dtype) -> DType:
    if t not in DTYPES:
        raise UnsupportedOperation(fn_name, f"dtype {t} is not supported (use float32, float16 or bfloat16)")
    return DTYPES[t]


def _name(target: object) -> str:
    return target.overloadpacket.__name__ if hasattr(target, "overloadpacket") else str(target)


def _elementwise(target: object) -> Elementwise | None:
    """The elementwise op an aten op lowers to, if it is one."""
    return _ONE_OVERLOAD.get(target) or _EVERY_OVERLOAD.get(_name(target))


class _Lowering:
    def __init__(self, fn_name: str, cap: Captured, axes: dict[str, tuple[int | None, ...]]) -> None:
        self.fn, self.cap, self.axes = fn_name, cap, axes
        rd = set(cap.rdims)
        self.x_axes = [a for a in range(len(cap.domain)) if a not in rd]
        self.r_axes = sorted(rd)
        self.nodes: list[Node] = []
        self.cse: dict[Node, int] = {}
        self.buffers: list[Buffer] = []
        self.placeholders = [n for n in cap.gm.graph.nodes if n.op == "placeholder"]
        self.buffer_of: dict[str, int] = {}
        self.input_order: list[int] = []
        self.loads: dict[str, int] = {}
        self.spans: list[int] = []

    # ---- building blocks -------------------------------------------------------------------------------
    def add(self, op: Op, args: tuple[int, ...], dtype: DType, attr: object = None, rank: Rank | None = None) -> int:
        if op in REDUCE_OPS or op == Op.GETITEM:
            rank = Rank.ROW
        elif rank is None:
            rank = Rank(max((self.nodes[a].rank.value for a in args), default=0))
        ranks = {self.nodes[a].rank for a in args}
        if Rank.TOTAL in ranks and (ranks - {Rank.TOTAL, Rank.SCALAR} or op in REDUCE_OPS or op == Op.GATHER):
            raise UnsupportedOperation(
                self.fn, "it uses a sum over every row in a per-row or per-element value (a second pass over rows)"
            )
        node = Node(op, tuple(args), dtype, rank, attr)
        if node in self.cse and op not in (Op.STORE,):
            return self.cse[node]
        self.nodes.append(node)
        self.cse[node] = len(self.nodes) - 1
        return len(self.nodes) - 1

    def const(self, value: float | int | bool) -> int:
        dt = DType.B1 if isinstance(value, bool) else DType.I64 if isinstance(value, int) else DType.F32
        return self.add(Op.CONST, (), dt, value, Rank.SCALAR)

    def _fold_cast(self, v: int, dt: DType) -> int:
        """A cast of a constant is a constant of the new type."""
        value = self.nodes[v].attr
        value = bool(value) if dt == DType.B1 else float(value) if dt.is_float else int(value)
        return self.add(Op.CONST, (), dt, value, Rank.SCALAR)

    def f32(self, v: int) -> int:
        return v if self.nodes[v].dtype == DType.F32 else self.add(Op.CAST, (v,), DType.F32)

    def cast(self, v: int, dt: DType) -> int:
        if self.nodes[v].dtype == dt:
            return v
        return self._fold_cast(v, dt) if self.nodes[v].op == Op.CONST else self.add(Op.CAST, (v,), dt)

    def access(self, node: torch.fx.Node, buffer: int, base_offset: int) -> Access:
        val = node.meta["val"]
        stride_of: dict[int, int] = {}
        axes = self.axes[node.name]
        if isinstance(axes, str):  # this value's dims could not be placed on the domain
            raise UnsupportedOperation(self.fn, axes)
        for size, stride, axis in zip(val.shape, val.stride(), axes):
            if axis is not None and size != 1:
                if axis in stride_of:
                    raise UnsupportedOperation(self.fn, f"{node.name} runs along domain dim {axis} twice")
                stride_of[axis] = stride
        self.spans.append(val.storage_offset() + sum((s - 1) * st for s, st in zip(val.shape, val.stride())) + 1)
        return Access(
            buffer,
            val.storage_offset() - base_offset,
            tuple(stride_of.get(a, 0) for a in self.x_axes),
            tuple(stride_of.get(a, 0) for a in self.r_axes),
        )

    def source_buffer(self, node: torch.fx.Node) -> tuple[int, int]:
        """The input buffer a view chain reads, and the storage offset of its placeholder."""
        base = node
        while base.op != "placeholder":
            base = base.args[0]
        if base.name not in self.buffer_of:
            self.buffer_of[base.name] = len(self.buffers)
            self.buffers.append(Buffer(f"in{len(self.input_order)}", _dtype(self.fn, base.meta["val"].dtype), False))
            self.input_order.append(self.placeholders.index(base))
        return self.buffer_of[base.name], base.meta["val"].storage_offset()

    def value(self, arg: object) -> int:
        """An operand as an IR node: constants become CONST, sources are loaded (once)."""
        if isinstance(arg, (bool, int, float)):
            return self.const(arg)
        if not isinstance(arg, torch.fx.Node):
            raise UnsupportedOperation(self.fn, f"operand {describe(arg)} is not a tensor or a number")
        v = self.env[arg.name]
        if isinstance(v, int):
            return v
        if v == "source":
            if arg.name not in self.loads:
                buf, base = self.source_buffer(arg)
                acc = self.access(arg, buf, base)
                dt = _dtype(self.fn, arg.meta["val"].dtype)
                self.loads[arg.name] = self.add(Op.LOAD, (), dt, acc, Rank.FULL if acc.uses_r else Rank.ROW)
            return self.loads[arg.name]
        raise UnsupportedOperation(self.fn, f"{arg.name} is a tuple, not a tensor")

    # ---- the walk --------------------------------------------------------------------------------------
    def supported(self, node: torch.fx.Node) -> bool:
        t = node.target
        if t is operator.getitem or t in VIEWS or t in _IDENTITY or t in _CASTS or _elementwise(t):
            return True
        return _name(t) in COMPOSED or hasattr(self, f"lower_{_name(t)}")

    def run(self) -> Lowered:
        for node in self.cap.gm.graph.nodes:  # name the first unsupported op before anything else can fail
            if node.op == "call_function" and not self.supported(node):
                raise UnsupportedOperation(self.fn, f"aten op {node.target} is not supported")
        self.env: dict[str, object] = {}
        out_node = None
        for node in self.cap.gm.graph.nodes:
            if node.op == "placeholder":
                self.env[node.name] = "source"
            elif node.op == "output":
                out_node = node
            elif node.op == "call_function":
                self.env[node.name] = self.lower_node(node)
            else:
                raise UnsupportedOperation(self.fn, f"fx node kind {node.op}")
        outputs = self.store_outputs(out_node.args[0])
        graph = self.finish()
        return Lowered(graph, tuple(self.input_order), outputs, self.cap.mutated, len(self.placeholders))

    def lower_node(self, node: torch.fx.Node) -> object:
        t = node.target
        if t is operator.getitem:
            return self.env[node.args[0].name][node.args[1]]
        if t in VIEWS or t in _IDENTITY:
            return "source" if _is_source(node) else self.value(node.args[0])
        out_dt = node.meta["val"].dtype if isinstance(node.meta.get("val"), torch.Tensor) else None
        if t in _CASTS:
            return self.cast(self.value(node.args[0]), _dtype(self.fn, out_dt))
        e = _elementwise(t)
        if e is not None:
            args = [self.value(a) for a in node.args[: e.arity]]
            alpha = node.kwargs.get("alpha", 1)
            if alpha != 1:  # add and sub: the second operand times alpha
                args[-1] = self.add(Op.MUL, (args[-1], self.const(alpha)), self.nodes[args[-1]].dtype)
            if node.kwargs.get("rounding_mode") is not None:
                raise UnsupportedOperation(self.fn, "division with a rounding mode")
            return self.add(e.op, tuple(args), _dtype(self.fn, out_dt))
        name = _name(t)
        dt = _dtype(self.fn, out_dt) if out_dt is not None else None
        if name in COMPOSED:
            return COMPOSED[name](self, node, dt)
        handler = getattr(self, f"lower_{name}", None)
        if handler is None:
            raise UnsupportedOperation(self.fn, f"aten op {t} is not supported")
        return handler(node, dt)

    # ---- gather: one element of each row -----------------------------------------------------------------
    def lower_gather(self, node, dt):
        src, dim, index = node.args
        rank = len(src.meta["val"].shape)
        along = self.axes[src.name][dim % rank] if not isinstance(self.axes[src.name], str) else "?"
        r_size = self.cap.domain[self.r_axes[0]] if len(self.r_axes) == 1 else -1
        if (
            not _is_source(src)
            or along not in (self.r_axes[0] if self.r_axes else -1, None)
            or src.meta["val"].shape[dim % rank] != r_size
        ):
            raise UnsupportedOperation(self.fn, "gather is supported from an input tensor along the reduced dim")
        pos = self.value(index)
        if self.nodes[pos].rank == Rank.FULL:
            raise UnsupportedOperation(self.fn, "gather of more than one element per row")
        buf, base = self.source_buffer(src)
        acc = self.access(src, buf, base)
        return self.add(Op.GATHER, (pos,), dt, acc, Rank.ROW)

    # ---- reductions --------------------------------------------------------------------------------------
    def _reduce_input(self, node) -> tuple[int, int]:
        v = self.value(node.args[0])
        n = math.prod(self.cap.domain[d] for d in reduction_dims(node))
        if self.nodes[v].rank != Rank.FULL:  # constant along r (a size-1 or stride-0 dim): repeat it
            v = self.add(Op.BROADCAST, (v,), self.nodes[v].dtype, rank=Rank.FULL)
        return v, n

    def _sum(self, node, dt):
        v, _ = self._reduce_input(node)
        if node.kwargs.get("dtype") is not None:  # torch.sum(x, dtype=d) converts x to d, then sums
            v = self.cast(v, dt)
        acc = DType.I64 if not self.nodes[v].dtype.is_float else DType.F32
        return self.add(Op.SUM, (v,), acc), dt

    def _total(self, node) -> int:
        """A sum over every row of a per-row value (`Captured.totals`)."""
        v = self.value(node.args[0])
        if self.nodes[v].rank != Rank.ROW:
            raise UnsupportedOperation(self.fn, f"{node.name} sums over rows a value that is not one per row")
        acc = DType.I64 if not self.nodes[v].dtype.is_float else DType.F32
        return self.add(Op.TOTAL_SUM, (v,), acc, rank=Rank.TOTAL)

    def lower_sum(self, node, dt):
        if node.name in self.cap.totals:
            return self.cast(self._total(node), dt)
        s, dt = self._sum(node, dt)
        return self.cast(s, dt)

    def lower_mean(self, node, dt):
        if node.name in self.cap.totals:
            rows = math.prod(self.cap.domain[a] for a in self.x_axes)
            return self.cast(self.add(Op.DIV, (self._total(node), self.const(float(rows))), DType.F32), dt)
        s, dt = self._sum(node, dt)
        _, n = self._reduce_input(node)
        return self.cast(self.add(Op.DIV, (s, self.const(float(n))), DType.F32), dt)

    def lower_amax(self, node, dt):
        return self.add(Op.MAX, (self._reduce_input(node)[0],), dt)

    def lower_amin(self, node, dt):
        return self.add(Op.MIN, (self._reduce_input(node)[0],), dt)

    def lower_argmax(self, node, dt):
        return self.add(Op.ARGMAX, (self._reduce_input(node)[0],), DType.I64)

    def lower_argmin(self, node, dt):
        return self.add(Op.ARGMIN, (self._reduce_input(node)[0],), DType.I64)

    def lower_max(self, node, dt):
        v, _ = self._reduce_input(node)
        return (self.add(Op.MAX, (v,), self.nodes[v].dtype), self.add(Op.ARGMAX, (v,), DType.I64))

    def lower_min(self, node, dt):
        v, _ = self._reduce_input(node)
        return (self.add(Op.MIN, (v,), self.nodes[v].dtype), self.add(Op.ARGMIN, (v,), DType.I64))

    def _welford(self, node) -> tuple[int, int, int]:
        v, n = self._reduce_input(node)
        w = self.add(Op.WELFORD, (self.f32(v),), DType.F32)
        return self.add(Op.GETITEM, (w,), DType.F32, 0), self.add(Op.GETITEM, (w,), DType.F32, 1), n

    def _variance(self, node) -> tuple[int, int]:
        mean, m2, n = self._welford(node)
        corr = node.kwargs.get("correction", 1)
        corr = 1 if corr is None else corr
        # max(0, ...): a NaN correction divides by 0, as PyTorch's does (max(nan, 0) would keep the NaN)
        return self.add(Op.DIV, (m2, self.const(float(max(0, n - corr)))), DType.F32), mean

    def lower_var(self, node, dt):
        return self.cast(self._variance(node)[0], dt)

    def lower_std(self, node, dt):
        return self.cast(self.add(Op.SQRT, (self._variance(node)[0],), DType.F32), dt)

    def lower_var_mean(self, node, dt):
        var, mean = self._variance(node)
        out_dt = _dtype(self.fn, node.meta["val"][0].dtype)
        return (self.cast(var, out_dt), self.cast(mean, out_dt))

    def _softmax_stats(self, node) -> tuple[int, int, int]:
        v, _ = self._reduce_input(node)
        v = self.f32(v)
        st = self.add(Op.SOFTMAX_STATS, (v,), DType.F32)
        return v, self.add(Op.GETITEM, (st,), DType.F32, 0), self.add(Op.GETITEM, (st,), DType.F32, 1)

    def lower_logsumexp(self, node, dt):
        _, m, s = self._softmax_stats(node)
        lse = self.add(Op.ADD, (self.add(Op.LOG, (s,), DType.F32), m), DType.F32)
        inf = self.add(Op.EQ, (m, self.const(math.inf)), DType.B1)
        return self.cast(self.add(Op.WHERE, (inf, m, lse), DType.F32), dt)

    def lower__softmax(self, node, dt):
        v, m, s = self._softmax_stats(node)
        e = self.add(Op.EXP, (self.add(Op.SUB, (v, m), DType.F32),), DType.F32)
        return self.cast(self.add(Op.DIV, (e, s), DType.F32), dt)

    def lower__log_softmax(self, node, dt):
        v, m, s = self._softmax_stats(node)
        shifted = self.add(Op.SUB, (v, m), DType.F32)
        return self.cast(self.add(Op.SUB, (shifted, self.add(Op.LOG, (s,), DType.F32)), DType.F32), dt)

    def lower_native_layer_norm(self, node, dt):
        x, _, weight, bias, eps = node.args
        mean, m2, n = self._welford(node)
        var = self.add(Op.DIV, (m2, self.const(float(n))), DType.F32)
        rstd = self.add(Op.RSQRT, (self.add(Op.ADD, (var, self.const(float(eps))), DType.F32),), DType.F32)
        out = self.add(Op.MUL, (self.add(Op.SUB, (self.f32(self.value(x)), mean), DType.F32), rstd), DType.F32)
        if weight is not None:
            out = self.add(Op.MUL, (out, self.f32(self.value(weight))), DType.F32)
        if bias is not None:
            out = self.add(Op.ADD, (out, self.f32(self.value(bias))), DType.F32)
        out_dt = _dtype(self.fn, node.meta["val"][0].dtype)
        return (self.cast(out, out_dt), mean, rstd)

    # ---- outputs -----------------------------------------------------------------------------------------
    def store_outputs(self, outs) -> tuple:
        specs = []
        for leaf in outs:
            if not isinstance(leaf, torch.fx.Node) or not isinstance(leaf.meta.get("val"), torch.Tensor):
                raise UnsupportedOperation(self.fn, f"it returns {describe(leaf)}; only tensors can be returned")
            val = leaf.meta["val"]
            v = self.value(leaf)
            dt = _dtype(self.fn, val.dtype)
            buf = len(self.buffers)
            self.buffers.append(Buffer(f"out{len(specs)}", dt, True))
            acc = self.access(leaf, buf, 0)
            if self.nodes[v].rank == Rank.ROW and acc.uses_r:
                raise UnsupportedOperation(self.fn, f"output {leaf.name} broadcasts a per-row value along r")
            # a full value stored without r strides: rows of one element (r dims of size 1)
            full = acc.uses_r or self.nodes[v].rank == Rank.FULL
            rank = Rank.TOTAL if self.nodes[v].rank == Rank.TOTAL else Rank.FULL if full else Rank.ROW
            self.add(Op.STORE, (self.cast(v, dt),), dt, acc, rank)
            specs.append((tuple(val.shape), tuple(val.stride()), val.dtype))
        return tuple(specs)

    def finish(self) -> KernelGraph:
        x_sizes = tuple(self.cap.domain[a] for a in self.x_axes)
        r_sizes = tuple(self.cap.domain[a] for a in self.r_axes) or (1,)
        nodes = tuple(self.nodes)
        if not self.r_axes:  # a 0-d domain: give every access a unit r dim
            nodes = tuple(
                Node(n.op, n.args, n.dtype, n.rank, Access(n.attr.buffer, n.attr.offset, n.attr.x_strides, (0,)))
                if isinstance(n.attr, Access)
                else n
                for n in nodes
            )
        bits = 64 if max(self.spans, default=0) >= WIDE_INDEX_SPAN else 32
        assert all(n.op not in MULTI_OUTPUT_OPS or n.op in REDUCE_OPS for n in nodes)
        return KernelGraph(self.fn, x_sizes, r_sizes, tuple(self.buffers), nodes, bits)
