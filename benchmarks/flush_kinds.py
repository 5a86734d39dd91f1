"""What `do_bench`'s L2 flush costs each op: rblock's call timed between two events after three kinds of flush.
`zero`: `do_bench`'s own (a zero_ of 256 MB, which leaves L2 full of dirty lines that whatever evicts them writes back
to memory); `read`: a read of 256 MB (L2 left clean); `none`: no flush (the inputs partly in L2 from the call
before). Medians of 100 calls, µs; set RBLOCK_PDL=0 to time the kernels launched without dependent launches.

    python benchmarks/flush_kinds.py [--points sum_dim0:1024,sum:1024] [--total 67108864]
"""

from __future__ import annotations

import argparse
import os

import torch
import triton

from rblock.bench import providers as prov


def timed(fn, flush, iters: int = 100) -> float:
    times = []
    for _ in range(iters):
        flush()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return sorted(times)[iters // 2] * 1e3


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument(
        "--points", default="sum_dim0:1024,sum_dim0:3000,sum_dim0:4096,sum:1024,rms_norm:4096,cross_entropy:4096"
    )
    ap.add_argument("--total", type=int, default=2**26)
    args = ap.parse_args()
    provider = prov.resolve(["rblock"])[0][0]
    cache = triton.runtime.driver.active.get_empty_cache_for_benchmark()
    big = torch.randn(2**27, dtype=torch.bfloat16, device="cuda")
    flushes = {"zero": cache.zero_, "read": big.sum, "none": lambda: None}
    print(torch.cuda.get_device_name(), "RBLOCK_PDL", os.environ.get("RBLOCK_PDL", "default"), flush=True)
    for point in args.points.split(","):
        op, n = point.split(":")
        m = args.total // int(n)
        torch.manual_seed(0)
        inputs = prov.make_inputs(op, m, int(n), torch.bfloat16, "cuda")
        with provider.scope():
            fn = provider.build(op, inputs)
            fn()
            torch.cuda.synchronize()
            cells = "  ".join(f"{name} {timed(fn, flush):6.1f}" for name, flush in flushes.items())
        print(f"{op:14s} ({m}, {n}): {cells}", flush=True)


if __name__ == "__main__":
    main()
