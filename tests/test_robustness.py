"""Nothing silently wrong: what a compiled function reads besides its arguments, inputs it updates in place, calls
from many threads, a damaged or unusable cache, and random compositions of ops against float64 PyTorch."""

from __future__ import annotations

import threading
import warnings
import zlib

import pytest
import torch
import torch.nn.functional as F
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rblock
from conftest import assert_matches, converted_as_kernels_do, upcast
from rblock.errors import InvalidArgument, UnsupportedOperation
from rblock.runtime import disk, loader
from rblock.trace import guards


def _rand(*shape: int, seed: str, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    gen = torch.Generator().manual_seed(zlib.crc32(seed.encode()))
    return torch.randn(*shape, generator=gen).to(dtype)


# ---- what a compiled function reads besides its arguments ------------------------------------------------------

SCALE = 2.0
MODE = "sum"


def test_a_changed_closure_value_compiles_anew():
    x = _rand(4, 33, seed="closure")
    scale = 2.0
    f = rblock.compile(lambda a: (a * scale).sum(-1))
    assert_matches(f(x), (x * 2.0).sum(-1), (x.double() * 2.0).sum(-1))
    scale = 5.0  # noqa: F841 -- read by the lambda
    assert_matches(f(x), (x * 5.0).sum(-1), (x.double() * 5.0).sum(-1))


def test_a_changed_global_compiles_anew_and_the_old_value_is_found_again():
    global SCALE
    x = _rand(3, 40, seed="global")
    f = rblock.compile(lambda a: (a * SCALE).amax(-1))
    try:
        for value in (2.0, -3.0, 2.0):
            SCALE = value
            assert_matches(f(x), (x * value).amax(-1), (x.double() * value).amax(-1))
        assert len(f._entries) == 2
    finally:
        SCALE = 2.0


def _helper(a):
    return a.amax(-1) if MODE == "max" else a.sum(-1)


def test_a_global_read_by_a_called_function_is_guarded_too():
    global MODE
    x = _rand(5, 24, seed="helper")
    f = rblock.compile(lambda a: _helper(a * 2))
    try:
        assert_matches(f(x), (x * 2).sum(-1), (x.double() * 2).sum(-1))
        MODE = "max"
        assert_matches(f(x), (x * 2).amax(-1), (x.double() * 2).amax(-1))
    finally:
        MODE = "sum"


def test_a_changed_dtype_in_a_closure_compiles_anew():
    x = _rand(3, 20, seed="dtype")
    dt = torch.float32
    f = rblock.compile(lambda a: a.to(dt).sum(-1))
    assert f(x).dtype == torch.float32
    dt = torch.bfloat16  # noqa: F841 -- read by the lambda
    out = f(x)
    converted = converted_as_kernels_do(x, torch.bfloat16)  # the interpreter truncates float32 to bfloat16
    assert_matches(out, x.bfloat16().sum(-1), converted.double().sum(-1), sum_of=x.shape[-1])


def test_a_bound_method_is_guarded_on_its_object_attributes():
    class Scaled:
        def __init__(self, s: float) -> None:
            self.s = s

        def __call__(self, a):
            return (a * self.s).sum(-1)

    obj = Scaled(2.0)
    f = rblock.compile(obj.__call__)
    x = _rand(3, 17, seed="method")
    assert_matches(f(x), (x * 2.0).sum(-1), (x.double() * 2.0).sum(-1))
    obj.s = 3.0
    assert_matches(f(x), (x * 3.0).sum(-1), (x.double() * 3.0).sum(-1))


def test_a_captured_tensor_is_an_input_read_at_every_call():
    x = _rand(4, 8, seed="captured x")
    w = _rand(8, seed="captured w")
    f = rblock.compile(lambda a: (a * w).sum(-1))
    assert_matches(f(x), (x * w).sum(-1), (x.double() * w.double()).sum(-1))
    w.mul_(-3)  # new data in the same tensor
    assert_matches(f(x), (x * w).sum(-1), (x.double() * w.double()).sum(-1))
    w = _rand(8, seed="another w")  # another tensor
    assert_matches(f(x), (x * w).sum(-1), (x.double() * w.double()).sum(-1))
    w = _rand(2, 1, seed="a w of another shape")  # broadcast along r now: compiled anew
    assert_matches(f(x[:2]), (x[:2] * w).sum(-1), (x[:2].double() * w.double()).sum(-1))


def test_a_tensor_reached_through_an_attribute_is_refused_by_name():
    holder = {"w": _rand(8, seed="dict w")}
    f = rblock.compile(lambda a: (a * holder["w"]).sum(-1))
    with pytest.raises(UnsupportedOperation, match="pass that tensor as an argument"):
        f(_rand(2, 8, seed="dict x"))


def test_a_captured_tensor_that_requires_grad_is_refused_by_its_name():
    weight = torch.randn(6, requires_grad=True)
    f = rblock.compile(lambda a: (a * weight).sum(-1))
    with pytest.raises(InvalidArgument, match="weight requires grad"):
        f(_rand(2, 6, seed="grad x"))


def test_the_variables_of_a_function_are_found_once_not_per_call(monkeypatch):
    calls = []
    found = guards.reads
    monkeypatch.setattr(guards, "reads", lambda fn: calls.append(fn) or found(fn))
    k = 3.0
    f = rblock.compile(lambda a: (a * k).sum(-1))
    x = _rand(2, 9, seed="once")
    for _ in range(5):
        f(x)
    assert len(calls) == 1
    from rblock.ops.softmax import _rows_kernel

    assert not _rows_kernel._guarded  # rblock's own kernels read nothing of the user's: no guard work per call


# ---- inputs updated in place --------------------------------------------------------------------------------


@pytest.mark.parametrize("strategy", ["persistent", "looped"])
def test_an_input_updated_in_place_is_written_back(strategy):
    def g(a):
        a.add_(1)
        return a.sum(-1)

    y = _rand(3, 50, seed="add_")
    ref = (y.double() + 1).sum(-1)
    eager = y.clone()
    expected = g(eager)
    with rblock.settings(strategy=strategy):
        out = rblock.compile(g)(y)
    assert_matches(out, expected, ref)
    assert torch.equal(y, eager)


@pytest.mark.parametrize("strategy", ["persistent", "looped"])
def test_an_update_read_again_after_the_reduction_is_not_applied_twice(strategy):
    """A looped softmax reads its input twice; the input's new value must be written once, from one computation."""

    def g(a, b):
        a.mul_(2)
        b.copy_(a - 1)
        return torch.softmax(a, -1)

    a, b = _rand(4, 70, seed="mul_ a"), torch.empty(4, 70)
    ea, eb = a.clone(), b.clone()
    expected = g(ea, eb)
    ref = torch.softmax(a.double() * 2, -1)
    with rblock.settings(strategy=strategy):
        out = rblock.compile(g)(a, b)
    assert_matches(out, expected, ref)
    assert torch.equal(a, ea) and torch.equal(b, eb)


def test_indexed_assignment_into_an_input_is_refused_not_dropped():
    def g(a):
        a[:, 0] = 3.0
        return a.sum(-1)

    y = _rand(2, 6, seed="index put")
    before = y.clone()
    with pytest.raises(UnsupportedOperation):
        rblock.compile(g)(y)
    assert torch.equal(y, before)


# ---- threads --------------------------------------------------------------------------------------------------


def _hammer(call, threads: int, calls: int = 20) -> list[str]:
    """Run `call(thread, k)` `calls` times on each of `threads` threads at once; what went wrong, if anything."""
    problems: list[str] = []

    def work(i: int) -> None:
        for k in range(calls):
            try:
                problem = call(i, k)
            except Exception as e:  # noqa: BLE001 -- every failure is reported, none may happen
                problem = f"thread {i} call {k}: {type(e).__name__}: {e}"[:300]
            if problem:
                problems.append(problem)

    pool = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    return problems


def test_many_threads_calling_a_compiled_op_get_right_results():
    x = _rand(8, 96, seed="threads")
    ref = torch.softmax(x.double(), -1)
    rblock.softmax(x, -1)

    def call(i: int, k: int) -> str | None:
        err = (rblock.softmax(x, -1).double() - ref).abs().max().item()
        return f"thread {i} call {k}: error {err}" if err > 1e-5 else None

    assert _hammer(call, threads=4) == []


def test_many_threads_compiling_new_shapes_at_once_get_right_results():
    def call(i: int, k: int) -> str | None:
        if k % 4:
            return None
        x = _rand(2 + i, 30 + k, seed=f"shapes {i} {k}")
        out = rblock.compile(lambda a: torch.logsumexp(a * 0.5, -1), name=f"lse_{i}")(x)
        err = (out.double() - torch.logsumexp(x.double() * 0.5, -1)).abs().max().item()
        return f"thread {i} shape {tuple(x.shape)}: error {err}" if err > 1e-5 else None

    assert _hammer(call, threads=8) == []


# ---- a damaged or unusable cache -----------------------------------------------------------------------------


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A fresh cache directory, and kernels forgotten as in a new process."""
    monkeypatch.setenv("RBLOCK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(loader, "_loaded", {})
    monkeypatch.setattr(disk, "_warned", set())
    return tmp_path / "cache"


def _fn(a):
    return torch.log_softmax(a * 1.5, -1)


def _kernel_paths(x) -> list:
    return [loader.source_path(spec) for spec in rblock.compile(_fn).compiled_for(x).specs]


@pytest.mark.parametrize("damage", ["binary", "folder", "other source"])
def test_a_damaged_kernel_source_is_made_again(cache, monkeypatch, damage):
    x = _rand(3, 40, seed="damaged")
    paths = _kernel_paths(x)
    monkeypatch.setattr(loader, "_loaded", {})  # a new process
    for p in paths:
        p.unlink()
        if damage == "binary":
            p.write_bytes(b"\x00\xff\xfe garbage \x80")
        elif damage == "folder":
            p.mkdir()
        else:
            p.write_text("import triton\n")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        out = rblock.compile(_fn)(x)
    assert_matches(out, _fn(x), _fn(x.double()))
    assert any("cache entry" in str(w.message) for w in seen)


@pytest.mark.parametrize("where", ["cache dir is a file", "kernels is a file", "tuning is a file"])
def test_an_unusable_cache_folder_falls_back_with_one_warning_naming_the_variable(cache, monkeypatch, where):
    if where == "cache dir is a file":
        cache.parent.mkdir(exist_ok=True)
        cache.write_text("not a folder")
    else:
        cache.mkdir()
        (cache / where.split()[0]).write_text("not a folder")
    x = _rand(2, 30, seed="unusable")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        first = rblock.compile(_fn)(x)
        rblock.compile(_fn)(x * 2)
    assert_matches(first, _fn(x), _fn(x.double()))
    named = [w for w in seen if "RBLOCK_CACHE_DIR" in str(w.message)]
    if where != "tuning is a file":  # the interpreter tunes nothing: the tuning folder is never opened here
        assert len(named) == 1, [str(w.message) for w in seen]


def test_the_tuning_cache_falls_back_when_its_folder_is_a_file(cache):
    from rblock.plan import Config
    from rblock.runtime import cache as tuning

    cache.mkdir()
    (cache / "tuning").write_text("not a folder")
    key = tuning.TuneKey(graph="g", xnumel_bucket=1, strategy="auto", device="d", capability="9.0")
    with pytest.warns(UserWarning, match="RBLOCK_CACHE_DIR"):
        tuning.store(key, Config("looped", 1, 64, 4), [])
    assert tuning.lookup(key)[0] == Config("looped", 1, 64, 4)


# ---- the entry point ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [3, "f", torch.randn(2), torch.nn.Module])
def test_compile_refuses_what_is_not_a_function_at_once(bad):
    with pytest.raises(InvalidArgument, match=r"rblock.compile: fn must be a function"):
        rblock.compile(bad)


def test_compile_refuses_a_name_that_is_not_a_string():
    with pytest.raises(InvalidArgument, match=r"rblock.compile: name must be a string"):
        rblock.compile(name=3)


def test_compile_on_meta_tensors_gives_shapes_and_dtypes():
    f = rblock.compile(lambda a, w: (F.rms_norm(a.float(), (a.shape[-1],), w) * 2).to(a.dtype))
    x, w = torch.empty(5, 64, device="meta", dtype=torch.bfloat16), torch.empty(64, device="meta")
    out = f(x, w)
    assert out.device.type == "meta" and out.shape == (5, 64) and out.dtype == torch.bfloat16


# ---- random compositions against float64 ---------------------------------------------------------------------

UNARY = {
    "neg": torch.neg,
    "abs": torch.abs,
    "exp": lambda v: torch.exp(v * 0.5),
    "sigmoid": torch.sigmoid,
    "silu": F.silu,
    "relu": torch.relu,
    "square": torch.square,
    "affine": lambda v: v * 1.75 - 0.5,
    "clamp_min": lambda v: torch.clamp_min(v, -0.25),
    "reciprocal": lambda v: 1 / (v.abs() + 1),
    "sqrt": lambda v: torch.sqrt(v.abs()),
    "rsqrt": lambda v: torch.rsqrt(v.abs() + 0.5),
    "leaky": lambda v: torch.where(v > 0, v, 0.1 * v),
}
BINARY = {"mul": torch.mul, "add": torch.add, "maximum": torch.maximum, "sub": torch.sub}
REDUCE = {
    "sum": lambda v: v.sum(-1),
    "mean": lambda v: v.mean(-1, keepdim=True),
    "amax": lambda v: v.amax(-1),
    "amin": lambda v: v.amin(-1),
    "var": lambda v: v.var(-1),
    "logsumexp": lambda v: torch.logsumexp(v, -1),
    "softmax": lambda v: torch.softmax(v, -1),
    "log_softmax": lambda v: torch.log_softmax(v, -1),
    "normalize": lambda v: (v - v.mean(-1, keepdim=True)) * torch.rsqrt(v.var(-1, keepdim=True) + 1e-5),
}
ULP = {torch.float32: 2.0**-23, torch.bfloat16: 2.0**-7, torch.float16: 2.0**-10}


@st.composite
def programs(draw):
    rows, cols = draw(st.integers(1, 6)), draw(st.integers(1, 70))
    return {
        "rows": rows,
        "cols": cols,
        "dtype": draw(st.sampled_from([torch.float32, torch.bfloat16, torch.float16])),
        "layout": draw(st.sampled_from(["contiguous", "transposed", "strided", "offset"])),
        "chain": draw(st.lists(st.sampled_from(sorted(UNARY)), max_size=3)),
        "binary": draw(st.sampled_from([None, *sorted(BINARY)])),
        "other": draw(st.sampled_from(["full", "row weight", "column"])),
        "reduce": draw(st.sampled_from(sorted(REDUCE))),
        "strategy": draw(st.sampled_from(["auto", "persistent", "looped"])),
        "seed": draw(st.integers(0, 2**31 - 1)),
    }


def _laid_out(t: torch.Tensor, layout: str) -> torch.Tensor:
    if layout == "transposed":
        return t.t().contiguous().t()
    if layout == "strided":
        return torch.repeat_interleave(t, 2, dim=-1)[..., ::2]
    if layout == "offset":
        return torch.cat([t.flatten(), t.flatten()[:3]])[3:].view(t.shape) if t.numel() > 3 else t
    return t


def _before_reduction(p: dict, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    for name in p["chain"]:
        a = UNARY[name](a)
    return a if p["binary"] is None else BINARY[p["binary"]](a, b)


@settings(max_examples=120, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(programs())
def test_random_compositions_match_float64(p):
    gen = torch.Generator().manual_seed(p["seed"])
    rows, cols, dt = p["rows"], p["cols"], p["dtype"]
    x = _laid_out(torch.randn(rows, cols, generator=gen).to(dt), p["layout"])
    shape = {"full": (rows, cols), "row weight": (cols,), "column": (rows, 1)}[p["other"]]
    y = torch.randn(*shape, generator=gen).to(dt)

    def fn(a, b):
        return REDUCE[p["reduce"]](_before_reduction(p, a, b))

    with rblock.settings(strategy=p["strategy"]):
        out = rblock.compile(fn, name="fuzz")(x, y)
    expected, ref = fn(x, y), fn(*upcast([x, y]))
    assert out.dtype == expected.dtype and out.shape == expected.shape
    # per element, no further from float64 than eager PyTorch in the same dtype is, give or take a few roundings
    # to the output dtype and float32's rounding over a row (cancellation in sums and variances); in 16 bits, where
    # eager and rblock may round intermediate values at different places, a rounding of the row's largest output
    m = _before_reduction(p, *upcast([x, y])).abs().amax(-1, keepdim=True)
    floor = cols * 2.0**-22 * (m + m * m)
    if dt != torch.float32:
        floor = floor + 2 * ULP[dt] * ref.abs().nan_to_num(0).reshape(rows, -1).amax(-1, keepdim=True)
    floor = floor.expand(rows, cols) if tuple(ref.shape) == (rows, cols) else floor.reshape(ref.shape)
    tol = 2 * (expected.double() - ref).abs().nan_to_num(0) + 4 * ULP[dt] * ref.abs() + floor
    err = (out.double() - ref).abs()
    bad = ~(err <= tol) & ~(ref.isnan() & out.isnan())
    assert not bad.any(), f"{p}: {int(bad.sum())} of {bad.numel()} wrong, largest error {err.max().item():.3g}"


def test_long_numpy_arrays_with_one_repr_get_their_own_kernels():
    """NumPy shortens the repr of long arrays: two arrays, one repr, must still be two keys."""
    import numpy as np

    a, b = np.zeros(2000), np.zeros(2000)
    b[1000] = 24.0
    assert repr(a) == repr(b)
    f = rblock.compile(lambda x, arr: x.sum(-1) + float(arr.sum()))
    x = _rand(2, 5, seed="numpy")
    assert_matches(f(x, a), x.sum(-1), x.double().sum(-1))
    assert_matches(f(x, b), x.sum(-1) + 24, x.double().sum(-1) + 24)


def test_a_view_with_a_pending_negation_is_refused_by_name():
    z = torch.complex(_rand(3, 8, seed="neg re"), _rand(3, 8, seed="neg im"))
    neg = z.conj().imag  # a view of z's memory, negated when read
    assert neg.is_neg()
    with pytest.raises(InvalidArgument, match="a: is a view whose values are its memory negated|resolve_neg"):
        rblock.compile(lambda a: a.sum(-1))(neg)


def test_a_sparse_tensor_is_refused_by_name():
    with pytest.raises(InvalidArgument, match="dense"):
        rblock.compile(lambda a: a.sum(-1))(_rand(3, 8, seed="sparse").to_sparse())


@pytest.mark.parametrize(
    "fields",
    [{"XBLOCK": True}, {"align": 1}, {"num_stages": 2.0}, {"kind": "fast"}, {"maxnreg": 300}],
)
def test_config_refuses_wrong_types_by_field(fields):
    with pytest.raises(InvalidArgument, match=f"rblock.Config: {next(iter(fields))}"):
        rblock.Config(**{"kind": "looped", "XBLOCK": 1, "RBLOCK": 64, "num_warps": 4, **fields})


@pytest.mark.parametrize("fields", [{"max_r0_block": "2048"}, {"max_r0_block": 2.5}, {"seed_max_rnumel": -1}])
def test_heuristics_refuse_wrong_types_and_negatives_by_field(fields):
    with pytest.raises(InvalidArgument, match=f"rblock.Heuristics: {next(iter(fields))}"):
        rblock.Heuristics(**fields)


def test_explain_lists_every_config_field_of_each_candidate():
    from dataclasses import fields

    report = rblock.explain(lambda a: torch.softmax(a, -1), _rand(4, 100, seed="explain"))
    names = {f.name for f in fields(rblock.Config)}
    assert all(names <= set(c) for c in report["candidates"])
