"""The `rblock` command: run and explain, as a user types them."""

from __future__ import annotations

import json

import pytest
import torch

import rblock
from rblock.cli.main import main


@pytest.mark.parametrize("strategy", ["persistent", "looped"])
def test_run_reports_a_small_error_and_the_strategy(strategy, capsys):
    assert main(["run", "rms_norm", "--shape", "64x3000", "--dtype", "bf16", "--strategy", strategy, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert {"op", "shape", "dtype", "strategy", "config", "max_rel_error", "device"} <= out.keys()
    assert out["strategy"] == strategy and out["shape"] == [64, 3000]
    assert out["max_rel_error"] <= 1e-2


def test_explain_rms_norm_32k_has_the_seed_candidate(capsys):
    assert main(["explain", "rms_norm", "--shape", "2048x32768", "--dtype", "bf16", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["strategy"] == "looped"
    assert out["features"]["saved_bytes_ratio"] >= 1.3
    seed = [c for c in out["candidates"] if c["kind"] == "persistent_rblock"]
    assert seed and all(c["RBLOCK"] == 32768 and c["XBLOCK"] == 1 and c["no_rblock_scaling"] for c in seed)
    assert {
        "persistent_bytes",
        "looped_bytes",
        "score_x",
        "score_r",
        "r_coalesce_ratio",
        "mem_ops_per_thread",
        "loads_and_reductions",
    } <= out["features"].keys()


@pytest.mark.parametrize(
    ("args", "key", "expected"),
    [
        (["rms_norm", "--shape", "2048x1024"], "strategy", "persistent"),
        (["sum", "--shape", "4096x4096", "--dim", "0"], "hint", "OUTER"),
    ],
)
def test_explain_decisions(args, key, expected, capsys):
    assert main(["explain", *args, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[key] == expected


def test_explain_without_seed_beyond_32k(capsys):
    assert main(["explain", "rms_norm", "--shape", "1024x65536", "--json"]) == 0
    kinds = [c["kind"] for c in json.loads(capsys.readouterr().out)["candidates"]]
    assert "persistent_rblock" not in kinds


def test_explain_prints_ir_and_source(capsys):
    assert main(["explain", "softmax", "--shape", "8x300"]) == 0
    text = capsys.readouterr().out
    assert "softmax_stats" in text and "@triton.jit" in text and "candidates:" in text


def one_line_error(capsys) -> str:
    """The error the command printed: one line on stderr, `rblock: ...`, no traceback, nothing on stdout."""
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("rblock: ") and err.count("\n") == 1, err
    return err.strip()


@pytest.mark.parametrize(
    ("shape", "message"),
    [
        (["--shape", "64by3000"], "must be MxN, two positive integers such as 64x3000, got '64by3000'"),
        (["--shape", "2x8x3"], "must be MxN"),
        (["--shape", "1e3x5"], "must be MxN"),
        (["--shape", "\uff12x8"], "must be MxN"),  # a full-width 2, which int() would take
        (["--shape", ""], "must be MxN"),
        (["--shape", "-4x5"], "must be MxN with M and N at least 1, got -4x5"),
        (["--shape=-4x5"], "must be MxN with M and N at least 1, got -4x5"),
        (["--shape", "4x-5"], "must be MxN with M and N at least 1, got 4x-5"),
        (["--shape", "0x5"], "must be MxN with M and N at least 1, got 0x5"),
        (["--shape", "5x0"], "must be MxN with M and N at least 1, got 5x0"),
        (["--shape", "99999999999x99999999999"], "99999999999x99999999999 is 9,999,999,999,800,000,000,001 elements"),
        (["--shape", "65536x65537"], "65536x65537 is 4,295,032,832 elements; allowed: at most 4,294,967,296 (2^32)"),
    ],
    ids=lambda v: v[-1] if isinstance(v, list) else "",
)
def test_bad_shape_is_one_line_naming_the_option(shape, message, capsys):
    assert main(["run", "softmax", *shape]) == 2
    assert one_line_error(capsys).startswith(f"rblock: argument --shape: {message}")


@pytest.mark.parametrize("op", ["rms_norm", "layer_norm", "cross_entropy", "fused_add_rms_norm"])
@pytest.mark.parametrize("command", ["run", "explain"])
def test_dim_is_refused_for_ops_that_take_none(command, op, capsys):
    assert main([command, op, "--shape", "4x8", "--dim", "0"]) == 2
    assert one_line_error(capsys).startswith(f"rblock: argument --dim: {op} takes no dim (it reduces each row); allo")


@pytest.mark.parametrize("dim", ["2", "-3", "99999999999999999999"])
def test_dim_out_of_range_is_one_line(dim, capsys):
    assert main(["run", "softmax", "--shape", "4x8", "--dim", dim]) == 2
    assert one_line_error(capsys).startswith(f"rblock: argument --dim: is {dim}, but softmax's input has 2 dims")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "the following arguments are required: command; see rblock --help"),
        (["run"], "the following arguments are required: op; see rblock run --help"),
        (["run", "softmax_"], "argument op: invalid choice: 'softmax_'"),
        (["run", "sum", "--dim", "x"], "argument --dim: invalid int value: 'x'"),
        (["explain", "sum", "--strategy", "fast"], "argument --strategy: invalid choice: 'fast'"),
        (["run", "sum", "--seed", str(2**64)], "argument --seed: must be an integer from -2^63 to 2^64-1"),
        (["run", "sum", "--shape"], "argument --shape: expected one argument"),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, list) else "",
)
def test_other_usage_errors_are_one_line(argv, message, capsys):
    assert main(argv) == 2
    assert one_line_error(capsys).startswith(f"rblock: {message}")


def test_dim_goes_to_the_ops_that_take_one(capsys):
    assert main(["run", "sum", "--shape", "5x7", "--dim", "0", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["max_rel_error"] <= 1e-2
    assert main(["explain", "sum", "--shape", "5x7", "--dim", "0", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["xnumel"], report["rnumel"]) == (7, 5)


def failing_op(monkeypatch, error: BaseException, where: str = "run") -> None:
    """Make softmax's registry entry raise `error` when it makes its inputs or runs."""
    from dataclasses import replace

    from rblock.ops import registry

    def fail(*args):
        raise error

    monkeypatch.setitem(registry.OPS, "softmax", replace(registry.OPS["softmax"], **{where: fail}))


def test_an_op_error_is_one_line(monkeypatch, capsys):
    failing_op(monkeypatch, rblock.InvalidArgument("softmax", "x", "is\nwrong"))
    assert main(["run", "softmax", "--shape", "4x8"]) == 2
    assert one_line_error(capsys) == "rblock: rblock.softmax: x is wrong"


def test_inputs_that_do_not_fit_in_memory_are_one_line(monkeypatch, capsys):
    error = RuntimeError("[enforce fail at alloc_cpu.cpp:117] DefaultCPUAllocator: can't allocate memory: you tried")
    failing_op(monkeypatch, error, "make_inputs")
    assert main(["explain", "softmax", "--shape", "65536x65536"]) == 2
    assert one_line_error(capsys).startswith("rblock: argument --shape: 65536x65536 bf16 inputs do not fit in memory (")


def test_out_of_memory_in_a_run_is_one_line(monkeypatch, capsys):
    failing_op(monkeypatch, torch.OutOfMemoryError("CUDA out of memory.\nTried to allocate 2.00 GiB"))
    assert main(["run", "softmax", "--shape", "4x8"]) == 2
    assert one_line_error(capsys) == (
        "rblock: out of memory: CUDA out of memory. Tried to allocate 2.00 GiB; try a smaller --shape"
    )


def test_an_internal_error_is_one_line_and_its_traceback_is_there_when_asked(monkeypatch, capsys):
    failing_op(monkeypatch, ZeroDivisionError("division by zero"))
    assert main(["run", "softmax", "--shape", "4x8"]) == 1
    assert one_line_error(capsys) == (
        "rblock: internal error: ZeroDivisionError: division by zero (RBLOCK_DEBUG=1 shows where)"
    )
    monkeypatch.setenv("RBLOCK_DEBUG", "1")
    assert main(["run", "softmax", "--shape", "4x8"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("Traceback (most recent call last):") and "in fail" in err
    assert err.endswith("rblock: internal error: ZeroDivisionError: division by zero (RBLOCK_DEBUG=1 shows where)\n")


def test_an_interrupt_is_one_line(monkeypatch, capsys):
    failing_op(monkeypatch, KeyboardInterrupt())
    assert main(["run", "softmax", "--shape", "4x8"]) == 130
    assert one_line_error(capsys) == "rblock: interrupted"
