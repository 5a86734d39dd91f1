"""The copy and read ceilings at several sizes, timed as `rblock bench` times its ceilings (`do_bench`, an L2 flush
before each call, median): a device-to-device copy and a `torch.sum` of 2^k bf16 elements. `rblock bench` measures
its ceilings at 2^28 elements and its points at 2^26: this shows what the same two operations reach at the points'
size, where a launch, the timer and a partly idle last wave weigh four times as much. GPU only.

    python benchmarks/ceilings.py [--ks 24,26,28] [--rounds 2]
"""

from __future__ import annotations

import argparse

import torch

from rblock.bench.harness import _bench_ms


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ks", default="24,25,26,27,28", help="comma-separated powers of two of the element counts")
    ap.add_argument("--rounds", type=int, default=2, help="timings of each; the fastest is printed")
    args = ap.parse_args()
    print(torch.cuda.get_device_name(), flush=True)
    for k in (int(v) for v in args.ks.split(",")):
        src = torch.randn(1 << k, dtype=torch.bfloat16, device="cuda")
        dst = torch.empty_like(src)
        nbytes = src.numel() * src.element_size()
        copy_ms = min(_bench_ms(lambda: dst.copy_(src)) for _ in range(args.rounds))
        read_ms = min(_bench_ms(lambda: torch.sum(src)) for _ in range(args.rounds))
        print(
            f"2^{k}: copy {copy_ms * 1e3:.1f} us, {2 * nbytes / copy_ms / 1e6:.0f} GB/s; "
            f"read {read_ms * 1e3:.1f} us, {nbytes / read_ms / 1e6:.0f} GB/s",
            flush=True,
        )


if __name__ == "__main__":
    main()
