"""rblock bench on the CPU: report functions on synthetic rows, flags, providers' plumbing, the no-GPU exit."""

from __future__ import annotations

import csv
import json
import math
import sys
import types

import pytest
import torch

from rblock.bench import args as bench_args
from rblock.bench import harness, inductor, report
from rblock.bench import providers as prov


def _row(provider: str, median_us: float | None, correct: bool = True, op: str = "rms_norm", n: int = 4096, **extra):
    gbps = None if median_us is None else 1000.0 / median_us
    return {
        "op": op,
        "M": 16384,
        "N": n,
        "dtype": "bf16",
        "provider": provider,
        "median_us": median_us,
        "GBps": gbps,
        "pct_of_copy": None if gbps is None else 100 * gbps / 4000,
        "correct": correct,
        "first_call_s": 1.5 if provider in ("rblock", "compile") else None,
        **extra,
    }


@pytest.fixture
def rows() -> list[dict]:
    return [
        _row("rblock", 10.0),
        _row("rblock_looped_only", 12.0),
        _row("eager", 30.0),
        _row("compile", 15.0),
        _row("liger", 5.0, correct=False),  # fastest but wrong: must not count
        _row("rblock", 20.0, n=8192),
        _row("compile", None, correct=False, n=8192, error="RuntimeError: boom"),
        _row("rblock", 40.0, op="softmax"),
        _row("eager", 20.0, op="softmax"),
        _row("rblock", 3.0, n=4096, small_batch=True, op="softmax_small"),
    ]


def test_speedup_uses_best_correct_non_rblock_provider(rows):
    out = {(r["op"], r["N"], r["provider"]): r for r in report.add_speedups(rows)}
    assert out[("rms_norm", 4096, "rblock")]["speedup_vs_best_other"] == pytest.approx(15.0 / 10.0)
    assert out[("rms_norm", 4096, "rblock_looped_only")]["speedup_vs_best_other"] == pytest.approx(15.0 / 12.0)
    assert out[("softmax", 4096, "rblock")]["speedup_vs_best_other"] == pytest.approx(0.5)
    # the only other provider at N=8192 failed: no speedup
    assert out[("rms_norm", 8192, "rblock")]["speedup_vs_best_other"] is None
    assert "speedup_vs_best_other" not in out[("rms_norm", 4096, "eager")]
    assert "speedup_vs_best_other" not in rows[0]  # the input rows are left alone


def test_graph_replays_are_compared_with_graph_replays(rows):
    """A provider replayed from a CUDA graph is timed without its host time: plain calls are not measured
    against it, nor it against them."""
    rows += [_row("compile_graph", 6.0), _row("rblock_graph", 4.0), _row("rblock_graph", 8.0, op="softmax")]
    out = {(r["op"], r["N"], r["provider"]): r for r in report.add_speedups(rows)}
    assert out[("rms_norm", 4096, "rblock")]["speedup_vs_best_other"] == pytest.approx(15.0 / 10.0)
    assert out[("rms_norm", 4096, "rblock_graph")]["speedup_vs_best_other"] == pytest.approx(6.0 / 4.0)
    assert out[("softmax", 4096, "rblock_graph")]["speedup_vs_best_other"] is None  # no other graph replay


def test_speedup_is_none_for_an_incorrect_rblock_row():
    out = report.add_speedups([_row("rblock", 1.0, correct=False), _row("eager", 2.0)])
    assert out[0]["speedup_vs_best_other"] is None


@pytest.mark.parametrize("use_rich", [False, True])
def test_table_lists_every_row(rows, use_rich):
    if use_rich:
        pytest.importorskip("rich")
    text = report.table_text(report.add_speedups(rows), 4000.0, 3500.0, use_rich=use_rich)
    assert "copy 4000 GB/s" in text and "read 3500 GB/s" in text
    for provider in ("rblock_looped_only", "eager", "compile", "liger"):
        assert provider in text
    assert "1.50x" in text  # rblock vs compile at rms_norm N=4096
    assert "error" in text and "NO" in text
    assert "40.0" in text and "0.50x" in text  # rblock at softmax: slower than eager
    if not use_rich:
        lines = text.splitlines()
        assert len(lines) == 3 + len(rows)  # title, header, rule, one per row


