"""The tuned knobs of one kernel: what the planner proposes, the tuner picks and the cache stores."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Literal

from rblock.errors import InvalidArgument, describe

Kind = Literal["persistent", "looped", "persistent_rblock", "split_row"]


@dataclass(frozen=True, slots=True, order=True)
class Config:
    kind: Kind  # persistent_rblock: a looped kernel's extra candidate with RBLOCK covering the row, one pass;
    # split_row: `split` co-resident programs each hold one RBLOCK slice of a row and exchange partial results
    XBLOCK: int  # rows per program
    RBLOCK: int  # row elements per tile
    num_warps: int
    num_stages: int = 1
    no_rblock_scaling: bool = False  # the tuner must not shrink RBLOCK
    split: int = 1  # > 1: slices per row reduced in parallel; looped: by a first kernel, combined by a second
    recompute: bool = False  # single-pass: hold 16-bit inputs as loaded, recompute full-size values after reductions
    tiles: int = 1  # single-pass: the row as this many tiles of RBLOCK (a row of 5 * 1024 needs no padding to 8192)
    prefetch: bool = False  # programs loop over rows, loading their next row (slice) before reducing (or waiting
    # for the partial results of) this one
    unroll: int = 1  # looped: the chunk loop unrolled this many times, so as many chunks' loads are in flight
    align: bool = False  # walk each row from the 16-byte boundary below its start, in whole vectors
    maxnreg: int = 0  # > 0: registers per thread capped at this (spilling past it), so more programs fit on an SM

    def __post_init__(self) -> None:
        # a split row may have any number of slices (the last one partly masked); a two-kernel split divides rows
        pow2 = ("XBLOCK", "RBLOCK", "num_warps", "unroll") + (() if self.kind == "split_row" else ("split",))
        for name in pow2:
            v = getattr(self, name)
            if type(v) is not int or v < 1 or v & (v - 1):
                _bad(name, f"must be a power of two, got {describe(v)}")
        for name in ("no_rblock_scaling", "recompute", "prefetch", "align"):
            if type(getattr(self, name)) is not bool:
                _bad(name, f"must be True or False, got {describe(getattr(self, name))}")
        if self.kind not in ("persistent", "looped", "persistent_rblock", "split_row"):
            kinds = "'persistent', 'looped', 'persistent_rblock' or 'split_row'"
            _bad("kind", f"must be {kinds}, got {describe(self.kind)}")
        if self.kind == "split_row" and not (type(self.split) is int and self.split >= 2 and self.XBLOCK == 1):
            got = f"split={describe(self.split)}, XBLOCK={describe(self.XBLOCK)}"
            _bad("split", f"of split_row must be >= 2 programs per row, with XBLOCK 1; got {got}")
        if self.kind == "split_row" and self.tiles > 1:
            _bad("tiles", "must be 1 for split_row")
        one_tile = self.kind == "split_row" or (self.split == 1 and self.tiles == 1 and not self.align)
        if self.prefetch and not (self.single_pass and one_tile):
            _bad("prefetch", "applies to split_row and to unsplit, unaligned single passes of one tile")
        if self.unroll > 1 and self.kind != "looped":
            _bad("unroll", "applies to looped kernels alone")
        if self.align and ((self.split > 1 and self.kind != "split_row") or self.tiles > 1 or self.prefetch):
            why = "not to splits over two kernels nor to rows loaded ahead (prefetch)"
            _bad("align", f"applies to kernels of one tile (split_row included), {why}")
        if type(self.tiles) is not int or self.tiles < 1:
            _bad("tiles", f"must be a positive int, got {describe(self.tiles)}")
        if self.tiles > 1 and not self.single_pass:
            _bad("tiles", "applies to single-pass kinds (persistent, persistent_rblock)")
        if self.recompute and not self.single_pass:
            _bad("recompute", "applies to single-pass kinds (persistent, persistent_rblock)")
        if type(self.maxnreg) is not int or not (self.maxnreg == 0 or (16 <= self.maxnreg <= 255)):
            _bad("maxnreg", f"must be 0 (no cap) or 16 to 255, got {describe(self.maxnreg)}")
        if type(self.num_stages) is not int or self.num_stages < 1:
            _bad("num_stages", f"must be a positive int, got {describe(self.num_stages)}")

    @property
    def single_pass(self) -> bool:
        """Whether the whole row is in registers (the input read once); for split_row, spread over programs."""
        return self.kind != "looped"

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @staticmethod
    def from_json(text: str) -> Config:
        return Config(**json.loads(text))

    def __str__(self) -> str:
        flags = ", no_rblock_scaling" if self.no_rblock_scaling else ""
        flags += f", split={self.split}" if self.split > 1 else ""
        flags += ", recompute" if self.recompute else ""
        flags += f", tiles={self.tiles}" if self.tiles > 1 else ""
        flags += ", prefetch" if self.prefetch else ""
        flags += f", unroll={self.unroll}" if self.unroll > 1 else ""
        flags += ", align" if self.align else ""
        flags += f", maxnreg={self.maxnreg}" if self.maxnreg else ""
        return (
            f"{self.kind}(XBLOCK={self.XBLOCK}, RBLOCK={self.RBLOCK}, "
            f"num_warps={self.num_warps}, num_stages={self.num_stages}{flags})"
        )


def _bad(name: str, problem: str) -> None:
    raise InvalidArgument("Config", name, problem)


@dataclass(frozen=True, slots=True)
class Candidate:
    config: Config
    reason: str  # why the planner proposes it, in one sentence
