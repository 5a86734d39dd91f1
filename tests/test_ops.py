"""rblock's ops give what PyTorch gives: values (within a per-dtype tolerance of a float64 reference), dtype and
shape, for every strategy, dtype, row length, memory layout and the special values NaN, +-inf and empty."""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
import torch
import torch.nn.functional as F

import rblock
from conftest import (
    DTYPES,
    RMS_NORM_DEFAULT_EPS,
    TOLERANCES,
    assert_matches,
    assert_near,
    check_against_torch,
    converted_as_kernels_do,
    dtype_id,
    stable_seed,
    strategies,
    upcast,
)
from rblock.compiler import recording

# ---------------------------------------------------------------------------------------------------------------
# The ops, each over the last dim of an (M, N) tensor, next to its PyTorch definition.
# ---------------------------------------------------------------------------------------------------------------


def _no_extra(make, m, n, dtype):
    return []


def _weight(make, m, n, dtype):
    return [make(n, dtype=dtype)]


def _weight_bias(make, m, n, dtype):
    return [make(n, dtype=dtype), make(n, dtype=dtype)]


def _target(make, m, n, dtype):
    return [torch.randint(0, n, (m,), generator=make.generator)]


def _residual_weight(make, m, n, dtype):
    return [make(m, n, dtype=dtype), make(n, dtype=dtype)]


@dataclass(frozen=True)
class RowOp:
    name: str
    rblock_fn: Callable
    torch_fn: Callable
    extra: Callable = field(default=_no_extra)  # (make, M, N, dtype) -> the inputs after x
    is_sum: bool = False  # a signed sum of the row: its absolute error grows like sqrt(N) (conftest.assert_near)

    def inputs(self, make, x: torch.Tensor) -> list[torch.Tensor]:
        m, n = x.shape
        return [x, *self.extra(make, m, n, x.dtype)]

    def check(self, inputs, strategy, **kw):
        n = inputs[0].shape[-1] if self.is_sum else 0
        check_against_torch(self.rblock_fn, self.torch_fn, inputs, strategy=strategy, sum_of=n, **kw)


ROW_OPS = [
    RowOp("sum", lambda x: rblock.sum(x, -1), lambda x: torch.sum(x, -1), is_sum=True),
    RowOp("mean", lambda x: rblock.mean(x, -1), lambda x: torch.mean(x, -1)),
    RowOp("amax", lambda x: rblock.amax(x, -1), lambda x: torch.amax(x, -1)),
    RowOp("amin", lambda x: rblock.amin(x, -1), lambda x: torch.amin(x, -1)),
    RowOp("logsumexp", lambda x: rblock.logsumexp(x, -1), lambda x: torch.logsumexp(x, -1)),
    RowOp("var", lambda x: rblock.var(x, -1), lambda x: torch.var(x, -1)),
    RowOp("std", lambda x: rblock.std(x, -1), lambda x: torch.std(x, -1)),
    RowOp("softmax", lambda x: rblock.softmax(x, -1), lambda x: torch.softmax(x, -1)),
    RowOp("log_softmax", lambda x: rblock.log_softmax(x, -1), lambda x: torch.log_softmax(x, -1)),
    RowOp(
        "rms_norm",
        lambda x, w: rblock.rms_norm(x, x.shape[-1:], w),
        lambda x, w: F.rms_norm(x, x.shape[-1:], w, eps=RMS_NORM_DEFAULT_EPS),
        _weight,
    ),
    RowOp(
        "layer_norm",
        lambda x, w, b: rblock.layer_norm(x, x.shape[-1:], w, b),
        lambda x, w, b: F.layer_norm(x, x.shape[-1:], w, b),
        _weight_bias,
    ),
    RowOp(
        "cross_entropy",
        lambda x, t: rblock.cross_entropy(x, t),
        lambda x, t: F.cross_entropy(x, t),
        _target,
    ),
    RowOp(
        "fused_add_rms_norm",
        lambda x, r, w: rblock.fused_add_rms_norm(x, r, w),
        lambda x, r, w: (F.rms_norm(x + r, x.shape[-1:], w, eps=1e-6), x + r),
        _residual_weight,
    ),
]
ROW_OP_IDS = [op.name for op in ROW_OPS]
OPS_BY_NAME = {op.name: op for op in ROW_OPS}

# (rows, row length): row lengths 1, 3, small and large non-powers of two and powers of two; row counts that are
# not multiples of a typical XBLOCK. Every shape stays under ~12k elements (Triton's interpreter is slow).
ROW_SHAPES = [(7, 1), (7, 3), (7, 37), (5, 127), (5, 300), (5, 1000), (3, 2049), (3, 4096)]
SHAPE_IDS = [f"{m}x{n}" for m, n in ROW_SHAPES]


# ---------------------------------------------------------------------------------------------------------------
# Every op x strategy x dtype x row length
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("m", "n"), ROW_SHAPES, ids=SHAPE_IDS)
@pytest.mark.parametrize("op", ROW_OPS, ids=ROW_OP_IDS)
def test_op_matches_pytorch_over_last_dim(op, m, n, dtype, strategy, make):
    op.check(op.inputs(make, make(m, n, dtype=dtype)), strategy, equal_nan=True)


@pytest.mark.parametrize("n", [1, 1000])
@pytest.mark.parametrize("op", ROW_OPS, ids=ROW_OP_IDS)
def test_op_matches_pytorch_on_a_single_row(op, n, strategy, make):
    op.check(op.inputs(make, make(1, n)), strategy, equal_nan=True)


@pytest.mark.parametrize(
    "op", [o for o in ROW_OPS if o.name not in ("cross_entropy", "fused_add_rms_norm")], ids=lambda o: o.name
)
def test_op_matches_pytorch_on_a_1d_input(op, strategy, make):
    x = make(300)
    op.check([x, *op.extra(make, 1, 300, x.dtype)], strategy)


# ---------------------------------------------------------------------------------------------------------------
# Memory layouts: strided views, storage offsets, transposes
# ---------------------------------------------------------------------------------------------------------------

M, N = 5, 300
LAYOUTS = {
    "every_other_column": lambda make, dt: make(M, 2 * N, dtype=dt)[:, ::2],
    "slice_with_storage_offset": lambda make, dt: make(M + 1, N + 2, dtype=dt)[1:, 2:],
    "transposed": lambda make, dt: make(N, M, dtype=dt).t(),
    "row_stride_padding": lambda make, dt: make(M, N + 13, dtype=dt)[:, :N],
    "one_row_broadcast_to_all": lambda make, dt: make(1, N, dtype=dt).expand(M, N),
    "one_value_broadcast_along_each_row": lambda make, dt: make(M, 1, dtype=dt).expand(M, N),
}


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("op", ROW_OPS, ids=ROW_OP_IDS)
def test_op_reads_non_contiguous_views(op, layout, strategy, make):
    x = LAYOUTS[layout](make, torch.float32)
    assert x.shape == (M, N) and not x.is_contiguous()
    op.check(op.inputs(make, x), strategy)


@pytest.mark.parametrize("layout", ["every_other_column", "transposed"])
def test_fused_add_rms_norm_reads_a_non_contiguous_residual(layout, strategy, make):
    x = make(M, N)
    residual = LAYOUTS[layout](make, torch.float32)
    op = OPS_BY_NAME["fused_add_rms_norm"]
    op.check([x, residual, make(N)], strategy)


def test_op_does_not_write_to_its_input(make, strategy):
    x = make(5, 300)
    before = x.clone()
    with rblock.settings(strategy=strategy):
        rblock.softmax(x, -1)
        rblock.fused_add_rms_norm(x, x, make(300))
    torch.testing.assert_close(x, before, rtol=0, atol=0)


# ---------------------------------------------------------------------------------------------------------------
# Reductions over other dims: dim 0, 3-D inputs, tuples of dims, keepdim
# ---------------------------------------------------------------------------------------------------------------

DIM_OPS = {
    "sum": (rblock.sum, torch.sum),
    "mean": (rblock.mean, torch.mean),
    "amax": (rblock.amax, torch.amax),
    "amin": (rblock.amin, torch.amin),
    "logsumexp": (rblock.logsumexp, torch.logsumexp),
    "var": (rblock.var, torch.var),
    "std": (rblock.std, torch.std),
}
SOFTMAX_OPS = {"softmax": (rblock.softmax, torch.softmax), "log_softmax": (rblock.log_softmax, torch.log_softmax)}


def _reduce_case(name: str, dim, keepdim: bool):
    ours, theirs = DIM_OPS[name]
    return (lambda x: ours(x, dim, keepdim=keepdim)), (lambda x: theirs(x, dim, keepdim=keepdim))


def _count(shape, dim) -> int:
    dims = range(len(shape)) if dim is None else (dim,) if isinstance(dim, int) else dim
    return math.prod(shape[d] for d in dims)