def test_json_has_the_layout(tmp_path, rows):
    meta = {
        "device": "H200",
        "torch": "2.11",
        "triton": "3.6",
        "rblock": "0.1.0",
        "copy_GBps": 4000.0,
        "read_GBps": 3500.0,
        "process_start_s": {"rblock": 4.5, "compile": None},
    }
    path = report.write_json(tmp_path / "bench.json", {**meta, "ignored": 1}, report.add_speedups(rows))
    data = json.loads(path.read_text())
    assert list(data) == [
        "device", "torch", "triton", "rblock", "copy_GBps", "read_GBps", "total", "point_copy_GBps", "point_read_GBps",
        "flush_us", "process_start_s", "rows",
    ]  # fmt: skip
    assert data["process_start_s"] == {"rblock": 4.5, "compile": None}
    assert data["copy_GBps"] == 4000.0 and data["device"] == "H200"
    assert len(data["rows"]) == len(rows)
    for r in data["rows"]:
        assert set(report.ROW_KEYS) <= set(r)
    assert data["rows"][6]["error"] == "RuntimeError: boom"


def test_csv_has_a_header_and_a_line_per_row(tmp_path, rows):
    path = report.write_csv(tmp_path / "bench.csv", report.add_speedups(rows))
    with path.open() as f:
        lines = list(csv.reader(f))
    header = lines[0]
    assert header[: len(report.ROW_KEYS)] == list(report.ROW_KEYS)
    assert {"speedup_vs_best_other", "error", "small_batch"} <= set(header)
    assert len(lines) == 1 + len(rows)
    first = dict(zip(header, lines[1]))
    assert first["provider"] == "rblock" and float(first["median_us"]) == 10.0
    assert float(first["speedup_vs_best_other"]) == pytest.approx(1.5)
    assert first["error"] == ""


def test_plots_one_png_per_op(tmp_path, rows):
    pytest.importorskip("matplotlib")
    paths = report.write_plots(tmp_path, "bench", rows, 4000.0, 3500.0)
    assert sorted(p.name for p in paths) == ["bench_rms_norm.png", "bench_softmax.png"]  # small-batch rows left out
    for p in paths:
        data = p.read_bytes()
        assert len(data) > 1000 and data[:8] == b"\x89PNG\r\n\x1a\n"


def test_quick_narrows_the_sweep():
    full = bench_args.sweep_of(bench_args.parse_args([]))
    quick = bench_args.sweep_of(bench_args.parse_args(["--quick"]))
    assert full.ops == prov.OPS and "sum_dim0" in full.ops
    assert full.ns[0] == 1024 and full.ns[-1] == 262144 and list(full.ns) == sorted(full.ns)
    assert {3000, 5120, 6144, 12288, 24576, 50257, 151936} <= set(full.ns) and len(full.ns) == 16
    assert full.providers == prov.PROVIDERS and full.dtype == "bf16" and full.total == 2**26
    assert quick.ops == ("rms_norm", "softmax", "cross_entropy", "layer_norm")
    assert quick.ns == (4096, 32768, 131072)
    assert quick.providers == ("rblock", "rblock_looped_only", "eager", "compile")
    assert (
        set(quick.ops) < set(full.ops) and set(quick.ns) < set(full.ns) and set(quick.providers) < set(full.providers)
    )
    explicit = bench_args.sweep_of(bench_args.parse_args(["--quick", "--ops", "sum,var"]))
    assert explicit.ops == ("sum", "var") and explicit.ns == quick.ns


def test_flags_are_parsed():
    a = bench_args.parse_args(
        ["--ns", "1024,3000", "--dtype", "fp16", "--providers", "eager,compile", "--total", "4096"]
    )
    assert a.ns == [1024, 3000] and a.dtype == "fp16" and a.providers == ["eager", "compile"] and a.total == 4096
    s = bench_args.sweep_of(bench_args.parse_args(["--ns", "3000,1024,3000", "--small-batch", "--name", "x"]))
    assert s.ns == (1024, 3000) and s.small_batch and not s.graphs
    assert bench_args.sweep_of(bench_args.parse_args(["--quick", "--graphs"])).graphs


