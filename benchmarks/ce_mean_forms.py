"""cross_entropy's mean kernel in place: the whole op (rows' kernel as tuned, then the mean) timed with the mean
forced to each of its candidates, plainly, as a CUDA-graph replay and as the host's time per call, beside the mean's
own time in the tuner's trials (alone after an L2 flush). Shows whether the tuner's pick for a small kernel that
reads what the kernel before it wrote is the best in the op.

    python benchmarks/ce_mean_forms.py [--ns 3000,4096,5120,8192,32768] [--total 67108864]
"""

from __future__ import annotations

import argparse
import importlib
import json

import torch
import triton.testing
from host_overhead import host_us  # benchmarks/ is the script's folder

import rblock
from rblock.bench.harness import graphed
from rblock.compiler import recording

ce = importlib.import_module("rblock.ops.softmax")  # the module, not the op it exports


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ns", default="3000,4096,5120,8192,32768")
    ap.add_argument("--total", type=int, default=2**26)
    ap.add_argument("--configs", default="[]", help="JSON list of rblock.Config fields, also forced on the mean")
    args = ap.parse_args()
    extra = [rblock.Config(**c) for c in json.loads(args.configs)]
    bench = lambda fn: 1000 * triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median")  # noqa: E731
    print(torch.cuda.get_device_name(), "· µs", flush=True)
    for n in map(int, args.ns.split(",")):
        m = args.total // n
        torch.manual_seed(0)
        logits = torch.randn(m, n, dtype=torch.bfloat16, device="cuda")
        target = torch.randint(0, n, (m,), device="cuda")
        loss = ce._rows_kernel(logits, target, -100, torch.float32)
        with recording() as log:
            ce._mean_kernel(loss, target, -100, torch.bfloat16)
        trials = {str(t.config): t.median_us for t in log[0].trials}
        tuned = str(log[0].config)
        print(f"cross_entropy ({m}, {n}): the op as tuned {bench(lambda: ce.cross_entropy(logits, target)):.1f}")
        for cfg in [c.config for c in log[0].plan.candidates] + extra:

            def op(cfg=cfg):
                loss = ce._rows_kernel(logits, target, -100, torch.float32)
                with rblock.settings(config=cfg):
                    return ce._mean_kernel(loss, target, -100, torch.bfloat16)

            try:
                op()
            except Exception as e:  # noqa: BLE001 -- a forced config the op refuses
                print(f"     {str(cfg):72s} {type(e).__name__}: {e}"[:300], flush=True)
                continue
            replay, _ = graphed(op)
            alone = trials.get(str(cfg))
            print(
                f"   {'*' if str(cfg) == tuned else ' '} {str(cfg):72s} alone {alone or float('nan'):5.1f} · op plain "
                f"{bench(op):5.1f} graph {bench(replay):5.1f} host/call {host_us(op):5.1f}",
                flush=True,
            )
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