def _sum_of(name: str, n: int) -> int:
    """The sum slack (conftest.assert_near) for the reductions that add n signed terms: sum alone. A mean is that
    sum divided by n, so its absolute error shrinks like 1/sqrt(n); amax/amin return an input; var, std and
    logsumexp add positive terms, whose rounding is relative to the result."""
    return n if name == "sum" else 0


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("n", [37, 1000])
@pytest.mark.parametrize("transposed", [False, True], ids=["contiguous", "transposed_view"])
@pytest.mark.parametrize("name", list(DIM_OPS))
def test_reduction_over_dim_0(name, transposed, n, keepdim, strategy, make):
    """(N, M) tensors reduced over dim 0: r strided across rows (contiguous), or r contiguous (x.t())."""
    x = make(5, n).t() if transposed else make(n, 5)
    ours, theirs = _reduce_case(name, 0, keepdim)
    check_against_torch(ours, theirs, [x], strategy=strategy, sum_of=_sum_of(name, n))


@pytest.mark.parametrize("n", [37, 1000])
@pytest.mark.parametrize("transposed", [False, True], ids=["contiguous", "transposed_view"])
@pytest.mark.parametrize("name", list(SOFTMAX_OPS))
def test_softmax_over_dim_0(name, transposed, n, strategy, make):
    x = make(5, n).t() if transposed else make(n, 5)
    ours, theirs = SOFTMAX_OPS[name]
    check_against_torch(lambda t: ours(t, 0), lambda t: theirs(t, 0), [x], strategy=strategy)


@pytest.mark.parametrize("name", ["sum", "mean", "amax", "var"])
def test_reduction_over_dim_0_of_a_broadcast_tensor(name, strategy, make):
    """x = v.expand(N, M): stride 0 along the reduced dim; every column is constant."""
    ours, theirs = _reduce_case(name, 0, False)
    check_against_torch(ours, theirs, [make(5).expand(300, 5)], strategy=strategy, sum_of=_sum_of(name, 300))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=dtype_id)
@pytest.mark.parametrize("name", ["sum", "amax", "var"])
def test_reduction_over_dim_0_in_16_bit(name, dtype, strategy, make):
    ours, theirs = _reduce_case(name, 0, False)
    check_against_torch(ours, theirs, [make(300, 5, dtype=dtype)], strategy=strategy, sum_of=_sum_of(name, 300))


SHAPE_3D = (4, 6, 50)
DIMS_3D = [2, 1, 0, -1, (1, 2), (0, 2), (0, 1), (2, 0), (0, 1, 2)]


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dim", DIMS_3D, ids=str)
@pytest.mark.parametrize("name", list(DIM_OPS))
def test_reduction_of_3d_input(name, dim, keepdim, strategy, make):
    x = make(*SHAPE_3D)
    ours, theirs = _reduce_case(name, dim, keepdim)
    check_against_torch(ours, theirs, [x], strategy=strategy, sum_of=_sum_of(name, _count(SHAPE_3D, dim)))


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("name", [n for n in DIM_OPS if n != "logsumexp"])  # torch.logsumexp needs its dims
def test_reduction_over_every_dim_when_dim_is_none(name, keepdim, strategy, make):
    x = make(*SHAPE_3D)
    ours, theirs = _reduce_case(name, None, keepdim)
    n = _sum_of(name, math.prod(SHAPE_3D))
    check_against_torch(ours, theirs, [x], strategy=strategy, sum_of=n)
    if not keepdim:  # dim left out, as torch.sum(x) takes it
        check_against_torch(DIM_OPS[name][0], DIM_OPS[name][1], [x], strategy=strategy, sum_of=n)


DTYPE_PAIRS = [(torch.bfloat16, torch.float32), (torch.float32, torch.float16), (torch.float32, torch.bfloat16)]


@pytest.mark.parametrize(("x_dtype", "out_dtype"), DTYPE_PAIRS, ids=dtype_id)
@pytest.mark.parametrize("dim", [-1, 0, None], ids=["last", "first", "every"])
@pytest.mark.parametrize("name", ["sum", "mean"])
def test_sum_and_mean_with_an_output_dtype(name, dim, x_dtype, out_dtype, strategy, make):
    """As torch.sum(x, dim, dtype=...): x converted to dtype, then reduced (the reference sums the converted values in
    float64, converted as the kernel converts them)."""
    ours, theirs = DIM_OPS[name]
    x = make(40, 300, dtype=x_dtype)
    with rblock.settings(strategy=strategy):
        got = ours(x, dim, dtype=out_dtype)
    ref = theirs(converted_as_kernels_do(x, out_dtype).double(), dim)
    n = x.numel() if dim is None else x.shape[dim]
    assert_matches(got, theirs(x, dim, dtype=out_dtype), ref, sum_of=_sum_of(name, n))


@pytest.mark.parametrize("name", ["sum", "mean"])
def test_sum_to_float16_converts_before_it_sums(name, strategy):
    """70000 and -69999 are inf and -inf in float16, so their sum is NaN, as in PyTorch (not 4, the float32 sum
    converted); 1e-8 is 0 in float16."""
    x = torch.tensor([[70000.0, -69999.0, 1.0, 2.0], [1e-8, 1e-8, 1e-8, 1e-8]])
    with rblock.settings(strategy=strategy):
        got = getattr(rblock, name)(x, -1, dtype=torch.float16)
    assert got.dtype == torch.float16
    assert got[0].isnan() and got[1] == 0


@pytest.mark.parametrize("dim", [(1, 2), [1, 2], (0, 2)], ids=["tuple", "list", "outer_and_inner"])
@pytest.mark.parametrize("name", ["sum", "mean"])
def test_reduction_over_dims_of_a_3d_view(name, dim, strategy, make):
    x = make(6, 4, 100)[1:5, :, ::2].transpose(0, 1)  # (4, 4, 50), no dim contiguous
    ours, theirs = DIM_OPS[name]
    check_against_torch(
        lambda t: ours(t, dim), lambda t: theirs(t, tuple(dim)), [x], strategy=strategy, sum_of=_sum_of(name, 200)
    )


@pytest.mark.parametrize("dim", [0, 1, 2, -1])
@pytest.mark.parametrize("name", list(SOFTMAX_OPS))
def test_softmax_of_3d_input(name, dim, strategy, make):
    ours, theirs = SOFTMAX_OPS[name]
    check_against_torch(lambda t: ours(t, dim), lambda t: theirs(t, dim), [make(*SHAPE_3D)], strategy=strategy)


@pytest.mark.parametrize("normalized_shape", [(50,), (6, 50)], ids=["last_dim", "last_two_dims"])
@pytest.mark.parametrize("affine", [False, True], ids=["no_weight", "weight"])
def test_rms_norm_of_3d_input(normalized_shape, affine, dtype, strategy, make):
    x = make(*SHAPE_3D, dtype=dtype)
    w = make(*normalized_shape, dtype=dtype) if affine else None
    check_against_torch(
        lambda x, w: rblock.rms_norm(x, normalized_shape, w),
        lambda x, w: F.rms_norm(x, normalized_shape, w, eps=RMS_NORM_DEFAULT_EPS),
        [x, w],
        strategy=strategy,
    )


@pytest.mark.parametrize("normalized_shape", [(50,), (6, 50)], ids=["last_dim", "last_two_dims"])
@pytest.mark.parametrize("affine", [False, True], ids=["no_affine", "affine"])
def test_layer_norm_of_3d_input(normalized_shape, affine, dtype, strategy, make):
    x = make(*SHAPE_3D, dtype=dtype)
    w, b = (make(*normalized_shape, dtype=dtype), make(*normalized_shape, dtype=dtype)) if affine else (None, None)
    check_against_torch(
        lambda x, w, b: rblock.layer_norm(x, normalized_shape, w, b),
        lambda x, w, b: F.layer_norm(x, normalized_shape, w, b),
        [x, w, b],
        strategy=strategy,
    )


def test_fused_add_rms_norm_of_3d_input_normalizes_the_last_dim(dtype, strategy, make):
    x, r, w = make(*SHAPE_3D, dtype=dtype), make(*SHAPE_3D, dtype=dtype), make(SHAPE_3D[-1], dtype=dtype)
    check_against_torch(
        lambda x, r, w: rblock.fused_add_rms_norm(x, r, w, eps=1e-5),
        lambda x, r, w: (F.rms_norm(x + r, (SHAPE_3D[-1],), w, eps=1e-5), x + r),
        [x, r, w],
        strategy=strategy,
    )


# ---------------------------------------------------------------------------------------------------------------
# Arguments: correction, eps, optional weights
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("correction", [0, 1, 2])
@pytest.mark.parametrize("name", ["var", "std"])
def test_var_and_std_correction(name, correction, keepdim, strategy, make):
    ours, theirs = DIM_OPS[name]
    check_against_torch(
        lambda x: ours(x, -1, keepdim=keepdim, correction=correction),
        lambda x: theirs(x, -1, keepdim=keepdim, correction=correction),
        [make(5, 300)],
        strategy=strategy,
    )


