"""The tuner's compile stage: every candidate compiled side by side, slow compiles left out once one has compiled."""

from __future__ import annotations

import collections
import importlib
import threading
import time

import pytest

from conftest import assert_near
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


def _gpu_path(monkeypatch, tune):
    """The GPU's build path on this machine: kernels generated and loaded, not compiled or run; no tuning cached."""
    from rblock import compiler

    props = compiler.device.device_properties()  # the interpreter's H100-class numbers
    monkeypatch.setattr(compiler.device, "interpreted", lambda: False)
    monkeypatch.setattr(compiler.device, "device_properties", lambda: props)
    monkeypatch.setattr(compiler.device, "dependent_launches", lambda: True)  # as on Hopper
    monkeypatch.setattr(compiler, "tune", tune)
    monkeypatch.setattr(compiler.cache, "lookup", lambda key: None)
    monkeypatch.setattr(compiler.cache, "store", lambda *args: None)
    monkeypatch.setattr(compiler.workers, "pool", lambda: object())  # workers to send kernels to


def test_cross_entropy_compiles_its_mean_beside_its_rows(monkeypatch):
    """A first call of cross_entropy sends its mean kernel's candidates to the compile workers before its rows'
    kernel is tuned, exactly the sources the mean's tuning then compiles, and that tuning waits for them."""
    import torch

    from rblock import compiler

    ops = importlib.import_module("rblock.ops.softmax")  # the module, not the op it exports

    events: list[tuple[str, frozenset[str]]] = []

    def precompile(kernels, background=False):
        assert background  # ahead of a tuning: on at most half the workers
        events.append(("sending", frozenset(warm.func.__self__.spec.source for _, warm in kernels)))
        time.sleep(0.3)  # still compiling when the rows' tuning ends
        events.append(("sent", events[-1][1]))

    def tune(cands, make, inputs, outputs, h, regs_per_sm):
        sources = frozenset(st.spec.source for c in cands for st in make(c.config).stages)
        events.append(("tuned", sources))
        return cands[0].config, []

    _gpu_path(monkeypatch, tune)
    monkeypatch.setattr(compiler.workers, "precompile", precompile)
    traced = []
    trace = compiler.trace
    monkeypatch.setattr(compiler, "trace", lambda name, *a: traced.append(name) or trace(name, *a))
    logits, target = torch.randn(13107, 512), torch.randint(0, 512, (13107,))
    try:
        with compiler.recording(launch=False) as log:
            loss = ops._rows_then_mean(logits, target, -100, torch.float32)  # the op's two kernels, as it calls them
            ops._mean_kernel(loss, target, -100, torch.float32)
    finally:  # entries built on a GPU's path stay out of later tests
        ops._rows_then_mean._entries.clear()
        ops._mean_kernel._entries.clear()
        ops._mean_kernel._prepared.clear()
    rows, mean = log
    assert mean.graph.name == "cross_entropy_mean" and len(mean.plan.candidates) > 1
    # the mean's candidates sent first, the rows tuned while they compiled, the mean tuned once they had
    assert [kind for kind, _ in events] == ["sending", "tuned", "sent", "tuned"]
    assert events[0][1] == events[3][1]  # what was sent ahead is what the mean's tuning compiled
    assert all("cross_entropy_mean" in src for src in events[0][1])
    assert sorted(traced) == ["cross_entropy", "cross_entropy_mean"]  # the mean traced once, ahead


def test_a_prepared_call_is_built_once_and_its_errors_come_with_the_call(monkeypatch):
    import torch

    import rblock
    from rblock import compiler

    traced = []
    trace = compiler.trace
    monkeypatch.setattr(compiler, "trace", lambda name, *a: traced.append(name) or trace(name, *a))
    f = rblock.compile(lambda x: torch.softmax(x, -1), name="prepared_softmax")
    x = torch.randn(8, 300)
    f.prepare(x)
    f.prepare(torch.randn(8, 300))  # the same signature: nothing more
    assert_near(f(x), torch.softmax(x.double(), -1))
    f.prepare(x)  # built already: nothing more
    assert traced == ["prepared_softmax"]
    # an `ahead` that prepares its own function, or fails, leaves the call as it would be without it
    own = rblock.compile(lambda x: torch.softmax(x, -1), name="prepared_own", ahead=lambda x: own.prepare(x))
    assert_near(own(x), torch.softmax(x.double(), -1))
    failing = rblock.compile(lambda x: torch.softmax(x, -1), name="prepared_failing", ahead=lambda x: 1 / 0)
    assert_near(failing(x), torch.softmax(x.double(), -1))
    bad = rblock.compile(lambda x: torch.sort(x, -1).values.sum(-1), name="prepared_sort")
    bad.prepare(x)  # what tracing refuses is not raised here
    with pytest.raises(rblock.UnsupportedOperation, match="sort"):
        bad(x)


def test_the_fastest_form_is_picked_and_one_refused_at_launch_is_skipped(monkeypatch):
    """Each candidate is timed once; the fastest is the pick; a candidate whose launch is refused (a split row's grid
    that cannot be co-resident) is kept in the trials with the reason, not fatal."""
    import triton.testing

    from rblock.plan import DEFAULT, Candidate
    from rblock.runtime.tune import tune

    slow, fast, refused = (Config("looped", 1, r, 8) for r in (1024, 2048, 4096))
    times = {slow: 51.0, fast: 50.0, refused: None}
    calls = collections.Counter()

    class FakeProgram:
        def __init__(self, cfg: Config):
            self.cfg = cfg

        def compile(self, inputs, outputs, in_workers=False):
            return 32, 0

        def run(self, inputs, outputs):
            calls[self.cfg] += 1
            if times[self.cfg] is None:
                raise RuntimeError("cooperative launch refused")
            return times[self.cfg]

    monkeypatch.setattr(triton.testing, "do_bench", lambda fn, **kw: fn() / 1000)
    best, trials = tune([Candidate(c, "test") for c in times], FakeProgram, [], [], DEFAULT, 65536)
    by_cfg = {t.config: t for t in trials}
    assert best == fast
    assert calls == {slow: 1, fast: 1, refused: 1}
    assert by_cfg[fast].median_us == 50.0 and by_cfg[refused].median_us is None
    assert by_cfg[refused].note == "launch failed: RuntimeError: cooperative launch refused"
