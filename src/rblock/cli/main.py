"""rblock run | explain | bench.

Every error is one line on stderr, `rblock: ...`, and a non-zero exit: 2 for input rblock does not take (a command
line, an op's argument), 130 when interrupted, 1 for anything else, a bug (RBLOCK_DEBUG=1 adds its traceback)."""

from __future__ import annotations

import argparse
import json
import re
import sys
from typing import NoReturn

import torch

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}

# --shape's elements at most: past this the inputs, their outputs and the float64 copies the reference computes on
# (tens of bytes an element in all) outgrow a GPU's memory and most hosts'
MAX_ELEMENTS = 2**32
_SHAPE = re.compile(r"\s*([+-]?\d+)\s*[xX]\s*([+-]?\d+)\s*", re.ASCII)


class UsageError(Exception):
    """A command line the CLI does not take."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, where argparse prints its usage block and exits
        raise UsageError(f"{message}; see {self.prog} --help")


def _shape(text: str) -> tuple[int, int]:
    from rblock.errors import describe

    match = _SHAPE.fullmatch(text)
    if match is None:
        raise argparse.ArgumentTypeError(f"must be MxN, two positive integers such as 64x3000, got {describe(text)}")
    m, n = int(match[1]), int(match[2])
    if m < 1 or n < 1:
        raise argparse.ArgumentTypeError(f"must be MxN with M and N at least 1, got {text.strip()}")
    if m * n > MAX_ELEMENTS:
        raise argparse.ArgumentTypeError(
            f"{m}x{n} is {m * n:,} elements; allowed: at most {MAX_ELEMENTS:,} (2^32), as the inputs and the "
            "float64 reference must fit in memory"
        )
    return m, n


def _seed(text: str) -> int:
    try:
        seed = int(text)
    except ValueError:
        seed = None
    if seed is None or not -(2**63) <= seed < 2**64:  # what torch.manual_seed takes
        raise argparse.ArgumentTypeError(f"must be an integer from -2^63 to 2^64-1, got {text!r}")
    return seed


def _attached(argv: list[str]) -> list[str]:
    """`--shape -4x5` as `--shape=-4x5`: argparse takes a word that starts with '-' for an option, not a value, and
    would say --shape has none instead of what is wrong with it."""
    out: list[str] = []
    for word in argv:
        if out and out[-1] == "--shape" and word.startswith("-") and not word.startswith("--"):
            out[-1] = f"--shape={word}"
        else:
            out.append(word)
    return out


def _parser() -> argparse.ArgumentParser:
    from rblock.ops.registry import OPS

    p = _Parser(prog="rblock", description="Fused Triton reductions: run, explain, benchmark.")
    sub = p.add_subparsers(dest="command", required=True)
    for name, help_text in (
        ("run", "compile and run an op on random input, check it against PyTorch in fp64"),
        ("explain", "show the analysis, the candidates with their reasons, the IR and the generated Triton"),
    ):
        s = sub.add_parser(name, help=help_text)
        s.add_argument("op", choices=sorted(OPS))
        s.add_argument("--shape", type=_shape, default=(64, 3000), help="MxN (default 64x3000)")
        s.add_argument("--dtype", choices=sorted(DTYPES), default="bf16")
        s.add_argument(
            "--dim",
            type=int,
            help=f"the dim reduced, -2 to 1 (default -1), for {_dim_takers()}",
        )
        s.add_argument("--strategy", choices=["auto", "persistent", "looped"], default="auto")
        s.add_argument("--json", action="store_true", help="print one JSON object")
        s.add_argument("--seed", type=_seed, default=0)
    sub.add_parser("bench", help="benchmark against eager, torch.compile and Liger (CUDA GPU only)", add_help=False)
    return p


def _dim_takers() -> str:
    from rblock.ops.registry import OPS

    return ", ".join(sorted(n for n, spec in OPS.items() if not spec.reduces_rows))


def _dim(args) -> int | None:
    """--dim, checked against the op: the reduced dim of an MxN input for the ops that take one; refused by the rest,
    which reduce each row (where --dim was once ignored without a word)."""
    from rblock.ops.registry import OPS

    if OPS[args.op].reduces_rows:
        if args.dim is not None:
            raise UsageError(
                f"argument --dim: {args.op} takes no dim (it reduces each row); allowed for {_dim_takers()}"
            )
        return None
    dim = -1 if args.dim is None else args.dim
    if not -2 <= dim <= 1:
        raise UsageError(f"argument --dim: is {dim}, but {args.op}'s input has 2 dims (MxN); allowed: -2 to 1")
    return dim


def _inputs(args):
    from rblock.ops.registry import OPS
    from rblock.runtime import device

    torch.manual_seed(args.seed)
    spec = OPS[args.op]
    m, n = args.shape
    try:
        return spec, spec.make_inputs(m, n, DTYPES[args.dtype], device.kernel_device())
    except (MemoryError, RuntimeError) as e:  # what a failed allocation raises (CUDA's OutOfMemoryError too)
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise UsageError(f"argument --shape: {m}x{n} {args.dtype} inputs do not fit in memory ({first})") from e


def cmd_run(args) -> int:
    import rblock
    from rblock.explain import recorded
    from rblock.ops.registry import max_rel_error
    from rblock.runtime import device

    dim = _dim(args)
    spec, inputs = _inputs(args)
    with rblock.settings(strategy=args.strategy):
        out, log = recorded(lambda: spec.run(inputs, dim))
    ref = spec.reference(inputs, dim)
    err = max_rel_error(out, ref)
    kernels = [{"strategy": c.config.kind, "config": str(c.config)} for c in log]
    result = {
        "op": args.op,
        "shape": list(args.shape),
        "dtype": args.dtype,
        "strategy": kernels[0]["strategy"] if kernels else None,
        "config": kernels[0]["config"] if kernels else None,
        "kernels": kernels,
        "max_rel_error": err,
        "device": device.device_name(),
    }
    if args.json:
        print(json.dumps(result))
    else:
        print(f"{args.op} {args.shape[0]}x{args.shape[1]} {args.dtype} on {result['device']}")
        for k in kernels:
            print(f"  kernel: {k['config']}")
        print(f"  max relative error vs fp64 PyTorch: {err:.3e}")
    return 0


def cmd_explain(args) -> int:
    import rblock
    from rblock.explain import combined, recorded, report

    dim = _dim(args)
    spec, inputs = _inputs(args)
    with rblock.settings(strategy=args.strategy):
        _, log = recorded(lambda: spec.run(inputs, dim), launch=False)
    reports = [report(c) for c in log]
    if args.json:
        print(json.dumps(combined(reports)))
        return 0
    for r in reports:
        print(r["ir"])
        f = r["features"]
        print(f"\nxnumel {r['xnumel']}  rnumel {r['rnumel']}  hint {r['hint']}  default strategy {r['strategy']}")
        print(
            f"bytes: persistent {f['persistent_bytes']}  looped {f['looped_bytes']}  "
            f"saved_bytes_ratio {f['saved_bytes_ratio']}"
        )
        print(
            f"coalescing: score_x {f['score_x']}  score_r {f['score_r']}  r_coalesce_ratio {f['r_coalesce_ratio']}; "
            f"mem_ops_per_thread {f['mem_ops_per_thread']}  loads_and_reductions {f['loads_and_reductions']}"
        )
        print("candidates:")
        for c in r["candidates"]:
            flag = " no_rblock_scaling" if c["no_rblock_scaling"] else ""
            flag += f" split={c['split']}" if c["split"] > 1 else ""
            flag += " recompute" if c["recompute"] else ""
            flag += f" tiles={c['tiles']}" if c["tiles"] > 1 else ""
            flag += " prefetch" if c["prefetch"] else ""
            flag += f" unroll={c['unroll']}" if c["unroll"] > 1 else ""
            flag += " align" if c["align"] else ""
            print(
                f"  {c['kind']:<18} XBLOCK={c['XBLOCK']:<4} RBLOCK={c['RBLOCK']:<6} "
                f"warps={c['num_warps']:<3}{flag}  {c['reason']}"
            )
        for t in r["tuning"]:
            timing = f"{t['median_us']:.1f} us" if t["median_us"] is not None else t["note"]
            print(f"  tuned: {t['config']}: {timing}")
        print(f"chosen: {r['chosen']}{' (from the tuning cache)' if r['from_cache'] else ''}\n")
        print(r["source"])
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        if argv and argv[0] == "bench":
            from rblock.bench.harness import main as bench_main

            return bench_main(argv[1:])
        args = _parser().parse_args(_attached(argv))
        return {"run": cmd_run, "explain": cmd_explain}[args.command](args)
    except KeyboardInterrupt:
        print("rblock: interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # noqa: BLE001 -- each error reads as one line; RBLOCK_DEBUG=1 adds the traceback
        return _report(e)


def _report(e: Exception) -> int:
    from rblock.errors import RBlockError
    from rblock.settings import debug

    if debug():
        import traceback

        traceback.print_exception(e, file=sys.stderr)
    text = " ".join(str(e).split()).removeprefix("rblock: ")  # one line, whatever the message holds
    if isinstance(e, (UsageError, RBlockError)):
        print(f"rblock: {text}", file=sys.stderr)
        return 2
    if isinstance(e, (MemoryError, torch.OutOfMemoryError)):
        print(f"rblock: out of memory: {text or type(e).__name__}; try a smaller --shape", file=sys.stderr)
        return 2
    print(f"rblock: internal error: {type(e).__name__}: {text} (RBLOCK_DEBUG=1 shows where)", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
