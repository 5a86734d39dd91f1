"""Merge `rblock bench` outputs of several runs (each covering some ops) into one results set, and print a Markdown
summary of rblock against the best other provider.

    python benchmarks/merge_results.py OUT_NAME PART.json [PART.json ...]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from rblock.bench import report


def merge(out_dir: Path, name: str, parts: list[Path]) -> dict:
    datas = [json.loads(p.read_text()) for p in parts]
    meta = {k: v for k, v in datas[0].items() if k != "rows"}
    meta["runs"] = [
        {"copy_GBps": d["copy_GBps"], "read_GBps": d["read_GBps"], "ops": sorted({r["op"] for r in d["rows"]})}
        for d in datas
    ]
    rows = [r for d in datas for r in d["rows"]]
    # one run could not hold every op: each run's own ceilings are kept under "runs"
    merged = {**report.to_json(meta, rows), "runs": meta["runs"]}
    (out_dir / f"{name}.json").write_text(json.dumps(merged, indent=1) + "\n")
    report.write_csv(out_dir / f"{name}.csv", rows)
    report.write_plots(out_dir, name, rows, meta["copy_GBps"], meta["read_GBps"])
    return {**meta, "rows": rows}


def summary(data: dict) -> str:
    by_point: dict[tuple[str, int], dict[str, dict]] = {}
    for r in data["rows"]:
        by_point.setdefault((r["op"], r["N"]), {})[r["provider"]] = r
    lines = [
        "| op | N | rblock GB/s | % of copy | rblock_looped_only | best other (GB/s) | rblock / best other |",
        "|---|---|---|---|---|---|---|",
    ]
    for (op, n), provs in sorted(by_point.items()):
        ours = provs.get("rblock")
        if not ours or not ours.get("GBps"):
            continue
        others = [r for p, r in provs.items() if not report.is_rblock(p) and r.get("correct") and r.get("GBps")]
        best = max(others, key=lambda r: r["GBps"], default=None)
        looped = provs.get("rblock_looped_only", {}).get("GBps")
        lines.append(
            f"| {op} | {n} | {ours['GBps']:.0f} | {ours['pct_of_copy']:.1f} | {looped:.0f} | "
            + (f"{best['provider']} ({best['GBps']:.0f}) | {ours['GBps'] / best['GBps']:.2f}x |" if best else "- | - |")
        )
    return "\n".join(lines)


if __name__ == "__main__":
    out_name, *paths = sys.argv[1:]
    data = merge(Path("benchmarks/results"), out_name, [Path(p) for p in paths])
    print(summary(data))
