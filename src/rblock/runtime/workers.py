"""Compile workers: long-lived processes that compile the tuner's candidates into Triton's cache, in parallel.

Threads cannot do this: Triton's stages before ptxas hold the GIL, so candidates compiled on threads wait on one
another (on a 16-core H100 host, threads ran 2.2-2.6x faster than one after another; on two cores, slower). Here
each kernel's compile goes to a worker (`compile_worker.py`, Triton alone imported), and the JIT in this process
then finds it in Triton's cache. A worker only saves time, never decides what runs: what this process's JIT
compiles and launches is what it would have without workers, and a kernel a worker fails on is compiled here, where
its error is reported as before.

What a kernel needs compiled is learned from the JIT itself: a warmup runs with Triton's `jit_cache_hook`
answering "skip", and the hook keeps the specialization data the JIT serializes for `JITFunction.preload`.
"""

from __future__ import annotations

import atexit
import contextlib
import contextvars
import functools
import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from rblock.settings import compile_workers

_capturing: contextvars.ContextVar[list | None] = contextvars.ContextVar("rblock_capturing", default=None)
_previous_hook: list = []  # the hook found installed before ours, called when not capturing


def _hook(**kwargs):
    box = _capturing.get()
    if box is None:
        return _previous_hook[0](**kwargs) if _previous_hook and _previous_hook[0] else None
    box.append(kwargs["compile"]["specialization_data"])
    return True  # the JIT returns without compiling


def _hooked() -> bool:
    """Whether Triton's JIT calls our hook: installed once, in front of any hook found there; False if another
    has replaced it since (then kernels compile here)."""
    from triton import knobs

    if not _previous_hook:
        _previous_hook.append(knobs.runtime.jit_cache_hook)
        knobs.runtime.jit_cache_hook = _hook
    return knobs.runtime.jit_cache_hook is _hook


def specializations(warmup: Callable[[], object]) -> list[str]:
    """Run a JIT warmup with compiling held back: the specialization data of the kernel it would compile (none
    when the JIT has it already, or when the warmup fails)."""
    box: list[str] = []
    token = _capturing.set(box)
    try:
        warmup()
    except Exception:  # noqa: BLE001 -- the warmup outside the workers raises it again, where it is reported
        return []
    finally:
        _capturing.reset(token)
    return box


@functools.cache
def _worker_code() -> str:
    return (Path(__file__).parent / "compile_worker.py").read_text()


class _Worker:
    def __init__(self, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _worker_code()],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            text=True,
        )
        self.send(sys.path)

    def send(self, obj: object) -> None:
        self.proc.stdin.write(json.dumps(obj) + "\n")
        self.proc.stdin.flush()

    def compile(self, job: dict) -> str | None:
        """The worker's error, or None once the kernel is in Triton's cache."""
        self.send(job)
        line = self.proc.stdout.readline()
        if not line:
            raise OSError(f"compile worker {self.proc.pid} exited")
        return json.loads(line)["error"]

    def close(self) -> None:
        try:
            self.proc.stdin.close()  # the worker's loop ends at end of input
        except OSError:
            pass

    def stop(self) -> None:
        self.close()
        try:
            self.proc.wait(timeout=1)
        except subprocess.TimeoutExpired:
            self.proc.kill()


