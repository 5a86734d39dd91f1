"""Time many configs of rms_norm and softmax on the GPU through rblock's tuner, to calibrate the planner.

python benchmarks/sweep_configs.py OUT_DIR
"""

from __future__ import annotations

import functools
import json
import os
import sys
import time

import torch
import triton.testing

import rblock
from rblock.codegen.kernel import generate
from rblock.compiler import recording
from rblock.ops.registry import OPS
from rblock.plan import DEFAULT, Candidate
from rblock.runtime import device
from rblock.runtime.tune import tune


def configs(n: int) -> list[rblock.Config]:
    rb = 1 << (n - 1).bit_length()
    out = []
    for xblock in (1, 2, 4, 8):
        for warps in (4, 8, 16, 32):
            per_thread = xblock * rb // (32 * warps)
            if not 4 <= per_thread <= 64:
                continue
            out.append(rblock.Config("persistent", xblock, rb, warps))
    out += [rblock.Config("looped", 1, min(rb, 2048), 8), rblock.Config("looped", 1, min(rb, 4096), 16)]
    return out


def main(out_dir: str) -> None:
    src = torch.randn(2**28, dtype=torch.bfloat16, device="cuda")
    dst = torch.empty_like(src)
    ms = triton.testing.do_bench(lambda: dst.copy_(src), warmup=25, rep=100, return_mode="median")
    copy_gbps = 4 * src.numel() / ms / 1e6
    print(f"copy {copy_gbps:.0f} GB/s")
    rows = []
    for op in ("rms_norm", "softmax"):
        for n in (4096, 32768):
            m = 2**26 // n
            inputs = OPS[op].make_inputs(m, n, torch.bfloat16, "cuda")
            nbytes = sum(t.numel() * t.element_size() for t in inputs) + m * n * 2
            with rblock.settings(tune=False), recording(launch=False) as log:
                OPS[op].run(inputs, -1)
            c = log[0]
            cands = [Candidate(cfg, "sweep") for cfg in configs(n)]
            specs = {cand.config: generate(c.graph, cand.config) for cand in cands}
            outs = [torch.empty_strided(sh, st, dtype=dt, device="cuda") for sh, st, dt in c.outputs]
            t0 = time.perf_counter()
            _, trials = tune(cands, specs, functools.partial(generate, c.graph), [inputs[i] for i in c.input_order] + outs,
                             c.graph.xnumel, DEFAULT, int(device.device_properties()["regs_per_sm"]))  # fmt: skip
            print(f"{op} N={n}: {len(cands)} configs in {time.perf_counter() - t0:.1f}s")
            for t in sorted(trials, key=lambda t: t.median_us or 1e9)[:12]:
                gbps = nbytes / t.median_us / 1e3 if t.median_us else 0
                rows.append(
                    {
                        "op": op,
                        "N": n,
                        "config": str(t.config),
                        "us": t.median_us,
                        "GBps": gbps,
                        "regs": t.n_regs,
                        "spills": t.n_spills,
                    }
                )
                print(
                    f"   {str(t.config):90s} {t.median_us or 0:8.1f} us {gbps:6.0f} GB/s {100 * gbps / copy_gbps:5.1f}% regs {t.n_regs} {t.note}"
                )
            del inputs, outs
            torch.cuda.empty_cache()
    with open(os.path.join(out_dir, "sweep_configs.json"), "w") as f:
        json.dump({"copy_GBps": copy_gbps, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else ".")
