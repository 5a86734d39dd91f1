"""The copy and read ceilings at several sizes, timed as `rblock bench` times its ceilings (`do_bench`, an L2 flush
before each call, median): a device-to-device copy and a `torch.sum` of 2^k bf16 elements. `rblock bench` measures
the ceilings its targets use at 2^28 elements and its points at 2^26 (and times the two at `--total` too): this
shows how both fall with size, where a launch, the timer and a partly idle last wave weigh more. GPU only.

    python benchmarks/ceilings.py [--ks 24,26,28] [--rounds 2]
"""

from __future__ import annotations

import argparse

import torch

from rblock.bench.harness import bandwidths


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ks", default="24,25,26,27,28", help="comma-separated powers of two of the element counts")
    ap.add_argument("--rounds", type=int, default=2, help="timings of each; the fastest is printed")
    args = ap.parse_args()
    print(torch.cuda.get_device_name(), flush=True)
    for k in (int(v) for v in args.ks.split(",")):
        copies, reads = zip(*(bandwidths(1 << k) for _ in range(args.rounds)))
        nbytes = 2 << k
        copy, read = max(copies), max(reads)
        print(
            f"2^{k}: copy {2 * nbytes / copy / 1e3:.1f} us, {copy:.0f} GB/s; read {nbytes / read / 1e3:.1f} us, "
            f"{read:.0f} GB/s",
            flush=True,
        )


if __name__ == "__main__":
    main()