@pytest.mark.parametrize("correction", [0.5, 1.5, True, None, math.nan], ids=repr)
@pytest.mark.parametrize("name", ["var", "std"])
def test_a_correction_that_is_not_an_int_is_taken_like_pytorch(name, correction, strategy, make):
    """PyTorch takes any real number (0.5: between the population's and the sample's divisor), a bool, None (1) and
    NaN (a divisor of 0)."""
    ours, theirs = getattr(rblock, name), getattr(torch, name)
    check_against_torch(
        lambda x: ours(x, -1, correction=correction),
        lambda x: theirs(x, -1, correction=correction),
        [make(4, 300)],
        strategy=strategy,
        equal_nan=True,
    )


@pytest.mark.parametrize("n", [1, 2])
def test_var_with_no_degrees_of_freedom_is_nan_like_pytorch(n, strategy, make):
    """correction >= row length: PyTorch divides by max(N - correction, 0) and gives NaN or inf."""
    check_against_torch(
        lambda x: rblock.var(x, -1, correction=2),
        lambda x: torch.var(x, -1, correction=2),
        [make(4, n)],
        strategy=strategy,
        equal_nan=True,
    )


@pytest.mark.parametrize("unbiased", [False, True])
@pytest.mark.parametrize("name", ["var", "std"])
def test_var_and_std_take_unbiased(name, unbiased, strategy, make):
    ours, theirs = DIM_OPS[name]
    check_against_torch(
        lambda x: ours(x, -1, unbiased=unbiased),
        lambda x: theirs(x, -1, unbiased=unbiased),
        [make(5, 30)],
        strategy=strategy,
    )


@pytest.mark.parametrize("name", ["var", "std"])
def test_var_and_std_take_keepdim_as_a_keyword_only(name):
    """torch.var(x, dim, False) reads False as `unbiased`: a third positional argument is refused, not read as
    keepdim."""
    with pytest.raises(TypeError):
        DIM_OPS[name][0](torch.randn(4, 8), -1, False)


@pytest.mark.parametrize("eps", [1e-6, 0.5])
def test_rms_norm_explicit_eps(eps, dtype, strategy, make):
    """eps 0.5 is half of mean(x^2): where it is added (under the square root) shows in every dtype."""
    check_against_torch(
        lambda x, w: rblock.rms_norm(x, (300,), w, eps=eps),
        lambda x, w: F.rms_norm(x, (300,), w, eps=eps),
        [make(5, 300, dtype=dtype), make(300, dtype=dtype)],
        strategy=strategy,
    )


def test_fused_add_rms_norm_explicit_eps(dtype, strategy, make):
    """eps 2 is the size of mean(h^2) (h = x + residual): where it is added shows in every dtype."""
    check_against_torch(
        lambda x, r, w: rblock.fused_add_rms_norm(x, r, w, eps=2.0),
        lambda x, r, w: (F.rms_norm(x + r, (300,), w, eps=2.0), x + r),
        [make(5, 300, dtype=dtype), make(5, 300, dtype=dtype), make(300, dtype=dtype)],
        strategy=strategy,
    )


@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
def test_rms_norm_default_eps_is_float32_eps_like_pytorch(dtype, strategy):
    """PyTorch: eps=None means torch.finfo(torch.float32).eps for float16, bfloat16 and float32 inputs. On a row of
    small values the difference to finfo(x.dtype).eps is far outside any tolerance; at 1e-3, mean(x^2) is 1e-6, and
    fp32's eps 12% of it, so where eps is added (under the square root) shows in every dtype too."""
    x = torch.full((3, 64), 1e-3).to(dtype)
    x[1] *= -3.0
    check_against_torch(
        lambda x: rblock.rms_norm(x, (64,)),
        lambda x: F.rms_norm(x, (64,), eps=RMS_NORM_DEFAULT_EPS),
        [x],
        strategy=strategy,
    )


@pytest.mark.parametrize("eps", [1e-5, 0.25])
@pytest.mark.parametrize("parts", ["none", "weight", "bias", "both"])
def test_layer_norm_optional_weight_bias_and_eps(parts, eps, strategy, make):
    w = make(300) if parts in ("weight", "both") else None
    b = make(300) if parts in ("bias", "both") else None
    check_against_torch(
        lambda x, w, b: rblock.layer_norm(x, (300,), w, b, eps=eps),
        lambda x, w, b: F.layer_norm(x, (300,), w, b, eps=eps),
        [make(5, 300), w, b],
        strategy=strategy,
    )


# The mean of values about 100 can only be known to about an ulp of 100: x - mean, and so layer_norm's outputs (of
# about unit size), carry that absolute error. var and std square their residuals: their errors stay relative.
LARGE_MEAN_FLOOR = 8 * torch.finfo(torch.float32).eps * 64  # 8 spacings of float32 values in [64, 128)


def _large_mean_floor(name: str) -> float | None:
    return LARGE_MEAN_FLOOR if name == "layer_norm" else None


@pytest.mark.parametrize("name", ["var", "std", "layer_norm"])
def test_statistics_of_values_with_a_large_mean_are_accurate(name, strategy, make):
    """mean/std = 100: a one-pass E[x^2] - E[x]^2 would lose ~4 digits in float32; PyTorch loses none. The mean
    itself can only be known to about an ulp of 100, so layer_norm's outputs get 8 ulps of 100 as their floor."""
    op = OPS_BY_NAME[name]
    inputs = op.inputs(make, 100.0 + make(5, 1000))
    check_against_torch(op.rblock_fn, op.torch_fn, inputs, strategy=strategy, floor=_large_mean_floor(name))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("name", ["var", "std", "layer_norm"])
def test_statistics_of_16_bit_values_with_a_large_mean_are_accurate(name, dtype, make):
    """From 16-bit data the single pass takes the mean as summed, without the residuals' correction: its rounding
    (a few fp32 ulps of 100) is far below the data's own resolution (2^-8 or 2^-11 of 100); layer_norm's outputs
    carry it as an absolute error, as from fp32 data."""
    op = OPS_BY_NAME[name]
    inputs = op.inputs(make, (100.0 + make(5, 1000)).to(dtype))
    check_against_torch(op.rblock_fn, op.torch_fn, inputs, strategy="persistent", floor=_large_mean_floor(name))


