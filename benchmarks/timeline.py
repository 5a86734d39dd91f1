"""Where a timed call's microseconds go on the GPU: each op's rblock call, timed as `rblock bench` times it (an L2
flush, then the call, between two events), is traced with the CUDA profiler, and every iteration is split into the
gap from the flush's end to the call's first kernel (the host not keeping up), each kernel's duration, and the gaps
between the call's kernels. Also prints `do_bench`'s median and the host's time per call, back to back. A kernel
launched as a dependent of the one before it (on sm_90) starts before that one ends and waits: its span includes the
wait, and its gap is negative.

    python benchmarks/timeline.py --ops cross_entropy --ns 3000,4096,5120,8192 [--total 67108864] [--iters 40]
"""

from __future__ import annotations

import argparse
import statistics

import torch
import triton
import triton.testing
from host_overhead import host_us  # benchmarks/ is the script's folder
from torch.profiler import ProfilerActivity, profile

from rblock.bench import providers as prov


def traced(fn, iters: int) -> list[list[tuple[str, float, float]]]:
    """The kernels (name, start µs, end µs) of each iteration of do_bench's timed loop, the flush first."""
    cache = triton.runtime.driver.active.get_empty_cache_for_benchmark()
    for _ in range(10):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(iters):
            triton.runtime.driver.active.clear_cache(cache)
            fn()
        torch.cuda.synchronize()
    kernels = sorted(
        (e.time_range.start, e.time_range.end, e.name)
        for e in prof.events()
        if e.device_type == torch.autograd.DeviceType.CUDA and "Memcpy" not in e.name
    )
    iterations, cur = [], None
    for start, end, name in kernels:
        if "FillFunctor" in name or "fill" in name.lower():  # clear_cache is a zero_: a new iteration
            cur = [(name, start, end)]
            iterations.append(cur)
        elif cur is not None:
            cur.append((name, start, end))
    return iterations[2:]  # the first ones may still see the profiler's start


def summary(iterations: list[list[tuple[str, float, float]]]) -> str:
    med = statistics.median
    lead = med(it[1][1] - it[0][2] for it in iterations if len(it) > 1)
    span = med(it[-1][2] - it[0][2] for it in iterations if len(it) > 1)
    parts = [f"flush→first {lead:6.1f}", f"flush end→last end {span:6.1f}"]
    n = min(len(it) for it in iterations)
    for k in range(1, n):
        dur = med(it[k][2] - it[k][1] for it in iterations)
        gap = med(it[k][1] - it[k - 1][2] for it in iterations) if k > 1 else None
        name = iterations[0][k][0][:40]
        parts.append((f"gap {gap:5.1f} · " if gap is not None else "") + f"{name} {dur:6.1f}")
    return " | ".join(parts)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ops", default="cross_entropy")
    ap.add_argument("--ns", default="3000,4096,5120,6144,8192")
    ap.add_argument("--total", type=int, default=2**26)
    ap.add_argument("--iters", type=int, default=40)
    args = ap.parse_args()
    provider = prov.resolve(["rblock"])[0][0]
    print(torch.cuda.get_device_name(), "· µs, medians over iterations", flush=True)
    for op in args.ops.split(","):
        for n in map(int, args.ns.split(",")):
            torch.manual_seed(0)
            inputs = prov.make_inputs(op, args.total // n, n, torch.bfloat16, "cuda")
            with provider.scope():
                fn = provider.build(op, inputs)
                fn()
                torch.cuda.synchronize()
                bench = 1000 * triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median")
                host = host_us(fn)
                line = summary(traced(fn, args.iters))
            print(f"{op} ({args.total // n}, {n}): do_bench {bench:6.1f} · host/call {host:5.1f} · {line}", flush=True)
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
