"""`rblock bench`: time rblock against eager PyTorch, torch.compile and Liger on a CUDA GPU, as GB/s next to the
device's copy and read bandwidth measured in the same run."""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import signal
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import torch

from rblock.bench import providers as prov
from rblock.bench import report
from rblock.bench.args import DTYPES, SMALL_BATCH, Sweep, parse_args, sweep_of
from rblock.compiler import recording
from rblock.ops.registry import max_rel_error

TOLERANCE = {"bf16": 3e-2, "fp16": 5e-3, "fp32": 1e-4}  # max |out - ref| / max |ref|
BANDWIDTH_NUMEL = 1 << 28
SMALL_BATCH_GRAPH_CALLS = 20  # small batches in a CUDA graph: calls captured back to back per replay
PROCESS_START_SHAPE = (64, 1024)  # (M, N): the call that starts each provider in the process, before the points
NO_GPU = "rblock bench needs a CUDA GPU (none found)"


def _bench_ms(fn: Callable[[], object]) -> float:
    from triton.testing import do_bench

    return do_bench(fn, warmup=25, rep=100, return_mode="median")


def host_call_us(fn: Callable[[], object], calls: int = 50) -> float:
    """The host's time per call: `calls` calls enqueued without a sync, few enough that the launch queue never
    fills and holds the host back. A plain row's `do_bench` time includes the host's wherever the host's time per
    iteration (this, the flush's launch and two events) exceeds the GPU's (the flush, the run's `flush_us`, and the
    call). A call that syncs inside itself (a `.item()`) waits for its GPU work here too."""
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    seconds = time.perf_counter() - start
    torch.cuda.synchronize()
    return seconds / calls * 1e6


def flush_us() -> float:
    """The GPU's time for `do_bench`'s L2 flush (Triton's zeroing of its 256 MB buffer), median of 20."""
    from triton.runtime import driver

    cache = driver.active.get_empty_cache_for_benchmark()
    times = []
    for _ in range(20):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        driver.active.clear_cache(cache)
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) * 1e3)
    return statistics.median(times)


def per_call_ms(fn: Callable[[], object], calls: int = 200) -> float:
    """Small batches: the time per call of back-to-back calls (no cache flush between them), so host overhead
    counts when it exceeds the kernel's time, as it does for a user calling in a loop. Median of 5 runs."""
    for _ in range(20):
        fn()
    times = []
    for _ in range(5):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / calls)
    return sorted(times)[2]


def bandwidths(numel: int = BANDWIDTH_NUMEL) -> tuple[float, float]:
    """(copy GB/s, read GB/s): a device-to-device copy and a torch.sum of `numel` bf16 elements."""
    src = torch.randn(numel, dtype=torch.bfloat16, device="cuda")
    dst = torch.empty_like(src)
    nbytes = src.numel() * src.element_size()
    copy_GBps = 2 * nbytes / _bench_ms(lambda: dst.copy_(src)) / 1e6
    read_GBps = nbytes / _bench_ms(lambda: torch.sum(src)) / 1e6
    return copy_GBps, read_GBps


@dataclass
class Point:
    op: str
    m: int
    n: int
    dtype: str
    inputs: list[torch.Tensor]
    refs: tuple[torch.Tensor, ...]
    nbytes: int  # each input read once, each output written once (in the input dtype)


def make_point(op: str, m: int, n: int, dtype: str) -> Point:
    torch.manual_seed(0)
    inputs = prov.make_inputs(op, m, n, DTYPES[dtype], "cuda")
    refs = prov.reference(op, inputs)
    nbytes = sum(t.numel() * t.element_size() for t in inputs) + sum(r.numel() for r in refs) * inputs[0].element_size()
    return Point(op, m, n, dtype, inputs, refs, nbytes)


def _base_row(op: str, m: int, n: int, dtype: str, provider: str) -> dict:
    return {"op": op, "M": m, "N": n, "dtype": dtype, "provider": provider} | dict.fromkeys(
        ("median_us", "GBps", "pct_of_copy", "correct", "first_call_s")
    )


