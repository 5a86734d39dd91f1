"""What the runtime needs to build and launch a generated kernel, and nothing about how it was made."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# A split_row kernel runs whole ("all"), or, for the interpreter (which runs programs one after another, so a
# barrier would wait forever), as two launches: one that stores the partial results, one that finishes the rows.
Phase = Literal["all", "partials", "finish"]


@dataclass(frozen=True, slots=True)
class KernelSpec:
    """Everything the runtime needs to build and launch a generated kernel, and nothing about how it was made."""

    name: str  # the @triton.jit function in `source`
    source: str
    pointer_dtypes: tuple[str, ...]  # element type of each pointer argument, in order; then xnumel
    XBLOCK: int
    RBLOCK: int
    num_warps: int
    num_stages: int
    parts: int = 1  # programs per row (split_row): the grid is row groups of this many programs
    loops_rows: bool = False  # programs loop over rows (split_row, prefetch): the grid is what runs at once
    waits: bool = False  # its programs wait for each other: the launch must be co-resident
    max_spins: int = 0  # polls before a waiting program gives up and raises the error flag (0: it never does)
    pdl: bool = False  # launched as a programmatic dependent of the kernel before it: it starts with a wait for it
    maxnreg: int = 0  # > 0: ptxas caps each thread's registers at this
    totals: int = 0  # sums over every row: a workspace of one share per program each, then the sync counters
