"""Bad input raises a clear exception that names the op and the argument, and says what is allowed.

rblock.InvalidArgument (a ValueError) for bad values, rblock.InvalidDtype (also a TypeError) for bad dtypes,
rblock.UnsupportedOperation (a NotImplementedError) for what rblock.compile cannot fuse."""

from __future__ import annotations

import math
import re

import pytest
import torch

import rblock
from conftest import assert_near
from rblock.settings import current


def x2d(*shape: int, dtype: torch.dtype = torch.float32, device: str = "cpu") -> torch.Tensor:
    return torch.randn(*(shape or (4, 8)), device=device).to(dtype)


LONG = torch.int64

# 1000 values, each of which a printed tensor would show
DATA = torch.arange(1000.0) + 123456.0
DATA_SHOWN = "a tensor of shape [1000] and dtype float32"

# One call per op with x replaced: (op name, call(x)). Every op checks its main tensor the same way.
X_CALLS = {
    "sum": lambda x: rblock.sum(x, -1),
    "mean": lambda x: rblock.mean(x, -1),
    "amax": lambda x: rblock.amax(x, -1),
    "amin": lambda x: rblock.amin(x, -1),
    "logsumexp": lambda x: rblock.logsumexp(x, -1),
    "var": lambda x: rblock.var(x, -1),
    "std": lambda x: rblock.std(x, -1),
    "softmax": lambda x: rblock.softmax(x, -1),
    "log_softmax": lambda x: rblock.log_softmax(x, -1),
    "rms_norm": lambda x: rblock.rms_norm(x, x.shape[-1:]),
    "layer_norm": lambda x: rblock.layer_norm(x, x.shape[-1:]),
    "fused_add_rms_norm": lambda x: rblock.fused_add_rms_norm(x, x.clone(), torch.ones(x.shape[-1], dtype=x.dtype)),
}


def test_error_classes():
    assert issubclass(rblock.InvalidArgument, ValueError)
    assert issubclass(rblock.InvalidDtype, rblock.InvalidArgument)
    assert issubclass(rblock.InvalidDtype, TypeError)
    assert issubclass(rblock.UnsupportedOperation, NotImplementedError)


# ---------------------------------------------------------------------------------------------------------------
# Device
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("op", list(X_CALLS))
def test_tensor_on_the_wrong_device_names_op_and_argument(op):
    x = x2d(device="meta")
    with pytest.raises(rblock.InvalidArgument, match=rf"^rblock\.{op}: x is on meta"):
        X_CALLS[op](x)


# Each float tensor argument but x: (op, argument, call(make)), `make(*shape)` giving that argument.
OTHER_TENSORS = [
    ("rms_norm", "weight", lambda m: rblock.rms_norm(x2d(), (8,), m(8))),
    ("layer_norm", "weight", lambda m: rblock.layer_norm(x2d(), (8,), m(8))),
    ("layer_norm", "bias", lambda m: rblock.layer_norm(x2d(), (8,), None, m(8))),
    ("fused_add_rms_norm", "residual", lambda m: rblock.fused_add_rms_norm(x2d(), m(4, 8), torch.ones(8))),
    ("fused_add_rms_norm", "weight", lambda m: rblock.fused_add_rms_norm(x2d(), x2d(), m(8))),
    ("cross_entropy", "logits", lambda m: rblock.cross_entropy(m(4, 8), torch.zeros(4, dtype=LONG))),
]


@pytest.mark.parametrize(
    ("op", "argument", "call"),
    [
        *OTHER_TENSORS,
        ("cross_entropy", "target", lambda m: rblock.cross_entropy(x2d(), torch.zeros(4, dtype=LONG, device="meta"))),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_other_tensor_on_the_wrong_device_names_it(op, argument, call):
    with pytest.raises(rblock.InvalidArgument, match=rf"^rblock\.{op}: {argument} is on meta"):
        call(lambda *shape: torch.randn(*shape, device="meta"))


# ---------------------------------------------------------------------------------------------------------------
# Dtypes
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float64, torch.int32, torch.int64, torch.bool, torch.complex64], ids=str)
@pytest.mark.parametrize("op", list(X_CALLS))
def test_unsupported_dtype_of_x(op, dtype):
    x = torch.ones(4, 8, dtype=dtype)
    name = str(dtype).removeprefix("torch.")
    with pytest.raises(rblock.InvalidDtype, match=rf"^rblock\.{op}: x has dtype {name}; allowed: float32"):
        X_CALLS[op](x)


