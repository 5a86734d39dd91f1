"""Shared fixtures and helpers for rblock's tests.

Every test compares rblock against PyTorch:
- `expected`: PyTorch on the very same inputs. Its dtype and shape are the spec for rblock's output.
- `ref`: PyTorch in float64 on the upcast inputs. rblock's values must be within the per-dtype tolerance of it,
  element by element (`Tolerance`).

On a machine without CUDA, kernels run in Triton's interpreter (~1e6 elements/s): keep every call small.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pytest
import torch

import rblock
from rblock.runtime.device import interpreted

strategies = ["persistent", "looped"]
DTYPES = [torch.bfloat16, torch.float16, torch.float32]
DTYPE_IDS = {torch.bfloat16: "bf16", torch.float16: "fp16", torch.float32: "fp32"}


@dataclass(frozen=True)
class Tolerance:
    """Each element must satisfy |out - ref| <= floor + ulps * eps * |ref|, where eps is the dtype's spacing of
    values in [1, 2) (torch.finfo(dtype).eps: 2^-7 for bfloat16, 2^-10 for float16, 2^-23 for float32), so `ulps`
    is a relative error in units of the output's own precision (one unit is one to two ulps of |ref|)."""

    ulps: float
    floor: float

    def allowed(self, dtype: torch.dtype, ref_abs: torch.Tensor) -> torch.Tensor:
        return self.floor + self.ulps * torch.finfo(dtype).eps * ref_abs


# Every kernel computes in fp32. Where its terms cancel (x - mean, y * w + b, x - logsumexp), a result keeps fp32's
# absolute error on its operands, which here (randn data, weights and biases: up to ~8) is a few ulps of 8: the
# floor, 2^-18 (~3.8e-6), for every dtype. It is far below the outputs that mean something: softmax values of rows of
# 4096 are ~2^-12 on average.
# - 16-bit outputs are rounded once from fp32: half a unit of eps on the GPU; Triton's interpreter converts float32
#   to bfloat16 by truncation, a whole unit; fused_add_rms_norm rounds x + residual and then its output. 2 units.
# - fp32 outputs keep their accumulations' rounding: Triton's interpreter adds a row's elements one after another,
#   whose relative error grows like sqrt(N) ulps; 64 = sqrt(4096), the longest rows of most tests.
# Signed sums get more (assert_near's sum_of); tests whose reference has a documented reason to be further away (a
# formula that PyTorch rounds to 16 bits on the way, statistics of data far from 0) pass their own `ulps`/`floor`.
FLOOR = 2.0**-18
TOLERANCES = {
    torch.float32: Tolerance(ulps=64, floor=FLOOR),
    torch.float16: Tolerance(ulps=2, floor=FLOOR),
    torch.bfloat16: Tolerance(ulps=2, floor=FLOOR),
}

# PyTorch's documented default eps of rms_norm for float16, bfloat16 and float32 inputs.
RMS_NORM_DEFAULT_EPS = torch.finfo(torch.float32).eps


def dtype_id(dtype: torch.dtype) -> str:
    return DTYPE_IDS[dtype]


def stable_seed(*parts: object) -> int:
    """A seed from strings, the same in every process (hash() of a str is salted per process)."""
    return zlib.crc32("/".join(str(p) for p in parts).encode())


@pytest.fixture(autouse=True)
def _seed_torch(request) -> None:
    """torch's global generator seeded from the test's id: a test that draws from it without a seed of its own draws
    the same values in every run, whichever tests ran before it in its process."""
    torch.manual_seed(stable_seed(request.node.nodeid))


@pytest.fixture(params=strategies)
def strategy(request) -> str:
    """Each test that takes `strategy` runs once per strategy; use it as `with rblock.settings(strategy=strategy)`."""
    return request.param


@pytest.fixture(params=DTYPES, ids=[DTYPE_IDS[d] for d in DTYPES])
def dtype(request) -> torch.dtype:
    return request.param


