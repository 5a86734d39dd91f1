"""Expressions: one IR node -> one line of Triton, and the small jit helpers generated kernels share."""

from __future__ import annotations

import math

from rblock.ir import ELEMENTWISE, DType, KernelGraph, Node, Op, Rank

TL_DTYPE = {
    DType.F32: "tl.float32",
    DType.F16: "tl.float16",
    DType.BF16: "tl.bfloat16",
    DType.I64: "tl.int64",
    DType.I32: "tl.int32",
    DType.B1: "tl.int1",
}


def extreme(dt: DType, low: bool) -> str:
    """The identity of a max (`low`: the lowest value of `dt`) or of a min (the highest). Integers keep their own
    type: a float identity would turn them into floats and round large ones."""
    if dt.is_float:
        return 'float("-inf")' if low else 'float("inf")'
    if dt == DType.B1:
        return "0" if low else "1"
    bits = 8 * dt.itemsize
    return str(-(2 ** (bits - 1)) if low else 2 ** (bits - 1) - 1)


# Combine functions for tl.reduce. max/min propagate NaN like torch (one instruction on the GPU); arg* keep the
# first index on ties and treat NaN as the extreme value; _add2 and _add_max_min_add reduce several values at once.
HELPERS = """
@triton.jit
def _maximum(a, b):
    return tl.maximum(a, b, propagate_nan=tl.PropagateNan.ALL)


@triton.jit
def _minimum(a, b):
    return tl.minimum(a, b, propagate_nan=tl.PropagateNan.ALL)


@triton.jit
def _argmax(a, ia, b, ib):
    a_nan = a != a
    b_nan = b != b
    first = ia < ib
    pick_a = (a_nan & (~b_nan | first)) | (~a_nan & ~b_nan & ((a > b) | ((a == b) & first)))
    return tl.where(pick_a, a, b), tl.where(pick_a, ia, ib)


@triton.jit
def _argmin(a, ia, b, ib):
    a_nan = a != a
    b_nan = b != b
    first = ia < ib
    pick_a = (a_nan & (~b_nan | first)) | (~a_nan & ~b_nan & ((a < b) | ((a == b) & first)))
    return tl.where(pick_a, a, b), tl.where(pick_a, ia, ib)


@triton.jit
def _add2(a0, a1, b0, b1):
    return a0 + b0, a1 + b1


@triton.jit
def _add_max_min_add(s_a, hi_a, lo_a, t_a, s_b, hi_b, lo_b, t_b):
    return s_a + s_b, _maximum(hi_a, hi_b), _minimum(lo_a, lo_b), t_a + t_b
"""

# The helpers written in inline PTX. `_widen`, 16-bit -> fp32 for loads of rows (two instructions per pair of
# bf16, where Triton's conversion takes more), has side effects, so that the compiler neither merges it with an
# earlier conversion of the same value nor moves it above a reduction: a recompute kernel's value stays in
# registers at 16 bits.
PTX_HELPERS = """
@triton.jit
def _widen(x):
    if x.dtype == tl.bfloat16:  # two bf16 per register: each becomes the high half of an fp32
        bits = tl.inline_asm_elementwise(
            "shl.b32 $0, $2, 16;\\n and.b32 $1, $2, 0xffff0000;", "=r,=r,r", [x], dtype=tl.uint32, is_pure=False, pack=2
        )
        return bits.to(tl.float32, bitcast=True)
    return tl.inline_asm_elementwise("cvt.f32.f16 $0, $1;", "=f,h", [x], dtype=tl.float32, is_pure=False, pack=1)


@triton.jit
def _exp2(x):  # one instruction: tl.exp adds three per element to keep subnormal results, which this flushes to 0
    return tl.inline_asm_elementwise("ex2.approx.ftz.f32 $0, $1;", "=f,f", [x], dtype=tl.float32, is_pure=True, pack=1)


@triton.jit
def _exp(x):
    return _exp2(x * 1.4426950408889634)


@triton.jit
def _exp_minus(x, shift):  # e^(x - shift) with one multiply-add per element when shift is one value per row
    return _exp2(x * 1.4426950408889634 - shift * 1.4426950408889634)
"""

# Split rows walked from 16-byte boundaries: a row's loads, in whole vectors but for a row whose last vector would
# reach past the end of its tensor (the tensor's last row), which loads its last partial vector element by element.
WALK_LOAD = """
@triton.jit
def _walk_load(p, whole, wmask, vmask, mask, policy: tl.constexpr):
    if whole:
        v = tl.load(p, wmask, other=0, eviction_policy=policy)
    else:
        head = tl.load(p, vmask, other=0, eviction_policy=policy)
        v = tl.where(vmask, head, tl.load(p, mask & ~vmask, other=0, eviction_policy=policy))
    return v
"""

