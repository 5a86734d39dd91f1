"""Each point of rblock's speed targets against a results file of `rblock bench` (one run or a merge): the measured
share of the run's copy or read bandwidth, the ratio to the best peer, and whether the point meets its target.

    python benchmarks/targets.py benchmarks/results/h200.json [--misses]

The targets are those of issues 5 (rows up to 32K) and 6 (rows above 32K, few huge rows), for bf16 at M·N = 2^26.
A point no run measured is listed as such, never as met. Shares use the ceilings of the run that measured the row
(a merged file keeps every run's copy and read bandwidth under `runs`). Beside them, where the run measured it, the
share of a bf16 copy or read of `total` elements, one input of a point (`point_copy_GBps`, `point_read_GBps`), timed
the same way; evidence for a miss, not a target. Small batches (`rblock bench --small-batch`)
are judged per call against torch.compile, in plain calls and in CUDA graphs alike. The tuning target (a new shape in
3 s) is judged on each point's first call where its run timed the process's start apart (listed below the table);
elsewhere a process's first point also paid it, and first calls are shown (marked †), not judged.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path

TOTAL = 2**26
POW2_32K = (1024, 2048, 4096, 8192, 16384, 32768)
UP_TO_32K = POW2_32K + (3000, 5120, 6144, 12288, 24576)
ABOVE_32K = (65536, 131072, 262144)
PEERS = ("compile", "compile_max", "liger")
SMALL_BATCHES = tuple((op, m, n) for op in ("rms_norm", "softmax") for n in (4096, 8192) for m in (1, 8, 64))
FIRST_CALL_S = 3.0


@dataclass(frozen=True)
class Target:
    issue: int
    op: str
    N: int
    M: int
    ceiling: str  # "copy" or "read": the bandwidth the share is taken of
    share: float  # the least share of that bandwidth, in percent
    vs_peers: float  # the least ratio of the best peer's time to rblock's
    vs_compile: float = 0.0  # the least ratio of torch.compile's time to rblock's (0: none)


def targets() -> list[Target]:
    out = []
    for op in ("rms_norm", "layer_norm", "softmax", "log_softmax", "fused_add_rms_norm"):
        vs_compile = 1.3 if op == "softmax" else 0.0
        out += [Target(5, op, n, TOTAL // n, "copy", 92.0, 1.0, vs_compile) for n in UP_TO_32K]
    out += [Target(5, "cross_entropy", n, TOTAL // n, "read", 90.0, 1.0, 1.3) for n in (4096, 8192, 16384, 32768)]
    for op, share in (("sum", 90.0), ("var", 90.0), ("sum_dim0", 85.0)):
        out += [Target(5, op, n, TOTAL // n, "read", share, 1.0) for n in UP_TO_32K]
    for op in ("rms_norm", "layer_norm", "softmax", "log_softmax"):
        out += [Target(6, op, n, TOTAL // n, "copy", 90.0, 1.2) for n in ABOVE_32K]
    # 50257 is issue 5's alone, 151936 both issues' (their stricter ratios), the others issue 6's
    out.append(Target(5, "cross_entropy", 50257, TOTAL // 50257, "read", 90.0, 1.0, 1.3))
    out.append(Target(6, "cross_entropy", 151936, TOTAL // 151936, "read", 90.0, 1.2, 1.3))
    out += [Target(6, "cross_entropy", n, TOTAL // n, "read", 90.0, 1.2) for n in ABOVE_32K + (128256, 256000)]
    out += [Target(6, op, n, m, "read", 85.0, 0.0) for op in ("sum", "var") for m, n in ((4, 2**24), (16, 2**22))]
    return out


def _run_of(data: dict, row: dict) -> dict:
    """The run that measured `row` (its ceilings, whether it timed the process's start): found from the row's own
    share of copy."""
    copy = row["GBps"] * 100 / row["pct_of_copy"]
    runs = data.get("runs") or [data]
    return min(runs, key=lambda r: abs(r["copy_GBps"] - copy))


def _at_least(ratio: float | None, target: float) -> bool | None:
    """Whether a ratio meets its target (a target of 0 asks nothing; None: the ratio was not measured)."""
    if not target:
        return True
    return None if ratio is None else ratio >= target


def assess(data: dict) -> list[dict]:
    """One verdict per target: `met` is True, False, or None where the point or a peer it is judged against was not
    measured (a point whose measured parts already miss is False)."""
    rows = {}
    for r in data["rows"]:
        if r.get("dtype") == "bf16" and not r.get("small_batch") and r.get("correct") and r.get("GBps"):
            rows[(r["op"], r["M"], r["N"], r["provider"])] = r
    out = []
    for t in targets():
        ours = rows.get((t.op, t.M, t.N, "rblock"))
        verdict = {"target": t, "share": None, "graph_share": None, "point_share": None, "peer": None,
                   "vs_peer": None, "vs_compile": None, "first_call_s": None, "first_call_judged": False,
                   "met": None}  # fmt: skip
        if ours:
            run = _run_of(data, ours)
            verdict["first_call_s"] = ours.get("first_call_s")
            verdict["first_call_judged"] = bool(run.get("process_start_s")) and verdict["first_call_s"] is not None
            ceiling = run["copy_GBps"] if t.ceiling == "copy" else run["read_GBps"]
            verdict["share"] = 100 * ours["GBps"] / ceiling
            point_ceiling = run.get(f"point_{t.ceiling}_GBps")  # evidence only: the targets are shares of `ceiling`
            if point_ceiling:
                verdict["point_share"] = 100 * ours["GBps"] / point_ceiling
            graphed = rows.get((t.op, t.M, t.N, "rblock_graph"))
            if graphed:
                verdict["graph_share"] = 100 * graphed["GBps"] / ceiling
            peers = [rows[(t.op, t.M, t.N, p)] for p in PEERS if (t.op, t.M, t.N, p) in rows]
            if peers:
                best = min(peers, key=lambda r: r["median_us"])
                verdict["peer"], verdict["vs_peer"] = best["provider"], best["median_us"] / ours["median_us"]
            compiled = rows.get((t.op, t.M, t.N, "compile"))
            if compiled:
                verdict["vs_compile"] = compiled["median_us"] / ours["median_us"]
            checks = (
                verdict["share"] >= t.share,
                _at_least(verdict["vs_peer"], t.vs_peers),
                _at_least(verdict["vs_compile"], t.vs_compile),
                not verdict["first_call_judged"] or verdict["first_call_s"] <= FIRST_CALL_S,
            )
            verdict["met"] = False if False in checks else (None if None in checks else True)
        out.append(verdict)
    return out


def assess_small_batches(data: dict) -> list[dict]:
    """Per small batch: rblock's and compile's time per call, plain and in a CUDA graph; `met` when rblock's is at
    most compile's in both (None where a side is missing)."""
    rows = {
        (r["op"], r["M"], r["N"], r["provider"]): r for r in data["rows"] if r.get("small_batch") and r.get("correct")
    }
    out = []
    for op, m, n in SMALL_BATCHES:
        times = {p: rows[(op, m, n, p)]["median_us"] for p in ("rblock", "compile", "rblock_graph", "compile_graph")
                 if (op, m, n, p) in rows}  # fmt: skip
        met = None
        if len(times) == 4:
            met = times["rblock"] <= times["compile"] and times["rblock_graph"] <= times["compile_graph"]
        out.append({"op": op, "M": m, "N": n, "times": times, "met": met})
    return out


def _fmt(value: float | None, spec: str, suffix: str = "") -> str:
    return "-" if value is None else format(value, spec) + suffix


def table(verdicts: list[dict]) -> str:
    lines = [
        "| issue | op | N | M | % of ceiling (target) | in a graph | % of the ceiling at the point's size | best peer "
        f"| × best peer (target) | × compile | first call s (≤ {FIRST_CALL_S:.0f}) | met |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for v in verdicts:
        t = v["target"]
        peer_target = f" (≥ {t.vs_peers:.1f})" if t.vs_peers else ""
        compile_target = f" (≥ {t.vs_compile:.1f})" if t.vs_compile else ""
        met = {True: "yes", False: "**no**", None: "not measured" if v["share"] is None else "peers not measured"}[
            v["met"]
        ]
        lines.append(
            f"| {t.issue} | {t.op} | {t.N} | {t.M} | {_fmt(v['share'], '.1f')} of {t.ceiling} (≥ {t.share:.0f}) | "
            f"{_fmt(v['graph_share'], '.1f')} | {_fmt(v['point_share'], '.1f')} | {v['peer'] or '-'} | "
            f"{_fmt(v['vs_peer'], '.2f', '×')}{peer_target} | "
            f"{_fmt(v['vs_compile'], '.2f', '×')}{compile_target} | {_fmt(v['first_call_s'], '.1f')}"
            f"{'' if v['first_call_judged'] or v['first_call_s'] is None else ' †'} | {met} |"
        )
    if any(v["first_call_s"] is not None and not v["first_call_judged"] for v in verdicts):
        lines.append("\n† not judged: the run did not time the process's start apart, which its first point paid.")
    return "\n".join(lines + [_counts(verdicts)])


def small_batch_table(verdicts: list[dict]) -> str:
    lines = [
        "| op | M | N | rblock µs | compile µs | rblock in a graph | compile in a graph | met |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for v in verdicts:
        t = v["times"]
        met = {True: "yes", False: "**no**", None: "not measured"}[v["met"]]
        cells = " | ".join(_fmt(t.get(p), ".1f") for p in ("rblock", "compile", "rblock_graph", "compile_graph"))
        lines.append(f"| {v['op']} | {v['M']} | {v['N']} | {cells} | {met} |")
    return "\n".join(lines + [_counts(verdicts)])


def _counts(verdicts: list[dict]) -> str:
    counts = {k: sum(v["met"] is k for v in verdicts) for k in (True, False, None)}
    return f"\n{counts[True]} met, {counts[False]} missed, {counts[None]} not measured in whole or in part, of {len(verdicts)}."


def process_starts(data: dict) -> str:
    """Each run's process start (every provider's first call, before the points), where the run timed it."""
    lines = []
    for run in data.get("runs") or [data]:
        started = run.get("process_start_s")
        if started:
            ops = ", ".join(run["ops"] if "ops" in run else sorted({r["op"] for r in data["rows"]})) or "no op"
            times = ", ".join(f"{k} {_fmt(v, '.1f', ' s')}" for k, v in started.items())
            lines.append(f"- the run of {ops}: {times}")
    return "Process start (each provider's first call, before a run's points):\n" + "\n".join(lines) if lines else ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path, help="a JSON file written by `rblock bench` or merge_results.py")
    parser.add_argument("--misses", action="store_true", help="list only the points that miss or were not measured")
    args = parser.parse_args()
    data = json.loads(args.results.read_text())
    keep = [v for v in assess(data) if not (args.misses and v["met"])]
    small = [v for v in assess_small_batches(data) if not (args.misses and v["met"])]
    print(f"{data.get('device', 'unknown device')}, rblock {data.get('rblock', '?')}\n\n{table(keep)}\n")
    print(small_batch_table(small))
    if starts := process_starts(data):
        print(f"\n{starts}")


if __name__ == "__main__":
    main()
