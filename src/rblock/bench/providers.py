"""The benchmarked ops (inputs, fp64 reference) and the implementations compared on them."""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import inspect
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass

import torch
import torch.nn.functional as F

import rblock
from rblock.bench import inductor
from rblock.ops.registry import OPS as REGISTRY

OPS = (
    "rms_norm",
    "layer_norm",
    "softmax",
    "log_softmax",
    "cross_entropy",
    "fused_add_rms_norm",
    "sum",
    "var",
    "sum_dim0",
)
PROVIDERS = (
    "rblock",
    "rblock_looped_only",
    "eager",
    "compile",
    "compile_max",
    "compile_no_persistent_rblock",
    "liger",
)

Inputs = list[torch.Tensor]
Call = Callable[[], object]


# each benchmarked op as rblock's registry knows it: (registry name, reduced dim)
_REGISTRY = {op: ("sum", 0) if op == "sum_dim0" else (op, -1) for op in OPS}


def make_inputs(op: str, m: int, n: int, dtype: torch.dtype, device: torch.device | str) -> Inputs:
    """Random inputs of shape (M, N); sum_dim0 reduces over M."""
    return REGISTRY[_REGISTRY[op][0]].make_inputs(m, n, dtype, device)


def _fused_add_rms_norm(x: torch.Tensor, r: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    h = x + r
    return F.rms_norm(h, (h.shape[-1],), w, 1e-6), h


def _rms_norm(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return F.rms_norm(x, (x.shape[-1],), w, 1e-6)


def _layer_norm(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return F.layer_norm(x, (x.shape[-1],), w, b, 1e-5)


def _softmax(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x, -1)


def _log_softmax(x: torch.Tensor) -> torch.Tensor:
    return torch.log_softmax(x, -1)


def _cross_entropy(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits, target)


def _sum(x: torch.Tensor) -> torch.Tensor:
    return torch.sum(x, -1)


def _var(x: torch.Tensor) -> torch.Tensor:
    return torch.var(x, -1)


def _sum_dim0(x: torch.Tensor) -> torch.Tensor:
    return torch.sum(x, 0)


EAGER: dict[str, Callable[..., object]] = {
    "rms_norm": _rms_norm,
    "layer_norm": _layer_norm,
    "softmax": _softmax,
    "log_softmax": _log_softmax,
    "cross_entropy": _cross_entropy,
    "fused_add_rms_norm": _fused_add_rms_norm,
    "sum": _sum,
    "var": _var,
    "sum_dim0": _sum_dim0,
}


def reference(op: str, inputs: Inputs) -> tuple[torch.Tensor, ...]:
    """The eager formula on fp64 copies of the inputs, on the inputs' device."""
    out = EAGER[op](*(t.double() if t.is_floating_point() else t for t in inputs))
    return out if isinstance(out, tuple) else (out,)


@dataclass(frozen=True)
class Provider:
    """`build(op, inputs)` returns a no-argument call, or None when the provider lacks the op.
    `scope()` is entered around building, the first call, the check and the timing of one point."""

    name: str
    build: Callable[[str, Inputs], Call | None]
    scope: Callable[[], AbstractContextManager[None]] = contextlib.nullcontext
    note: str = ""


def _rblock(op: str, inputs: Inputs) -> Call:
    name, dim = _REGISTRY[op]
    return lambda: REGISTRY[name].run(inputs, dim)


def _rblock_looped(op: str, inputs: Inputs) -> Call:
    name, dim = _REGISTRY[op]

    def call() -> object:
        with rblock.settings(strategy="looped"):
            return REGISTRY[name].run(inputs, dim)

    return call


def _eager(op: str, inputs: Inputs) -> Call:
    fn = EAGER[op]
    return lambda: fn(*inputs)


def _compiled(mode: str | None) -> Callable[[str, Inputs], Call]:
    def build(op: str, inputs: Inputs) -> Call:
        kwargs = {"mode": mode} if mode else {}
        fn = torch.compile(EAGER[op], dynamic=False, **kwargs)
        return lambda: fn(*inputs)

    return build


# op -> (module, class names tried in order, extra arguments by forward() parameter name)
_LIGER: dict[str, tuple[str, tuple[str, ...], dict[str, object]]] = {
    "rms_norm": ("liger_kernel.ops.rms_norm", ("LigerRMSNormFunction",), {"eps": 1e-6, "in_place": False}),
    "layer_norm": ("liger_kernel.ops.layer_norm", ("LigerLayerNormFunction",), {"eps": 1e-5}),
    "softmax": ("liger_kernel.ops.softmax", ("LigerSoftmaxFunction", "LigerSoftmax"), {}),
    "cross_entropy": (
        "liger_kernel.ops.cross_entropy",
        ("LigerCrossEntropyFunction",),
        {"weight": None, "ignore_index": -100, "reduction": "mean", "return_z_loss": False},
    ),
    "fused_add_rms_norm": (
        "liger_kernel.ops.fused_add_rms_norm",
        ("LigerFusedAddRMSNormFunction", "LigerFusedAddRMSNorm"),
        {"eps": 1e-6, "in_place": False},
    ),
}


def liger_args(forward: Callable[..., object], inputs: Inputs, extra: dict[str, object]) -> list[object] | None:
    """Positional arguments for an autograd Function's forward(ctx, ...): the inputs first, then `extra` by
    parameter name, then defaults. None when a required parameter is left without a value."""
    params = list(inspect.signature(forward).parameters.values())[1:]
    if len(params) < len(inputs):
        return None
    args: list[object] = list(inputs)
    for p in params[len(inputs) :]:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.KEYWORD_ONLY):
            break
        if p.name in extra:
            args.append(extra[p.name])
        elif p.default is not p.empty:
            args.append(p.default)
        else:
            return None
    return args


def _liger(op: str, inputs: Inputs) -> Call | None:
    if op not in _LIGER:
        return None
    module_name, class_names, extra = _LIGER[op]
    try:
        module = importlib.import_module(module_name)
    except ImportError:
        return None
    cls = next((getattr(module, c) for c in class_names if hasattr(module, c)), None)
    if cls is None:
        return None
    if op == "cross_entropy":
        # Liger writes the gradient into the logits in place: give it its own copy.
        inputs = [inputs[0].clone(), inputs[1]]
    args = liger_args(cls.forward, inputs, extra)
    if args is None:
        return None

    def call() -> object:
        out = cls.apply(*args)
        return out[0] if op == "cross_entropy" and isinstance(out, tuple) else out

    return call


def _chained(*scopes: Callable[[], AbstractContextManager[None]]) -> Callable[[], AbstractContextManager[None]]:
    @contextlib.contextmanager
    def scope() -> Iterator[None]:
        with contextlib.ExitStack() as stack:
            for s in scopes:
                stack.enter_context(s())
            yield

    return scope


def resolve(names: list[str]) -> tuple[list[Provider], list[str]]:
    """The requested providers that can run here, and a note for each one that cannot."""
    available: list[Provider] = []
    notes: list[str] = []
    for name in names:
        if name == "rblock":
            available.append(Provider(name, _rblock))
        elif name == "rblock_looped_only":
            available.append(Provider(name, _rblock_looped))
        elif name == "eager":
            available.append(Provider(name, _eager))
        elif name == "compile":
            available.append(Provider(name, _compiled(None), inductor.fresh_compile))
        elif name == "compile_max":
            available.append(Provider(name, _compiled("max-autotune-no-cudagraphs"), inductor.fresh_compile))
        elif name == "compile_no_persistent_rblock":
            mechanism = inductor.no_persistent_rblock()
            if mechanism is None:
                notes.append(
                    f"{name}: skipped, torch {torch.__version__} offers no known way to drop "
                    "the persistent-RBLOCK candidate"
                )
                continue
            scope = _chained(inductor.fresh_compile, mechanism.scope)
            available.append(Provider(name, _compiled(None), scope, f"candidate off via {mechanism.description}"))
            notes.append(f"{name}: {mechanism.description}")
        elif name == "liger":
            if importlib.util.find_spec("liger_kernel") is None:
                notes.append("liger: skipped, liger_kernel is not installed")
                continue
            available.append(Provider(name, _liger))
        else:
            raise ValueError(f"unknown provider {name!r}")
    return available, notes
