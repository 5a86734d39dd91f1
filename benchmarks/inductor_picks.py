"""What torch.compile writes and picks for the benchmarked ops: for each point (bf16, M·N = 2^26), every Triton
kernel of the compiled op with its sizes, its reduction hint and the config its autotuner chose, and the op's time
beside rblock's and rblock's pick. Each point compiles into an Inductor cache of its own under OUT_DIR, which keeps
the kernels' sources and their `.best_config` files. GPU only.

    python benchmarks/inductor_picks.py OUT_DIR [--ops sum_dim0,cross_entropy] [--ns 3000,12288]
        [--mode max-autotune-no-cudagraphs]
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import torch
import triton.testing

from rblock.bench import inductor
from rblock.bench import providers as prov
from rblock.compiler import recording

CONFIG_KEYS = ("XBLOCK", "R0_BLOCK", "num_warps", "num_stages")


def picks(cache: Path) -> list[dict]:
    """Each autotuned kernel in an Inductor cache: its name, sizes and reduction hint (read off its source) and the
    config its autotuner chose (the `.best_config` written beside the source)."""
    out = []
    for best in sorted(cache.rglob("*.best_config")):
        config = json.loads(best.read_text())
        for src in sorted(best.parent.glob("*.py")):
            text = src.read_text()
            name = re.search(r"^def (triton_\w+)\(", text, re.M)
            if name is None:
                continue
            sizes = {k: int(v) for k, v in re.findall(r"^\s+(xnumel|r0_numel) = (\d+)$", text, re.M)}
            hint = re.search(r"reduction_hint=ReductionHint\.(\w+)", text)
            out.append({
                "kernel": name.group(1), **sizes, "hint": hint.group(1) if hint else None,
                "config": {k: config[k] for k in CONFIG_KEYS if k in config}, "source": str(src.relative_to(cache)),
            })  # fmt: skip
            break
    return out


def point(op: str, m: int, n: int, mode: str, cache: Path) -> dict:
    torch.manual_seed(0)
    inputs = prov.make_inputs(op, m, n, torch.bfloat16, "cuda")
    cache.mkdir(parents=True, exist_ok=True)
    with inductor.fresh_compile(keep_in=str(cache)):
        fn = torch.compile(prov.EAGER[op], dynamic=False, mode=mode)
        fn(*inputs)
        compiled_us = 1e3 * triton.testing.do_bench(lambda: fn(*inputs), warmup=25, rep=100, return_mode="median")
    (ours,), _ = prov.resolve(["rblock"])
    call = ours.build(op, inputs)
    with recording() as log:
        call()
    rblock_us = 1e3 * triton.testing.do_bench(call, warmup=25, rep=100, return_mode="median")
    return {
        "op": op, "M": m, "N": n, "mode": mode, "compiled_us": compiled_us, "rblock_us": rblock_us,
        "rblock": [str(c.config) for c in log], "kernels": picks(cache),
    }  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--ops", default="sum_dim0")
    ap.add_argument("--ns", default="3000,5120,12288")
    ap.add_argument("--total", type=int, default=2**26)
    ap.add_argument(
        "--mode", default="max-autotune-no-cudagraphs", help="torch.compile's mode (default: compile_max's)"
    )
    args = ap.parse_args()
    rows = []
    for op in args.ops.split(","):
        for n in map(int, args.ns.split(",")):
            m = max(args.total // n, 1)
            row = point(op, m, n, args.mode, Path(args.out) / f"{op}_{n}")
            print(f"{op} ({m}, {n}): {args.mode} {row['compiled_us']:.1f} us, rblock {row['rblock_us']:.1f} us "
                  f"{', '.join(row['rblock'])}", flush=True)  # fmt: skip
            for k in row["kernels"]:
                sizes = f"x {k.get('xnumel', '-')} r {k.get('r0_numel', '-')}"
                print(f"   {k['kernel']:32s} {sizes:18s} {k['hint'] or '':8s} {k['config']}", flush=True)
            rows.append(row)
            # written after every point, so a run cut short by a time limit keeps what it measured
            (Path(args.out) / "inductor_picks.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
