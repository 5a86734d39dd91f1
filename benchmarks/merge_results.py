"""Merge `rblock bench` outputs of several runs (each covering some ops or providers) into one results set, and print
a Markdown summary of rblock against the best other provider.

    python benchmarks/merge_results.py OUT_NAME PART.json[:provider,provider...] [...]

A part may be limited to some providers (`old.json:eager,compile`): the rows of the others are left out. Where two
parts measured the same point (op, shape, dtype, provider), the later part's row is kept.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from rblock.bench import report

PER_RUN = ("total", "point_copy_GBps", "point_read_GBps", "flush_us")  # kept with their run where it measured them


def _load(part: str) -> dict:
    path, _, only = part.partition(":")
    data = json.loads(Path(path).read_text())
    if only:
        data["rows"] = [r for r in data["rows"] if r["provider"].removesuffix("_graph") in only.split(",")]
    return data


def merge(out_dir: Path, name: str, parts: list[str]) -> dict:
    datas = [_load(p) for p in parts]
    meta = {k: v for k, v in datas[0].items() if k not in ("rows", "runs", "process_start_s", *PER_RUN)}  # per run
    meta["runs"] = []
    for d in datas:
        providers = sorted({r["provider"] for r in d["rows"]})
        ops = sorted({r["op"] for r in d["rows"]})
        for run in d.get("runs") or [d]:  # an earlier merge keeps each of its runs' ceilings
            run_ops = [op for op in run.get("ops", ops) if op in ops]
            meta["runs"].append({"copy_GBps": run["copy_GBps"], "read_GBps": run["read_GBps"], "ops": run_ops,
                                 "providers": providers, "process_start_s": run.get("process_start_s"),
                                 **{k: run[k] for k in PER_RUN if run.get(k)}})  # fmt: skip
    latest: dict[tuple, dict] = {}  # a later part's measurement of a point replaces an earlier part's
    for d in datas:
        for r in d["rows"]:
            latest[(r["op"], r["M"], r["N"], r["dtype"], r["provider"], bool(r.get("small_batch")))] = r
    rows = list(latest.values())
    # one run could not hold every op: each run's own ceilings are kept under "runs"
    merged = {**report.to_json(meta, rows), "runs": meta["runs"]}
    (out_dir / f"{name}.json").write_text(json.dumps(merged, indent=1) + "\n")
    report.write_csv(out_dir / f"{name}.csv", rows)
    report.write_plots(out_dir, name, rows, meta["copy_GBps"], meta["read_GBps"])
    return {**meta, "rows": rows}


def summary(data: dict) -> str:
    by_point: dict[tuple[str, int], dict[str, dict]] = {}
    for r in (r for r in data["rows"] if not r.get("small_batch")):
        by_point.setdefault((r["op"], r["N"]), {})[r["provider"]] = r
    lines = [
        "| op | N | rblock GB/s | % of copy | rblock_looped_only | best other (GB/s) | rblock / best other |",
        "|---|---|---|---|---|---|---|",
    ]
    for (op, n), provs in sorted(by_point.items()):
        ours = provs.get("rblock")
        if not ours or not ours.get("GBps"):
            continue
        others = [
            r
            for p, r in provs.items()
            if not report.is_rblock(p) and not report.graphed(p) and r.get("correct") and r.get("GBps")
        ]
        best = max(others, key=lambda r: r["GBps"], default=None)
        looped = provs.get("rblock_looped_only", {}).get("GBps")
        lines.append(
            f"| {op} | {n} | {ours['GBps']:.0f} | {ours['pct_of_copy']:.1f} | {f'{looped:.0f}' if looped else '-'} | "
            + (f"{best['provider']} ({best['GBps']:.0f}) | {ours['GBps'] / best['GBps']:.2f}x |" if best else "- | - |")
        )
    return "\n".join(lines)


if __name__ == "__main__":
    out_name, *paths = sys.argv[1:]
    data = merge(Path("benchmarks/results"), out_name, paths)
    print(summary(data))
