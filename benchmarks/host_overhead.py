"""Host time per call of rblock ops against torch.compile at small batches (launch-bound), and where rblock's time
goes (cProfile of a call loop).

    python benchmarks/host_overhead.py
"""

from __future__ import annotations

import cProfile
import pstats
import time

import torch

from rblock.bench import providers as prov
from rblock.ops.registry import OPS


def host_us(fn, calls: int = 2000) -> float:
    """Host time per call: no synchronization inside the loop (the GPU runs behind, the queue absorbs it)."""
    for _ in range(50):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    host = (time.perf_counter() - t0) / calls * 1e6
    torch.cuda.synchronize()
    return host


def main() -> None:
    for op in ("rms_norm", "softmax", "layer_norm", "cross_entropy"):
        inputs = OPS[op].make_inputs(64, 4096, torch.bfloat16, "cuda")
        line = f"{op:14s} (64, 4096) host us/call:"
        for name in ("rblock", "compile", "eager"):
            provider = prov.resolve([name])[0][0]
            with provider.scope():
                fn = provider.build(op, inputs)
                if fn is None:
                    continue
                fn()
                line += f"  {name} {host_us(fn):6.1f}"
        print(line, flush=True)
    inputs = OPS["cross_entropy"].make_inputs(64, 4096, torch.bfloat16, "cuda")
    OPS["cross_entropy"].run(inputs, -1)
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(2000):
        OPS["cross_entropy"].run(inputs, -1)
    prof.disable()
    torch.cuda.synchronize()
    pstats.Stats(prof).sort_stats("tottime").print_stats(18)


if __name__ == "__main__":
    main()
