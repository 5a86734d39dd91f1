"""rblock run | explain | bench."""

from __future__ import annotations

import argparse
import json
import sys

import torch

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def _shape(text: str) -> tuple[int, int]:
    try:
        m, n = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--shape must look like 64x3000, got {text!r}") from None
    if m < 0 or n < 0:
        raise argparse.ArgumentTypeError(f"--shape must be non-negative, got {text!r}")
    return m, n


def _parser() -> argparse.ArgumentParser:
    from rblock.ops.registry import OPS

    p = argparse.ArgumentParser(prog="rblock", description="Fused Triton reductions: run, explain, benchmark.")
    sub = p.add_subparsers(dest="command", required=True)
    for name, help_text in (
        ("run", "compile and run an op on random input, check it against PyTorch in fp64"),
        ("explain", "show the analysis, the candidates with their reasons, the IR and the generated Triton"),
    ):
        s = sub.add_parser(name, help=help_text)
        s.add_argument("op", choices=sorted(OPS))
        s.add_argument("--shape", type=_shape, default=(64, 3000), help="MxN (default 64x3000)")
        s.add_argument("--dtype", choices=sorted(DTYPES), default="bf16")
        s.add_argument("--dim", type=int, default=-1, help="reduced dim for softmax, log_softmax and reductions")
        s.add_argument("--strategy", choices=["auto", "persistent", "looped"], default="auto")
        s.add_argument("--json", action="store_true", help="print one JSON object")
        s.add_argument("--seed", type=int, default=0)
    sub.add_parser("bench", help="benchmark against eager, torch.compile and Liger (CUDA GPU only)", add_help=False)
    return p


def _inputs(args):
    from rblock.ops.registry import OPS
    from rblock.runtime import device

    torch.manual_seed(args.seed)
    spec = OPS[args.op]
    m, n = args.shape
    return spec, spec.make_inputs(m, n, DTYPES[args.dtype], device.kernel_device())


def cmd_run(args) -> int:
    import rblock
    from rblock.explain import recorded
    from rblock.ops.registry import max_rel_error
    from rblock.runtime import device

    spec, inputs = _inputs(args)
    with rblock.settings(strategy=args.strategy):
        out, log = recorded(lambda: spec.run(inputs, args.dim))
    ref = spec.reference(inputs, args.dim)
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

    spec, inputs = _inputs(args)
    with rblock.settings(strategy=args.strategy):
        _, log = recorded(lambda: spec.run(inputs, args.dim), launch=False)
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
    if argv and argv[0] == "bench":
        from rblock.bench.harness import main as bench_main

        return bench_main(argv[1:])
    args = _parser().parse_args(argv)
    try:
        return {"run": cmd_run, "explain": cmd_explain}[args.command](args)
    except Exception as e:  # rblock's own errors read as one line; anything else is a bug worth a traceback
        from rblock.errors import RBlockError

        if isinstance(e, RBlockError):
            print(f"error: {e}", file=sys.stderr)
            return 2
        raise


if __name__ == "__main__":
    sys.exit(main())
