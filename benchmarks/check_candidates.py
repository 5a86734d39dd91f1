"""Verify generated kernels on a GPU: every candidate the planner proposes for each (op, N, view), forced in turn and
compared with the fp64 reference. Views: `contiguous`; `shifted` (the data starts 1 element past a 16-byte
boundary, so every row starts misaligned); `padded` (rows 3 elements longer than N, so each row starts at another
offset from the boundary). Split-row kernels are also run again and again (their row groups' counters carry over
between launches), replayed from a CUDA graph (also on a second stream beside eager calls), and once with a
bounded wait (RBLOCK_DEBUG_SYNC), which must not trip when the launch is co-resident. Prints each check and writes
them to OUT_JSON. Processes may run side by side on one GPU (nothing is timed), e.g. one per op.

    python benchmarks/check_candidates.py OUT_JSON [--ops rms_norm,sum] [--ns 3000,50257] [--views contiguous,padded]
        [--kinds split_row] [--dim 0] [--total 4194304] [--dtype bfloat16]
"""

from __future__ import annotations

import argparse
import json
import os

import torch

import rblock
from rblock.compiler import recording
from rblock.ops.registry import OPS, max_rel_error

OPS_DEFAULT = ("rms_norm", "layer_norm", "softmax", "log_softmax", "cross_entropy", "fused_add_rms_norm", "sum", "var")
TOLERANCE = {torch.bfloat16: 2e-2, torch.float16: 4e-3, torch.float32: 1e-4}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--ops", default=",".join(OPS_DEFAULT))
    ap.add_argument("--ns", default="3000,5120,50257")
    ap.add_argument("--views", default="contiguous,shifted,padded")
    ap.add_argument("--kinds", default="", help="only candidates of these kinds (default: all)")
    ap.add_argument("--dim", type=int, default=-1, help="reduced dim, for ops that take one (sum over dim 0)")
    ap.add_argument("--total", type=int, default=2**22)
    ap.add_argument("--dtype", default="bfloat16")
    args = ap.parse_args()
    dtype = getattr(torch, args.dtype)
    kinds = set(filter(None, args.kinds.split(",")))
    rows, failures = [], 0
    for op in args.ops.split(","):
        dim = args.dim if not OPS[op].reduces_rows else -1
        for n in map(int, args.ns.split(",")):
            for view in args.views.split(","):
                for row in check(op, max(args.total // n, 1), n, dim, view, dtype, kinds):
                    rows.append(row)
                    failures += not row["ok"]
                    print(json.dumps(row), flush=True)
                torch.cuda.empty_cache()
                # written after every point, so a run cut short by a time limit keeps what it checked
                with open(args.out, "w") as f:
                    json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, f, indent=1)
    print(f"{len(rows)} checks, {failures} failed", flush=True)


def _viewed(t: torch.Tensor, view: str) -> torch.Tensor:
    """`t`'s values in the layout `view` (vectors such as weights stay as they are)."""
    if t.dim() < 2 or not t.is_floating_point() or view == "contiguous":
        return t
    m, n = t.shape
    if view == "shifted":
        return torch.empty(m * n + 1, dtype=t.dtype, device=t.device)[1:].view(m, n).copy_(t)
    return torch.empty(m, n + 3, dtype=t.dtype, device=t.device)[:, :n].copy_(t)


def check(op: str, m: int, n: int, dim: int, view: str, dtype: torch.dtype, kinds: set[str]) -> list[dict]:
    torch.manual_seed(n)
    spec = OPS[op]
    inputs = [_viewed(t, view) for t in spec.make_inputs(m, n, dtype, "cuda")]
    if op == "cross_entropy":  # the row kernel alone: a forced config would also apply to the mean's kernel

        def run():
            return rblock.ops.cross_entropy(*inputs, reduction="none")

        ref = torch.nn.functional.cross_entropy(inputs[0].double(), inputs[1], reduction="none")
    else:

        def run():
            return spec.run(inputs, dim)

        ref = spec.reference(inputs, dim)
    with recording(launch=False) as log:
        run()
    configs = [c.config for c in log[0].plan.candidates if not kinds or c.config.kind in kinds]
    tol = TOLERANCE[dtype]
    rows = []
    for cfg in configs:
        row = {"op": op, "M": m, "N": n, "dim": dim, "view": view, "dtype": str(dtype), "config": str(cfg)}
        try:
            with rblock.settings(config=cfg, tune=False):
                errors = [max_rel_error(run(), ref)]
                if cfg.kind == "split_row":
                    for _ in range(200):  # the counters carry over from launch to launch
                        out = run()
                    errors.append(max_rel_error(out, ref))
                    errors.append(_graph_replay_error(run, ref))
            row.update(max_rel_errors=errors, ok=max(errors) < tol)
        except Exception as e:  # reported, not fatal: the next candidate still runs
            row.update(ok=False, error=f"{type(e).__name__}: {e}"[:400])
        rows.append(row)
    split = [c for c in configs if c.kind == "split_row"]
    if split:  # the bounded wait of debug mode must not trip on a co-resident launch
        os.environ["RBLOCK_DEBUG_SYNC"] = str(1 << 22)
        row = {"op": op, "M": m, "N": n, "dim": dim, "view": view, "config": f"{split[0]} with RBLOCK_DEBUG_SYNC"}
        try:
            with rblock.settings(config=split[0]):  # other settings than above: built again, with the bound
                row.update(max_rel_errors=[max_rel_error(run(), ref) for _ in range(3)])
            row["ok"] = max(row["max_rel_errors"]) < tol
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
