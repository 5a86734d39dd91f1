"""Time every candidate the planner proposes, through rblock's own tuner, for many ops and row lengths: the data
behind the planner's thresholds. `--configs` also times configs the planner does not propose (each forced, checked
against the fp64 reference), to try a form before the planner offers it. Prints each trial and writes
OUT_DIR/trials.json. rblock's and Triton's caches are fresh ones of the run's own (a pick found cached would be
loaded, its candidates not timed), unless `--keep-cache`.

    python benchmarks/trials.py OUT_DIR [--ops rms_norm,softmax] [--ns 4096,32768] [--total 67108864] [--dim 0]
        [--configs '[{"kind": "split_row", "XBLOCK": 1, "RBLOCK": 16384, "num_warps": 16, "split": 2}]']
        [--keep-cache]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time

import torch
import triton.testing

import rblock
from rblock.bench.harness import bandwidths, graphed
from rblock.compiler import recording
from rblock.ops.registry import OPS, max_rel_error

NS = (1024, 2048, 3000, 4096, 5120, 6144, 8192, 12288, 16384, 24576, 32768)
OPS_DEFAULT = ("rms_norm", "softmax", "log_softmax", "layer_norm", "fused_add_rms_norm", "cross_entropy", "var", "sum")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--ops", default=",".join(OPS_DEFAULT))
    ap.add_argument("--ns", default=",".join(map(str, NS)))
    ap.add_argument("--total", type=int, default=2**26)
    ap.add_argument("--dim", type=int, default=-1, help="reduced dim, for ops that take one (sum over dim 0)")
    ap.add_argument("--configs", default="[]", help="JSON list of rblock.Config fields, each also timed (forced)")
    ap.add_argument("--keep-cache", action="store_true", help="use the usual caches (cached picks are not tuned)")
    args = ap.parse_args()
    fresh = None if args.keep_cache else tempfile.TemporaryDirectory(prefix="rblock-trials-")
    if fresh is not None:
        os.environ["RBLOCK_CACHE_DIR"], os.environ["TRITON_CACHE_DIR"] = fresh.name, os.path.join(fresh.name, "triton")
    extra = [rblock.Config(**c) for c in json.loads(args.configs)]
    os.makedirs(args.out, exist_ok=True)
    copy, _ = bandwidths()
    print(f"copy {copy:.0f} GB/s", flush=True)
    rows = []
    for op in args.ops.split(","):
        for n in map(int, args.ns.split(",")):
            rows += point(op, max(args.total // n, 1), n, copy, args.dim if not OPS[op].reduces_rows else -1, extra)
            torch.cuda.empty_cache()
            # written after every point, so a run cut short by a time limit keeps what it measured
            with open(os.path.join(args.out, "trials.json"), "w") as f:
                json.dump({"device": torch.cuda.get_device_name(), "copy_GBps": copy, "rblock": rblock.__version__,
                           "rows": rows}, f, indent=1)  # fmt: skip


def point(op: str, m: int, n: int, copy: float, dim: int = -1, extra: list = ()) -> list[dict]:
    torch.manual_seed(0)
    rows = []
    inputs = OPS[op].make_inputs(m, n, torch.bfloat16, "cuda")
    ref = OPS[op].reference(inputs, dim)
    t0 = time.perf_counter()
    with recording() as log:
        out = OPS[op].run(inputs, dim)
    torch.cuda.synchronize()
    first = time.perf_counter() - t0
    outs = out if isinstance(out, (tuple, list)) else (out,)
    nbytes = sum(t.numel() * t.element_size() for t in [*inputs, *outs])
    ms = triton.testing.do_bench(lambda: OPS[op].run(inputs, dim), warmup=25, rep=100, return_mode="median")
    graph_us = graph_time(lambda: OPS[op].run(inputs, dim))
    gbps = nbytes / ms / 1e6
    err = max_rel_error(out, ref)
    print(f"{op} ({m}, {n}): {ms * 1e3:.1f} us {gbps:.0f} GB/s {100 * gbps / copy:.1f}% of copy, "
          f"{graph_us} us in a CUDA graph, err {err:.1e}, first call {first:.2f} s", flush=True)  # fmt: skip
    for k, c in enumerate(log):
        trials = [t.as_dict() for t in c.trials]
        for t in sorted(trials, key=lambda t: t["median_us"] or 1e9):
            print(f"   k{k} {t['config']:100s} {t['median_us'] or 0:8.1f} us regs {t['n_regs']} {t['note']}")
        rows.append({"op": op, "M": m, "N": n, "dim": dim, "kernel": k, "chosen": str(c.config), "trials": trials,
                     "median_us": ms * 1e3, "graph_us": graph_us, "GBps": gbps, "pct_of_copy": 100 * gbps / copy,
                     "max_rel_error": err, "first_call_s": first})  # fmt: skip
    for cfg in extra:
        rows.append(forced(op, inputs, ref, dim, cfg, nbytes, copy))
    return rows


def graph_time(fn) -> float | None:
    """The op replayed from a CUDA graph (µs): its kernels alone, without the host's work around them. None if the
    op cannot be captured."""
    try:
        replay, _ = graphed(fn)
    except RuntimeError as e:
        print(f"   no CUDA graph: {e}"[:200], flush=True)
        return None
    return round(triton.testing.do_bench(replay, warmup=25, rep=100, return_mode="median") * 1e3, 2)


def forced(op: str, inputs: list, ref, dim: int, cfg, nbytes: int, copy: float) -> dict:
    """One config the planner did not propose, forced on every kernel of the op."""
    row = {"op": op, "M": inputs[0].shape[0], "N": inputs[0].shape[-1], "dim": dim, "forced": str(cfg)}
    try:
        with rblock.settings(config=cfg, tune=False):
            err = max_rel_error(OPS[op].run(inputs, dim), ref)
            ms = triton.testing.do_bench(lambda: OPS[op].run(inputs, dim), warmup=25, rep=100, return_mode="median")
        row.update(median_us=ms * 1e3, GBps=nbytes / ms / 1e6, pct_of_copy=100 * nbytes / ms / 1e6 / copy,
                   max_rel_error=err)  # fmt: skip
        print(f"   forced {cfg}: {ms * 1e3:.1f} us {row['GBps']:.0f} GB/s, err {err:.1e}", flush=True)
    except Exception as e:  # a config that does not fit this op or shape: reported, the sweep goes on
        row["error"] = f"{type(e).__name__}: {e}"[:300]
        print(f"   forced {cfg}: {row['error']}", flush=True)
    return row


if __name__ == "__main__":
    main()