@pytest.mark.parametrize(
    "argv", [["--providers", "eager,nope"], ["--ops", "rms_norm,bogus"], ["--ns", "4k"], ["--ns", ""]]
)
def test_bad_flags_exit(argv):
    with pytest.raises(SystemExit):
        bench_args.parse_args(argv)


def test_main_without_gpu_returns_2(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert harness.main(["--quick", "--out", str(tmp_path / "results")]) == 2
    assert "rblock bench needs a CUDA GPU (none found)" in capsys.readouterr().err
    assert not (tmp_path / "results").exists()


def test_max_rel_error():
    ref = (torch.tensor([1.0, -4.0], dtype=torch.float64),)
    assert harness.max_rel_error(torch.tensor([1.0, -4.0]), ref) == 0.0
    assert harness.max_rel_error(torch.tensor([1.4, -4.0]), ref) == pytest.approx(0.1)
    assert harness.max_rel_error(torch.tensor([1.0, float("nan")]), ref) == math.inf
    assert harness.max_rel_error(torch.tensor([1.0]), ref) == math.inf
    assert harness.max_rel_error((torch.tensor([1.0, -4.0]), torch.tensor([0.0])), ref) == math.inf


@pytest.mark.parametrize("op", prov.OPS)
def test_inputs_and_references(op):
    torch.manual_seed(0)
    inputs = prov.make_inputs(op, 8, 64, torch.bfloat16, "cpu")
    assert inputs[0].shape == (8, 64) and inputs[0].dtype == torch.bfloat16
    assert all(t.abs().sum() > 0 for t in inputs if t.is_floating_point())
    refs = prov.reference(op, inputs)
    assert all(r.dtype == torch.float64 for r in refs)
    expected = {"cross_entropy": [()], "fused_add_rms_norm": [(8, 64), (8, 64)], "sum": [(8,)], "var": [(8,)]}
    expected |= {"sum_dim0": [(64,)]}
    assert [tuple(r.shape) for r in refs] == expected.get(op, [(8, 64)])
    eager = prov.EAGER[op](*inputs)
    assert harness.max_rel_error(eager, refs) <= harness.TOLERANCE["bf16"]
    if op == "cross_entropy":
        assert inputs[1].dtype == torch.int64 and int(inputs[1].max()) < 64


def test_liger_args_follow_the_forward_signature():
    def forward(ctx, X, W, eps, offset=0.0, casting_mode="llama", in_place=True, *rest):
        return X

    x, w = torch.ones(2, 4), torch.ones(4)
    args = prov.liger_args(forward, [x, w], {"eps": 1e-6, "in_place": False})
    assert args[2:] == [1e-6, 0.0, "llama", False] and args[0] is x and args[1] is w
    assert prov.liger_args(forward, [x, w], {}) is None  # eps is required
    assert prov.liger_args(lambda ctx, X: X, [x, w], {}) is None


def test_liger_provider_with_a_stand_in_module(monkeypatch):
    calls = []

    class FakeCrossEntropy:
        @staticmethod
        def forward(ctx, _input, target, weight=None, ignore_index=-100, reduction="mean", return_z_loss=True):
            return _input

        @staticmethod
        def apply(*args):
            calls.append(args)
            return torch.tensor(1.0), None

    module = types.ModuleType("liger_kernel.ops.cross_entropy")
    module.LigerCrossEntropyFunction = FakeCrossEntropy
    monkeypatch.setitem(sys.modules, "liger_kernel.ops.cross_entropy", module)
    logits, target = torch.randn(4, 8), torch.randint(0, 8, (4,))
    call = prov._liger("cross_entropy", [logits, target])
    assert call is not None and call().item() == 1.0
    args = calls[0]
    assert args[0] is not logits and torch.equal(args[0], logits)  # its own copy: Liger writes gradients into it
    assert args[1] is target and args[2:] == (None, -100, "mean", False)
    assert prov._liger("var", [logits]) is None


def test_unavailable_liger_is_skipped_with_a_note(monkeypatch):
    monkeypatch.setattr(prov.importlib.util, "find_spec", lambda name: None)
    available, notes = prov.resolve(["eager", "liger", "rblock_looped_only"])
    assert [p.name for p in available] == ["eager", "rblock_looped_only"]
    assert any("liger" in n and "not installed" in n for n in notes)
    with pytest.raises(ValueError):
        prov.resolve(["nope"])


def test_compile_without_a_way_to_drop_the_candidate_is_skipped(monkeypatch):
    monkeypatch.setattr(inductor, "no_persistent_rblock", lambda: None)
    available, notes = prov.resolve(["compile", "compile_no_persistent_rblock"])
    assert [p.name for p in available] == ["compile"]
    assert notes and notes[0].startswith("compile_no_persistent_rblock: skipped")


def test_no_persistent_rblock_mechanism_is_found_and_undone():
    from torch._inductor.codegen.triton import TritonKernel

    mechanism = inductor.no_persistent_rblock()
    assert mechanism is not None, "no way to drop Inductor's persistent-RBLOCK candidate in this torch"
    before = TritonKernel.__dict__.get(inductor.KEY)
    with mechanism.scope():
        if before is not None and "codegen" in mechanism.description:
            assert TritonKernel.add_persistent_rblock.fget(None) is False
    assert TritonKernel.__dict__.get(inductor.KEY) is before


def test_runtime_hook_drops_the_candidate():
    from torch._inductor.runtime import triton_heuristics
    from torch._inductor.runtime.hints import DeviceProperties, ReductionHint

    scope = inductor._runtime_hook()
    if scope is None:  # this torch decides in codegen: the codegen hook must then exist instead
        assert inductor._codegen_hook() is not None
        return
    meta = {"reduction_hint": ReductionHint.INNER, "num_load": 2, "num_reduction": 1, inductor.KEY: True}
    kwargs = {"size_hints": {"x": 2048, "r0_": 8192}, "inductor_meta": meta}
    kwargs["triton_meta"] = {"device": DeviceProperties.create(torch.device("cpu"))}
    original = triton_heuristics._reduction_configs
    with_candidate = len(original(**kwargs))
    with scope():
        assert triton_heuristics._reduction_configs is not original
        without = len(triton_heuristics._reduction_configs(**kwargs))
    assert triton_heuristics._reduction_configs is original
    assert without == with_candidate - 1
    assert meta[inductor.KEY] is True  # the caller's dict is left alone


@pytest.fixture
def cpu_harness(monkeypatch):
    """The harness on fp32 CPU points, each timed at 0.5 ms: what it records, not how fast."""

    def cpu_point(op, m, n, dtype):
        torch.manual_seed(0)
        inputs = prov.make_inputs(op, m, n, torch.float32, "cpu")
        return harness.Point(op, m, n, dtype, inputs, prov.reference(op, inputs), 1_000_000)

    monkeypatch.setattr(harness, "make_point", cpu_point)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)
    monkeypatch.setattr(harness, "_bench_ms", lambda fn: 0.5)
    monkeypatch.setattr(harness, "host_call_us", lambda fn: 12.5)


