"""An op's time per call three ways, with the tuner's picks: `do_bench` (an L2 flush before each call, which hides
the host's time while the host keeps up), a CUDA graph replay (the kernels alone), and calls back to back (no flush,
no sync between them: the host's time shows where it exceeds the GPU's, as in a loop of calls). bf16, M·N = 2^26.
GPU only.

    python benchmarks/back_to_back.py [--ops cross_entropy] [--ns 3000,4096,8192,32768]
"""

from __future__ import annotations

import argparse

import torch
import triton.testing

from rblock.bench.harness import graphed, per_call_ms
from rblock.compiler import recording
from rblock.ops.registry import OPS


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ops", default="cross_entropy")
    ap.add_argument("--ns", default="3000,4096,8192,32768")
    ap.add_argument("--total", type=int, default=2**26)
    args = ap.parse_args()
    bench = lambda fn: 1e3 * triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median")  # noqa: E731
    print(torch.cuda.get_device_name(), "· µs", flush=True)
    for op in args.ops.split(","):
        for n in map(int, args.ns.split(",")):
            m = max(args.total // n, 1)
            torch.manual_seed(0)
            inputs = OPS[op].make_inputs(m, n, torch.bfloat16, "cuda")
            call = lambda: OPS[op].run(inputs, -1)  # noqa: E731
            with recording() as log:
                call()
            replay, _ = graphed(call)
            picks = "; ".join(str(c.config) for c in log)
            print(
                f"{op} ({m}, {n}) plain {bench(call):.1f} graph {bench(replay):.1f} "
                f"back-to-back {1e3 * per_call_ms(call):.1f} | {picks}",
                flush=True,
            )


if __name__ == "__main__":
    main()