def test_unsupported_dtype_is_a_type_error():
    with pytest.raises(TypeError):
        rblock.sum(torch.ones(4, 8, dtype=torch.float64), -1)


@pytest.mark.parametrize(
    ("op", "argument", "call"),
    [
        ("rms_norm", "weight", lambda: rblock.rms_norm(x2d(), (8,), torch.ones(8, dtype=torch.float64))),
        ("layer_norm", "bias", lambda: rblock.layer_norm(x2d(), (8,), None, torch.ones(8, dtype=torch.int32))),
        ("cross_entropy", "logits", lambda: rblock.cross_entropy(x2d().double(), torch.zeros(4, dtype=LONG))),
        ("cross_entropy", "target", lambda: rblock.cross_entropy(x2d(), torch.zeros(4))),
        ("cross_entropy", "target", lambda: rblock.cross_entropy(x2d(), torch.zeros(4, dtype=torch.bool))),
        ("fused_add_rms_norm", "residual", lambda: rblock.fused_add_rms_norm(x2d(), x2d().double(), torch.ones(8))),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_unsupported_dtype_of_another_argument(op, argument, call):
    with pytest.raises(rblock.InvalidDtype, match=rf"^rblock\.{op}: {argument} has dtype"):
        call()


@pytest.mark.parametrize("value", [[1.0, 2.0], 3.0, None], ids=["list", "float", "None"])
def test_x_that_is_not_a_tensor(value):
    with pytest.raises(rblock.InvalidArgument, match=r"^rblock\.sum: x must be a torch\.Tensor"):
        rblock.sum(value, 0)


@pytest.mark.parametrize("op", ["sum", "softmax", "rms_norm"])
def test_zero_dim_x(op):
    with pytest.raises(rblock.InvalidArgument, match=rf"^rblock\.{op}: x has 0 dims"):
        X_CALLS[op](torch.tensor(1.0))


# ---------------------------------------------------------------------------------------------------------------
# Gradients: rblock's kernels have no backward, so a tensor that requires grad would leave the autograd graph
# ---------------------------------------------------------------------------------------------------------------

FORWARD_ONLY = "requires grad, and rblock computes forward passes only"


@pytest.mark.parametrize("op", list(X_CALLS))
def test_x_that_requires_grad_names_op_and_argument(op):
    x = x2d().requires_grad_()
    with pytest.raises(rblock.InvalidArgument, match=rf"^rblock\.{op}: x {FORWARD_ONLY}"):
        X_CALLS[op](x)


@pytest.mark.parametrize(("op", "argument", "call"), OTHER_TENSORS, ids=lambda v: v if isinstance(v, str) else "")
def test_other_tensor_that_requires_grad_names_it(op, argument, call):
    with pytest.raises(rblock.InvalidArgument, match=rf"^rblock\.{op}: {argument} {FORWARD_ONLY}"):
        call(lambda *shape: torch.randn(*shape, requires_grad=True))


@pytest.mark.parametrize("mode", [torch.no_grad, torch.inference_mode], ids=lambda m: m.__name__)
def test_a_tensor_that_requires_grad_is_taken_where_grad_mode_is_off(mode):
    x, w = x2d(6, 40).requires_grad_(), torch.randn(40, requires_grad=True)
    with mode():
        y = rblock.rms_norm(x, (40,), w, eps=1e-6)
    xd, wd = x.detach().double(), w.detach().double()
    want = xd * torch.rsqrt(xd.pow(2).mean(-1, keepdim=True) + 1e-6) * wd
    assert not y.requires_grad
    assert_near(y, want)


def test_compile_of_a_tensor_that_requires_grad_names_its_parameter():
    @rblock.compile
    def gated_sum(x, gate):
        return (x * gate).sum(-1)

    x, gate = x2d(), x2d().requires_grad_()
    with pytest.raises(rblock.InvalidArgument, match=rf"^rblock\.compile\(gated_sum\): gate {FORWARD_ONLY}"):
        gated_sum(x, gate)
    with pytest.raises(rblock.InvalidArgument, match=rf"gate {FORWARD_ONLY}"):
        gated_sum(x, gate=gate)
    with torch.no_grad():
        got = gated_sum(x, gate)
    assert_near(got, (x.double() * gate.detach().double()).sum(-1), sum_of=x.shape[-1])


# ---------------------------------------------------------------------------------------------------------------
# dim
# ---------------------------------------------------------------------------------------------------------------

DIM_OPS = ["sum", "mean", "amax", "amin", "logsumexp", "var", "std", "softmax", "log_softmax"]


@pytest.mark.parametrize(
    ("op", "dim"),
    [
        (op, dim)
        for op in DIM_OPS
        for dim in (2, -3, 100, (0, 2))
        if not (op.endswith("softmax") and isinstance(dim, tuple))
    ],
    ids=str,
)
def test_dim_out_of_range(op, dim):
    pattern = rf"^rblock\.{op}: dim is -?\d+, but x has 2 dims \(allowed: -2 to 1\)"
    with pytest.raises(rblock.InvalidArgument, match=pattern):
        getattr(rblock, op)(x2d(), dim)


@pytest.mark.parametrize("dim", [(0, 0), (1, -1), [0, 1, 0]], ids=str)
@pytest.mark.parametrize("op", ["sum", "mean", "amax", "amin", "logsumexp", "var", "std"])
def test_dim_repeated(op, dim):
    with pytest.raises(rblock.InvalidArgument, match=rf"^rblock\.{op}: dim repeats a dim"):
        getattr(rblock, op)(x2d(), dim)


@pytest.mark.parametrize("dim", [1.0, "1", True, (), (0, 1.0), torch.tensor(1)], ids=repr)
@pytest.mark.parametrize("op", DIM_OPS)
def test_dim_of_the_wrong_type(op, dim):
    with pytest.raises(rblock.InvalidArgument, match=rf"^rblock\.{op}: dim must be an int"):
        getattr(rblock, op)(x2d(), dim)


@pytest.mark.parametrize("op", ["logsumexp", "softmax", "log_softmax"])
def test_dim_none_is_refused_where_pytorch_needs_a_dim(op):
    with pytest.raises(rblock.InvalidArgument, match=rf"^rblock\.{op}: dim must be an int"):
        getattr(rblock, op)(x2d(), None)


@pytest.mark.parametrize("op", ["sum", "mean", "amax", "amin", "var", "std", "logsumexp"])
@pytest.mark.parametrize("keepdim", [1, None, "no"], ids=repr)
def test_keepdim_must_be_a_bool(op, keepdim):
    with pytest.raises(rblock.InvalidArgument, match=rf"^rblock\.{op}: keepdim must be a bool, got "):
        getattr(rblock, op)(x2d(), -1, keepdim=keepdim)


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_softmax_takes_exactly_one_dim(op):
    """softmax normalizes along one dim: a tuple of two dims is an invalid `dim`, reported as such."""
    with pytest.raises(rblock.InvalidArgument, match=rf"^rblock\.{op}: dim"):
        getattr(rblock, op)(x2d(), (0, 1))


# ---------------------------------------------------------------------------------------------------------------
# normalized_shape, weight, bias
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(4,), (8, 8), (2, 4, 8), (), [3], 7], ids=str)
@pytest.mark.parametrize("op", ["rms_norm", "layer_norm"])
def test_normalized_shape_must_match_the_last_dims(op, shape):
    listed = re.escape(str(list(shape) if not isinstance(shape, int) else [shape]))
    pattern = rf"^rblock\.{op}: normalized_shape is {listed}, but x has shape \[4, 8\]"
    with pytest.raises(rblock.InvalidArgument, match=pattern):
        getattr(rblock, op)(x2d(), shape)