# split_row kernels' waits: with max_spins > 0 a wait gives up after that many polls and raises the flag at counter 0
# (the host reports it; RBLOCK_DEBUG_SYNC).
WAIT_BOUND = """
@triton.jit
def _gave_up(done, spins, sync_ptr, max_spins: tl.constexpr):
    if max_spins > 0:
        spins += 1
        if spins >= max_spins:
            if not done:
                tl.atomic_xchg(sync_ptr, 1)
            done = True
    return done, spins
"""

# split_row kernels: the programs of one row group meet here after storing their partial results. Each arrives on
# the group's counter: the leader adds 2**31 - (parts - 1), the others 1, so every round adds 2**31: the sign bit
# flips once per round and the low bits come back. No reset is needed between rows or launches.
ROW_BARRIER = """
@triton.jit
def _row_arrive(sync_ptr, group, leader, lead_add: tl.constexpr):
    tl.debug_barrier()  # every thread's partial results are stored before the program arrives
    return tl.atomic_add(sync_ptr + 1 + group, tl.where(leader, lead_add, 1), sem="release", scope="gpu")


@triton.jit
def _row_wait(sync_ptr, group, arrived, max_spins: tl.constexpr):
    counter = sync_ptr + 1 + group
    flipped = False
    spins = 0
    while not flipped:
        now = tl.atomic_add(counter, 0, sem="acquire", scope="gpu")
        flipped = (arrived ^ now) < 0
        flipped, spins = _gave_up(flipped, spins, sync_ptr, max_spins)
    tl.debug_barrier()
"""

# split_row kernels whose partial results are 32-bit: each program publishes each partial result in a 64-bit word
# of its own, the round's epoch above the value's bits, with one relaxed atomic exchange; the others poll the row's
# words until every one carries the epoch. A word is read whole, so its value comes with its epoch: no counter,
# fence or barrier between the programs. The epochs go on from launch to launch: the group's counter keeps the last
# one (its leader stores it at the end), so a word left from an earlier launch never carries a coming epoch.
ROW_WORDS = """
@triton.jit
def _word_put(ptr, value, epoch):
    bits = value.to(tl.int32, bitcast=True).to(tl.int64) & 0xFFFFFFFF
    tl.atomic_xchg(ptr + tl.zeros_like(bits), (epoch.to(tl.int64) << 32) | bits, sem="relaxed", scope="gpu")


@triton.jit
def _words_wait(ptr, mask, epoch, sync_ptr, max_spins: tl.constexpr):
    stamp = epoch.to(tl.int64) << 32  # masked lanes read as a word of this epoch
    words = tl.zeros_like(mask.to(tl.int64))  # loaded in the loop
    done = False
    spins = 0
    while not done:
        words = tl.load(ptr, mask, other=stamp, volatile=True)
        done = tl.min(((words >> 32).to(tl.int32) == epoch).to(tl.int32)) == 1
        done, spins = _gave_up(done, spins, sync_ptr, max_spins)
    return (words & 0xFFFFFFFF).to(tl.int32).to(tl.float32, bitcast=True)


@triton.jit
def _words_wait2(ptr, stride, mask, epoch, sync_ptr, max_spins: tl.constexpr):
    # two words per program, `stride` apart (a mean and M2, a max and a sum), polled together: one round trip per poll
    stamp = epoch.to(tl.int64) << 32
    first = tl.zeros_like(mask.to(tl.int64))
    second = tl.zeros_like(mask.to(tl.int64))
    done = False
    spins = 0
    while not done:
        first = tl.load(ptr, mask, other=stamp, volatile=True)
        second = tl.load(ptr + stride, mask, other=stamp, volatile=True)
        ready = ((first >> 32).to(tl.int32) == epoch) & ((second >> 32).to(tl.int32) == epoch)
        done = tl.min(ready.to(tl.int32)) == 1
        done, spins = _gave_up(done, spins, sync_ptr, max_spins)
    values = (first & 0xFFFFFFFF).to(tl.int32).to(tl.float32, bitcast=True)
    return values, (second & 0xFFFFFFFF).to(tl.int32).to(tl.float32, bitcast=True)
"""

# Kernels with sums over every row: each program stores its rows' share; the last program of each group of shares
# to arrive on the group's counter adds the group (one load of a whole group, zero-padded), stores that as a share of
# the next level, and arrives there; the last at the top adds the last group. A fixed tree: the same result on every
# run, whichever program comes last, with a few words of registers. Each last arrival resets its counter for the
# next launch (launches on one stream run one after another).
TOTALS = """
@triton.jit
def _last_to_arrive(counter_ptr, members):
    tl.debug_barrier()  # every thread's stores are made before the program arrives
    arrived = tl.atomic_add(counter_ptr, 1, sem="acq_rel", scope="gpu")
    last = arrived == members - 1
    if last:
        tl.atomic_xchg(counter_ptr, 0, sem="relaxed", scope="gpu")
    tl.debug_barrier()
    return last


@triton.jit
def _sum_of_group(share_ptr, GROUP: tl.constexpr):
    return tl.sum(tl.load(share_ptr + tl.arange(0, GROUP), cache_modifier=".cg"))  # past L1: other SMs wrote them
"""

