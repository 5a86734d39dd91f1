"""Compile workers, without a GPU: Triton's JIT runs against a driver that only names an sm_90 target, so that it
specializes, hashes and compiles as it would on a Hopper GPU; kernels are rblock's generated candidates."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch

from rblock.compiler import recording
from rblock.ir.nodes import DType
from rblock.ops.registry import OPS
from rblock.program import TORCH_DTYPES, make_program
from rblock.settings import compile_workers

SCRIPT = textwrap.dedent(
    """
    import importlib.util, json, os, sys, time
    import torch, triton
    from triton.backends.compiler import GPUTarget
    from triton.runtime.driver import driver

    class Sm90:  # what the JIT asks of a driver before it compiles
        def get_current_device(self): return 0
        def get_current_stream(self, device=None): return 0
        def get_current_target(self): return GPUTarget("cuda", 90, 32)

    from rblock.runtime import workers  # imports rblock, which asks for the interpreter on a machine without CUDA
    os.environ.pop("TRITON_INTERPRET")
    driver.set_active(Sm90())
    spied = []
    triton.knobs.runtime.jit_cache_hook = lambda **kw: spied.append(kw["fn"].name)  # someone else's hook
    args = json.loads(sys.argv[1])
    kernels = []
    for job in args["jobs"]:
        spec = importlib.util.spec_from_file_location("rblock_kernels." + job["name"], job["path"])
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        kernel = getattr(module, job["name"])
        buffers = [torch.empty(16, dtype=getattr(torch, dt)) for dt in job["dtypes"]]
        warm = lambda k=kernel, b=buffers, job=job: k.warmup(*b, job["xnumel"], grid=(1,), **job["options"])
        kernels.append((kernel, warm))

    def files():
        return {os.path.join(d, f) for d, _, fs in os.walk(os.environ["TRITON_CACHE_DIR"]) for f in fs}

    workers.IDLE_S = args["idle_s"]
    pool = workers.pool()
    if args["kill"]:
        for w in pool.workers:
            w.proc.kill()
            w.proc.wait()
    workers.precompile(kernels)
    by_workers = files()
    compiled = [warm() for _, warm in kernels]
    alive = sum(w.proc.poll() is None for w in pool.workers) if pool else 0
    time.sleep(2 * args["idle_s"] if args["idle_s"] < 60 else 0)
    exited = [w.proc.poll() is not None for w in pool.workers] if pool else []
    print(json.dumps({
        "workers": len(pool.workers) if pool else 0,
        "alive": alive,
        "by_workers": len(by_workers),
        "new_here": len(files() - by_workers),
        "names": [c.metadata.name for c in compiled],
        "cubins": [len(c.asm["cubin"]) for c in compiled],
        "spied": spied,
        "exited": exited,
        "left": len(workers._pool),
    }))
    """
)


def _jobs(tmp_path) -> list[dict]:
    """A split reduction's kernels of rms_norm (partials, combine, outputs), as launched on an H200."""
    x = OPS["rms_norm"].make_inputs(8, 3000, torch.bfloat16, "cpu")
    with recording(launch=False) as log:
        OPS["rms_norm"].run(x, -1)
    cfg = next(c.config for c in log[0].plan.candidates if c.config.split == 1)
    from dataclasses import replace

    program = make_program(log[0].graph, replace(cfg, kind="looped", split=2), interpret=False, pdl=True)
    jobs = []
    for k, st in enumerate(program.stages):
        path = tmp_path / f"k{k}.py"
        path.write_text(st.spec.source)
        jobs.append(
            {
                "path": str(path),
                "name": st.spec.name,
                "dtypes": [str(TORCH_DTYPES[DType(dt)]).removeprefix("torch.") for dt in st.spec.pointer_dtypes],
                "xnumel": st.xnumel,
                "options": st.options(),
            }
        )
    return jobs


def _run(tmp_path, jobs, workers: str, kill: bool = False, idle_s: float = 60.0) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env |= {"TRITON_CACHE_DIR": str(tmp_path / "triton"), "RBLOCK_COMPILE_WORKERS": workers}
    args = json.dumps({"jobs": jobs, "kill": kill, "idle_s": idle_s})
    done = subprocess.run([sys.executable, "-c", SCRIPT, args], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_workers_fill_the_cache_the_jit_then_reads(tmp_path):
    jobs = _jobs(tmp_path)
    assert [j["name"].rsplit("_", 1)[1] for j in jobs] == ["partials", "combine", "outputs"]
    got = _run(tmp_path, jobs, "2")
    assert got["workers"] == 2 and got["alive"] == 2
    assert got["by_workers"] > 0  # the workers compiled both kernels...
    assert got["new_here"] == 0  # ... so that this process's JIT compiled nothing: its cache keys are theirs
    assert got["names"] == [j["name"] for j in jobs] and all(n > 0 for n in got["cubins"])
    assert got["spied"] == got["names"]  # the hook found installed still sees this process's compiles


def test_without_workers_the_jit_compiles_here(tmp_path):
    got = _run(tmp_path, _jobs(tmp_path), "0")
    assert got["workers"] == 0 and got["by_workers"] == 0
    assert got["new_here"] > 0 and all(n > 0 for n in got["cubins"])


def test_dead_workers_are_replaced_and_the_jit_compiles_here(tmp_path):
    jobs = _jobs(tmp_path)
    got = _run(tmp_path, jobs, "2", kill=True)
    assert got["alive"] == 2  # two new workers
    assert got["new_here"] > 0 and got["names"] == [j["name"] for j in jobs]


def test_idle_workers_exit(tmp_path):
    got = _run(tmp_path, _jobs(tmp_path), "2", idle_s=0.5)
    assert got["new_here"] == 0  # they compiled first
    assert got["exited"] == [True, True] and got["left"] == 0


def test_worker_count_from_the_environment(monkeypatch):
    monkeypatch.setenv("RBLOCK_COMPILE_WORKERS", "3")
    assert compile_workers() == 3
    monkeypatch.delenv("RBLOCK_COMPILE_WORKERS")
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(64)), raising=False)
    assert compile_workers() == 16
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "8")
    assert compile_workers() == 8
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "64")
    assert compile_workers() == 0
    monkeypatch.setenv("RBLOCK_COMPILE_WORKERS", "many")
    with pytest.raises(ValueError, match="RBLOCK_COMPILE_WORKERS must be a number of processes >= 0, got 'many'"):
        compile_workers()


def test_compiles_ahead_of_a_tuning_leave_it_half_the_workers(monkeypatch):
    """Four workers, six compiles sent ahead of a tuning: two run at once, and a tuning's compile sent after them
    takes a free worker at once, not after theirs."""
    import threading
    import time

    from rblock.runtime import workers

    running, most, lock, release = [0], [0], threading.Lock(), threading.Event()

    class Slow:
        def compile(self, job):
            with lock:
                running[0] += 1
                most[0] = max(most[0], running[0])
            if job["ahead"]:
                release.wait(5)
            with lock:
                running[0] -= 1

    monkeypatch.setattr(workers, "_Worker", lambda env: Slow())
    pool = workers.Pool(4)
    ahead = [threading.Thread(target=pool.compile, args=({"ahead": True}, True)) for _ in range(6)]
    for t in ahead:
        t.start()
    time.sleep(0.2)
    start = time.monotonic()
    assert pool.compile({"ahead": False})  # the tuning's own: a free worker, no wait for the six
    assert time.monotonic() - start < 1
    release.set()
    for t in ahead:
        t.join()
    assert most[0] == 3  # two ahead and the tuning's, never more ahead
