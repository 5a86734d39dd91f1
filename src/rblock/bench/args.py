"""Command-line flags of `rblock bench` and the sweep they select."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from rblock.bench import providers as prov

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
DEFAULT_NS = tuple(sorted({2**k for k in range(10, 19)} | {3000, 5120, 6144, 12288, 24576, 50257, 151936}))
DEFAULT_PROVIDERS = prov.PROVIDERS
QUICK_OPS = ("rms_norm", "softmax", "cross_entropy", "layer_norm")
QUICK_NS = (4096, 32768, 131072)
QUICK_PROVIDERS = ("rblock", "rblock_looped_only", "eager", "compile")
SMALL_BATCH = {"ops": ("rms_norm", "softmax"), "ms": (1, 8, 64), "ns": (4096, 8192), "providers": ("rblock", "compile")}


@dataclass(frozen=True)
class Sweep:
    ops: tuple[str, ...]
    ns: tuple[int, ...]
    providers: tuple[str, ...]
    dtype: str
    total: int
    small_batch: bool
    graphs: bool = False  # every point also replayed from a CUDA graph: the GPU's time without the host's


def _listed(kind: Callable[[str], object], allowed: tuple[str, ...] | None = None) -> Callable[[str], list]:
    def parse(text: str) -> list:
        try:
            values = [kind(v.strip()) for v in text.split(",") if v.strip()]
        except ValueError:
            values = []
        if not values:
            raise argparse.ArgumentTypeError(f"expected a comma-separated list, got {text!r}")
        unknown = [str(v) for v in values if allowed is not None and v not in allowed]
        if unknown:
            raise argparse.ArgumentTypeError(f"unknown {', '.join(unknown)} (choose from {', '.join(allowed or ())})")
        return values

    return parse


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="rblock bench", description="Time rblock against eager PyTorch, torch.compile and Liger on a CUDA GPU."
    )
    p.add_argument("--ops", type=_listed(str, prov.OPS), help=f"comma-separated subset of {','.join(prov.OPS)}")
    p.add_argument(
        "--ns", type=_listed(int), help="comma-separated row lengths N (default 1024..262144 and model sizes)"
    )
    p.add_argument(
        "--providers", type=_listed(str, prov.PROVIDERS), help=f"comma-separated subset of {','.join(prov.PROVIDERS)}"
    )
    p.add_argument("--dtype", choices=sorted(DTYPES), default="bf16")
    p.add_argument("--total", type=int, default=1 << 26, help="elements per input: M = total // N (default 2^26)")
    p.add_argument(
        "--quick",
        action="store_true",
        help=f"ops {','.join(QUICK_OPS)}, N in {QUICK_NS}, providers {','.join(QUICK_PROVIDERS)}",
    )
    p.add_argument(
        "--small-batch",
        action="store_true",
        help="also time M in 1,8,64 at N 4096,8192 back to back, plain and captured 20 calls to a CUDA graph",
    )
    p.add_argument(
        "--graphs",
        action="store_true",
        help="also time every provider at every point replayed from a CUDA graph (the GPU's time alone: a call "
        "whose host time outlasts the timer's L2 flush is timed with it)",
    )
    p.add_argument("--out", type=Path, default=Path("benchmarks/results"), help="output directory")
    p.add_argument("--name", default="bench", help="file name stem of the outputs")
    p.add_argument(
        "--keep-cache", action="store_true", help="use the usual rblock/Triton caches (first calls may skip tuning)"
    )
    return p


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = parser()
    args = p.parse_args(argv)
    if args.total < 1:
        p.error("--total must be positive")
    if args.ns and min(args.ns) < 1:
        p.error("--ns must be positive")
    return args


def sweep_of(args: argparse.Namespace) -> Sweep:
    """The sweep the flags ask for: explicit lists win over --quick, which wins over the defaults."""
    ops = args.ops or (QUICK_OPS if args.quick else prov.OPS)
    ns = sorted(set(args.ns or (QUICK_NS if args.quick else DEFAULT_NS)))
    providers = args.providers or (QUICK_PROVIDERS if args.quick else DEFAULT_PROVIDERS)
    return Sweep(
        tuple(dict.fromkeys(ops)),
        tuple(ns),
        tuple(dict.fromkeys(providers)),
        args.dtype,
        args.total,
        args.small_batch,
        args.graphs,
    )