def graphed(fn: Callable[[], object], calls: int = 1) -> tuple[Callable[[], object], object]:
    """Capture `calls` calls of fn (already warm) back to back in one CUDA graph: (replay, the last call's output)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            out = fn()
    return graph.replay, out


def measure(
    point: Point, provider: prov.Provider, copy_GBps: float, graph: bool = False, back_to_back: bool = False
) -> dict | None:
    """One row: first call, correctness against the fp64 reference, median time (per call of back-to-back calls with
    `back_to_back`). None when the provider lacks the op."""
    row = _base_row(point.op, point.m, point.n, point.dtype, provider.name + ("_graph" if graph else ""))
    row["correct"] = False
    if provider.note:
        row["note"] = provider.note
    try:
        with provider.scope():
            fn = provider.build(point.op, point.inputs)
            if fn is None:
                return None
            torch.cuda.synchronize()
            start = time.perf_counter()
            with recording() as log:  # rblock's kernels: the config each runs (tuned in this call)
                out = fn()
            torch.cuda.synchronize()
            if log:
                row["configs"] = [str(c.config) for c in log]
            # small batches in a graph: many calls per replay, as a captured model step holds them, so the time per
            # call is the GPU's and not the graph launch's (about as long as one such kernel)
            calls = SMALL_BATCH_GRAPH_CALLS if graph and back_to_back else 1
            if graph:
                fn, out = graphed(fn, calls)
                fn()
                torch.cuda.synchronize()
            else:
                row["first_call_s"] = time.perf_counter() - start
            err = max_rel_error(out, point.refs)
            del out
            row["max_rel_err"] = err
            row["correct"] = err <= TOLERANCE[point.dtype]
            ms = (per_call_ms(fn) if back_to_back else _bench_ms(fn)) / calls
            if not (graph or back_to_back):
                with contextlib.suppress(Exception):  # a diagnostic: its failure leaves the timed row as it is
                    row["host_us"] = host_call_us(fn)
    except Exception as e:  # noqa: BLE001 -- one failing point must not end the sweep
        row["error"] = f"{type(e).__name__}: {e}"[:500]
        return row
    row["median_us"] = ms * 1e3
    row["GBps"] = point.nbytes / ms / 1e6
    row["pct_of_copy"] = 100 * row["GBps"] / copy_GBps
    return row


def process_start(ops: tuple[str, ...], dtype: str, providers: list[prov.Provider]) -> dict[str, float | None]:
    """Each provider's first call in this process, on a small shape of the first of `ops` it has (seconds; None if it
    failed): what a process pays once (imports, Triton's start and its launcher built in a fresh cache, compile
    workers), so that each point's first call is the cost of a new shape alone (but a point of that very shape, whose
    tuning is then cached)."""
    seconds: dict[str, float | None] = {}
    for provider in providers:
        for op in ops:
            try:
                point = make_point(op, *PROCESS_START_SHAPE, dtype)
                with provider.scope():
                    fn = provider.build(op, point.inputs)
                    if fn is None:
                        continue  # the provider lacks this op: its next one
                    torch.cuda.synchronize()
                    start = time.perf_counter()
                    fn()
                    torch.cuda.synchronize()
                    seconds[provider.name] = time.perf_counter() - start
            except Exception:  # noqa: BLE001 -- its points report the error
                seconds[provider.name] = None
            break
    return seconds


def _free() -> None:
    gc.collect()
    torch.cuda.empty_cache()


def _log_row(r: dict) -> None:
    status = "error" if r.get("error") else ("ok" if r["correct"] else "WRONG")
    us = "-" if r["median_us"] is None else f"{r['median_us']:.1f} us"
    gbps = "-" if r["GBps"] is None else f"{r['GBps']:.0f} GB/s"
    print(f"  {r['op']:<18} N={r['N']:<7} M={r['M']:<6} {r['provider']:<30} {us:>12} {gbps:>11}  {status}", flush=True)


def run_points(
    ops: tuple[str, ...],
    shapes: list[tuple[int, int]],
    dtype: str,
    providers: list[prov.Provider],
    copy_GBps: float,
    small: bool,
    rows: list[dict],
    save: Callable[[], None],
    extra: dict | None = None,
    graphs: bool = False,
) -> None:
    """Append a row for every (op, shape, provider) to `rows`; with `small` (small batches), timed back to back and
    also as a CUDA-graph replay; with `graphs`, also as a CUDA-graph replay. `extra` keys are added to every row;
    `save()` runs after each shape."""
    lacking: set[tuple[str, str]] = set()
    for op in ops:
        for m, n in shapes:
            try:
                point = make_point(op, m, n, dtype)
            except Exception as e:  # noqa: BLE001 -- e.g. out of memory for the fp64 reference
                error = f"{type(e).__name__}: {e}"[:500]
                rows += [
                    {**_base_row(op, m, n, dtype, p.name), "correct": False, "error": error, **(extra or {})}
                    for p in providers
                ]
                _free()
                continue
            for provider in providers:
                for graph in (False, True) if small or graphs else (False,):
                    row = measure(point, provider, copy_GBps, graph, back_to_back=small)
                    _free()
                    if row is None:
                        if (provider.name, op) not in lacking:
                            print(f"  note: {provider.name} has no {op}", flush=True)
                        lacking.add((provider.name, op))
                        continue
                    rows.append({**row, **(extra or {})})
                    _log_row(row)
            del point
            _free()
            save()


@contextlib.contextmanager
def _env(values: dict[str, str]) -> Iterator[None]:
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _run(args: argparse.Namespace, sweep: Sweep) -> int:
    import triton

    import rblock

    providers, notes = prov.resolve(list(sweep.providers))
    for note in notes:
        print(f"note: {note}", flush=True)
    out_dir: Path = args.out
    out_dir.mkdir(parents=True, exist_ok=True)
    meta = {
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "rblock": rblock.__version__,
    }
    print(
        f"{meta['device']}: torch {meta['torch']}, triton {meta['triton']}, rblock {meta['rblock']}, {sweep.dtype}",
        flush=True,
    )
    done: list[dict] = []

    def save() -> None:
        # after every shape, so an interrupted sweep still leaves its results
        report.write_json(out_dir / f"{args.name}.json", meta, done)
        report.write_csv(out_dir / f"{args.name}.csv", done)

    try:
        with torch.no_grad():
            meta["copy_GBps"], meta["read_GBps"] = bandwidths()
            _free()
            # the same two of `total` bf16 elements, one input of a point, where a launch and the timer weigh more
            # than at 2^28: evidence beside the ceilings the targets are shares of
            meta["total"] = sweep.total
            meta["point_copy_GBps"], meta["point_read_GBps"] = bandwidths(sweep.total)
            meta["flush_us"] = flush_us()
            _free()
            print(
                f"copy {meta['copy_GBps']:.0f} GB/s, read {meta['read_GBps']:.0f} GB/s; of {sweep.total} elements, "
                f"copy {meta['point_copy_GBps']:.0f} GB/s, read {meta['point_read_GBps']:.0f} GB/s; "
                f"do_bench's flush {meta['flush_us']:.1f} us",
                flush=True,
            )
            meta["process_start_s"] = process_start(sweep.ops, sweep.dtype, providers)
            _free()
            started = ", ".join(
                f"{k} {v:.2f} s" if v is not None else f"{k} failed" for k, v in meta["process_start_s"].items()
            )
            print(
                f"process start (each provider's first call, on {PROCESS_START_SHAPE} of its first op): {started}",
                flush=True,
            )
            shapes = [(max(1, sweep.total // n), n) for n in sweep.ns]
            run_points(
                sweep.ops, shapes, sweep.dtype, providers, meta["copy_GBps"], False, done, save, None, sweep.graphs
            )
            if sweep.small_batch:
                small, small_notes = prov.resolve(list(SMALL_BATCH["providers"]))
                for note in small_notes:
                    print(f"note: {note}", flush=True)
                shapes = [(m, n) for n in SMALL_BATCH["ns"] for m in SMALL_BATCH["ms"]]
                extra = {"small_batch": True}
                run_points(SMALL_BATCH["ops"], shapes, sweep.dtype, small, meta["copy_GBps"], True, done, save, extra)
        status = 0
    except KeyboardInterrupt:
        if "read_GBps" not in meta:
            raise
        print("interrupted: reporting the rows measured so far", file=sys.stderr, flush=True)
        status = 130
    rows = report.add_speedups(done)
    print(report.table_text(rows, meta["copy_GBps"], meta["read_GBps"]), flush=True)
    for r in rows:
        if r.get("error"):
            print(f"error: {r['op']} M={r['M']} N={r['N']} {r['provider']}: {r['error']}", file=sys.stderr)
    paths = [
        report.write_json(out_dir / f"{args.name}.json", meta, rows),
        report.write_csv(out_dir / f"{args.name}.csv", rows),
    ]
    paths += report.write_plots(out_dir, args.name, rows, meta["copy_GBps"], meta["read_GBps"])
    print("wrote " + ", ".join(str(p) for p in paths), flush=True)
    return status


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """`timeout` and job schedulers send SIGTERM: handle it like Ctrl-C, so the rows so far are still reported."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def main(argv: list[str] | None = None) -> int:
    """Entry point of `rblock bench` and `python -m rblock.bench`: 0 when done, 2 without a CUDA GPU, 130 when
    interrupted (after reporting what was measured)."""
    args = parse_args(argv)
    sweep = sweep_of(args)
    if not torch.cuda.is_available():
        print(NO_GPU, file=sys.stderr)
        return 2
    with contextlib.ExitStack() as stack:
        stack.enter_context(_sigterm_as_interrupt())
        if not args.keep_cache:
            # fresh caches, so rblock's first calls include code generation, compilation and tuning
            tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="rblock-bench-"))
            stack.enter_context(_env({"RBLOCK_CACHE_DIR": tmp, "TRITON_CACHE_DIR": os.path.join(tmp, "triton")}))
        return _run(args, sweep)