@pytest.mark.parametrize("shape", [None, 8.0, "8"], ids=repr)
@pytest.mark.parametrize("op", ["rms_norm", "layer_norm"])
def test_normalized_shape_of_the_wrong_type(op, shape):
    with pytest.raises(rblock.InvalidArgument, match=rf"^rblock\.{op}: normalized_shape"):
        getattr(rblock, op)(x2d(), shape)


@pytest.mark.parametrize(
    ("op", "argument", "call", "got", "want"),
    [
        ("rms_norm", "weight", lambda: rblock.rms_norm(x2d(), (8,), torch.ones(7)), (7,), (8,)),
        ("rms_norm", "weight", lambda: rblock.rms_norm(x2d(), (8,), torch.ones(1, 8)), (1, 8), (8,)),
        ("rms_norm", "weight", lambda: rblock.rms_norm(x2d(3, 4, 8), (4, 8), torch.ones(8)), (8,), (4, 8)),
        ("layer_norm", "weight", lambda: rblock.layer_norm(x2d(), (8,), torch.ones(9)), (9,), (8,)),
        ("layer_norm", "bias", lambda: rblock.layer_norm(x2d(), (8,), torch.ones(8), torch.ones(3)), (3,), (8,)),
        ("fused_add_rms_norm", "weight", lambda: rblock.fused_add_rms_norm(x2d(), x2d(), torch.ones(4)), (4,), (8,)),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_parameter_of_the_wrong_shape_names_it_and_both_shapes(op, argument, call, got, want):
    pattern = rf"^rblock\.{op}: {argument} has shape {re.escape(str(got))}, expected {re.escape(str(want))}"
    with pytest.raises(rblock.InvalidArgument, match=pattern):
        call()


def test_fused_add_rms_norm_requires_a_weight():
    with pytest.raises(rblock.InvalidArgument, match=r"^rblock\.fused_add_rms_norm: weight is required"):
        rblock.fused_add_rms_norm(x2d(), x2d(), None)


@pytest.mark.parametrize(
    "residual",
    [x2d(4, 7), x2d(2, 4, 8), x2d(dtype=torch.bfloat16)],
    ids=["fewer_columns", "more_dims", "other_dtype"],
)
def test_fused_add_rms_norm_residual_must_match_x(residual):
    with pytest.raises(rblock.InvalidArgument, match=r"^rblock\.fused_add_rms_norm: residual is .*expected x's"):
        rblock.fused_add_rms_norm(x2d(), residual, torch.ones(8))


# ---------------------------------------------------------------------------------------------------------------
# cross_entropy
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("logits", [x2d(2, 3, 4), x2d(2, 3, 4, 5), x2d(4)], ids=["3d", "4d", "1d"])
def test_cross_entropy_takes_2d_logits(logits):
    target = torch.zeros(logits.shape[0], dtype=LONG)
    with pytest.raises(rblock.InvalidArgument, match=r"^rblock\.cross_entropy: logits has"):
        rblock.cross_entropy(logits, target)


@pytest.mark.parametrize("shape", [(3,), (5,), (4, 1), (1, 4)], ids=str)
def test_cross_entropy_target_shape(shape):
    pattern = rf"^rblock\.cross_entropy: target has shape {re.escape(str(list(shape)))}, expected \[4\]"
    with pytest.raises(rblock.InvalidArgument, match=pattern):
        rblock.cross_entropy(x2d(), torch.zeros(shape, dtype=LONG))


def test_cross_entropy_scalar_target():
    with pytest.raises(rblock.InvalidArgument, match=r"^rblock\.cross_entropy: target has 0 dims"):
        rblock.cross_entropy(x2d(), torch.tensor(0))


@pytest.mark.parametrize("reduction", ["avg", "MEAN", "", None], ids=repr)
def test_cross_entropy_reduction(reduction):
    pattern = r"^rblock\.cross_entropy: reduction is .*; allowed: 'mean', 'sum', 'none'"
    with pytest.raises(rblock.InvalidArgument, match=pattern):
        rblock.cross_entropy(x2d(), torch.zeros(4, dtype=LONG), reduction=reduction)


@pytest.mark.parametrize("value", [-0.1, 1.5, math.nan], ids=repr)
def test_cross_entropy_label_smoothing_must_lie_in_0_to_1(value):
    with pytest.raises(
        rblock.InvalidArgument, match=r"^rblock\.cross_entropy: label_smoothing is .*; allowed: 0\.0 to 1"
    ):
        rblock.cross_entropy(x2d(), torch.zeros(4, dtype=LONG), label_smoothing=value)


def test_cross_entropy_class_weights_are_refused_by_name():
    with pytest.raises(rblock.InvalidArgument, match=r"^rblock\.cross_entropy: weight \(class weights\) is not supp"):
        rblock.cross_entropy(x2d(), torch.zeros(4, dtype=LONG), weight=torch.ones(8))


@pytest.mark.parametrize("op", ["var", "std"])
def test_unbiased_and_correction_together_are_refused(op):
    with pytest.raises(rblock.InvalidArgument, match=rf"^rblock\.{op}: unbiased cannot be given with correction"):
        getattr(rblock, op)(x2d(), -1, unbiased=True, correction=1)


@pytest.mark.parametrize("op", ["var", "std"])
def test_unbiased_must_be_a_bool(op):
    with pytest.raises(rblock.InvalidArgument, match=rf"^rblock\.{op}: unbiased must be a bool, got 0"):
        getattr(rblock, op)(x2d(), -1, unbiased=0)


@pytest.mark.parametrize("ignore_index", [1.5, "-100", None, True, torch.tensor(1)], ids=repr)
def test_cross_entropy_ignore_index_must_be_an_int(ignore_index):
    with pytest.raises(rblock.InvalidArgument, match=r"^rblock\.cross_entropy: ignore_index must be an int, got "):
        rblock.cross_entropy(x2d(), torch.zeros(4, dtype=LONG), ignore_index=ignore_index)


@pytest.mark.parametrize(
    ("op", "argument", "call"),
    [
        ("rms_norm", "eps", lambda v: rblock.rms_norm(x2d(), 8, None, v)),
        ("layer_norm", "eps", lambda v: rblock.layer_norm(x2d(), 8, eps=v)),
        ("fused_add_rms_norm", "eps", lambda v: rblock.fused_add_rms_norm(x2d(), x2d(), torch.ones(8), v)),
        ("var", "correction", lambda v: rblock.var(x2d(), -1, correction=v)),
        ("std", "correction", lambda v: rblock.std(x2d(), -1, correction=v)),
        (
            "cross_entropy",
            "label_smoothing",
            lambda v: rblock.cross_entropy(x2d(), torch.zeros(4, dtype=LONG), label_smoothing=v),
        ),
    ],
)
@pytest.mark.parametrize("value", ["1e-5", torch.tensor(1.0), torch.tensor(0.0)], ids=["str", "tensor", "tensor_0"])
def test_a_number_argument_that_is_not_a_number_names_it(op, argument, call, value):
    with pytest.raises(rblock.InvalidArgument, match=rf"^rblock\.{op}: {argument} must be a real number, got "):
        call(value)


@pytest.mark.parametrize("op", ["softmax", "log_softmax", "sum", "mean"])
@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.bool, torch.float64])
def test_output_dtype_must_be_a_float_type_rblock_computes_in(op, dtype):
    name = str(dtype).replace("torch.", "")
    with pytest.raises(rblock.InvalidDtype, match=rf"^rblock\.{op}: dtype is {name}; allowed: float32, float16"):
        getattr(rblock, op)(x2d(), -1, dtype=dtype)


