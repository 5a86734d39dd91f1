"""GPU acceptance checks, run on the H200: correctness of both strategies at (2048, 32768), the tuner's pick for
rms_norm, and a second process that must load the winner from the cache without timing anything.

    python benchmarks/gpu_check.py OUT_DIR
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import torch
import triton.testing

import rblock
from rblock.compiler import recording
from rblock.ops.registry import OPS, max_rel_error


def gbps(inputs, outs, ms: float) -> float:
    outs = outs if isinstance(outs, (tuple, list)) else (outs,)
    nbytes = sum(t.numel() * t.element_size() for t in list(inputs) + list(outs))
    return nbytes / ms / 1e6


def main(out_dir: str) -> None:
    rows = []
    torch.manual_seed(0)
    m, n = 2048, 32768
    for op in ("rms_norm", "softmax", "cross_entropy", "layer_norm"):
        spec = OPS[op]
        inputs = spec.make_inputs(m, n, torch.bfloat16, "cuda")
        ref = spec.reference(inputs, -1)
        for strategy in ("persistent", "looped", "auto"):
            with rblock.settings(strategy=strategy), recording() as log:
                t0 = time.perf_counter()
                out = spec.run(inputs, -1)
                torch.cuda.synchronize()
                first = time.perf_counter() - t0
            with rblock.settings(strategy=strategy):
                ms = triton.testing.do_bench(lambda: spec.run(inputs, -1), warmup=25, rep=100, return_mode="median")
            err = max_rel_error(out, ref)
            row = {
                "op": op, "M": m, "N": n, "strategy": strategy, "config": str(log[0].config), "max_rel_error": err,
                "median_us": ms * 1000, "GBps": gbps(inputs, out, ms), "first_call_s": first,
                "trials": [t.as_dict() for t in log[0].trials],
            }  # fmt: skip
            rows.append(row)
            print(
                f"{op:14s} {strategy:10s} {row['config']:70s} err {err:.2e} {ms * 1000:8.1f} us {row['GBps']:7.0f} GB/s first {first:.2f}s"
            )
            for t in row["trials"]:
                print(
                    f"      {t['config']:70s} {t['median_us']} us regs {t['n_regs']} spill bytes {t['spill_bytes']} {t['note']}"
                )
    # a second process must find the tuned winner in the cache
    code = (
        "import torch, rblock, json; from rblock.compiler import recording;"
        "x = torch.randn(2048, 32768, dtype=torch.bfloat16, device='cuda'); w = torch.randn(32768, dtype=torch.bfloat16, device='cuda');"
        "rec = recording(); log = rec.__enter__(); rblock.rms_norm(x, (32768,), w, 1e-6); rec.__exit__(None, None, None);"
        "print(json.dumps({'from_cache': log[0].from_cache, 'trials': len(log[0].trials), 'config': str(log[0].config)}))"
    )
    t0 = time.perf_counter()
    second = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=os.environ)
    print("second process:", second.stdout.strip(), second.stderr[-2000:], f"{time.perf_counter() - t0:.1f}s")
    with open(os.path.join(out_dir, "gpu_check.json"), "w") as f:
        json.dump(
            {"device": torch.cuda.get_device_name(), "rows": rows, "second_process": second.stdout.strip()}, f, indent=1
        )


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else ".")
