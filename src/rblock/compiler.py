"""The orchestrator: the only place that runs the stages in order.

trace -> verify -> simplify -> analyze -> plan -> (tune) -> codegen -> load -> launch
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import math
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch.utils import _pytree as pytree

from rblock import __version__
from rblock import settings as settings_mod
from rblock.analysis import Features, analyze
from rblock.codegen.spec import KernelSpec
from rblock.errors import FORWARD_ONLY, CompileFailed, InvalidArgument
from rblock.ir import KernelGraph, query
from rblock.ir.passes import dead_code, reciprocal_row_divisors, simplify_dims
from rblock.ir.verify import verify
from rblock.plan import DEFAULT, Config, Heuristics, Plan, plan
from rblock.plan.feasible import check_forced
from rblock.plan.sizes import next_pow2
from rblock.program import make_program
from rblock.runtime import cache, device, workers
from rblock.runtime.launch import Program
from rblock.runtime.tune import Trial, tune
from rblock.trace import Lowered, trace
from rblock.trace.calls import holder, signature
from rblock.trace.guards import CapturedCall, guard, guarded


@dataclass(frozen=True)
class Compiled:
    """One traced function specialized to one input signature: its kernel and how to call it."""

    graph: KernelGraph
    features: Features
    plan: Plan
    config: Config
    program: Program  # the kernels that run, in order (two or three for a split reduction)
    input_order: tuple[int, ...]
    outputs: tuple[tuple[tuple[int, ...], tuple[int, ...], torch.dtype], ...]
    out_spec: pytree.TreeSpec
    trials: tuple[Trial, ...] = ()
    from_cache: bool = False
    mutated: tuple[int, ...] = ()  # inputs the function updates in place, from the last outputs
    launches: bool = True  # False on the meta device: outputs of the right shapes and dtypes, and no kernel runs
    traced: int = 0  # tensors a call passes (some may be read by no kernel)

    @property
    def specs(self) -> tuple[KernelSpec, ...]:
        return tuple(st.spec for st in self.program.stages)

    def __post_init__(self) -> None:
        # decided once per signature, not per call: the host time of a call matters for small inputs
        returned = len(self.outputs) - len(self.mutated)
        shape = "leaf" if self.out_spec.is_leaf() else None
        if shape is None and self.out_spec == pytree.tree_structure(tuple(range(returned))):
            shape = "tuple"
        object.__setattr__(self, "_out_shape", shape)
        # sums over rows are written even for no rows; other kernels run only when every output has elements
        launches = bool(self.graph.xnumel) and all(math.prod(o[0]) for o in self.outputs)
        object.__setattr__(self, "_launches", self.launches and (launches or bool(query.totals(self.graph))))
        object.__setattr__(self, "_same_order", self.input_order == tuple(range(self.traced)))

    def run(self, tensors: list[torch.Tensor], launch: bool = True):
        dev = tensors[0].device if tensors else device.kernel_device()
        outs = [torch.empty_strided(shape, stride, dtype=dt, device=dev) for shape, stride, dt in self.outputs]
        if launch and self._launches:
            self.program.run(tensors if self._same_order else [tensors[i] for i in self.input_order], outs)
        if self.mutated:  # the updated inputs take their new values, as they would in eager PyTorch
            returned = len(outs) - len(self.mutated)
            if launch:
                for i, new in zip(self.mutated, outs[returned:]):
                    tensors[i].copy_(new)
            outs = outs[:returned]
        if self._out_shape == "leaf":
            return outs[0]
        if self._out_shape == "tuple":
            return tuple(outs)
        return pytree.tree_unflatten(outs, self.out_spec)


def header_lines(f: Features, p: Plan, cfg: Config) -> tuple[str, ...]:
    return (
        f"x: {f.xnumel} rows, r: {f.rnumel} per row; hint {f.hint.value}; default strategy {p.strategy}",
        f"bytes: persistent {f.persistent_bytes}, looped {f.looped_bytes} (saved_bytes_ratio {f.saved_bytes_ratio})",
        f"chosen: {cfg.kind} because " + next((c.reason for c in p.candidates if c.config == cfg), "it was requested"),
    )


@dataclass(frozen=True)
class Front:
    """A call's stages before a kernel is chosen: traced, simplified, analyzed and planned."""

    lowered: Lowered
    out_spec: pytree.TreeSpec
    graph: KernelGraph
    features: Features
    plan: Plan

    def make(self, cfg: Config) -> Program:
        # one form for the candidates compiled while choosing and for the one kept: Triton's cache key holds the
        # kernel's first line number, which a header of another length would move (a compile more per first call)
        return make_program(self.graph, cfg, header_lines(self.features, self.plan, cfg))