@pytest.mark.usefixtures("cpu_harness")
def test_run_points_records_rows_errors_and_missing_ops(capsys):
    def failing(op, inputs):
        def call():
            raise RuntimeError("kernel failed")

        return call

    def wrong(op, inputs):
        return lambda: prov.EAGER[op](*inputs) * 1.5

    providers = [
        prov.Provider("eager", lambda op, inputs: lambda: prov.EAGER[op](*inputs)),
        prov.Provider("broken", failing),
        prov.Provider("sloppy", wrong),
        prov.Provider(
            "softmax_only", lambda op, inputs: (lambda: torch.softmax(inputs[0], -1)) if op == "softmax" else None
        ),
    ]
    rows: list[dict] = []
    saves = []
    harness.run_points(
        ("softmax", "sum_dim0"),
        [(4, 32)],
        "fp32",
        providers,
        2000.0,
        False,
        rows,
        lambda: saves.append(len(rows)),
        {"tag": 1},
    )
    by = {(r["op"], r["provider"]): r for r in rows}
    assert saves == [4, 7]
    ok = by[("softmax", "eager")]
    assert ok["correct"] and ok["median_us"] == 500.0 and ok["GBps"] == pytest.approx(2.0) and ok["tag"] == 1
    assert ok["pct_of_copy"] == pytest.approx(0.1) and ok["first_call_s"] >= 0
    assert list(ok)[:10] == list(report.ROW_KEYS)
    assert ok["host_us"] == 12.5  # the host's time per call, beside the plain time it may hide in
    broken = by[("softmax", "broken")]
    assert not broken["correct"] and broken["median_us"] is None and broken["error"] == "RuntimeError: kernel failed"
    assert "host_us" not in broken
    sloppy = by[("softmax", "sloppy")]
    assert not sloppy["correct"] and sloppy["median_us"] == 500.0 and sloppy["max_rel_err"] == pytest.approx(0.5)
    assert ("sum_dim0", "softmax_only") not in by and by[("sum_dim0", "eager")]["correct"]
    assert "softmax_only has no sum_dim0" in capsys.readouterr().out