@pytest.mark.parametrize("form", ["persistent", "split_row"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("mean", [0.0, 2.5, 2.7, 40.0, 300.0])
@pytest.mark.parametrize("name", ["var", "layer_norm", "fp32_var_of_16_bit"])
def test_single_pass_mean_variance_about_zero_and_about_the_mean(name, mean, dtype, form, make):
    """From 16-bit data the single pass takes M2 from the sum of squares while the mean lies within about 2.6
    standard deviations of 0 (2.5: at most 3 bits lost, far below the data's resolution; where the result is fp32,
    within the ulps that M2's cancellation allows), and about the mean past that (2.7, 40, 300: a second exchange).
    A split row does so in each slice (4 of 500)."""
    x = make(6, 2000)
    x = ((x - x.mean(-1, keepdim=True)) / x.std(-1, keepdim=True) + mean).to(dtype)
    settings = (
        rblock.settings(strategy="persistent")
        if form == "persistent"
        else rblock.settings(config=rblock.Config("split_row", 1, 512, 4, split=4))
    )
    # Where the single pass keeps M2 = sum(x^2) - sum(x)^2 / n (the mean within 2.6 sd of 0), M2 keeps the absolute
    # errors of the two sums, each of the fp32 table's relative size: sum(x^2) is (1 + mean^2) times M2, and
    # sum(x)^2 / n is mean^2 times M2 with twice the relative error of sum(x). fp32 variances get that many ulps.
    # layer_norm's outputs (y * w + b, up to ~8) carry the statistics' errors in absolute terms: those of M2, and
    # the fp32 mean's (a few ulps of |mean|, 300 at most): a floor of 2^-13 where the mean is not 0.
    fp32_ulps = TOLERANCES[torch.float32].ulps * (1 + 3 * mean**2) if mean < 2.6 else None
    with settings:
        if name == "fp32_var_of_16_bit":
            fn = rblock.compile(lambda t: t.float().var(-1), name="fp32_var")
            ref = lambda t: (t if t.dtype == torch.float64 else t.float()).var(-1)  # noqa: E731
            check_against_torch(fn, ref, [x], ulps=fp32_ulps)
            return
        op = OPS_BY_NAME[name]
        floor = 2.0**-13 if name == "layer_norm" and mean else None
        check_against_torch(op.rblock_fn, op.torch_fn, op.inputs(make, x), floor=floor)


def test_single_pass_mean_variance_corrects_the_mean_of_fp32_data_only():
    var = rblock.compile(lambda t: t.var(-1), name="var")
    offset_var = rblock.compile(lambda t: (t.float() + 1e6).var(-1), name="offset_var")

    def source(fn, dtype: torch.dtype) -> str:
        x = torch.randn(4, 1000, dtype=dtype)
        with rblock.settings(strategy="persistent"):
            return fn.compiled_for(x).program.stages[0].spec.source

    assert "_dsum" in source(var, torch.float32)
    assert "_dsum" not in source(var, torch.bfloat16) and "_dsum" not in source(var, torch.float16)
    assert "_dsum" in source(offset_var, torch.bfloat16)  # fp32 arithmetic on the way: values as fine as fp32's


@pytest.mark.parametrize("xblock", [1, 4])
@pytest.mark.parametrize("align", [False, True])
@pytest.mark.parametrize("name", ["var", "layer_norm"])
def test_looped_welford_over_many_chunks_and_a_partial_last_one(name, align, xblock, make):
    """Chunks of 128 over rows of 1000, each lane's sums taken about its first element. Not aligned, the first chunk
    is taken before the loop, and the lanes' counts (8 chunks or 7: the last one is partial) come from their
    positions; at 4 rows per program the second program holds 2 rows past the last. Aligned, rows start 1 element
    past a 16-byte boundary and the walk's first chunk masks each row's head, whose lanes then meet their first
    element in the second chunk."""
    op = OPS_BY_NAME[name]
    x = (100.0 + make(6, 1001))[:, 1:] if align else 100.0 + make(6, 1000)
    with recording() as log, rblock.settings(config=rblock.Config("looped", xblock, 128, 4, align=align)):
        check_against_torch(op.rblock_fn, op.torch_fn, op.inputs(make, x), floor=_large_mean_floor(name))
    (src,) = [st.spec.source for c in log for st in c.program.stages]
    assert ("the lanes' shifts" in src) == (not align)


@pytest.mark.parametrize("name", ["var", "layer_norm"])
def test_looped_statistics_when_each_lanes_first_element_is_far_from_the_rest(name, make):
    """The looped sums are taken about each lane's first element: here the whole first chunk lies 1000 standard
    deviations away from the rest of its row. The shift is one of the lane's elements, so its distance from the
    lane's mean is part of the lane's M2 and the subtraction loses no more than a few ulps of it."""
    op = OPS_BY_NAME[name]
    x = make(6, 1000)
    x[:, :128] += 1000.0
    with rblock.settings(config=rblock.Config("looped", 1, 128, 4)):
        check_against_torch(op.rblock_fn, op.torch_fn, op.inputs(make, x))


def _check_softmax_statistics(name: str, dtype: torch.dtype, config: rblock.Config, make) -> list[str]:
    """Rows of 1800 for the looped softmax statistics, against fp64; the kernels' sources. Row 0's first 512 elements
    are -inf, so its groups start without a value; row 1 rises 40 above its running max at 901 and again in the
    row's last 5 elements; row 2 spreads over 10^4, where exps underflow. Row 3 is plain."""
    x = make(4, 1800, dtype=dtype)
    x[0, :512] = -math.inf
    x[1, 901] += 40.0
    x[1, 1795] += 80.0
    x[2] *= 5000.0
    op = OPS_BY_NAME[name]
    with recording() as log, rblock.settings(config=config):
        check_against_torch(op.rblock_fn, op.torch_fn, op.inputs(make, x))
    return [st.spec.source for c in log for st in c.program.stages]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=dtype_id)
@pytest.mark.parametrize("name", ["logsumexp", "softmax", "log_softmax", "cross_entropy"])
def test_looped_softmax_statistics_in_groups_of_a_threads_elements(name, dtype, make):
    """Chunks of 512 at 2 warps: each thread's 8 contiguous elements (4 in fp32) share one running max; row 1's jumps
    fall in the middle of a group and in the row's partial last chunk."""
    sources = _check_softmax_statistics(name, dtype, rblock.Config("looped", 1, 512, 2), make)
    assert any(f"[XBLOCK, RBLOCK // {8 if dtype == torch.bfloat16 else 4}, " in s for s in sources)


@pytest.mark.parametrize(
    "config", [rblock.Config("looped", 1, 128, 2, unroll=4), rblock.Config("looped", 1, 256, 1, unroll=2)]
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=dtype_id)
@pytest.mark.parametrize("name", ["logsumexp", "softmax", "cross_entropy"])
def test_unrolled_softmax_statistics_group_a_threads_vectors_of_every_chunk(name, dtype, config, make):
    """Unrolled, one row per program: a loop trip is one tile of `unroll` chunks, and a thread's vectors of it share
    one running max (4 or 2 of them here, each of 2 to 8 elements). The last trip holds chunks that lie wholly past
    the row's end."""
    sources = _check_softmax_statistics(name, dtype, config, make)
    (src,) = [s for s in sources if "softmax_stats" in s]
    per_thread = config.RBLOCK // (32 * config.num_warps)
    reps = config.unroll * per_thread // min(per_thread, 8 if dtype == torch.bfloat16 else 4)
    assert f"rwide = tl.arange(0, RBLOCK * {config.unroll})" in src and f"[XBLOCK, {reps}, RBLOCK * " in src


@pytest.mark.parametrize(
    "config", [rblock.Config("looped", 1, 256, 1, unroll=4), rblock.Config("looped", 1, 512, 2, unroll=2)]
)
@pytest.mark.parametrize("n", [1300, 700])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=dtype_id)
@pytest.mark.parametrize("name", ["sum", "var", "rms_norm", "fused_add_rms_norm"])
def test_unrolled_sums_fold_a_tile_of_chunks_in_each_thread(name, dtype, n, config, make):
    """Unrolled, one row per program, chunks of whole rounds of the threads' vectors: a loop trip is one tile of
    `unroll` chunks, added lane by lane within each thread before the accumulators take it; mean-variance takes its
    shifts from the first tile's first chunk. Rows of 1300 end inside a trip, whose last chunks lie wholly past the
    end; rows of 700 end inside the first tile, and the loop never runs. Row 0's first 300 elements lie 1000 above
    the rest (the lanes' shifts among them)."""
    x = make(3, n, dtype=dtype)
    x[0, :300] += 1000.0
    op = OPS_BY_NAME[name]
    with recording() as log, rblock.settings(config=config):
        op.check(op.inputs(make, x), None)
    (src,) = [st.spec.source for c in log for st in c.program.stages if "for r0_offset" in st.spec.source]
    assert f"rwide = tl.arange(0, RBLOCK * {config.unroll})" in src
    assert "tl.sum(tl.reshape(tl.broadcast_to(tl.where(mask, " in src or "_shift[:, None, :]" in src


@pytest.mark.parametrize("n", [1300, 3001])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=dtype_id)
@pytest.mark.parametrize("name", ["sum", "rms_norm", "fused_add_rms_norm", "cross_entropy"])
def test_looped_float_sums_keep_one_total_per_vector_of_a_thread(name, dtype, n, make):
    """Chunks of 512 at 2 warps: a thread's 8 contiguous elements (4 in fp32) are added up within the thread before
    the one accumulator lane they share takes them; rows of 3001 are walked from the boundary below their start
    (cross_entropy's label smoothing sums its row beside the softmax statistics). Row 0's first 300 elements lie
    1000 above the rest."""
    x = make(3, n, dtype=dtype)
    x[0, :300] += 1000.0
    op = OPS_BY_NAME[name]
    config = rblock.Config("looped", 1, 512, 2, align=n % 8 != 0)
    inputs = op.inputs(make, x)
    if name == "cross_entropy":
        fn = lambda logits, t: rblock.cross_entropy(logits, t, reduction="none", label_smoothing=0.25)  # noqa: E731
        ref = lambda logits, t: F.cross_entropy(logits, t, reduction="none", label_smoothing=0.25)  # noqa: E731
        with recording() as log, rblock.settings(config=config):
            check_against_torch(fn, ref, inputs)
    else:
        with recording() as log, rblock.settings(config=config):
            op.check(inputs, None)
    (src,) = [st.spec.source for c in log for st in c.program.stages if "for r0_offset" in st.spec.source]
    group = 8 if dtype == torch.bfloat16 else 4
    assert f"tl.full([XBLOCK, RBLOCK // {group}], 0, tl.float32)" in src
    assert f"[XBLOCK, RBLOCK // {group}, {group}]), 2)" in src


