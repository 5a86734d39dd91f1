"""The tuning cache: round trip, concurrent writers, corrupt entries."""

from __future__ import annotations

import functools
import multiprocessing
import warnings

import pytest

from conftest import assert_near
from rblock.plan import Config
from rblock.runtime import cache

KEY = cache.TuneKey(graph="kernel k x=[-1] r=[4096]", xnumel_bucket=2048, strategy="auto", device="d", capability="9.0")
CFG = Config("persistent_rblock", 1, 4096, 8, no_rblock_scaling=True)


@pytest.fixture(autouse=True)
def _cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("RBLOCK_CACHE_DIR", str(tmp_path))


def test_round_trip():
    assert cache.lookup(KEY) is None
    cache.store(KEY, CFG, [{"config": str(CFG), "median_us": 1.0}])
    cfg, data = cache.lookup(KEY)
    assert cfg == CFG and data["timings"][0]["median_us"] == 1.0


def test_keys_differ_by_every_field():
    other = cache.TuneKey(graph=KEY.graph, xnumel_bucket=4096, strategy="auto", device="d", capability="9.0")
    cache.store(KEY, CFG, [])
    assert cache.lookup(other) is None


def _writer(path: str, i: int) -> None:
    import os

    os.environ["RBLOCK_CACHE_DIR"] = path
    for _ in range(50):
        cache.store(KEY, Config("looped", 1, 1 << (i % 8), 4), [])


def test_concurrent_writers_leave_a_valid_entry(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(str(tmp_path), i)) for i in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
        assert p.exitcode == 0
    cfg, _ = cache.lookup(KEY)
    assert cfg.kind == "looped"
    assert not list((tmp_path / "tuning").glob("*.tmp"))


def test_corrupt_entry_is_ignored_with_a_warning():
    cache.store(KEY, CFG, [])
    cache._path(KEY).write_text("{not json")
    with pytest.warns(UserWarning, match="ignoring unreadable tuning cache entry"):
        assert cache.lookup(KEY) is None
    cache.store(KEY, CFG, [])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert cache.lookup(KEY)[0] == CFG


def test_a_new_process_takes_the_tuned_winner_without_timing(monkeypatch):
    import torch

    import rblock
    from rblock import compiler
    from rblock.runtime import device

    def fn(x):
        return torch.softmax(x, -1)

    x = torch.randn(3, 3000)
    winner = Config("looped", 1, 512, 4)
    with rblock.settings(config=winner):
        graph = rblock.compile(fn).compiled_for(x).graph
    cache.store(compiler.tune_key(graph, "auto"), winner, [])

    def no_timing(*args, **kwargs):
        raise AssertionError("the cache held the winner: nothing should be timed")

    monkeypatch.setattr(device, "interpreted", lambda: False)  # as on a GPU: tuning is on
    monkeypatch.setattr(compiler, "tune", no_timing)
    # ... but the kernels still run here, in the interpreter: built for it
    monkeypatch.setattr(compiler, "make_program", functools.partial(compiler.make_program, interpret=True, pdl=False))
    fresh = rblock.compile(fn)  # nothing in memory, as in a new process
    out = fresh(x)
    entry = fresh.compiled_for(x)
    assert entry.from_cache and entry.config == winner and not entry.trials
    assert_near(out, torch.softmax(x.double(), -1))