@pytest.mark.parametrize("op", ["softmax", "sum"])
def test_output_dtype_that_is_not_a_dtype_says_so(op):
    with pytest.raises(rblock.InvalidArgument, match=rf"^rblock\.{op}: dtype must be a torch\.dtype, got 'float16'"):
        getattr(rblock, op)(x2d(), -1, dtype="float16")


def test_cross_entropy_without_classes():
    with pytest.raises(rblock.InvalidArgument, match=r"^rblock\.cross_entropy: logits has no classes"):
        rblock.cross_entropy(x2d(4, 0), torch.zeros(4, dtype=LONG))


# ---------------------------------------------------------------------------------------------------------------
# Reductions without an identity
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dim", [-1, (0, 1)], ids=str)
@pytest.mark.parametrize("op", ["amax", "amin"])
def test_amax_and_amin_over_an_empty_dim(op, dim):
    pattern = rf"^rblock\.{op}: dim reduces over an empty dim of shape \[3, 0\]"
    with pytest.raises(rblock.InvalidArgument, match=pattern):
        getattr(rblock, op)(torch.randn(3, 0), dim)


@pytest.mark.parametrize("op", ["amax", "amin"])
def test_amax_over_a_non_empty_dim_of_an_empty_tensor_is_fine(op):
    """Only the reduced dims must be non-empty: (0, 5) reduced over dim 1 is an empty result, as in PyTorch."""
    out = getattr(rblock, op)(torch.randn(0, 5), 1)
    assert out.shape == (0,) and out.dtype == torch.float32