@pytest.mark.usefixtures("cpu_harness")
def test_host_time_rides_on_plain_rows_alone(monkeypatch):
    """Graph replays and back-to-back rows carry no host time (none hides in them); a plain row whose host timing
    fails keeps its time and its verdict."""
    monkeypatch.setattr(harness, "graphed", lambda fn, calls=1: (fn, fn()))
    monkeypatch.setattr(harness, "per_call_ms", lambda fn: 0.01)
    point = harness.make_point("softmax", 4, 32, "fp32")
    eager = prov.Provider("eager", lambda op, inputs: lambda: prov.EAGER[op](*inputs))
    assert harness.measure(point, eager, 2000.0)["host_us"] == 12.5
    for row in (harness.measure(point, eager, 2000.0, graph=True), harness.measure(point, eager, 2000.0, True, True)):
        assert row["correct"] and row["median_us"] and "host_us" not in row

    def failing(fn):
        raise RuntimeError("no timer")

    monkeypatch.setattr(harness, "host_call_us", failing)
    row = harness.measure(point, eager, 2000.0)
    assert row["correct"] and row["median_us"] == 500.0 and "host_us" not in row and "error" not in row


def test_host_time_counts_calls_enqueued_without_a_sync(monkeypatch):
    """The host's time per call: each call's own seconds, averaged over the calls, syncing only around them."""
    events = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: events.append("sync"))
    monkeypatch.setattr(harness.time, "perf_counter", lambda: len(events) * 1e-6)  # 1 us per event so far

    def call():
        events.append("call")

    us = harness.host_call_us(call, calls=10)
    assert events == ["sync"] + ["call"] * 10 + ["sync"]
    assert us == pytest.approx(1.0)


@pytest.mark.usefixtures("cpu_harness")
def test_process_start_times_each_providers_first_call():
    """Before the points, each provider's first call in the process is timed on a small shape of the first op it has:
    a provider that fails there is None (its points report the error), one with none of the ops is left out."""

    def failing(op, inputs):
        def call():
            raise RuntimeError("kernel failed")

        return call

    built = []

    def softmax_only(op, inputs):
        built.append((op, tuple(inputs[0].shape)))
        return (lambda: torch.softmax(inputs[0], -1)) if op == "softmax" else None

    providers = [
        prov.Provider("eager", lambda op, inputs: lambda: prov.EAGER[op](*inputs)),
        prov.Provider("broken", failing),
        prov.Provider("none", lambda op, inputs: None),
        prov.Provider("softmax_only", softmax_only),
        *prov.resolve(["rblock"])[0],
    ]
    started = harness.process_start(("rms_norm", "softmax"), "fp32", providers)
    assert list(started) == ["eager", "broken", "softmax_only", "rblock"]
    assert started["eager"] > 0 and started["rblock"] > 0 and started["softmax_only"] > 0
    assert started["broken"] is None
    assert built == [("rms_norm", harness.PROCESS_START_SHAPE), ("softmax", harness.PROCESS_START_SHAPE)]


