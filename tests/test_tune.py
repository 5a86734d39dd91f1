"""The tuner's compile stage: every candidate compiled side by side, slow compiles left out once one has compiled."""

from __future__ import annotations

import threading
import time

from rblock.plan import Config
from rblock.runtime.tune import compile_all

FAST, SLOW, FAILING = (Config("looped", 1, r, 4) for r in (256, 512, 1024))


def _builder(release: threading.Event):
    def build(cfg: Config):
        if cfg == SLOW:
            release.wait()
            return cfg, (40, 0)
        if cfg == FAILING:
            return cfg, RuntimeError("out of resources")
        return cfg, (32, 0)

    return build


def test_a_compile_past_the_wait_is_left_out_once_one_has_compiled():
    release = threading.Event()
    start = time.monotonic()
    try:
        results = compile_all([FAST, SLOW, FAILING], _builder(release), wait_s=0.2)
    finally:
        release.set()
    assert time.monotonic() - start < 5
    assert results[FAST] == (32, 0)
    assert isinstance(results[FAILING], RuntimeError)
    assert SLOW not in results


def test_with_nothing_compiled_the_wait_goes_on_until_one_has():
    release = threading.Event()
    threading.Timer(0.5, release.set).start()
    results = compile_all([SLOW, FAILING], _builder(release), wait_s=0.05)
    assert results[SLOW] == (40, 0)
    assert isinstance(results[FAILING], RuntimeError)


def test_within_the_wait_every_compile_is_kept():
    release = threading.Event()
    threading.Timer(0.1, release.set).start()
    results = compile_all([FAST, SLOW, FAILING], _builder(release), wait_s=30)
    assert set(results) == {FAST, SLOW, FAILING}


def test_a_config_proposed_twice_is_compiled_once():
    """Two candidates may share a config (with different reasons); waiting for both results would never end."""
    start = time.monotonic()
    assert compile_all([FAST, FAST], _builder(threading.Event()), wait_s=30) == {FAST: (32, 0)}
    failed = compile_all([FAILING, FAILING], _builder(threading.Event()), wait_s=0.05)
    assert isinstance(failed[FAILING], RuntimeError)
    assert time.monotonic() - start < 5


def test_a_few_spilled_words_are_timed_and_more_are_dropped(monkeypatch):
    """Times and spills like those of layer_norm (2048, 32768)'s forms on the H200 (trials_run22_ln.json), and one
    form that would be faster but spills past the bound."""
    import triton.testing

    from rblock.plan import DEFAULT, Candidate
    from rblock.runtime.tune import tune

    plain, few, many = (Config("persistent_rblock", 1, 32768, w, no_rblock_scaling=True) for w in (32, 16, 8))
    spills, times = {plain: 0, few: 40, many: 96}, {plain: 92.5, few: 83.6, many: 70.0}

    class FakeProgram:
        def __init__(self, cfg: Config):
            self.cfg = cfg

        def compile(self, inputs, outputs, in_workers=False):
            return 64, spills[self.cfg]

        def run(self, inputs, outputs):
            return times[self.cfg]

    monkeypatch.setattr(triton.testing, "do_bench", lambda fn, **kw: fn() / 1000)
    cands = [Candidate(c, "test") for c in (plain, few, many)]
    best, trials = tune(cands, FakeProgram, [], [], DEFAULT, 65536)
    assert DEFAULT.max_spill_bytes == 64
    assert best == few  # `many` would be faster, but spills past the bound: not timed
    by_cfg = {t.config: t for t in trials}
    assert by_cfg[many].median_us is None and by_cfg[many].note == "spills 96 bytes"
    assert by_cfg[few].median_us == 83.6 and by_cfg[few].spill_bytes == 40


def test_the_kept_kernel_is_the_source_the_tuner_compiled(monkeypatch):
    """Triton's cache key holds a kernel's first line number: the program kept after tuning has the very source the
    tuner compiled for its config, header and all (a header of another length made every first call compile the
    chosen kernel once more)."""
    import torch

    import rblock
    from rblock import compiler

    compiled_for: dict[Config, list[str]] = {}

    def tune(cands, make, inputs, outputs, h, regs_per_sm):
        for c in cands:
            compiled_for[c.config] = [st.spec.source for st in make(c.config).stages]
        return cands[-1].config, []

    props = compiler.device.device_properties()  # the interpreter's H100-class numbers
    monkeypatch.setattr(compiler.device, "interpreted", lambda: False)  # the GPU's path, kernels built not run
    monkeypatch.setattr(compiler.device, "device_properties", lambda: props)
    monkeypatch.setattr(compiler.device, "dependent_launches", lambda: True)  # as on Hopper
    monkeypatch.setattr(compiler, "tune", tune)
    monkeypatch.setattr(compiler.cache, "lookup", lambda key: None)
    monkeypatch.setattr(compiler.cache, "store", lambda *args: None)
    f = rblock.compile(lambda x: torch.softmax(x, -1), name="softmax_kept")
    kept = f.compiled_for(torch.randn(64, 5000))
    assert len(compiled_for) > 1 and kept.config == list(compiled_for)[-1]
    assert [st.spec.source for st in kept.program.stages] == compiled_for[kept.config]
    assert kept.program.stages[0].spec.source.splitlines()[1].startswith("# x: 64 rows")  # the header is there
