"""Elementwise ops, one record each: the aten ops it lowers from, its Triton expression, and how it rounds in 16 bits.

The tracer lowers every aten op a record names to the record's `Op`, and codegen writes the node with the record's
template, so adding an elementwise op is an `Op` member, one record here and its test. Aten ops that lower to several
IR ops (sigmoid, silu, pow, ...) are compositions in `trace/compose.py`; they build on these records.
"""

from __future__ import annotations

import string
from dataclasses import dataclass

from rblock.ir.nodes import Op


@dataclass(frozen=True, slots=True)
class Elementwise:
    op: Op
    # the aten ops lowered to it, their operands in order: "neg.default" names that overload, "add" every overload of
    # add (add.Tensor, add.Scalar); none: only compositions make it
    aten: tuple[str, ...]
    # its Triton expression, the operands as {0}, {1}, ... (floats in fp32); it may call the helpers every kernel
    # defines (`_exp`, `_maximum`, `_minimum`: codegen/emit.py)
    triton: str
    # the expression under Triton's interpreter, where `triton` cannot run there (libdevice functions do not)
    interpreted: str | None = None
    # the expression when the result is a float and every operand an integer (true division)
    of_integers: str | None = None
    # the result is one of its operands: in a 16-bit type it needs no rounding back
    exact: bool = False

    def __post_init__(self) -> None:
        for form in (self.interpreted, self.of_integers):
            assert form is None or _arity(form) == self.arity, f"{self.op.name}: {form!r} takes other operands"

    @property
    def arity(self) -> int:
        return _arity(self.triton)

    def expression(self, operands: list[str], interpret: bool = False, of_integers: bool = False) -> str:
        """The Triton expression of this op on `operands` (names or parenthesized expressions)."""
        form = self.interpreted if interpret and self.interpreted else self.triton
        if of_integers and self.of_integers:
            form = self.of_integers
        return form.format(*operands)


def _arity(template: str) -> int:
    return 1 + max(int(field) for _, field, _, _ in string.Formatter().parse(template) if field is not None)


_RECORDS = (
    # unary
    Elementwise(Op.NEG, ("neg.default",), "-{0}", exact=True),
    Elementwise(Op.EXP, ("exp.default",), "_exp({0})"),
    Elementwise(Op.LOG, ("log.default",), "tl.log({0})"),
    Elementwise(Op.RSQRT, ("rsqrt.default",), "tl.rsqrt({0})"),
    Elementwise(Op.SQRT, ("sqrt.default",), "tl.sqrt({0})"),
    Elementwise(Op.ABS, ("abs.default",), "tl.abs({0})", exact=True),
    Elementwise(Op.NOT, ("logical_not.default", "bitwise_not.default"), "{0} == 0"),
    Elementwise(Op.ISNAN, ("isnan.default",), "{0} != {0}"),
    Elementwise(
        Op.TANH,
        ("tanh.default",),
        "tl.extra.cuda.libdevice.tanh({0})",
        # near 0 its series to x^5, else sign(x) (1 - e^-2|x|) / (1 + e^-2|x|): within 1e-6 of tanh relatively, no x
        # overflows, and -0 and NaN stay as they are
        interpreted=(
            "tl.where(tl.abs({0}) < 0.0625, "
            "{0} * (1 - {0} * {0} * (0.3333333333333333 - {0} * {0} * 0.13333333333333333)), "
            "tl.where({0} < 0, -1.0, 1.0) * ((1 - tl.exp(-2 * tl.abs({0}))) / (1 + tl.exp(-2 * tl.abs({0})))))"
        ),
    ),
    # binary; the in-place forms (add_, ...) are those of a function's own intermediate values
    Elementwise(Op.ADD, ("add", "add_"), "{0} + {1}"),
    Elementwise(Op.SUB, ("sub", "sub_"), "{0} - {1}"),
    Elementwise(Op.MUL, ("mul", "mul_"), "{0} * {1}"),
    Elementwise(Op.DIV, ("div", "div_"), "{0} / {1}", of_integers="{0}.to(tl.float32) / {1}"),
    Elementwise(Op.MAXIMUM, ("maximum",), "_maximum({0}, {1})", exact=True),
    Elementwise(Op.MINIMUM, ("minimum",), "_minimum({0}, {1})", exact=True),
    Elementwise(Op.EQ, ("eq",), "{0} == {1}"),
    Elementwise(Op.NE, ("ne",), "{0} != {1}"),
    Elementwise(Op.LT, ("lt",), "{0} < {1}"),
    Elementwise(Op.LE, ("le",), "{0} <= {1}"),
    Elementwise(Op.GT, ("gt",), "{0} > {1}"),
    Elementwise(Op.GE, ("ge",), "{0} >= {1}"),
    Elementwise(Op.AND, ("logical_and", "bitwise_and"), "{0} & {1}"),
    Elementwise(Op.OR, ("logical_or", "bitwise_or"), "{0} | {1}"),
    # ternary: (cond, a, b), lowered from where and masked_fill with their operands cast
    Elementwise(Op.WHERE, (), "tl.where({0}, {1}, {2})", exact=True),
)

ELEMENTWISE: dict[Op, Elementwise] = {e.op: e for e in _RECORDS}
assert len(ELEMENTWISE) == len(_RECORDS), "one record per op"

# every pointwise op: the elementwise ones, and the two whose code depends on their types and ranks
POINTWISE_OPS = frozenset(ELEMENTWISE) | {Op.CAST, Op.BROADCAST}