# ---------------------------------------------------------------------------------------------------------------
# settings and Config
# ---------------------------------------------------------------------------------------------------------------


def test_settings_rejects_an_unknown_strategy():
    pattern = r"^rblock\.settings: strategy must be 'auto', 'persistent' or 'looped', got 'fast'"
    with pytest.raises(ValueError, match=pattern):
        with rblock.settings(strategy="fast"):
            pass


def test_settings_rejects_a_config_that_is_not_a_config():
    with pytest.raises(TypeError, match=r"^rblock\.settings: config must be an rblock\.Config"):
        with rblock.settings(config={"kind": "looped"}):
            pass


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"tune": "no"}, "tune must be True or False, got 'no'"),
        ({"tune": 0}, "tune must be True or False, got 0"),
        ({"tune": None}, "tune must be True or False, got None"),
        ({"strategy": None}, "strategy must be 'auto', 'persistent' or 'looped', got None"),
        ({"strategy": ["looped"]}, "strategy must be 'auto', 'persistent' or 'looped', got ['looped']"),
        ({"strategy": "Looped"}, "strategy must be 'auto', 'persistent' or 'looped', got 'Looped'"),
        ({"config": "looped"}, "config must be an rblock.Config or None, got 'looped'"),
        ({"config": DATA}, f"config must be an rblock.Config or None, got {DATA_SHOWN}"),
        ({"stratgy": "looped"}, "stratgy is not a setting; allowed: strategy, config, tune"),
    ],
    ids=lambda v: "-".join(v) if isinstance(v, dict) else "",
)
def test_settings_checks_every_argument_where_it_is_called(kwargs, message):
    """Before entering the block: a bad value fails at the line that wrote it, and a `with` forgotten around a
    bad call still fails."""
    with pytest.raises(rblock.InvalidArgument, match="^" + re.escape(f"rblock.settings: {message}")):
        rblock.settings(**kwargs)