def front(name: str, fn, args: tuple, kwargs: dict, s: settings_mod.Settings, h: Heuristics = DEFAULT) -> Front:
    lowered, out_spec = trace(name, fn, args, kwargs)
    g = verify(lowered.graph)
    g = verify(simplify_dims(g))  # drop size-1 dims, merge dims every access walks contiguously
    g = verify(reciprocal_row_divisors(g))  # divide once per row, multiply per element
    g = verify(dead_code(g))  # drop what no store needs
    features = analyze(g, h)
    p = plan(features, h, s.strategy, int(device.device_properties()["sm_count"]))
    return Front(lowered, out_spec, g, features, p)


@dataclass(frozen=True)
class Prepared:
    """A first call's front, and the thread on which its candidates compile in the workers (None: nothing to
    compile ahead)."""

    front: Front
    compiling: threading.Thread | None


def _tunes(p: Plan, s: settings_mod.Settings) -> bool:
    """Whether a first call times candidates (else it takes a forced config or the first that compiles)."""
    return (
        s.config is None
        and not device.interpreted()
        and s.tune
        and settings_mod.tune_enabled_by_env()
        and len(p.candidates) > 1
    )


def prepare(name: str, fn, args: tuple, kwargs: dict, s: settings_mod.Settings, h: Heuristics = DEFAULT) -> Prepared:
    """A first call's front, and, where the call will tune and no tuning is cached, its candidates sent to the
    compile workers on a thread of their own: the call's tuning then finds them in Triton's cache."""
    f = front(name, fn, args, kwargs, s, h)
    if not _tunes(f.plan, s) or workers.pool() is None or cache.lookup(tune_key(f.graph, s.strategy)) is not None:
        return Prepared(f, None)
    tensors = [t for t in pytree.tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
    inputs, outs = _buffers(f.lowered, tensors)
    configs = dict.fromkeys(c.config for c in f.plan.candidates)
    kernels = [k for cfg in configs for k in f.make(cfg).warmups(inputs, outs)]
    thread = threading.Thread(
        target=workers.precompile, args=(kernels, True), daemon=True, name=f"rblock-prepare {name}"
    )
    thread.start()
    return Prepared(f, thread)


def build(
    name: str,
    fn,
    args: tuple,
    kwargs: dict,
    s: settings_mod.Settings,
    h: Heuristics = DEFAULT,
    known: Front | None = None,
) -> Compiled:
    """Compile one call (`known`: its front, made ahead by `prepare`)."""
    f = known or front(name, fn, args, kwargs, s, h)
    lowered, g, features, p, make = f.lowered, f.graph, f.features, f.plan, f.make

    tensors = [t for t in pytree.tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
    meta = any(t.device.type == "meta" for t in tensors)  # shapes only: nothing to time or run
    trials: tuple[Trial, ...] = ()
    from_cache = False
    if s.config is not None:
        cfg = check_forced(name, g, s.config)
    elif device.interpreted() or meta:
        cfg = p.candidates[0].config
    elif not _tunes(p, s):
        cfg = _first_that_compiles(g, p, make, lowered, tensors)
    else:
        cfg, trials, from_cache = _tuned(g, p, make, lowered, tensors, h, s.strategy)
    program = make(cfg)
    return Compiled(
        g, features, p, cfg, program, lowered.input_order, lowered.outputs, f.out_spec, trials, from_cache,
        lowered.mutated, not meta, lowered.traced,
    )  # fmt: skip


def tune_key(g: KernelGraph, strategy: str) -> cache.TuneKey:
    props = device.device_properties()
    return cache.TuneKey(
        graph=str(g.shape_key()),
        xnumel_bucket=next_pow2(max(g.xnumel, 1)),
        strategy=strategy,
        device=str(props["name"]),
        capability=str(props["capability"]),
        rblock_version=__version__,
    )


def _buffers(lowered, tensors) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    inputs = [tensors[i] for i in lowered.input_order]
    outs = [torch.empty_strided(sh, st, dtype=dt, device=inputs[0].device) for sh, st, dt in lowered.outputs]
    return inputs, outs


def _first_that_compiles(g: KernelGraph, p: Plan, make: Callable[[Config], Program], lowered, tensors) -> Config:
    """Without tuning, the planner's first candidate, or the next one if the GPU compiler refuses it."""
    inputs, outs = _buffers(lowered, tensors)
    errors = []
    for cand in p.candidates:
        try:
            make(cand.config).compile(inputs, outs)
            return cand.config
        except Exception as e:  # out of resources and the like: try the next candidate
            errors.append(f"{cand.config}: {type(e).__name__}: {e}"[:300])
    raise CompileFailed(f"{g.name}: no candidate compiled: " + "; ".join(errors))


def _tuned(g, p: Plan, make: Callable[[Config], Program], lowered, tensors, h: Heuristics, strategy: str):
    key = tune_key(g, strategy)
    hit = cache.lookup(key)
    if hit is not None:
        return hit[0], (), True
    inputs, outs = _buffers(lowered, tensors)
    regs_per_sm = int(device.device_properties()["regs_per_sm"])
    cfg, trials = tune(list(p.candidates), make, inputs, outs, h, regs_per_sm)
    cache.store(key, cfg, [t.as_dict() for t in trials])
    return cfg, tuple(trials), False


# While `recording()` is active, compiled calls report what they ran (and, if asked, skip the launch).
_recording: contextvars.ContextVar[tuple[list, bool] | None] = contextvars.ContextVar("rblock_recording", default=None)


@contextlib.contextmanager
def recording(launch: bool = True):
    """Collect the Compiled entry of every rblock kernel called inside the block (for explain)."""
    log: list[Compiled] = []
    token = _recording.set((log, launch))
    try:
        yield log
    finally:
        _recording.reset(token)


@dataclass
class CompiledFunction:
    """`rblock.compile(fn)`: compiles `fn` once per input signature (shapes, strides, dtypes, other args, and the
    values of the variables `fn` reads besides its arguments)."""

    fn: object
    name: str
    ahead: Callable | None = None  # called with a first call's arguments before it is built (see `prepare`)
    checks_inputs: bool = True  # False for rblock's ops, which check each tensor by name before they call
    _entries: dict = field(default_factory=dict)
    _prepared: dict = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self._guarded = guarded(self.fn)

    def _resolve(self, args: tuple, kwargs: dict, tensors: list) -> tuple[tuple, object, tuple]:
        """A call's key, the function to trace and its arguments, and (into `tensors`) the tensors the kernel reads.
        What `fn` reads besides its arguments is in the key; the tensors among it are one more argument."""
        fn, read = self.fn, ()
        if self._guarded:
            found: list = []
            captured: list[torch.Tensor] = []
            slots: list[tuple[int, str]] = []
            guard(self.fn, found, captured, slots)
            read = tuple(found)
            if captured:
                self._check_grad(captured, lambda t: next(n for (_, n), c in zip(slots, captured) if c is t))
                args, fn = (*args, tuple(captured)), CapturedCall(self.fn, tuple(slots))
        sig: list = []
        signature(args, kwargs, tensors, sig)
        return (tuple(sig), read, settings_mod.current()), fn, args

    def _check_grad(self, tensors: list[torch.Tensor], holder: Callable[[torch.Tensor], str]) -> None:
        if self.checks_inputs and torch.is_grad_enabled():
            for t in tensors:
                if t.requires_grad:
                    raise InvalidArgument(f"compile({self.name})", holder(t), FORWARD_ONLY)

    def __call__(self, *args, **kwargs):
        tensors: list[torch.Tensor] = []
        key, fn, traced = self._resolve(args, kwargs, tensors)
        if self.checks_inputs:
            for t in tensors:  # the kernel reads plain strided memory: a pending negation would flip every sign
                if t.is_neg() or t.layout is not torch.strided or t.is_nested:
                    what = (
                        "is a view whose values are its memory negated: pass t.resolve_neg()"
                        if t.is_neg()
                        else "is not a dense (strided) tensor: pass t.to_dense()"
                    )
                    raise InvalidArgument(f"compile({self.name})", holder(self.fn, args, kwargs, t), what)
            if torch.is_grad_enabled():
                self._check_grad(tensors, lambda t: holder(self.fn, args, kwargs, t))
        entry = self._entries.get(key)
        if entry is None:
            with self._lock:
                entry = self._entries.get(key) or self._build(key, fn, traced, kwargs, ahead=True)
                self._entries[key] = entry
        rec = _recording.get()
        if rec is not None:
            rec[0].append(entry)
            return entry.run(tensors, launch=rec[1])
        return entry.run(tensors)

    def _build(self, key: tuple, fn, args: tuple, kwargs: dict, ahead: bool) -> Compiled:
        prepared = self._prepared.pop(key, None)
        if ahead and self.ahead is not None:
            try:
                self.ahead(*args, **kwargs)
            except Exception:  # noqa: BLE001 -- a hint: the call goes on as it would without it
                pass
        if prepared is None:
            return build(self.name, fn, args, kwargs, key[-1])
        if prepared.compiling is not None:  # its compiles, under way since `prepare`, are not sent twice
            prepared.compiling.join(DEFAULT.compile_wait_s)
        return build(self.name, fn, args, kwargs, key[-1], known=prepared.front)

    def prepare(self, *args, **kwargs) -> None:
        """Trace and plan a call to come, and start compiling the candidates its first call will tune, in the
        compile workers (at most half of them, so a tuning under way keeps the rest); return at once. A call that
        follows another's first call (cross_entropy's mean after its rows) is prepared before that first call, so
        the two compile together. A hint: errors are left for the call, and nothing is done while this function is
        being built or prepared on another thread."""
        key, fn, args = self._resolve(args, kwargs, [])
        if not self._lock.acquire(blocking=False):  # being built or prepared now: a hint needs no waiting
            return
        try:
            if key not in self._entries and key not in self._prepared:
                self._prepared[key] = prepare(self.name, fn, args, kwargs, key[-1])
        except Exception:  # noqa: BLE001 -- the call meets it again and raises it there
            pass
        finally:
            self._lock.release()

    def compiled_for(self, *args, **kwargs) -> Compiled:
        """The compiled kernel (graph, plan, config, source) that a call with these arguments runs."""
        key, fn, args = self._resolve(args, kwargs, [])
        with self._lock:
            if key not in self._entries:
                self._entries[key] = self._build(key, fn, args, kwargs, ahead=False)
            return self._entries[key]


def compile(fn=None, *, name: str | None = None, ahead: Callable | None = None):  # noqa: A001 - mirrors torch.compile
    """Compile a plain PyTorch function into one fused Triton reduction kernel (per input signature). `ahead`, if
    given, is called with each first call's arguments before that call is built: to `prepare` the compiled function
    called after it, whose candidates then compile beside this one's."""
    if name is not None and not isinstance(name, str):
        raise InvalidArgument("compile", "name", f"must be a string, got {type(name).__name__}")
    if ahead is not None and not callable(ahead):
        raise InvalidArgument("compile", "ahead", f"must be a function or None, got {type(ahead).__name__}")
    if fn is None:
        return functools.partial(compile, name=name, ahead=ahead)
    if not callable(fn) or isinstance(fn, (type, CompiledFunction)):
        what = "an rblock.compile result" if isinstance(fn, CompiledFunction) else type(fn).__name__
        raise InvalidArgument("compile", "fn", f"must be a function of tensors to compile, got {what}")
    label = name or getattr(fn, "__name__", "fn")
    return CompiledFunction(fn, re.sub(r"\W", "_", label).strip("_") or "fn", ahead)


def op_kernel(fn, name: str, ahead: Callable | None = None) -> CompiledFunction:
    """`compile` for rblock's own ops, which check their tensors (grad included) by name before they call it."""
    return CompiledFunction(fn, name, ahead, checks_inputs=False)
