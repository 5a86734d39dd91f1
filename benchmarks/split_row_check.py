"""Verify split-row kernels on a GPU: every split_row candidate of each (op, N) against the fp64 reference, twice in
a row (the row groups' counters carry over between launches), replayed from a CUDA graph (also on a second stream beside eager calls), and once with a bounded
wait (RBLOCK_DEBUG_SYNC), which must not trip when the launch is co-resident. Prints each check and its kernel time;
writes OUT_DIR/split_row_check.json.

    python benchmarks/split_row_check.py OUT_DIR [--ops rms_norm,softmax] [--ns 65536,262144]
"""

from __future__ import annotations

import argparse
import json
import os

import torch
import triton.testing

import rblock
from rblock.compiler import recording
from rblock.ops.registry import OPS, max_rel_error

OPS_DEFAULT = ("rms_norm", "softmax", "layer_norm", "cross_entropy")
NS = (65536, 131072, 262144)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--ops", default=",".join(OPS_DEFAULT))
    ap.add_argument("--ns", default=",".join(map(str, NS)))
    ap.add_argument("--total", type=int, default=2**26)
    args = ap.parse_args()
    rows, failures = [], 0
    for op in args.ops.split(","):
        for n in map(int, args.ns.split(",")):
            for row in check(op, max(args.total // n, 1), n):
                rows.append(row)
                failures += not row["ok"]
                print(json.dumps(row), flush=True)
            with open(os.path.join(args.out, "split_row_check.json"), "w") as f:
                json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, f, indent=1)
    print(f"{len(rows)} checks, {failures} failed", flush=True)


def check(op: str, m: int, n: int) -> list[dict]:
    torch.manual_seed(n)
    spec = OPS[op]
    inputs = spec.make_inputs(m, n, torch.bfloat16, "cuda")
    if op == "cross_entropy":  # the row kernel alone: a forced config would also apply to the mean's kernel

        def run():
            return rblock.ops.cross_entropy(*inputs, reduction="none")

        ref = torch.nn.functional.cross_entropy(inputs[0].double(), inputs[1], reduction="none")
    else:

        def run():
            return spec.run(inputs, -1)

        ref = spec.reference(inputs, -1)
    with recording(launch=False) as log:
        run()
    configs = [c.config for c in log[0].plan.candidates if c.config.kind == "split_row"]
    rows = []
    for cfg in configs:
        row = {"op": op, "M": m, "N": n, "config": str(cfg)}
        try:
            with rblock.settings(config=cfg, tune=False):
                errors = [max_rel_error(run(), ref) for _ in range(3)]  # counters carry over
                ms = triton.testing.do_bench(run, warmup=25, rep=100, return_mode="median")
                errors.append(max_rel_error(run(), ref))  # after hundreds of launches
                errors.append(_graph_replay_error(run, ref))
            row.update(median_us=1000 * ms, max_rel_errors=errors, ok=max(errors) < 2e-2)
        except Exception as e:  # reported, not fatal: the next candidate still runs
            row.update(ok=False, error=f"{type(e).__name__}: {e}"[:400])
        rows.append(row)
    if configs:  # the bounded wait of debug mode must not trip on a co-resident launch
        os.environ["RBLOCK_DEBUG_SYNC"] = str(1 << 22)
        row = {"op": op, "M": m, "N": n, "config": f"{configs[0]} with RBLOCK_DEBUG_SYNC"}
        try:
            with rblock.settings(config=configs[0]):  # other settings than above: built again, with the bound
                row.update(max_rel_errors=[max_rel_error(run(), ref) for _ in range(3)])
            row["ok"] = max(row["max_rel_errors"]) < 2e-2
        except Exception as e:
            row.update(ok=False, error=f"{type(e).__name__}: {e}"[:400])
        finally:
            del os.environ["RBLOCK_DEBUG_SYNC"]
        rows.append(row)
    return rows


def _graph_replay_error(run, ref) -> float:
    run()  # compiled and its counters made before capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = run()
    worst = 0.0
    side = torch.cuda.Stream()
    for _ in range(3):
        graph.replay()
        torch.cuda.synchronize()
        worst = max(worst, max_rel_error(out, ref))
    for _ in range(3):  # replayed on another stream beside eager calls: each has counters of its own
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            graph.replay()
        eager = run()
        torch.cuda.synchronize()
        worst = max(worst, max_rel_error(out, ref), max_rel_error(eager, ref))
    return worst


if __name__ == "__main__":
    main()