def test_looped_integer_sums_keep_a_lane_per_element(make):
    """Integer sums (in int64, as PyTorch's) keep their [XBLOCK, RBLOCK] lanes."""
    x = torch.randint(-1000, 1000, (3, 1300), dtype=torch.int32)
    fn = rblock.compile(lambda x: x.sum(-1), name="int_sum")
    with recording() as log, rblock.settings(config=rblock.Config("looped", 1, 512, 2)):
        torch.testing.assert_close(fn(x), x.sum(-1), rtol=0, atol=0)
    src = log[0].program.stages[0].spec.source
    assert "tl.full([XBLOCK, RBLOCK], 0, tl.int64)" in src and "RBLOCK // " not in src


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=dtype_id)
def test_unrolled_mean_variance_followed_by_another_pass_keeps_its_loop(dtype, make):
    """layer_norm's mean-variance takes its first chunk before its loop, at function scope, and its second pass
    assigns the same names at the chunk's width: Triton refuses a loop that assigns a name of another shape, so the
    first pass keeps its unrolled loop (compiled for sm_90: tests/test_sm90.py)."""
    x = make(3, 1300, dtype=dtype)
    x[0, :300] += 1000.0
    op = OPS_BY_NAME["layer_norm"]
    with recording() as log, rblock.settings(config=rblock.Config("looped", 1, 256, 1, unroll=4)):
        op.check(op.inputs(make, x), None)
    (src,) = [st.spec.source for c in log for st in c.program.stages]
    assert "rwide" not in src and src.count("loop_unroll_factor=4") == 2


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=dtype_id)
@pytest.mark.parametrize("name", ["sum", "var"])
def test_unrolled_sums_of_a_split_row_fold_tiles_of_each_slice(name, dtype, make):
    """A split reduction's first kernel over 4 slices of rows of 5001 (slices of 1251, the last of 1248): each slice
    is walked in tiles of 4 chunks of 256, the last one partial, then combined."""
    x = make(2, 5001, dtype=dtype)
    x[1, :700] += 1000.0
    op = OPS_BY_NAME[name]
    with recording() as log, rblock.settings(config=rblock.Config("looped", 1, 256, 1, split=4, unroll=4)):
        op.check(op.inputs(make, x), None)
    assert any("rwide = tl.arange(0, RBLOCK * 4)" in st.spec.source for c in log for st in c.program.stages)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=dtype_id)
def test_unrolled_sums_over_chunks_narrower_than_the_threads_vectors_keep_their_loop(dtype, make):
    """Chunks of 64 at 1 warp hold 2 elements per thread, less than a round of its vectors: a tile of them would
    put one lane's elements in several threads, so the pass keeps its unrolled loop."""
    op = OPS_BY_NAME["var"]
    with recording() as log, rblock.settings(config=rblock.Config("looped", 1, 64, 1, unroll=4)):
        op.check(op.inputs(make, make(3, 700, dtype=dtype)), None)
    (src,) = [st.spec.source for c in log for st in c.program.stages]
    assert "rwide" not in src and "loop_unroll_factor=4" in src


def test_column_softmax_statistics_keep_one_running_max_per_element(make):
    """Over dim 0 a thread's contiguous elements lie in one row of the input, each in another column's statistics:
    no groups."""
    x = make(300, 64)
    with recording() as log, rblock.settings(config=rblock.Config("looped", 2, 64, 2)):
        check_against_torch(lambda x: rblock.logsumexp(x, 0), lambda x: torch.logsumexp(x, 0), [x])
    assert "RBLOCK // " not in log[0].program.stages[0].spec.source


def test_layer_norm_of_a_constant_row_is_the_bias(strategy):
    x = torch.full((3, 100), 7.0)
    b = torch.linspace(-1, 1, 100)
    check_against_torch(
        lambda x, b: rblock.layer_norm(x, (100,), None, b),
        lambda x, b: F.layer_norm(x, (100,), None, b),
        [x, b],
        strategy=strategy,
    )


def test_softmax_rows_sum_to_one(dtype, strategy, make):
    x = make(5, 1000, dtype=dtype, scale=5.0)
    with rblock.settings(strategy=strategy):
        y = rblock.softmax(x, -1)
    # each value within its tolerance of the reference's, so their sum within as much of 1
    assert_near(y.double().sum(-1), torch.ones(5, dtype=torch.float64), dtype=dtype)


def test_softmax_of_large_logits_does_not_overflow(strategy):
    x = torch.tensor([[1000.0, 999.0, 998.0], [-1000.0, -999.0, -998.0]])
    check_against_torch(lambda x: rblock.softmax(x, -1), lambda x: torch.softmax(x, -1), [x], strategy=strategy)
    check_against_torch(lambda x: rblock.logsumexp(x, -1), lambda x: torch.logsumexp(x, -1), [x], strategy=strategy)


# ---------------------------------------------------------------------------------------------------------------
# cross_entropy
# ---------------------------------------------------------------------------------------------------------------

CE_SHAPES = [(7, 5), (6, 1000)]


@pytest.mark.parametrize(("m", "c"), CE_SHAPES, ids=[f"{m}x{c}" for m, c in CE_SHAPES])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_with_ignored_rows(reduction, m, c, dtype, strategy, make, make_target):
    logits, target = make(m, c, dtype=dtype), make_target(m, c)
    target[::3] = -100
    check_against_torch(
        lambda x, t: rblock.cross_entropy(x, t, reduction=reduction),
        lambda x, t: F.cross_entropy(x, t, reduction=reduction),
        [logits, target],
        strategy=strategy,
        sum_of=m if reduction == "sum" else 0,
    )


@pytest.mark.parametrize("smoothing", [0.1, 1.0])
@pytest.mark.parametrize(("m", "c"), CE_SHAPES, ids=[f"{m}x{c}" for m, c in CE_SHAPES])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_with_label_smoothing(reduction, m, c, smoothing, dtype, strategy, make, make_target):
    logits, target = make(m, c, dtype=dtype), make_target(m, c)
    target[1] = -100
    check_against_torch(
        lambda x, t: rblock.cross_entropy(x, t, reduction=reduction, label_smoothing=smoothing),
        lambda x, t: F.cross_entropy(x, t, reduction=reduction, label_smoothing=smoothing),
        [logits, target],
        strategy=strategy,
        sum_of=m if reduction == "sum" else 0,
    )


def test_cross_entropy_without_label_smoothing_runs_the_plain_kernel(make, make_target):
    """label_smoothing=0.0 is no argument to the row kernel: the call finds the plain call's compiled kernel, and
    gives PyTorch's losses."""
    from rblock.ops.softmax import _rows_kernel as rows  # the module, not the op of its name

    logits, target = make(5, 40), make_target(5, 40)
    rblock.cross_entropy(logits, target, reduction="none")
    entries = len(rows._entries)
    check_against_torch(
        lambda x, t: rblock.cross_entropy(x, t, reduction="none", label_smoothing=0.0),
        lambda x, t: F.cross_entropy(x, t, reduction="none", label_smoothing=0.0),
        [logits, target],
    )
    assert len(rows._entries) == entries


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_custom_ignore_index(reduction, strategy, make):
    logits = make(6, 40)
    target = torch.tensor([0, 3, 3, 39, 3, 7])
    check_against_torch(
        lambda x, t: rblock.cross_entropy(x, t, ignore_index=3, reduction=reduction),
        lambda x, t: F.cross_entropy(x, t, ignore_index=3, reduction=reduction),
        [logits, target],
        strategy=strategy,
    )


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_with_every_row_ignored(reduction, strategy, make):
    """PyTorch: mean over no rows is NaN, sum is 0, per-row losses are 0."""
    check_against_torch(
        lambda x, t: rblock.cross_entropy(x, t, reduction=reduction),
        lambda x, t: F.cross_entropy(x, t, reduction=reduction),
        [make(4, 10), torch.full((4,), -100)],
        strategy=strategy,
        equal_nan=True,
    )


@pytest.mark.parametrize("where", ["target", "another_class", "ignored_row"])
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_plus_inf_in_cross_entropy_logits_gives_nan_for_that_row(reduction, where, strategy, make):
    """PyTorch's log-softmax turns a row holding +inf into NaN (inf - inf), whichever class is the target; an ignored
    row stays 0, and the mean and the sum of the others finite."""
    logits, target = make(4, 300), torch.tensor([1, 200, 3, -100])
    row, col = {"target": (1, 200), "another_class": (2, 7), "ignored_row": (3, 5)}[where]
    logits[row, col] = math.inf
    check_against_torch(
        lambda x, t: rblock.cross_entropy(x, t, reduction=reduction),
        lambda x, t: F.cross_entropy(x, t, reduction=reduction),
        [logits, target],
        strategy=strategy,
        equal_nan=True,
    )


