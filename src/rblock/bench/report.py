"""Benchmark results as a table, JSON, CSV and one GB/s-vs-N plot per op. Pure functions of the rows."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

ROW_KEYS = ("op", "M", "N", "dtype", "provider", "median_us", "GBps", "pct_of_copy", "correct", "first_call_s")
META_KEYS = (
    "device",
    "torch",
    "triton",
    "rblock",
    "copy_GBps",
    "read_GBps",
    "total",  # elements per input of each point
    "point_copy_GBps",  # a copy and a read of `total` elements, timed as the ceilings are
    "point_read_GBps",
    "flush_us",  # the GPU's time for do_bench's L2 flush, which hides the host's time of a plain row's call
    "process_start_s",
)
COLUMNS = ("op", "N", "M", "provider", "median_us", "GB/s", "% of copy", "rblock speedup", "first call s", "correct")


def is_rblock(provider: str) -> bool:
    return provider.startswith("rblock")


def graphed(provider: str) -> bool:
    """A row timed as a CUDA-graph replay (compared only with other such rows)."""
    return provider.endswith("_graph")


def add_speedups(rows: list[dict]) -> list[dict]:
    """Copies of the rows; each rblock row gets `speedup_vs_best_other`: the fastest correct non-rblock
    median at the same (op, M, N, dtype), timed the same way (plainly or as a CUDA-graph replay), over its own
    median (None when either side is missing)."""
    best: dict[tuple, float] = {}
    for r in rows:
        if not is_rblock(r["provider"]) and r.get("correct") and r.get("median_us"):
            key = (r["op"], r["M"], r["N"], r["dtype"], graphed(r["provider"]))
            best[key] = min(best.get(key, float("inf")), r["median_us"])
    out = []
    for r in rows:
        r = dict(r)
        if is_rblock(r["provider"]):
            other = best.get((r["op"], r["M"], r["N"], r["dtype"], graphed(r["provider"])))
            ok = r.get("correct") and r.get("median_us")
            r["speedup_vs_best_other"] = other / r["median_us"] if ok and other else None
        out.append(r)
    return out


def _fmt(value: object, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def _cells(r: dict) -> list[str]:
    correct = "error" if r.get("error") else ("yes" if r.get("correct") else "NO")
    return [
        r["op"],
        str(r["N"]),
        str(r["M"]),
        r["provider"],
        _fmt(r.get("median_us"), ".1f"),
        _fmt(r.get("GBps"), ".0f"),
        _fmt(r.get("pct_of_copy"), ".1f"),
        _fmt(r.get("speedup_vs_best_other"), ".2f") + ("x" if r.get("speedup_vs_best_other") else ""),
        _fmt(r.get("first_call_s"), ".2f"),
        correct,
    ]


def table_text(rows: list[dict], copy_GBps: float, read_GBps: float, use_rich: bool | None = None) -> str:
    """The rows as a text table (rich when importable, unless use_rich=False)."""
    title = f"copy {copy_GBps:.0f} GB/s, read {read_GBps:.0f} GB/s"
    if use_rich is not False:
        try:
            from rich.console import Console
            from rich.table import Table
        except ImportError:
            if use_rich:
                raise
        else:
            table = Table(title=title)
            for c in COLUMNS:
                table.add_column(c, justify="left" if c in ("op", "provider") else "right")
            for r in rows:
                table.add_row(*_cells(r))
            console = Console(file=io.StringIO(), width=160, force_terminal=False)
            console.print(table)
            return console.file.getvalue()
    cells = [list(COLUMNS)] + [_cells(r) for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(COLUMNS))]
    lines = [title] + [
        "  ".join(c.ljust(w) if i in (0, 3) else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths)))
        for row in cells
    ]
    lines.insert(2, "  ".join("-" * w for w in widths))
    return "\n".join(lines) + "\n"


def to_json(meta: dict, rows: list[dict]) -> dict:
    return {**{k: meta.get(k) for k in META_KEYS}, "rows": rows}


def write_json(path: Path, meta: dict, rows: list[dict]) -> Path:
    path.write_text(json.dumps(to_json(meta, rows), indent=1) + "\n")
    return path


def write_csv(path: Path, rows: list[dict]) -> Path:
    """One line per row: the standard keys first, then any extra keys in first-seen order."""
    keys = list(ROW_KEYS) + [k for k in dict.fromkeys(k for r in rows for k in r) if k not in ROW_KEYS]
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=keys)
        writer.writeheader()
        for r in rows:
            writer.writerow({k: ("" if r.get(k) is None else r.get(k)) for k in keys})
    return path


def write_plots(out_dir: Path, name: str, rows: list[dict], copy_GBps: float, read_GBps: float) -> list[Path]:
    """`<name>_<op>.png` per op: GB/s of the correct rows against N (log2), one line per provider. Small-batch
    rows (several M at one N) are left out."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sweep = [r for r in rows if not r.get("small_batch")]
    paths = []
    for op in dict.fromkeys(r["op"] for r in sweep):
        op_rows = [r for r in sweep if r["op"] == op]
        fig, ax = plt.subplots(figsize=(9, 5.5))
        for provider in dict.fromkeys(r["provider"] for r in op_rows):
            points = sorted(
                (r["N"], r["GBps"]) for r in op_rows if r["provider"] == provider and r.get("correct") and r.get("GBps")
            )
            if points:
                ax.plot(
                    *zip(*points), marker="o", markersize=3, label=provider, linewidth=2 if is_rblock(provider) else 1.2
                )
        ax.axhline(copy_GBps, linestyle="--", color="gray", label=f"copy {copy_GBps:.0f} GB/s")
        ax.axhline(read_GBps, linestyle=":", color="gray", label=f"read {read_GBps:.0f} GB/s")
        ns = sorted({r["N"] for r in op_rows})
        ax.set_xscale("log", base=2)
        if ns:
            ax.set_xticks(ns, [str(n) for n in ns], rotation=60, fontsize=7)
            ax.minorticks_off()
        dtypes = ", ".join(sorted({r["dtype"] for r in op_rows}))
        ax.set(title=f"{op} ({dtypes})", xlabel="N (row length)", ylabel="GB/s (bytes read + written / time)")
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        path = out_dir / f"{name}_{op}.png"
        fig.savefig(path, dpi=120)
        plt.close(fig)
        paths.append(path)
    return paths
