"""The `rblock` command: run and explain, as a user types them."""

from __future__ import annotations

import json

import pytest

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


def test_bad_shape_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as e:
        main(["run", "softmax", "--shape", "64by3000"])
    assert e.value.code == 2
    assert "--shape must look like 64x3000" in capsys.readouterr().err