@pytest.mark.parametrize(("x_dtype", "w_dtype"), [(torch.bfloat16, torch.float32), (torch.float16, torch.float32)])
def test_rms_norms_return_x_dtype_whatever_the_weights(x_dtype, w_dtype, strategy, make):
    """As PyTorch 2.13's rms_norm (earlier versions promoted to the weight's dtype); the values against float64."""
    x, residual, w = make(5, 300, dtype=x_dtype), make(5, 300, dtype=x_dtype), make(300, dtype=w_dtype)
    with rblock.settings(strategy=strategy):
        out = rblock.rms_norm(x, (300,), w, 1e-6)
        fused, h = rblock.fused_add_rms_norm(x, residual, w, 1e-6)
    assert out.dtype == fused.dtype == h.dtype == x_dtype
    assert_matches(out, F.rms_norm(x, (300,), w.to(x_dtype), 1e-6), F.rms_norm(x.double(), (300,), w.double(), 1e-6))
    h_ref = x.double() + residual.double()
    assert_matches(h, x + residual, h_ref)
    assert_matches(fused, F.rms_norm(h, (300,), w.to(x_dtype), 1e-6), F.rms_norm(h_ref, (300,), w.double(), 1e-6))


@pytest.mark.parametrize("bad", [10, 11, -1, 10**6], ids=["C", "C+1", "minus_1", "huge"])
def test_cross_entropy_out_of_range_target_gives_nan_for_that_row(bad, strategy, make, make_target):
    """Documented deviation: PyTorch raises; rblock gives NaN for that row (and so NaN for mean and sum)."""
    logits, target = make(5, 10), make_target(5, 10)
    target[2] = bad
    with rblock.settings(strategy=strategy):
        per_row = rblock.cross_entropy(logits, target, reduction="none")
        total = rblock.cross_entropy(logits, target, reduction="sum")
        mean = rblock.cross_entropy(logits, target, reduction="mean")
    assert per_row.shape == (5,) and per_row.dtype == logits.dtype
    assert torch.isnan(per_row[2])
    ok = torch.tensor([True, True, False, True, True])
    expected = F.cross_entropy(logits[ok], target[ok], reduction="none")
    assert_matches(per_row[ok], expected, F.cross_entropy(logits[ok].double(), target[ok], reduction="none"))
    assert torch.isnan(total) and torch.isnan(mean)


def test_cross_entropy_int32_target_is_refused_or_same_as_int64(strategy, make, make_target):
    """PyTorch takes int64 targets. rblock may refuse an int32 target (InvalidDtype naming target) or accept it; if
    it accepts it, the result is that of the same target as int64."""
    logits, target = make(5, 40), make_target(5, 40)
    target[1] = -100
    try:
        with rblock.settings(strategy=strategy):
            out = rblock.cross_entropy(logits, target.to(torch.int32), reduction="none")
    except rblock.InvalidDtype as e:
        assert "target" in str(e)
        return
    expected = F.cross_entropy(logits, target, reduction="none")
    assert_matches(out, expected, F.cross_entropy(logits.double(), target, reduction="none"))


def test_cross_entropy_of_one_class_is_zero(strategy):
    check_against_torch(
        lambda x, t: rblock.cross_entropy(x, t, reduction="none"),
        lambda x, t: F.cross_entropy(x, t, reduction="none"),
        [torch.randn(4, 1), torch.zeros(4, dtype=torch.int64)],
        strategy=strategy,
    )


# ---------------------------------------------------------------------------------------------------------------
# NaN and infinity
# ---------------------------------------------------------------------------------------------------------------

# Where special values are put, as (settings, row length): persistent, looped, and looped with many small chunks
# (so a special value meets the running state of an earlier chunk).
SPECIAL_SETTINGS = {
    **{s: dict(strategy=s) for s in strategies},
    "looped_chunks_of_64": dict(config=rblock.Config("looped", 2, 64, 2)),
}
NAN_OPS = ["sum", "mean", "amax", "amin", "logsumexp", "var", "std", "softmax", "log_softmax", "rms_norm", "layer_norm"]


def _check_special(op: RowOp, x: torch.Tensor, settings: dict, make) -> None:
    inputs = op.inputs(make, x)
    with rblock.settings(**settings):
        out = op.rblock_fn(*inputs)
    expected = op.torch_fn(*inputs)
    n = x.shape[-1] if op.is_sum else 0
    assert_matches(out, expected, op.torch_fn(*upcast(inputs)), sum_of=n, equal_nan=True)


@pytest.mark.parametrize("position", ["first", "middle", "last"])
@pytest.mark.parametrize("where", list(SPECIAL_SETTINGS))
@pytest.mark.parametrize("name", NAN_OPS)
def test_nan_in_a_row_propagates_like_pytorch(name, where, position, make):
    x = make(4, 300)
    x[1, {"first": 0, "middle": 150, "last": 299}[position]] = math.nan
    _check_special(OPS_BY_NAME[name], x, SPECIAL_SETTINGS[where], make)


def test_nan_in_cross_entropy_logits_gives_nan_for_that_row(strategy, make):
    logits, target = make(4, 300), torch.tensor([1, 2, 3, 4])
    logits[1, 200] = math.nan
    check_against_torch(
        lambda x, t: rblock.cross_entropy(x, t, reduction="none"),
        lambda x, t: F.cross_entropy(x, t, reduction="none"),
        [logits, target],
        strategy=strategy,
        equal_nan=True,
    )