@pytest.mark.parametrize("kwargs", [{"tune": "no"}, {"strategy": 1}, {"config": {}}], ids=str)
def test_a_setting_of_the_wrong_type_is_also_a_type_error(kwargs):
    with pytest.raises(TypeError, match=r"^rblock\.settings: "):
        rblock.settings(**kwargs)


def test_settings_takes_keywords_alone():
    pattern = r"^rblock\.settings: arguments are keywords \(strategy=, config=, tune=\), got 1 positional"
    with pytest.raises(rblock.InvalidArgument, match=pattern):
        rblock.settings("looped")


def test_settings_apply_inside_their_block_over_the_settings_of_the_time():
    later = rblock.settings(strategy="looped")  # checked now, applied on entering
    with rblock.settings(tune=False), later as s:
        assert (s.strategy, s.tune) == ("looped", False)
    assert current() == rblock.Settings()


@pytest.mark.parametrize("kwargs", [{"tune": 1}, {"strategy": "fast"}, {"config": "looped"}], ids=str)
def test_settings_objects_check_their_fields_too(kwargs):
    with pytest.raises(rblock.InvalidArgument, match=rf"^rblock\.settings: {next(iter(kwargs))} must be"):
        rblock.Settings(**kwargs)


@pytest.mark.parametrize("kind", ["persistent", "persistent_rblock"])
def test_persistent_config_shorter_than_the_row_is_refused(kind):
    x = x2d(5, 1000)
    with pytest.raises(rblock.InvalidArgument, match=r"^rblock\.settings: config .*RBLOCK 256.*1000"):
        with rblock.settings(config=rblock.Config(kind, 1, 256, 2)):
            rblock.sum(x, -1)