def test_merged_results_keep_each_runs_process_start(tmp_path, rows):
    """A merge keeps each run's process start, ceilings at the points' size and flush time with its run, and none of
    them at the top as if it were every run's."""
    merge_results = _script("merge_results")
    per_run = ("total", "point_copy_GBps", "point_read_GBps", "flush_us")
    parts = []
    for i, started in enumerate(({"rblock": 5.0}, {"rblock": 4.0, "compile": None}, {"rblock": 6.0})):
        meta = {"device": "H200", "copy_GBps": 4000.0 + i, "read_GBps": 3800.0, "process_start_s": started}
        if i < 2:  # the third run measured none of them
            meta |= dict(zip(per_run, (2**26, 3700.0 + i, 3300.0 + i, 60.0 + i)))
        parts.append(str(report.write_json(tmp_path / f"part{i}.json", meta, rows)))
    merged = merge_results.merge(tmp_path, "merged", parts)
    assert [run["process_start_s"] for run in merged["runs"]] == [
        {"rblock": 5.0},
        {"rblock": 4.0, "compile": None},
        {"rblock": 6.0},
    ]
    assert [[run.get(k) for k in per_run] for run in merged["runs"]] == [
        [2**26, 3700.0, 3300.0, 60.0],
        [2**26, 3701.0, 3301.0, 61.0],
        [None] * 4,
    ]
    assert not set(per_run) & set(merged["runs"][2])  # not measured there: not written as None
    top = json.loads((tmp_path / "merged.json").read_text())
    assert [top[k] for k in ("process_start_s", *per_run)] == [None] * 5


@pytest.mark.usefixtures("cpu_harness")
def test_rblock_rows_name_the_config_each_kernel_runs():
    """Which candidate won is part of a row (the tuner's pick can differ between runs); other providers' rows have
    no configs."""
    providers, _ = prov.resolve(["rblock", "rblock_looped_only", "eager"])
    rows: list[dict] = []
    harness.run_points(("cross_entropy",), [(4, 3000)], "fp32", providers, 2000.0, False, rows, lambda: None)
    by = {r["provider"]: r for r in rows}
    assert all(by[p]["correct"] for p in by)
    assert len(by["rblock"]["configs"]) == 2  # the row kernel and the mean
    assert by["rblock_looped_only"]["configs"][0].startswith("looped(")
    assert "configs" not in by["eager"]