INF = math.inf
SPECIAL_ROWS = {
    "all_minus_inf": lambda n: [-INF] * n,
    "one_plus_inf": lambda n: [1.0] * (n // 2) + [INF] + [2.0] * (n - n // 2 - 1),
    "one_minus_inf": lambda n: [1.0] * (n // 2) + [-INF] + [2.0] * (n - n // 2 - 1),
    "plus_and_minus_inf": lambda n: [INF] + [0.5] * (n - 2) + [-INF],
    "all_plus_inf": lambda n: [INF] * n,
    "minus_inf_then_finite": lambda n: [-INF] * (n - 1) + [3.0],
}
INF_OPS = ["amax", "amin", "logsumexp", "softmax", "log_softmax", "sum", "var", "std", "layer_norm", "rms_norm"]


@pytest.mark.parametrize("row", list(SPECIAL_ROWS))
@pytest.mark.parametrize("where", list(SPECIAL_SETTINGS))
@pytest.mark.parametrize("name", INF_OPS)
def test_infinities_in_a_row_like_pytorch(name, where, row, make):
    x = make(3, 200)
    x[1] = torch.tensor(SPECIAL_ROWS[row](200))
    _check_special(OPS_BY_NAME[name], x, SPECIAL_SETTINGS[where], make)


# ---------------------------------------------------------------------------------------------------------------
# Empty tensors
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("op", [o for o in ROW_OPS if o.name != "cross_entropy"], ids=lambda o: o.name)
def test_no_rows_gives_an_empty_result(op, strategy, make):  # cross_entropy: see test_cross_entropy_of_no_rows
    op.check(op.inputs(make, make(0, 300)), strategy)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_of_no_rows(reduction, strategy):
    check_against_torch(
        lambda x, t: rblock.cross_entropy(x, t, reduction=reduction),
        lambda x, t: F.cross_entropy(x, t, reduction=reduction),
        [torch.randn(0, 7), torch.zeros(0, dtype=torch.int64)],
        strategy=strategy,
        equal_nan=True,
    )


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("name", ["sum", "mean", "logsumexp", "var", "std"])
def test_reduction_over_an_empty_dim_gives_the_identity_like_pytorch(name, keepdim, strategy):
    """sum -> 0, mean/var/std -> NaN, logsumexp -> -inf, one value per row."""
    ours, theirs = _reduce_case(name, -1, keepdim)
    check_against_torch(ours, theirs, [torch.randn(3, 0)], strategy=strategy, equal_nan=True)


def test_sum_over_empty_dim_0_is_zeros(strategy):
    check_against_torch(lambda x: rblock.sum(x, 0), lambda x: torch.sum(x, 0), [torch.randn(0, 4)], strategy=strategy)


@pytest.mark.parametrize("name", list(SOFTMAX_OPS))
@pytest.mark.parametrize("shape", [(3, 0), (0, 3), (0, 0)], ids=str)
def test_softmax_of_empty_tensor(name, shape, strategy):
    ours, theirs = SOFTMAX_OPS[name]
    check_against_torch(lambda x: ours(x, -1), lambda x: theirs(x, -1), [torch.randn(*shape)], strategy=strategy)


def test_rms_norm_of_no_rows_in_3d(strategy, make):
    check_against_torch(
        lambda x: rblock.rms_norm(x, (6, 50)),
        lambda x: F.rms_norm(x, (6, 50), eps=RMS_NORM_DEFAULT_EPS),
        [make(0, 6, 50)],
        strategy=strategy,
    )


# ---------------------------------------------------------------------------------------------------------------
# Explicit configs
# ---------------------------------------------------------------------------------------------------------------

CONFIGS = [
    rblock.Config("persistent", 1, 1024, 4),
    rblock.Config("persistent", 2, 1024, 4),
    rblock.Config("persistent", 4, 1024, 8),
    rblock.Config("persistent", 8, 1024, 8),
    rblock.Config("looped", 1, 64, 2),
    rblock.Config("looped", 1, 256, 4),
    rblock.Config("looped", 2, 64, 2),
    rblock.Config("looped", 2, 256, 4),
    rblock.Config("looped", 4, 128, 2, num_stages=2),
    rblock.Config("looped", 1, 64, 2, unroll=4),  # 16 trips, 4 in flight
    rblock.Config("looped", 2, 128, 4, unroll=2),  # 8 trips
    rblock.Config("persistent_rblock", 1, 1024, 4, no_rblock_scaling=True),
    rblock.Config("persistent_rblock", 4, 1024, 8, no_rblock_scaling=True),
]
CONFIG_OPS = ["rms_norm", "softmax", "log_softmax", "layer_norm", "var", "cross_entropy", "fused_add_rms_norm"]


@pytest.mark.parametrize("config", CONFIGS, ids=str)
@pytest.mark.parametrize("name", CONFIG_OPS)
def test_explicit_config_gives_correct_results(name, config, make):
    op = OPS_BY_NAME[name]
    inputs = op.inputs(make, make(5, 1000))
    out = _run_with_config(op, inputs, config)
    expected = op.torch_fn(*inputs)
    ref = op.torch_fn(*upcast(inputs))
    for o, e, r in zip(*(v if isinstance(v, tuple) else (v,) for v in (out, expected, ref))):
        assert_matches(o, e, r)


def _run_with_config(op: RowOp, inputs, config):
    with rblock.settings(config=config):
        return op.rblock_fn(*inputs)


@pytest.mark.parametrize("config", [CONFIGS[1], CONFIGS[6]], ids=str)
def test_explicit_config_bf16(config, make):
    op = OPS_BY_NAME["softmax"]
    inputs = op.inputs(make, make(5, 1000, dtype=torch.bfloat16))
    assert_matches(_run_with_config(op, inputs, config), op.torch_fn(*inputs), op.torch_fn(*upcast(inputs)))


def test_persistent_config_too_small_for_the_row_is_never_silently_wrong(make):
    """A persistent Config needs RBLOCK >= next_pow2(row length). Asked for less, rblock must either refuse
    (ValueError / RBlockError) or still compute the whole row; it must not return a partial reduction."""
    x = make(5, 1000)
    try:
        with rblock.settings(config=rblock.Config("persistent", 1, 256, 2)):
            out = rblock.sum(x, -1)
    except (ValueError, rblock.RBlockError):
        return
    assert_matches(out, torch.sum(x, -1), torch.sum(x.double(), -1), sum_of=1000)


# ---------------------------------------------------------------------------------------------------------------
# Determinism and strategies agree
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["sum", "var", "softmax", "layer_norm"])
def test_same_call_twice_gives_bitwise_identical_results(name, strategy, make):
    op = OPS_BY_NAME[name]
    inputs = op.inputs(make, make(5, 1000))
    with rblock.settings(strategy=strategy):
        a = op.rblock_fn(*inputs)
        b = op.rblock_fn(*inputs)
    torch.testing.assert_close(a, b, rtol=0, atol=0)


@pytest.mark.parametrize("name", ["amax", "amin"])
def test_max_and_min_are_exact(name, dtype, strategy, make):
    """amax/amin return one of the inputs: no tolerance needed."""
    x = make(5, 1000, dtype=dtype)
    ours, theirs = DIM_OPS[name]
    with rblock.settings(strategy=strategy):
        out = ours(x, -1)
    torch.testing.assert_close(out, theirs(x, -1), rtol=0, atol=0)


ALIGN_CONFIGS = [
    rblock.Config("looped", 1, 128, 4, align=True),
    rblock.Config("looped", 4, 64, 2, align=True, unroll=2),  # rows of four different shifts in one program
    rblock.Config("persistent", 2, 1024, 4, align=True),  # one tile from the boundary: 1001 + 7 <= 1024
    rblock.Config("persistent_rblock", 1, 1024, 4, align=True, recompute=True),
    rblock.Config("looped", 1, 4, 2, align=True),  # chunks shorter than a vector: its halves in two chunks
]


@pytest.mark.parametrize("config", ALIGN_CONFIGS, ids=str)
@pytest.mark.parametrize(("m", "n"), [(9, 1001), (5, 3), (3, 130)], ids=["9x1001", "5x3", "3x130"])
@pytest.mark.parametrize("name", ["rms_norm", "softmax", "layer_norm", "cross_entropy", "fused_add_rms_norm", "var"])
def test_rows_walked_from_16_byte_boundaries_match_pytorch(name, m, n, config, dtype, make):
    """Rows of odd length start at every shift from a 16-byte boundary; a walk from the boundary below reads whole
    vectors that hold the previous row's end, which must not count, and writes only the row's own elements."""
    op = OPS_BY_NAME[name]
    inputs = op.inputs(make, make(m, n, dtype=dtype))
    out = _run_with_config(op, inputs, config)
    with recording(launch=False) as log:
        _run_with_config(op, inputs, config)
    assert "xalign" in log[0].program.stages[0].spec.source
    expected, ref = op.torch_fn(*inputs), op.torch_fn(*upcast(inputs))
    for o, e, r in zip(*(v if isinstance(v, tuple) else (v,) for v in (out, expected, ref))):
        assert_matches(o, e, r)


@pytest.mark.parametrize(
    "config",
    [
        rblock.Config("looped", 1, 128, 4, align=True),
        rblock.Config("looped", 2, 64, 2, align=True),
        rblock.Config("looped", 2, 64, 2, align=True, unroll=2),  # unrolled: one masked loop
    ],
    ids=str,
)
@pytest.mark.parametrize(("n", "view"), [(257, False), (1001, False), (1024, True)], ids=["257", "1001", "1024-view"])
@pytest.mark.parametrize("name", ["softmax", "cross_entropy", "var", "fused_add_rms_norm"])
def test_walked_chunks_inside_every_row_go_unmasked(name, n, view, config, dtype, make):
    """A walk's chunks that lie wholly inside every row (after the first, which holds the lanes before each row's
    start, and before the one holding its end) load, reduce and store whole vectors with the rows' masks alone, no
    element masks and no edge stores. Rows of 257 and 1001 in contiguous tensors (outputs walked too); rows of 1024
    one element longer in memory, which end exactly where those chunks do. Unrolled loops keep one masked loop."""
    op = OPS_BY_NAME[name]
    x = make(9, n + 1, dtype=dtype)[:, 1:] if view else make(9, n, dtype=dtype)
    inputs = op.inputs(make, x)
    out = _run_with_config(op, inputs, config)
    expected, ref = op.torch_fn(*inputs), op.torch_fn(*upcast(inputs))
    for o, e, r in zip(*(v if isinstance(v, tuple) else (v,) for v in (out, expected, ref))):
        assert_matches(o, e, r)
    with recording(launch=False) as log:
        _run_with_config(op, inputs, config)
    src = log[0].program.stages[0].spec.source
    whole = src[src.index("if whole:") : src.index("else:  # a row that ends its tensor")]
    loops = whole.split("for r0_offset in ")[1:]  # each loop's text runs to the next loop
    inner = [loop for loop in loops if "(RBLOCK, " in loop.split(":")[0]]
    assert len(inner) == (0 if config.unroll > 1 else len(whole.split("# pass ")) - 1)  # one in each pass
    for loop in inner:
        assert f"range(RBLOCK, {n // config.RBLOCK * config.RBLOCK}, RBLOCK" in loop
        assert "rindex >= 0" not in loop and "rnumel + rshift" not in loop and "~smask" not in loop
        assert "jvec" not in loop  # nothing computed per vector that only the edges need


@pytest.mark.parametrize("config", [rblock.Config("looped", 256, 2, 4), rblock.Config("looped", 128, 2, 2)], ids=str)
@pytest.mark.parametrize("name", ["sum", "mean", "softmax", "logsumexp"])
def test_grouped_accumulators_of_chunks_narrower_than_a_vector(name, config, make):
    """Many short rows a program, chunks of 2: a thread's vector spans rows, so a group holds at most a chunk."""
    x = make(512, 8)
    ours, theirs = {**DIM_OPS, **SOFTMAX_OPS}[name]
    with rblock.settings(config=config):
        out = ours(x, -1)
    assert_matches(out, theirs(x, -1), theirs(x.double(), -1), sum_of=_sum_of(name, 8))


@pytest.mark.parametrize(
    "config", [rblock.Config("looped", 1, 16, 4), rblock.Config("looped", 2, 16, 4, unroll=2)], ids=str
)
@pytest.mark.parametrize("name", ["softmax", "log_softmax", "rms_norm", "layer_norm"])
def test_rows_of_one_element_under_a_chunk_longer_than_the_row(name, config, make):
    """Rows of one element lose their r dim: their outputs are still written once per row."""
    op = OPS_BY_NAME[name]
    inputs = op.inputs(make, make(3, 1))
    out = _run_with_config(op, inputs, config)
    assert_matches(out, op.torch_fn(*inputs), op.torch_fn(*upcast(inputs)))


@pytest.mark.parametrize("fn", [torch.argmax, torch.argmin], ids=lambda f: f.__name__)
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.int32], ids=str)
def test_aligned_walks_never_return_a_position_before_the_row(fn, dtype):
    """Rows equal to the identity everywhere (-inf for argmax, the integer maximum for argmin) tie with the masked
    lanes of the vector before the row: the row's first element must win."""
    big = float("-inf") if dtype.is_floating_point and fn is torch.argmax else None
    if big is None:
        info = torch.finfo(dtype) if dtype.is_floating_point else torch.iinfo(dtype)
        big = info.min if fn is torch.argmax else info.max
    x = torch.full((5, 33), big, dtype=dtype)
    x[1, 5] = 1
    with rblock.settings(config=rblock.Config("looped", 1, 16, 4, align=True)):
        out = rblock.compile(lambda x: fn(x, -1), name=f"walk_{fn.__name__}")(x)
    torch.testing.assert_close(out, fn(x, -1), rtol=0, atol=0)