@pytest.mark.parametrize("field", ["XBLOCK", "RBLOCK", "num_warps"])
def test_config_fields_must_be_powers_of_two(field):
    values = {"XBLOCK": 1, "RBLOCK": 64, "num_warps": 2, field: 3}
    with pytest.raises(ValueError, match=rf"^rblock\.Config: {field}"):
        rblock.Config("looped", **values)


# ---------------------------------------------------------------------------------------------------------------
# rblock.compile: what cannot be fused
# ---------------------------------------------------------------------------------------------------------------


def cumsum_then_sum(x):
    return torch.cumsum(x, -1).sum(-1)


def sort_values(x):
    return torch.sort(x, -1).values


def top_value(x):
    return torch.topk(x, 2, -1).values.sum(-1)


def matmul(x):
    return (x @ x.t()).sum(-1)


def any_positive(x):
    return (x > 0).any(-1)


def vector_norm(x):
    return torch.linalg.vector_norm(x, dim=-1)


@pytest.mark.parametrize(
    ("fn", "op"),
    [
        (cumsum_then_sum, "cumsum"),
        (sort_values, "sort"),
        (top_value, "topk"),
        (matmul, "mm"),
        (any_positive, "any"),
        (vector_norm, "vector_norm"),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_compile_of_an_unsupported_op_names_it(fn, op):
    with pytest.raises(rblock.UnsupportedOperation, match=rf"^rblock\.compile\({fn.__name__}\): .*{op}"):
        rblock.compile(fn)(x2d())


def sums_over_rows_and_columns(x):
    return x.sum(0).sum() + x.sum(1).sum()


def returns_both_sums(x):
    return x.sum(0), x.sum(1)


def softmax_of_a_column_sum(x):
    return torch.softmax(x, -1) * x.sum(0)


@pytest.mark.parametrize(
    "fn", [sums_over_rows_and_columns, returns_both_sums, softmax_of_a_column_sum], ids=lambda f: f.__name__
)
def test_compile_of_reductions_over_different_dims(fn):
    with pytest.raises(rblock.UnsupportedOperation, match=rf"^rblock\.compile\({fn.__name__}\): .*different"):
        rblock.compile(fn)(x2d())


def test_compile_of_a_float64_function():
    with pytest.raises(rblock.UnsupportedOperation, match=r"float64"):
        rblock.compile(lambda x: x.sum(-1))(x2d().double())


def test_compile_of_a_function_returning_no_tensor():
    with pytest.raises(rblock.UnsupportedOperation, match=r"^rblock\.compile\(three\): .*no tensor"):
        rblock.compile(lambda x: 3, name="three")(x2d())


def test_compile_of_a_function_that_fails_says_so():
    def broken(x):
        raise RuntimeError("boom")

    pattern = r"^rblock\.compile\(broken\): tracing failed: RuntimeError: boom"
    with pytest.raises(rblock.UnsupportedOperation, match=pattern):
        rblock.compile(broken)(x2d())


def test_triton_imported_before_rblock_without_a_gpu_is_a_clear_error(tmp_path):
    """Triton's interpreter must be on before triton is imported; if it was imported first, say so instead of failing
    inside Triton. Imported the other way round, the same call works."""
    import os
    import subprocess
    import sys

    call = "x = torch.randn(2, 300); print(float((rblock.softmax(x, -1) - torch.softmax(x, -1)).abs().max()))"
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env |= {"RBLOCK_CACHE_DIR": str(tmp_path), "RBLOCK_FORCE_INTERPRET": "1"}  # as without a GPU
    cases = (
        ("import triton, torch, rblock", {}, False),
        ("import torch, rblock, triton", {}, True),
        ("import triton, torch, rblock", {"TRITON_INTERPRET": "true"}, True),  # on before triton: fine
        ("import os, triton, torch; os.environ['TRITON_INTERPRET'] = '1'; import rblock", {}, False),  # too late
    )
    for first, extra, ok in cases:
        cmd = [sys.executable, "-c", f"{first}; {call}"]
        done = subprocess.run(cmd, capture_output=True, text=True, env=env | extra)
        if ok:
            assert done.returncode == 0 and float(done.stdout) < 1e-5, done.stderr[-2000:]
        else:
            assert done.returncode != 0
            assert "rblock.errors.RBlockError: rblock: without a CUDA GPU" in done.stderr
            assert "import rblock first, or set TRITON_INTERPRET=1" in done.stderr


@pytest.mark.parametrize("value", [8, 256, -1])
def test_config_register_cap_must_be_none_or_within_what_ptxas_takes(value):
    with pytest.raises(ValueError, match=r"^rblock\.Config: maxnreg must be 0 \(no cap\) or 16 to 255"):
        rblock.Config("persistent", 1, 64, 2, maxnreg=value)


# ---------------------------------------------------------------------------------------------------------------
# Messages describe a value, never print its data
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("op", "argument", "call"),
    [
        ("cross_entropy", "ignore_index", lambda v: rblock.cross_entropy(x2d(), torch.zeros(4, dtype=LONG), v)),
        ("cross_entropy", "reduction", lambda v: rblock.cross_entropy(x2d(), torch.zeros(4, dtype=LONG), -1, v)),
        (
            "cross_entropy",
            "label_smoothing",
            lambda v: rblock.cross_entropy(x2d(), torch.zeros(4, dtype=LONG), label_smoothing=v),
        ),
        ("sum", "dim", lambda v: rblock.sum(x2d(), v)),
        ("softmax", "dim", lambda v: rblock.softmax(x2d(), v)),
        ("sum", "keepdim", lambda v: rblock.sum(x2d(), -1, v)),
        ("softmax", "dtype", lambda v: rblock.softmax(x2d(), -1, v)),
        ("rms_norm", "normalized_shape", lambda v: rblock.rms_norm(x2d(), v)),
        ("rms_norm", "eps", lambda v: rblock.rms_norm(x2d(), 8, None, v)),
        ("var", "correction", lambda v: rblock.var(x2d(), -1, correction=v)),
        ("std", "unbiased", lambda v: rblock.std(x2d(), -1, unbiased=v)),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_a_tensor_in_the_wrong_place_is_described_not_printed(op, argument, call):
    with pytest.raises(rblock.InvalidArgument, match=rf"^rblock\.{op}: {argument} ") as e:
        call(DATA)
    assert DATA_SHOWN in str(e.value) and "123456" not in str(e.value), str(e.value)


def test_class_weights_passed_as_ignore_index_say_where_they_go():
    """cross_entropy(logits, target, weight): PyTorch's third argument is weight, rblock's is ignore_index."""
    pattern = rf"^rblock\.cross_entropy: ignore_index must be an int, got {re.escape(DATA_SHOWN)} \(class weights go by"
    with pytest.raises(rblock.InvalidArgument, match=pattern):
        rblock.cross_entropy(x2d(), torch.zeros(4, dtype=LONG), DATA)


@pytest.mark.parametrize(
    ("call", "shown"),
    [
        (lambda: rblock.sum(x2d(), [0] * 10_000), "repeats a dim: a list of 10000 items"),
        (lambda: rblock.rms_norm(x2d(), [8] * 10_000), "normalized_shape is a list of 10000 items"),
        (lambda: rblock.cross_entropy(x2d(), torch.zeros(4, dtype=LONG), reduction="m" * 10_000), "10000 characters"),
        (lambda: rblock.sum(list(range(10_000)), 0), "x must be a torch.Tensor, got a list of 10000 items"),
        (lambda: rblock.var(x2d(), -1, correction=10**5000), "correction is an int of 16610 bits, too large"),
    ],
    ids=["dim", "normalized_shape", "reduction", "x", "correction"],
)
def test_a_large_object_in_a_message_is_described_by_its_size(call, shown):
    with pytest.raises(rblock.InvalidArgument) as e:
        call()
    assert shown in str(e.value) and len(str(e.value)) < 300, str(e.value)
