"""Shared fixtures and helpers for rblock's tests.

Every test compares rblock against PyTorch:
- `expected`: PyTorch on the very same inputs. Its dtype and shape are the spec for rblock's output.
- `ref`: PyTorch in float64 on the upcast inputs. rblock's values must be within the per-dtype tolerance of it.

On a machine without CUDA, kernels run in Triton's interpreter (~1e6 elements/s): keep every call small.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable, Sequence

import pytest
import torch

import rblock

strategies = ["persistent", "looped"]
DTYPES = [torch.bfloat16, torch.float16, torch.float32]
DTYPE_IDS = {torch.bfloat16: "bf16", torch.float16: "fp16", torch.float32: "fp32"}

# (atol, rtol) against a float64 reference. Outputs are rounded to their dtype once, so the 16-bit tolerances
# are a few ulps of that dtype; fp32 leaves room for a different summation order.
TOLERANCES = {
    torch.float32: (1e-5, 1e-4),
    torch.float16: (2e-3, 2e-3),
    torch.bfloat16: (2e-2, 2e-2),
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


def assert_matches(
    out: torch.Tensor,
    expected: torch.Tensor,
    ref: torch.Tensor,
    *,
    atol_scale: float = 1.0,
    equal_nan: bool = False,
    msg: str | None = None,
) -> None:
    """rblock's `out` has PyTorch's dtype and shape (`expected`) and the float64 reference's values (`ref`)."""
    assert isinstance(out, torch.Tensor), f"expected a tensor, got {type(out).__name__}"
    assert out.dtype == expected.dtype, f"dtype: rblock {out.dtype}, PyTorch {expected.dtype}"
    assert out.shape == expected.shape, f"shape: rblock {tuple(out.shape)}, PyTorch {tuple(expected.shape)}"
    atol, rtol = TOLERANCES.get(expected.dtype, (0.0, 0.0))
    torch.testing.assert_close(
        out.double() if out.is_floating_point() else out,
        ref.double() if ref.is_floating_point() else ref.to(out.dtype),
        atol=atol * atol_scale,
        rtol=rtol,
        equal_nan=equal_nan,
        msg=msg,
    )


def check_against_torch(
    rblock_fn: Callable,
    torch_fn: Callable,
    inputs: Sequence[torch.Tensor],
    *,
    strategy: str | None = None,
    atol_scale: float = 1.0,
    equal_nan: bool = False,
) -> None:
    """Run `rblock_fn(*inputs)` (under `rblock.settings(strategy=...)` when given) and compare every output with
    `torch_fn` on the same inputs (dtype, shape) and on float64 copies of them (values)."""
    if strategy is None:
        out = rblock_fn(*inputs)
    else:
        with rblock.settings(strategy=strategy):
            out = rblock_fn(*inputs)
    expected = torch_fn(*inputs)
    ref = torch_fn(*upcast(list(inputs)))
    outs, exps, refs = (v if isinstance(v, tuple) else (v,) for v in (out, expected, ref))
    assert len(outs) == len(exps), f"rblock returned {len(outs)} outputs, PyTorch {len(exps)}"
    for k, (o, e, r) in enumerate(zip(outs, exps, refs)):
        assert_matches(o, e, r, atol_scale=atol_scale, equal_nan=equal_nan, msg=lambda m, k=k: f"output {k}: {m}")


def sum_scale(n: int) -> float:
    """Absolute error of a sum of n standard-normal values grows like sqrt(n)."""
    return max(1.0, math.sqrt(n))