@pytest.mark.parametrize("config", ALIGN_CONFIGS, ids=str)
def test_a_walk_over_empty_rows_reads_nothing(config):
    """Rows of no element hold no vector: nothing is loaded (an empty tensor has no memory to read)."""
    x = torch.randn(5, 0)
    with rblock.settings(config=config):
        out = rblock.sum(x, -1)
    torch.testing.assert_close(out, torch.zeros(5))


def test_a_single_pass_walk_needs_a_tile_that_covers_the_row_from_the_boundary():
    x = torch.randn(3, 1020, dtype=torch.bfloat16)  # rows start up to 7 elements after a boundary: 1027 > 1024
    with rblock.settings(config=rblock.Config("persistent", 1, 1024, 4, align=True)):
        with pytest.raises(rblock.InvalidArgument, match="walked from the 16-byte boundary"):
            rblock.softmax(x, -1)


@pytest.mark.parametrize("config", ALIGN_CONFIGS, ids=str)
@pytest.mark.parametrize("name", ["softmax", "rms_norm", "cross_entropy", "var"])
def test_whole_vectors_past_a_row_never_reach_its_result(name, config, dtype, make):
    """Rows with a successor in their tensor load their last vector whole: the elements past the row's end (NaN
    here) are masked out of every reduction and never stored. The tensor's last row loads it element by element."""
    op = OPS_BY_NAME[name]
    base = make(7, 1011, dtype=dtype)
    base[:, 1001:] = float("nan")
    inputs = op.inputs(make, base[:, :1001])
    out = _run_with_config(op, inputs, config)
    with recording(launch=False) as log:
        _run_with_config(op, inputs, config)
    source = log[0].program.stages[0].spec.source
    assert "if whole:" in source and "wmask" in source and f"<= {6 * 1011 + 1001}" in source
    expected, ref = op.torch_fn(*inputs), op.torch_fn(*upcast(inputs))
    for o, e, r in zip(*(v if isinstance(v, tuple) else (v,) for v in (out, expected, ref))):
        assert_matches(o, e, r)


@pytest.mark.parametrize("view", ["offset", "rows_and_offset"])
def test_views_walked_from_16_byte_boundaries_match_pytorch(view, dtype, make):
    """A view's storage offset shifts where its rows start: the walk counts it."""
    base = make(9, 1011, dtype=dtype)
    x = base[:, 3:1004] if view == "offset" else base[1:, 5:]
    with rblock.settings(config=ALIGN_CONFIGS[1]):
        out = rblock.softmax(x, -1)
    assert_matches(out, torch.softmax(x, -1), torch.softmax(x.double(), -1))


INT_CONFIGS = [
    rblock.Config("persistent", 2, 2048, 4),
    rblock.Config("looped", 1, 256, 4),
    rblock.Config("looped", 1, 256, 4, split=4),  # two kernels, an uneven last slice
    rblock.Config("split_row", 1, 512, 4, split=3),  # a padded lane among the partial results
]


@pytest.mark.parametrize("config", INT_CONFIGS, ids=str)
@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.bool], ids=str)
@pytest.mark.parametrize("fn", [torch.amax, torch.amin, torch.argmax, torch.argmin], ids=lambda f: f.__name__)
def test_integer_max_and_min_are_exact(fn, dtype, config):
    """Integers keep their type through a max or min: no float identity rounds them (int64 beyond 2**53, int32
    beyond 2**24 differ in their last bits here)."""
    torch.manual_seed(stable_seed(fn.__name__, dtype, config))
    if dtype == torch.bool:
        x = torch.rand(7, 1500) > 0.999
    else:
        info = torch.iinfo(dtype)
        x = torch.randint(info.min, info.max, (7, 1500), dtype=dtype)
        x[:, ::2] = x[:, :1] ^ torch.randint(0, 8, (7, 750), dtype=dtype)  # near-ties in the low bits
    f = rblock.compile(lambda x: fn(x, -1), name=f"int_{fn.__name__}")
    if fn in (torch.argmax, torch.argmin) and config.split > 1:  # an index of a slice is not the row's
        with rblock.settings(config=config), pytest.raises(rblock.InvalidArgument, match="not possible"):
            f(x)
        return
    with rblock.settings(config=config):
        out = f(x)
    # PyTorch has no argmax of bools; rblock's is that of the bools as integers
    arg = fn in (torch.argmax, torch.argmin)
    torch.testing.assert_close(out, fn(x.int() if arg and dtype == torch.bool else x, -1), rtol=0, atol=0)


@pytest.mark.parametrize("n", [100, 3000])
@pytest.mark.parametrize("name", ["softmax", "var", "rms_norm"])
def test_default_strategy_matches_pytorch(name, n, make):
    """No settings: rblock picks the strategy itself."""
    op = OPS_BY_NAME[name]
    op.check(op.inputs(make, make(3, n)), None)


def _cross_entropy_as_lse_minus_logit(x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    return (torch.logsumexp(x, 1) - x.gather(1, t.unsqueeze(1)).squeeze(1)).mean()


WIDE_CASES = [
    ("var", rblock.Config("looped", 2, 128, 4)),  # the first chunk peeled, counts from positions
    ("var", rblock.Config("looped", 1, 128, 4, split=4)),  # uneven slices (the last is short), their combine
    ("layer_norm", rblock.Config("looped", 2, 128, 4, unroll=2)),
    ("softmax", rblock.Config("looped", 1, 256, 2)),  # grouped statistics, then a second pass
    ("cross_entropy", rblock.Config("persistent", 2, 1024, 4)),  # a gather, the mean over rows in the row kernel
    ("rms_norm", rblock.Config("split_row", 1, 256, 2, split=4)),  # programs looping over rows, exchanging
]


@pytest.mark.parametrize(("name", "config"), WIDE_CASES, ids=[f"{n}-{c}" for n, c in WIDE_CASES])
def test_kernels_with_64_bit_indices(name, config, make, monkeypatch):
    """A tensor that spans 2^31 elements or more is indexed in 64 bits, too big for the interpreter; here every
    tensor counts as that big, so the same kernels run with 64-bit program ids, positions and counts."""
    monkeypatch.setattr(importlib.import_module("rblock.trace.lower"), "WIDE_INDEX_SPAN", 1)
    op = OPS_BY_NAME[name]
    formula = _cross_entropy_as_lse_minus_logit if name == "cross_entropy" else op.torch_fn
    fn = rblock.compile(formula, name=f"wide_{name}")
    with recording() as log, rblock.settings(config=config):
        check_against_torch(fn, op.torch_fn, op.inputs(make, make(6, 1001)))
    sources = [st.spec.source for c in log for st in c.program.stages]
    assert sources and all("tl.program_id(0).to(tl.int64)" in src for src in sources)


@pytest.mark.parametrize("rows", [8, 7])
def test_rows_that_fill_every_program_need_no_row_mask(rows, make):
    """XBLOCK dividing the rows, every program's rows exist and the kernel masks no rows; otherwise the last
    program's rows past the end are masked."""
    op = OPS_BY_NAME["logsumexp"]
    with recording() as log, rblock.settings(config=rblock.Config("looped", 4, 128, 4)):
        check_against_torch(op.rblock_fn, op.torch_fn, op.inputs(make, make(rows, 1000)))
    (src,) = [st.spec.source for c in log for st in c.program.stages]
    assert ("xmask = tl.full([XBLOCK, 1], True, tl.int1)" in src) == (rows % 4 == 0)