# A kernel launched as a programmatic dependent of the one before it in the stream (Hopper on) is scheduled while that
# one's last programs still run, instead of after it has drained: it waits for that kernel's end, and for its writes,
# before anything else (a buffer it writes may be one the earlier kernel still reads), then lets the next one in.
PDL_PROLOGUE = [
    "tl.extra.cuda.gdc_wait()  # the kernel before this one has finished and its writes are visible",
    "tl.extra.cuda.gdc_launch_dependents()  # the kernel after this one may be scheduled now",
]

# Triton's interpreter runs no PTX: the same helpers in plain Triton (the conversion is exact either way).
PLAIN_HELPERS = """
@triton.jit
def _widen(x):
    return x.to(tl.float32)


@triton.jit
def _exp(x):
    return tl.exp(x)


@triton.jit
def _exp_minus(x, shift):
    return tl.exp(x - shift)
"""


def literal(value: object) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, float) and (math.isinf(value) or math.isnan(value)):
        return f'float("{value}")'
    return repr(value)


def register_type(dt: DType) -> str:
    """Values live in registers as fp32 (any float), int64/int32, or int1."""
    return "tl.float32" if dt.is_float else TL_DTYPE[dt]


def shifted_exp(node: Node, g: KernelGraph) -> tuple[int, int] | None:
    """The operands (a, b) of an exp of a - b in fp32 where b is one value per row (softmax's exp(x - max)): its
    scaling to base 2 is then one multiply-add per element (`_exp_minus`)."""
    if node.op != Op.EXP:
        return None
    sub = g.nodes[node.args[0]]
    if sub.op != Op.SUB or sub.dtype != DType.F32 or g.nodes[sub.args[1]].rank == Rank.FULL:
        return None
    return sub.args


def pointwise(node: Node, operands: list[str], g: KernelGraph, interpret: bool = False) -> str:
    """The Triton expression of a pointwise node, rounded like eager PyTorch when its type is 16-bit. `interpret`:
    for Triton's interpreter (an elementwise op's form there, where it differs)."""
    a = [f"({o})" if " " in o else o for o in operands]
    if node.op == Op.CAST:
        src = g.nodes[node.args[0]].dtype
        if node.dtype == src:
            return operands[0]
        if node.dtype == DType.B1:
            return f"{a[0]} != 0"
        if not node.dtype.is_float:
            return f"{a[0]}.to({TL_DTYPE[node.dtype]})"
        expr = operands[0] if src.is_float else f"{a[0]}.to(tl.float32)"
        if node.dtype == DType.F32:
            return expr
        return f"{a[0] if src.is_float else '(' + expr + ')'}.to({TL_DTYPE[node.dtype]}).to(tl.float32)"
    if node.op == Op.BROADCAST:
        src = g.nodes[node.args[0]]
        if src.op == Op.CONST:
            return f"tl.full([XBLOCK, RBLOCK], {operands[0]}, {register_type(node.dtype)})"
        return f"tl.broadcast_to({operands[0]}, [XBLOCK, RBLOCK])"
    if shifted_exp(node, g):
        expr = f"_exp_minus({operands[0]}, {operands[1]})"
    else:
        of_integers = node.dtype.is_float and not any(g.nodes[i].dtype.is_float for i in node.args)
        expr = ELEMENTWISE[node.op].expression(a, interpret, of_integers)
    return round16(node, expr)


def round16(node: Node, expr: str) -> str:
    """`expr` rounded to the node's type when that is 16-bit and the op's result is not one of its operands (an
    elementwise op's record says; a reduction's max or min is exact)."""
    exact = ELEMENTWISE[node.op].exact if node.op in ELEMENTWISE else node.op in (Op.MAX, Op.MIN, Op.BROADCAST)
    if node.dtype in (DType.BF16, DType.F16) and not exact:
        return f"({expr}).to({TL_DTYPE[node.dtype]}).to(tl.float32)"
    return expr


def dim_vars(prefix: str, index: str, sizes: tuple[int, ...], suffix: str = "") -> list[str]:
    """x0, x1, ... (outermost first) from the flat index."""
    out = []
    for k in range(len(sizes)):
        inner = math.prod(sizes[k + 1 :])
        expr = index if inner == 1 else f"({index} // {inner})"
        if k > 0:
            expr = f"{expr} % {sizes[k]}"
        out.append(f"{prefix}{k}{suffix} = {expr}")
    return out


def gather(ptr: str, row: str, r_stride: int, pos: str, dt: DType) -> str:
    """Element `pos` of each row starting at `ptr + row` (NaN where `pos` is outside the row)."""
    off = pos if r_stride == 1 else f"{pos} * {r_stride}"
    inside = f"xmask & ({pos} >= 0) & ({pos} < rnumel)"
    other = 'float("nan")' if dt.is_float else "0"
    text = f"tl.load({ptr} + ({row} + {off}), {inside}, other={other})"
    return f"{text}.to(tl.float32)" if dt in (DType.BF16, DType.F16) else text