@pytest.fixture
def make(request) -> Callable[..., torch.Tensor]:
    """`make(*shape, dtype=torch.float32)`: fresh torch.randn values, seeded from the test's id (reproducible,
    different for every parametrization), never all zeros."""
    gen = torch.Generator().manual_seed(stable_seed(request.node.nodeid))

    def _make(*shape: int, dtype: torch.dtype = torch.float32, scale: float = 1.0) -> torch.Tensor:
        return (torch.randn(*shape, generator=gen) * scale).to(dtype)

    _make.generator = gen
    return _make


@pytest.fixture
def make_target(make) -> Callable[..., torch.Tensor]:
    """`make_target(rows, classes)`: random int64 class indices in [0, classes)."""

    def _make_target(rows: int, classes: int) -> torch.Tensor:
        return torch.randint(0, classes, (rows,), generator=make.generator, dtype=torch.int64)

    return _make_target


def upcast(value):
    """float tensors -> float64 (recursively through tuples and lists); everything else unchanged."""
    if isinstance(value, torch.Tensor):
        return value.double() if value.is_floating_point() else value
    if isinstance(value, (tuple, list)):
        return type(value)(upcast(v) for v in value)
    return value


def converted_as_kernels_do(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """x converted to dtype as rblock's kernels convert it: to nearest, like PyTorch, but for float32 -> bfloat16 in
    Triton's interpreter, which truncates (rounds toward zero). For a reference whose inputs a kernel converts."""
    if x.dtype == torch.float32 and dtype == torch.bfloat16 and interpreted():
        return (x.contiguous().view(torch.int32) & -(2**16)).view(torch.float32).to(dtype)  # exact: low bits 0
    return x.to(dtype)


def assert_near(
    out: torch.Tensor,
    ref: torch.Tensor,
    *,
    dtype: torch.dtype | None = None,
    sum_of: int = 0,
    ulps: float | None = None,
    floor: float | None = None,
    equal_nan: bool = False,
    msg: str | Callable[[str], str] | None = None,
) -> None:
    """Every element of `out` within the tolerance of `dtype` (out's own by default) of the float64 `ref`: NaN where
    ref is NaN (with `equal_nan`), the same infinity where ref is infinite, and elsewhere
    |out - ref| <= floor + ulps * eps * |ref| (TOLERANCES; `ulps` or `floor` given replace the dtype's for this
    check). Integer and bool outputs must equal ref exactly.

    `sum_of=n`: the output is a sum of n terms of about unit size and either sign, accumulated in fp32 (sum, mean's
    numerator, a sum loss). Its rounding error is absolute, growing like sqrt(n) whatever the sum's own size, and a
    sum that cancels to near 0 has no relative accuracy: the floor is multiplied by sqrt(n). Nothing else gets it."""
    assert isinstance(out, torch.Tensor), f"expected a tensor, got {type(out).__name__}"
    assert out.shape == ref.shape, f"shape: rblock {tuple(out.shape)}, reference {tuple(ref.shape)}"
    dtype = out.dtype if dtype is None else dtype
    if not dtype.is_floating_point or not out.is_floating_point():
        torch.testing.assert_close(out, ref.to(out.dtype), rtol=0, atol=0, msg=msg)
        return
    tol = TOLERANCES.get(dtype, Tolerance(0.0, 0.0))
    tol = Tolerance(tol.ulps if ulps is None else ulps, tol.floor if floor is None else floor)
    if sum_of:
        tol = Tolerance(tol.ulps, tol.floor * math.sqrt(sum_of))
    o, r = out.detach().double().cpu(), ref.detach().double().cpu()
    problems = []
    o_nan, r_nan = o.isnan(), r.isnan()
    if equal_nan:
        bad_nan = o_nan != r_nan
    else:
        bad_nan = o_nan | r_nan
    if bad_nan.any():
        problems.append(("NaN where the reference is not, or not NaN where it is", bad_nan))
    r_inf = r.isinf()
    bad_inf = (r_inf & (o != r)) | (o.isinf() & ~r_inf & ~r_nan)
    if bad_inf.any():
        problems.append(("an infinity not matched", bad_inf))
    finite = r.isfinite() & o.isfinite()
    err = torch.where(finite, (o - r).abs(), torch.zeros_like(o))
    allowed = tol.allowed(dtype, r.abs())
    bad = finite & (err > allowed)
    if bad.any():
        problems.append((f"|out - ref| > {tol.floor:.3g} + {tol.ulps:g} * eps * |ref|", bad))
    if not problems:
        return
    lines = []
    for what, mask in problems:
        idx = mask.nonzero()
        worst = idx[0]
        if what.startswith("|"):
            ratio = torch.where(mask, err / allowed, torch.zeros_like(err))
            worst = (ratio == ratio.max()).nonzero()[0]
        w = tuple(int(i) for i in worst)
        lines.append(
            f"{int(mask.sum())} of {mask.numel()} elements: {what} ({DTYPE_IDS.get(dtype, dtype)}); "
            f"worst at {w}: out {o[w].item():.8g}, ref {r[w].item():.8g}, |out - ref| {err[w].item():.3g}, "
            f"allowed {allowed[w].item():.3g}"
        )
    text = "\n".join(lines)
    if callable(msg):
        text = msg(text)
    elif msg:
        text = f"{msg}: {text}"
    raise AssertionError(text)


def assert_matches(
    out: torch.Tensor,
    expected: torch.Tensor,
    ref: torch.Tensor,
    *,
    sum_of: int = 0,
    ulps: float | None = None,
    floor: float | None = None,
    equal_nan: bool = False,
    msg: str | Callable[[str], str] | None = None,
) -> None:
    """rblock's `out` has PyTorch's dtype and shape (`expected`) and, element by element, the float64 reference's
    values (`ref`) within the tolerance of that dtype (assert_near)."""
    assert isinstance(out, torch.Tensor), f"expected a tensor, got {type(out).__name__}"
    assert out.dtype == expected.dtype, f"dtype: rblock {out.dtype}, PyTorch {expected.dtype}"
    assert out.shape == expected.shape, f"shape: rblock {tuple(out.shape)}, PyTorch {tuple(expected.shape)}"
    assert_near(out, ref, dtype=expected.dtype, sum_of=sum_of, ulps=ulps, floor=floor, equal_nan=equal_nan, msg=msg)


def assert_all_near(outs, refs, *, msg: str | None = None, **kw) -> None:
    """assert_near on each of several outputs (a tensor, or a tuple or list of them) and their references."""
    outs, refs = (v if isinstance(v, (tuple, list)) else (v,) for v in (outs, refs))
    assert len(outs) == len(refs), f"rblock returned {len(outs)} outputs, the reference {len(refs)}"
    head = f"{msg}: " if msg else ""
    for k, (o, r) in enumerate(zip(outs, refs)):
        assert_near(o, r, msg=lambda m, k=k: f"{head}output {k}: {m}", **kw)


def check_against_torch(
    rblock_fn: Callable,
    torch_fn: Callable,
    inputs: Sequence[torch.Tensor],
    *,
    strategy: str | None = None,
    sum_of: int | Sequence[int] = 0,
    ulps: float | None = None,
    floor: float | None = None,
    equal_nan: bool = False,
) -> None:
    """Run `rblock_fn(*inputs)` (under `rblock.settings(strategy=...)` when given) and compare every output with
    `torch_fn` on the same inputs (dtype, shape) and on float64 copies of them (values, per element). `sum_of` may
    give one count per output (0 for the outputs that are no sums)."""
    if strategy is None:
        out = rblock_fn(*inputs)
    else:
        with rblock.settings(strategy=strategy):
            out = rblock_fn(*inputs)
    expected = torch_fn(*inputs)
    ref = torch_fn(*upcast(list(inputs)))
    outs, exps, refs = (v if isinstance(v, tuple) else (v,) for v in (out, expected, ref))
    assert len(outs) == len(exps), f"rblock returned {len(outs)} outputs, PyTorch {len(exps)}"
    counts = [sum_of] * len(outs) if isinstance(sum_of, int) else list(sum_of)
    assert len(counts) == len(outs), f"sum_of gives {len(counts)} counts for {len(outs)} outputs"
    for k, (o, e, r, n) in enumerate(zip(outs, exps, refs, counts)):
        assert_matches(
            o, e, r, sum_of=n, ulps=ulps, floor=floor, equal_nan=equal_nan, msg=lambda m, k=k: f"output {k}: {m}"
        )
