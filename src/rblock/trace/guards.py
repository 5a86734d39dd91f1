"""What a compiled function reads besides its arguments, so that a change of it is never silently ignored.

A function's closure variables and the globals its code names (and, through them, those of the plain Python
functions it calls) are read again at every call. Numbers, strings, dtypes and other values go into the call's key,
so a new value compiles anew, as torch.compile's guards do; tensors become inputs of the kernel, read at every call,
so a new tensor (or new data in the old one) is what the kernel reads. Modules are not followed.
"""

from __future__ import annotations

import dis
import functools
import types
import weakref
from dataclasses import dataclass

import torch

_PLAIN = (int, float, bool, str, bytes, complex, type(None), torch.dtype, torch.device, torch.Size)
_UNSET = object()  # a global not (or not yet) defined, or an empty closure cell


@dataclass(frozen=True, slots=True)
class Read:
    """One variable a function reads: a closure cell, or a name in its globals."""

    label: str  # how the user wrote it, for messages
    cell: types.CellType | None
    globals: dict | None

    def value(self) -> object:
        if self.cell is not None:
            try:
                return self.cell.cell_contents
            except ValueError:
                return _UNSET
        return self.globals.get(self.label, _UNSET)


@functools.cache
def _names(code: types.CodeType) -> tuple[str, ...]:
    """The global names `code` and the functions defined inside it look up (not the attribute names beside them in
    `co_names`)."""
    names = dict.fromkeys(i.argval for i in dis.get_instructions(code) if i.opname == "LOAD_GLOBAL")
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names.update(dict.fromkeys(_names(const)))
    return tuple(names)


def reads(fn: types.FunctionType) -> tuple[Read, ...]:
    """The variables `fn` reads: its closure cells, then the names of its globals that its code uses."""
    code, glob = fn.__code__, fn.__globals__
    cells = tuple(Read(name, cell, None) for name, cell in zip(code.co_freevars, fn.__closure__ or ()))
    return cells + tuple(Read(name, None, glob) for name in _names(code) if name in glob)


def _followed(fn: object) -> bool:
    """A plain Python function of the user's (not torch's or rblock's own, which read no state of the user's)."""
    if type(fn) is not types.FunctionType:
        return False
    module = fn.__module__ or ""
    return not (module.startswith(("torch", "rblock.")) or module == "rblock")


_reads_of: weakref.WeakKeyDictionary[types.FunctionType, tuple[Read, ...]] = weakref.WeakKeyDictionary()


def _reads(fn: types.FunctionType) -> tuple[Read, ...]:
    found = _reads_of.get(fn)
    return found if found is not None else _reads_of.setdefault(fn, reads(fn))


def guarded(fn: object) -> bool:
    """Whether `guard` may find anything to read in `fn` (rblock's own functions read no state of the user's)."""
    return isinstance(fn, (functools.partial, types.MethodType)) or _followed(fn)


def guard(fn: object, key: list, tensors: list[torch.Tensor], slots: list[tuple[int, str]]) -> None:
    """Append to `key` what `fn` reads (values, or shapes and dtypes of tensors) and to `tensors` the tensors it
    reads, with their `slots` (the function that reads each, and the variable's name). Cheap: the variables of a
    function are found once; a call reads their values."""
    if isinstance(fn, functools.partial):
        key.append(tuple(value_key(a) for a in (*fn.args, *fn.keywords.values())))
        fn = fn.func
    if isinstance(fn, types.MethodType):
        key.append(_object_key(fn.__self__))
        fn = fn.__func__
    if _followed(fn):
        _guard_function(fn, key, tensors, slots, {id(fn)})


def _guard_function(fn: types.FunctionType, key: list, tensors: list, slots: list, seen: set[int]) -> None:
    for r in _reads(fn):
        v = r.value()
        t = type(v)
        if t in _PLAIN:
            key.append((t, v))
        elif isinstance(v, torch.Tensor):
            tensors.append(v)
            slots.append((id(fn), r.label))
            key.append((r.label, v.shape, v.stride(), v.dtype, v.device))
        elif t is types.ModuleType:
            continue
        elif _followed(v):
            key.append(id(v))
            if id(v) not in seen:
                seen.add(id(v))
                _guard_function(v, key, tensors, slots, seen)
        else:
            key.append(value_key(v))


def value_key(v: object) -> object:
    """A hashable stand-in for a value read by a compiled function: equal when tracing it would give the same
    kernel (containers by their items, plain objects by identity and their plain attributes)."""
    t = type(v)
    if t in _PLAIN or v is _UNSET:
        return (t, v)
    if isinstance(v, torch.Tensor):  # inside a container: the trace refuses it if the function uses it
        return (t, v.shape, v.dtype)
    if t.__module__ == "numpy" and t.__name__ == "ndarray":  # baked into the kernel: by its every value
        return (t, v.dtype.str, v.shape, v.tobytes())
    if t in (tuple, list, set, frozenset):
        return (t, tuple(value_key(o) for o in v))
    if t is dict:
        return (t, tuple((value_key(k), value_key(o)) for k, o in v.items()))
    if t.__hash__ is object.__hash__ and hasattr(v, "__dict__") and not callable(v):
        return _object_key(v)
    try:
        hash(v)
    except TypeError:
        return (t, id(v))
    return (t, v)


def _object_key(v: object) -> object:
    attrs = vars(v) if hasattr(v, "__dict__") else {}
    return (type(v), id(v), tuple((k, (type(a), a)) for k, a in attrs.items() if type(a) in _PLAIN))


def rebound(fn: object, replace: dict[tuple[int, str], torch.Tensor]) -> object:
    """`fn` with the tensors it reads in these slots swapped for others (fake tensors while it is traced): a copy
    of the function (and of the functions it calls), so the user's variables are left alone."""
    if isinstance(fn, functools.partial):
        return functools.partial(rebound(fn.func, replace), *fn.args, **fn.keywords)
    if isinstance(fn, types.MethodType):
        return types.MethodType(rebound(fn.__func__, replace), fn.__self__)
    return _rebound_function(fn, replace, {}) if _followed(fn) else fn


def _rebound_function(fn: types.FunctionType, replace: dict, done: dict[int, object]) -> types.FunctionType:
    if id(fn) in done:  # a function that calls itself keeps calling the original
        return done[id(fn)]
    done[id(fn)] = fn
    glob = dict(fn.__globals__)
    cells = list(fn.__closure__ or ())
    for r in _reads(fn):
        v = r.value()
        if isinstance(v, torch.Tensor) and (id(fn), r.label) in replace:
            new = replace[(id(fn), r.label)]
        elif _followed(v):
            new = _rebound_function(v, replace, done)
        else:
            continue
        if r.cell is not None:
            cells[fn.__code__.co_freevars.index(r.label)] = types.CellType(new)
        else:
            glob[r.label] = new
    copy = types.FunctionType(fn.__code__, glob, fn.__name__, fn.__defaults__, tuple(cells) or None)
    copy.__kwdefaults__ = fn.__kwdefaults__
    done[id(fn)] = copy
    return copy


class CapturedCall:
    """`fn` called with the tensors it reads by name passed as one more, last argument (see `trace.guards`): while
    it is traced they are fake tensors, at every call the ones it reads then."""

    def __init__(self, fn, slots: tuple[tuple[int, str], ...]) -> None:
        self.fn, self.slots = fn, slots

    def __call__(self, *args, **kwargs):
        *args, captured = args
        return rebound(self.fn, dict(zip(self.slots, captured)))(*args, **kwargs)