class Pool:
    """Up to `size` workers (as many as could be started), started at once; each job goes to an idle one. A worker
    that dies is replaced."""

    def __init__(self, size: int) -> None:
        self.env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
        self.pid = os.getpid()
        self.users = 0  # precompiles under way
        self.last_used = time.monotonic()
        self.timer: threading.Timer | None = None  # closes them once idle
        self.idle: queue.Queue[_Worker] = queue.Queue()
        self.background = threading.BoundedSemaphore(max(size // 2, 1))  # jobs ahead of a tuning: half the workers
        self.workers: list[_Worker] = []
        for _ in range(size):
            try:
                self.workers.append(_Worker(self.env))
            except OSError:  # no more processes to be had
                break
            self.idle.put(self.workers[-1])

    def compile(self, job: dict, background: bool = False) -> bool:
        """Whether a worker put the kernel in Triton's cache. `background` jobs (compiles ahead of a tuning) take at
        most half the workers, so the tuning under way never waits for them all."""
        if background:
            with self.background:
                return self.compile(job)
        worker = self.idle.get()
        try:
            return worker.compile(job) is None
        except (OSError, ValueError):  # it died, or answered nonsense: a new one takes its place if one starts
            worker.stop()
            with contextlib.suppress(OSError):
                new = _Worker(self.env)
                self.workers[self.workers.index(worker)] = new
                worker = new
            return False
        finally:
            self.idle.put(worker)

    def close(self) -> None:
        for w in self.workers:
            w.close()
        for w in self.workers:
            w.stop()


IDLE_S = 60.0
"""Workers idle this long exit (about 130 MB each after compiling a dozen kernels); the next tuning starts new
ones, 0.1-0.2 s from start to a first answer. Tunings come in bursts: the first calls of new shapes."""

_pool: list[Pool] = []
_pool_lock = threading.Lock()


def _current() -> Pool | None:
    size = compile_workers()
    if size == 0:
        return None
    if _pool and _pool[0].pid != os.getpid():
        _pool.clear()  # a forked child: the pipes are the parent's
    if not _hooked():
        return None
    if not _pool:
        _pool.append(Pool(size))
    return _pool[0] if _pool[0].workers else None


def pool() -> Pool | None:
    """This process's workers, started on first use; None where there are none (RBLOCK_COMPILE_WORKERS=0 or one
    CPU) or where Triton's JIT would not call our hook."""
    with _pool_lock:
        return _current()


@contextlib.contextmanager
def _in_use() -> Iterator[Pool | None]:
    """The workers, kept from closing while in use; once none uses them, they close after IDLE_S."""
    with _pool_lock:
        workers = _current()
        if workers is not None:
            workers.users += 1
    if workers is None:
        yield None
        return
    try:
        yield workers
    finally:
        with _pool_lock:
            workers.users -= 1
            workers.last_used = time.monotonic()
            if workers.users == 0:
                if workers.timer is not None:
                    workers.timer.cancel()
                workers.timer = threading.Timer(IDLE_S, _close_if_idle)
                workers.timer.daemon = True
                workers.timer.start()


def _close_if_idle() -> None:
    with _pool_lock:
        if _pool and _pool[0].users == 0 and time.monotonic() - _pool[0].last_used >= IDLE_S:
            _pool.pop().close()


@atexit.register
def _close() -> None:
    if _pool and _pool[0].pid == os.getpid():
        _pool[0].close()


def precompile(kernels: list[tuple[object, Callable[[], object]]], background: bool = False) -> None:
    """Compile in the workers what each (JIT kernel, its warmup) would compile here, all at once, and return when
    they are done: the warmups then find their kernels in Triton's cache. Without workers, does nothing.
    `background`: compiles ahead of a tuning, on at most half the workers."""
    with _in_use() as workers:
        if workers is not None:
            _precompile(workers, kernels, background)


def _precompile(workers: Pool, kernels: list[tuple[object, Callable[[], object]]], background: bool) -> None:
    from triton import knobs
    from triton.runtime import driver

    target = driver.active.get_current_target()
    jobs = []
    for kernel, warmup in kernels:
        fn = kernel.fn
        for data in specializations(warmup):
            jobs.append(
                {
                    "path": fn.__code__.co_filename,
                    "module": fn.__module__,
                    "name": fn.__name__,
                    "data": data,
                    "target": [target.backend, target.arch, target.warp_size],
                    "cache_dir": str(knobs.cache.dir),  # this process's JIT looks there
                }
            )
    threads = [threading.Thread(target=workers.compile, args=(job, background), daemon=True) for job in jobs[1:]]
    for t in threads:
        t.start()
    if jobs:
        workers.compile(jobs[0], background)
    for t in threads:
        t.join()
