"""A body's loads, gathers and stores of its buffers, as Triton expressions or lines. Each takes the body's `Scope`
and where emission stands: `sfx`, the current tile's name suffix; `pass_index`, the loop being emitted (looped);
`whole` and `inside` (align), the walk's body for rows whose last vectors lie inside the tensors, and a chunk inside
every row."""

from __future__ import annotations

from rblock.codegen.emit import TL_DTYPE, gather
from rblock.codegen.scope import Scope, index, ptr, walks
from rblock.ir import Access, DType, Rank


def load(
    s: Scope,
    i: int,
    acc: Access,
    dt: DType,
    *,
    sfx: str,
    whole: bool,
    pass_index: int,
    widen: bool = True,
    x: str = "x",
    row_mask: str = "mask",
    x_mask: str = "xmask",
) -> str:
    """Node i's load. `x`, `row_mask`, `x_mask`: the names of the row's x dims, full mask and row mask (another
    row's, for a prefetch)."""
    idx, has_x, has_r = index(acc, sfx, x=x)
    t = sfx
    mask = f"{row_mask}{t}" if has_x and has_r else f"rmask{t}" if has_r else x_mask if has_x else None
    policy = eviction(s, i, has_x, pass_index)
    pol = f", eviction_policy='{policy}'" if policy else ""
    if walks(s, acc):  # whole vectors, then (unless `whole`) the row's last partial vector element-wise
        p = f"{ptr(s.g, acc.buffer)} + (xalign + jindex)"
        text = f"tl.where(vmask, tl.load({p}, vmask, other=0{pol}), tl.load({p}, mask & ~vmask, other=0{pol}))"
        if whole:
            text = f"tl.load({p}, wmask, other=0{pol})"
        elif s.split_row:  # `whole` is the row's own: a branch per load
            text = f"_walk_load({p}, whole, wmask, vmask, mask, {policy or ''!r})"
        return f"_widen({text})" if widen and dt in (DType.BF16, DType.F16) else text
    args = [f"{ptr(s.g, acc.buffer)} + ({idx})"]
    if mask:
        args += [mask, "other=0"]
    text = f"tl.load({', '.join(args)}{pol})"
    return f"_widen({text})" if widen and dt in (DType.BF16, DType.F16) else text


def eviction(s: Scope, i: int, has_x: bool, pass_index: int) -> str | None:
    if not has_x:
        return "evict_last"  # parameters broadcast over rows: every program reads them
    if s.g.nodes[i].rank != Rank.FULL:
        return None
    if not s.looped:
        # a single pass that writes only per-row results streams its rows past L2: read first out, they leave
        # the lines written before the kernel (dirty, written back when evicted) in place; measured 12-16%
        # faster for var and cross_entropy, and 0-3% slower for kernels that write rows as well
        return None if s.writes_rows else "evict_first"
    later = any(i in uses for uses in s.loop_uses[pass_index + 1 :])
    return "evict_last" if later else "evict_first"


def gathered(s: Scope, acc: Access, pos: str, dt: DType) -> str:
    """A gather of `acc` at positions `pos`."""
    idx, has_x, _ = index(acc, "", with_r=False)
    return gather(ptr(s.g, acc.buffer), idx if has_x else f"{idx} + 0 * xindex", acc.r_strides[0], pos, dt)


def store(
    s: Scope, acc: Access, value: str, dt: DType, rank: Rank, *, sfx: str, inside: bool, keep: bool = False
) -> list[str]:
    """`keep`: a later loop reads the value back, so it stays in L2 before the inputs streaming past."""
    idx, has_x, has_r = index(acc, sfx)
    if rank == Rank.TOTAL:  # one value for the whole kernel
        return [f"tl.store({ptr(s.g, acc.buffer)} + {idx}, {value}.to({TL_DTYPE[dt]}))"]
    if not has_x:
        idx = f"{idx} + 0 * xindex"  # give the pointer the value's shape
    t = sfx
    if rank == Rank.FULL and not has_r:
        idx = f"{idx} + 0 * rindex{t}"
    mask = f"mask{t}" if rank == Rank.FULL else "owner" if s.split_row else "xmask"
    if dt != DType.F32 and dt != DType.B1:
        value = f"{value}.to({TL_DTYPE[dt]})"
    pol = ", eviction_policy='evict_last'" if keep else ""
    if walks(s, acc):  # whole vectors of the row, then its partial first and last vectors
        p = f"{ptr(s.g, acc.buffer)} + (xalign + jindex)"
        whole, edges = f"tl.store({p}, {value}, smask{pol})", f"tl.store({p}, {value}, mask & ~smask{pol})"
        if s.split_row:  # the row's partial vectors lie in its first and last slices
            return [whole, "if (part == 0) | (part == parts - 1):", f"    {edges}"]
        if not s.looped:
            return [whole, edges]
        if inside:  # chunks inside every row hold no partial vector
            return [whole]
        v = s.vec  # chunks within a vector of the row's ends hold its partial vectors; others need none
        return [whole, f"if (r0_offset < {v}) | (r0_offset + RBLOCK + {v} > rnumel):", f"    {edges}"]
    return [f"tl.store({ptr(s.g, acc.buffer)} + ({idx}), {value}, {mask}{pol})"]
