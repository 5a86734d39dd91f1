"""Where a first call's seconds go: an op's first call on a new shape, with fresh rblock and Triton caches, split into
compiling the candidates (wall time, and the sum over candidates of each of Triton's stages run in this process),
timing them, and the rest (tracing, planning, code generation, loading). Each point runs in each mode: compiles in
the compile workers (as the tuner does), on threads of this process (RBLOCK_COMPILE_WORKERS=0), and one after
another, which shows how much of the compile overlaps.

    python benchmarks/first_call.py --points layer_norm:32768,cross_entropy:5120 [--total 67108864]
        [--modes workers,threads,serial]

`--cold`: instead, a process's very first call (the first point of a benchmark's process), with the profile of this
thread's time in it, as a fresh process on a fresh machine pays it.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import cProfile
import gc
import io
import os
import pstats
import tempfile
import threading
import time
import warnings

import torch
import triton.testing
from triton.backends.nvidia.compiler import CUDABackend
from triton.compiler.compiler import ASTSource

from rblock.bench import providers as prov
from rblock.compiler import CompiledFunction
from rblock.runtime import tune

STAGES = ("make_ir", "make_ttir", "make_ttgir", "make_llir", "make_ptx", "make_cubin")


class Clock:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.s: collections.Counter = collections.Counter()
        self.n: collections.Counter = collections.Counter()

    def add(self, key: str, dt: float) -> None:
        with self.lock:
            self.s[key] += dt
            self.n[key] += 1

    def timed(self, key: str, fn):
        def wrapper(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.add(key, time.perf_counter() - t0)

        return wrapper


@contextlib.contextmanager
def instrumented(clock: Clock, serial: bool):
    saved = {name: CUDABackend.__dict__[name] for name in STAGES[1:]}
    saved_bench, saved_all, saved_ir = triton.testing.do_bench, tune.compile_all, ASTSource.make_ir
    ASTSource.make_ir = clock.timed("make_ir", saved_ir)  # Python source to Triton IR
    for name, attr in saved.items():
        if isinstance(attr, staticmethod):
            setattr(CUDABackend, name, staticmethod(clock.timed(name, attr.__func__)))
        else:
            setattr(CUDABackend, name, clock.timed(name, attr))
    triton.testing.do_bench = clock.timed("do_bench", saved_bench)

    def serial_all(configs, build, wait_s):
        return {cfg: build(cfg)[1] for cfg in dict.fromkeys(configs)}

    tune.compile_all = clock.timed("compile_all", serial_all if serial else saved_all)
    try:
        yield
    finally:
        for name, attr in saved.items():
            setattr(CUDABackend, name, attr)
        triton.testing.do_bench, tune.compile_all, ASTSource.make_ir = saved_bench, saved_all, saved_ir


def first_call(op: str, n: int, total: int, mode: str) -> str:
    torch.manual_seed(0)
    inputs = prov.make_inputs(op, total // n, n, torch.bfloat16, "cuda")
    clock = Clock()
    with warnings.catch_warnings():  # isinstance touches deprecated torch attributes, which warn
        warnings.simplefilter("ignore", FutureWarning)
        for f in gc.get_objects():  # forget the ops' compiled calls, so the second run compiles and tunes again
            if isinstance(f, CompiledFunction):
                f._entries.clear()
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["RBLOCK_CACHE_DIR"], os.environ["TRITON_CACHE_DIR"] = tmp, os.path.join(tmp, "triton")
        os.environ["RBLOCK_COMPILE_WORKERS"] = "0"
        if mode == "workers":
            del os.environ["RBLOCK_COMPILE_WORKERS"]  # the default count
        provider = prov.resolve(["rblock"])[0][0]
        with provider.scope(), instrumented(clock, mode == "serial"):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            provider.build(op, inputs)()
            torch.cuda.synchronize()
            wall = time.perf_counter() - t0
    s, k = clock.s, clock.n
    stages = " ".join(f"{name[5:]} {s[name]:.2f}" for name in STAGES)
    rest = wall - s["compile_all"] - s["do_bench"]
    return (
        f"{op} ({total // n}, {n}) {mode:7s}: first call {wall:.2f} s = compile_all {s['compile_all']:.2f} "
        f"({k['make_cubin']} kernels here; summed stages: {stages}) + do_bench {s['do_bench']:.2f} "
        f"({k['do_bench']} timed) + rest {rest:.2f}"
    )


def cold(op: str, n: int, total: int, entries: int = 30) -> str:
    """The process's first call, with fresh rblock and Triton caches as the other modes have (its imports, Triton's
    and the workers' start, the launchers Triton builds), with the profile of this thread's time in it, by
    cumulative time."""
    torch.manual_seed(0)
    inputs = prov.make_inputs(op, total // n, n, torch.bfloat16, "cuda")
    provider = prov.resolve(["rblock"])[0][0]
    with tempfile.TemporaryDirectory() as tmp, provider.scope():
        os.environ["RBLOCK_CACHE_DIR"], os.environ["TRITON_CACHE_DIR"] = tmp, os.path.join(tmp, "triton")
        torch.cuda.synchronize()
        profile = cProfile.Profile()
        t0 = time.perf_counter()
        profile.enable()
        provider.build(op, inputs)()
        torch.cuda.synchronize()
        profile.disable()
        wall = time.perf_counter() - t0
    text = io.StringIO()
    pstats.Stats(profile, stream=text).sort_stats("cumulative").print_stats(entries)
    return f"{op} ({total // n}, {n}) cold: first call {wall:.2f} s\n{text.getvalue()}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--points", default="layer_norm:32768,layer_norm:12288,cross_entropy:5120,rms_norm:8192")
    ap.add_argument("--total", type=int, default=2**26)
    ap.add_argument("--modes", default="workers,threads,serial")
    ap.add_argument("--cold", action="store_true", help="the process's first call, profiled (the first point only)")
    args = ap.parse_args()
    print(torch.cuda.get_device_name(), os.cpu_count(), "CPUs", flush=True)
    if args.cold:
        op, n = args.points.split(",")[0].split(":")
        print(cold(op, int(n), args.total), flush=True)
        return
    # CUDA's, Triton's and the workers' start, not a first call's own cost
    first_call("rms_norm", 4096, args.total, "workers")
    for point in args.points.split(","):
        op, n = point.split(":")
        for mode in args.modes.split(","):
            print(first_call(op, int(n), args.total, mode), flush=True)


if __name__ == "__main__":
    main()
