"""A call's tensors and its key: what a compiled function is specialized to, besides what it reads by name."""

from __future__ import annotations

import inspect

import torch
from torch.utils import _pytree as pytree

from rblock.trace.guards import value_key

_PLAIN = (int, float, bool, str, type(None))


def signature(args: tuple, kwargs: dict, leaves: list, sig: list) -> None:
    """The tensors of a call and its cache key. Positional tensors, scalars and lists of ints (the usual op call)
    take a flat path; anything else the general one. Which path depends only on the arguments' types, so one call
    pattern always gets one key."""
    if not kwargs:
        for a in args:
            t = type(a)
            if isinstance(a, torch.Tensor):
                leaves.append(a)
                sig.append((a.shape, a.stride(), a.dtype, a.device))  # a device, not its type: 5x cheaper
            elif t in _PLAIN or t is torch.dtype:
                sig.append((t, a))
            elif (t is list or t is tuple) and all(type(v) is int for v in a):
                sig.append((t, tuple(a)))
            else:
                break
        else:
            return
        leaves.clear()
        sig.clear()
    sig.append("general")
    _flatten((args, kwargs), leaves, sig)


def _flatten(obj: object, leaves: list, sig: list) -> None:
    """Tensors and scalars of a call's arguments, in order, and a hashable key of everything but tensor data."""
    if isinstance(obj, torch.Tensor):
        leaves.append(obj)
        sig.append((obj.shape, obj.stride(), obj.dtype, obj.device))
    elif isinstance(obj, (tuple, list)):
        sig.append((type(obj), len(obj)))
        for o in obj:
            _flatten(o, leaves, sig)
    elif isinstance(obj, dict):
        sig.append(tuple(obj))
        for o in obj.values():
            _flatten(o, leaves, sig)
    else:
        # the type too: 2 and 2.0 trace to different kernels (integer vs float math); never a repr, which NumPy
        # shortens for long arrays (two arrays, one key)
        sig.append(value_key(obj))


def holder(fn, args: tuple, kwargs: dict, t: torch.Tensor) -> str:
    """The parameter of `fn` whose value holds tensor `t`, for an error message."""
    try:
        bound = inspect.signature(fn).bind(*args, **kwargs).arguments
    except (TypeError, ValueError):  # no signature to bind to: name positions
        bound = {**{f"argument {i}": a for i, a in enumerate(args)}, **kwargs}
    for name, value in bound.items():
        if any(leaf is t for leaf in pytree.tree_leaves(value)):
            return name
    return "a tensor argument"