def _script(name: str):
    """A script beside the benchmarks (benchmarks/NAME.py), not part of the package."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"rblock_{name}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up
    spec.loader.exec_module(module)
    return module


def test_targets_judge_each_point_against_its_own_runs_ceilings():
    """A share is taken of the ceiling of the run that measured the row; a point meets its target only with its
    share and its peer ratios; a point no run measured is never met."""
    targets = _script("targets")

    def row(op, n, provider, us, copy, m=None, first=1.0):
        nbytes = 4.0 * 2**26  # bf16 read and written
        gbps = nbytes / us / 1e3
        return {"op": op, "M": m or 2**26 // n, "N": n, "dtype": "bf16", "provider": provider, "median_us": us,
                "GBps": gbps, "pct_of_copy": 100 * gbps / copy, "correct": True, "first_call_s": first}  # fmt: skip

    data = {
        "runs": [
            {
                "copy_GBps": 4000.0,
                "read_GBps": 3800.0,
                "ops": ["rms_norm"],
                "process_start_s": {"rblock": 7.4, "liger": None},
            },  # fmt: skip
            # a run that timed no process start, with its ceilings at the points' size
            {"copy_GBps": 4200.0, "read_GBps": 3000.0, "total": 2**26, "point_copy_GBps": 3900.0},
        ],
        "rows": [
            row("rms_norm", 4096, "rblock", 70.0, 4000.0),  # 3835 GB/s: 95.9% of 4000
            row("rms_norm", 4096, "compile", 71.0, 4000.0),
            row("rms_norm", 8192, "rblock", 70.0, 4200.0),  # 91.3% of 4200: misses 92
            row("rms_norm", 8192, "liger", 80.0, 4200.0),
            row("rms_norm", 2048, "rblock", 70.0, 4000.0),
            row("rms_norm", 2048, "compile_max", 69.0, 4000.0),  # a peer ahead
            row("softmax", 4096, "rblock", 70.0, 4000.0),
            row("softmax", 4096, "compile", 80.0, 4000.0),  # 1.14x compile: softmax needs 1.3x
            row("sum", 16777216, "rblock", 40.0, 4200.0, m=4),  # 3355 GB/s of read 3000: over 100%
            row("rms_norm", 16384, "rblock", 70.0, 4000.0),  # no peer timed: its ratio is unknown
            row("softmax", 1024, "rblock", 70.0, 4000.0, first=3.5),  # a first call over 3 s, judged in this run
            row("softmax", 1024, "compile", 95.0, 4000.0),
            row("softmax", 8192, "rblock", 66.0, 4200.0, first=3.5),  # the same where the run paid its start in it
            row("softmax", 8192, "compile", 90.0, 4200.0),
        ],
    }
    verdicts = {(v["target"].op, v["target"].N): v for v in targets.assess(data)}
    ok = verdicts[("rms_norm", 4096)]
    assert ok["met"] and ok["share"] == pytest.approx(95.87, abs=0.01) and ok["peer"] == "compile"
    assert ok["vs_peer"] == pytest.approx(71 / 70) and ok["first_call_s"] == 1.0
    assert verdicts[("rms_norm", 8192)]["met"] is False and verdicts[("rms_norm", 8192)]["share"] < 92
    assert verdicts[("rms_norm", 8192)]["point_share"] == pytest.approx(100 * 4 * 2**26 / 70e3 / 3900)
    assert ok["point_share"] is None  # its run measured no ceiling at the points' size
    assert verdicts[("rms_norm", 2048)]["met"] is False and verdicts[("rms_norm", 2048)]["vs_peer"] < 1
    assert verdicts[("softmax", 4096)]["met"] is False and verdicts[("softmax", 4096)]["vs_compile"] > 1.1
    assert verdicts[("sum", 16777216)]["met"] and verdicts[("sum", 16777216)]["share"] > 100
    assert verdicts[("rms_norm", 16384)]["met"] is None and verdicts[("rms_norm", 16384)]["share"] > 92
    assert verdicts[("layer_norm", 4096)]["met"] is None and verdicts[("layer_norm", 4096)]["share"] is None
    slow_start = verdicts[("softmax", 1024)]
    assert slow_start["first_call_judged"] and slow_start["met"] is False and slow_start["vs_compile"] > 1.3
    assert not verdicts[("softmax", 8192)]["first_call_judged"] and verdicts[("softmax", 8192)]["met"] is True
    text = targets.table(list(verdicts.values()))
    assert "3 met, 4 missed," in text and "| 6 | sum | 16777216 | 4 |" in text
    assert "| 91.3 of copy (≥ 92) | - | 98.3 |" in text
    assert "| 3.5 | **no** |" in text and "| 3.5 † | yes |" in text
    assert "| 5 | rms_norm | 16384 | 4096 |" in text and "peers not measured" in text
    assert targets.process_starts(data).splitlines()[1:] == ["- the run of rms_norm: rblock 7.4 s, liger -"]
    assert targets.process_starts({"rows": []}) == ""


def test_targets_judge_small_batches_plain_and_in_graphs():
    targets = _script("targets")
    rows = []
    for provider, us in (("rblock", 20.0), ("compile", 40.0), ("rblock_graph", 2.0), ("compile_graph", 3.0)):
        rows.append({"op": "softmax", "M": 1, "N": 4096, "provider": provider, "median_us": us, "correct": True,
                     "small_batch": True})  # fmt: skip
        slower = us * (2.0 if provider == "rblock_graph" else 1.0)  # behind compile in a graph only
        rows.append({"op": "rms_norm", "M": 8, "N": 8192, "provider": provider, "median_us": slower,
                     "correct": True, "small_batch": True})  # fmt: skip
    verdicts = {(v["op"], v["M"], v["N"]): v["met"] for v in targets.assess_small_batches({"rows": rows})}
    assert verdicts[("softmax", 1, 4096)] is True
    assert verdicts[("rms_norm", 8, 8192)] is False
    assert verdicts[("rms_norm", 64, 4096)] is None
