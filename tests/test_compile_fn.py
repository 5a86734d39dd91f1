"""rblock.compile on user functions: plain PyTorch (pointwise ops around reductions over one set of dims) runs as one
fused kernel and gives what eager PyTorch gives; compiled kernels are cached per input signature; explain() says
what was decided and shows the generated Triton source."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import rblock
from conftest import assert_matches, assert_near, check_against_torch, dtype_id, upcast

FP32_BF16 = [torch.float32, torch.bfloat16]

# ---------------------------------------------------------------------------------------------------------------
# User functions
# ---------------------------------------------------------------------------------------------------------------


def residual_rms_norm(x, residual, weight, eps: float = 1e-6):
    h = x + residual
    hf = h.float()
    y = hf * torch.rsqrt(hf.pow(2).mean(-1, keepdim=True) + eps)
    return (y * weight.float()).to(x.dtype), h


def silu_gated_norm(x, gate, weight):
    xf = x.float()
    y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6) * weight
    return (y * F.silu(gate.float())).to(x.dtype)


def softmax_by_hand(x):
    m = torch.amax(x, dim=-1, keepdim=True)
    e = torch.exp(x - m)
    return e / torch.sum(e, dim=-1, keepdim=True)


def by_hand_ulps(dtype: torch.dtype) -> float | None:
    """softmax_by_hand in 16 bits, as PyTorch defines it, rounds x - max to the dtype: for rows of randn values
    (x - max > -7) that moves its exp by up to 7 units of eps (the interpreter truncates; 3.5 rounded to nearest).
    The exp, their sum and the quotient are rounded too: up to 10 units from the float64 reference. fp32: as usual."""
    return 10 if dtype in (torch.bfloat16, torch.float16) else None


def mean_over_last_two(x):
    return x.mean(dim=(1, 2))


def mean_over_last_two_keepdim(x):
    return torch.mean(x, (-2, -1), keepdim=True)


def centered_and_stats(x):
    mean = x.mean(-1)
    return x.sum(-1), x.amax(-1), x - mean[..., None]


def soft_capped_logsumexp(logits, cap: float = 30.0):
    return torch.logsumexp(cap * torch.tanh(logits / cap), -1)


def stats_dict(x):
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    return {"mean": mean, "rstd": torch.rsqrt(var + 1e-5), "normalized": (x - mean) * torch.rsqrt(var + 1e-5)}


@pytest.mark.parametrize("dtype", FP32_BF16, ids=dtype_id)
@pytest.mark.parametrize("n", [37, 1000])
def test_residual_rms_norm_by_hand(n, dtype, strategy, make):
    x, r, w = make(5, n, dtype=dtype), make(5, n, dtype=dtype), make(n, dtype=dtype)
    check_against_torch(rblock.compile(residual_rms_norm), residual_rms_norm, [x, r, w], strategy=strategy)


@pytest.mark.parametrize("dtype", FP32_BF16, ids=dtype_id)
def test_silu_gating_times_a_norm(dtype, strategy, make):
    x, g, w = make(5, 300, dtype=dtype), make(5, 300, dtype=dtype), make(300)
    check_against_torch(rblock.compile(silu_gated_norm), silu_gated_norm, [x, g, w], strategy=strategy)


@pytest.mark.parametrize("dtype", FP32_BF16, ids=dtype_id)
@pytest.mark.parametrize("n", [3, 300])
def test_softmax_by_hand(n, dtype, strategy, make):
    check_against_torch(
        rblock.compile(softmax_by_hand),
        softmax_by_hand,
        [make(5, n, dtype=dtype)],
        strategy=strategy,
        ulps=by_hand_ulps(dtype),
    )


@pytest.mark.parametrize("fn", [mean_over_last_two, mean_over_last_two_keepdim], ids=lambda f: f.__name__)
@pytest.mark.parametrize("layout", ["contiguous", "permuted"])
def test_mean_over_a_tuple_of_dims(fn, layout, strategy, make):
    x = make(4, 6, 50) if layout == "contiguous" else make(50, 4, 6).permute(1, 2, 0)
    check_against_torch(rblock.compile(fn), fn, [x], strategy=strategy)


def test_function_returning_a_tuple(strategy, make):
    fn = rblock.compile(centered_and_stats)
    check_against_torch(fn, centered_and_stats, [make(5, 300)], strategy=strategy, sum_of=(300, 0, 0))


def test_function_returning_a_dict(strategy, make):
    x = make(5, 300)
    with rblock.settings(strategy=strategy):
        out = rblock.compile(stats_dict)(x)
    expected, ref = stats_dict(x), stats_dict(upcast(x))
    assert isinstance(out, dict) and list(out) == list(expected)
    for key in expected:
        assert_matches(out[key], expected[key], ref[key], msg=lambda m, key=key: f"{key}: {m}")


def test_function_returning_a_single_tensor_in_a_list(strategy, make):
    fn = rblock.compile(lambda x: [x.sum(-1)])
    with rblock.settings(strategy=strategy):
        out = fn(make(5, 30))
    assert isinstance(out, list) and len(out) == 1 and out[0].shape == (5,)


@pytest.mark.parametrize("eps", [1e-6, 0.1])
def test_python_scalars_are_baked_into_the_kernel(eps, strategy, make):
    x, r, w = make(5, 300), make(5, 300), make(300)
    check_against_torch(
        lambda *t: rblock.compile(residual_rms_norm)(*t, eps=eps),
        lambda *t: residual_rms_norm(*t, eps=eps),
        [x, r, w],
        strategy=strategy,
    )


def test_reduction_over_dim_0_with_a_broadcast_parameter(strategy, make):
    def weighted_column_sum(x, w):
        return (x * w[:, None]).sum(0)

    fn = rblock.compile(weighted_column_sum)
    inputs = [make(300, 5), make(300)]
    check_against_torch(fn, weighted_column_sum, inputs, strategy=strategy, sum_of=300)


def test_reduction_to_a_scalar(strategy, make):
    def sum_of_squares(x):
        return x.pow(2).sum()

    fn = rblock.compile(sum_of_squares)
    check_against_torch(fn, sum_of_squares, [make(5, 300)], strategy=strategy)  # positive terms: relative error


def test_pointwise_only_function(strategy, make):
    def gate(x, y):
        return x * torch.sigmoid(y) + 1.0

    check_against_torch(rblock.compile(gate), gate, [make(5, 300), make(5, 300)], strategy=strategy)


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: torch.var_mean(x, -1),
        lambda x: F.layer_norm(x, (300,)),
        lambda x: F.rms_norm(x, (300,), eps=1e-6),
        lambda x: torch.logsumexp(x * 2.0, -1) - x.mean(-1),
        lambda x: F.log_softmax(x, -1).neg().mean(-1),
        lambda x: torch.where(x > 0, x, 0.0).sum(-1) / (x > 0).sum(-1),
    ],
    ids=["var_mean", "layer_norm", "rms_norm", "logsumexp_minus_mean", "neg_log_softmax_mean", "masked_mean"],
)
def test_torch_functions_inside_compile(fn, strategy, make):
    check_against_torch(rblock.compile(fn), fn, [make(5, 300)], strategy=strategy)


@pytest.mark.parametrize("name", ["argmax", "argmin", "max_dim"])
def test_arg_reductions_are_exact(name, strategy, make):
    fn = {
        "argmax": lambda x: x.argmax(-1),
        "argmin": lambda x: x.argmin(-1),
        "max_dim": lambda x: tuple(torch.max(x, -1)),
    }[name]
    x = make(5, 300)
    with rblock.settings(strategy=strategy):
        out = rblock.compile(fn)(x)
    expected = fn(x)
    for o, e in zip(*(v if isinstance(v, tuple) else (v,) for v in (out, expected))):
        assert o.dtype == e.dtype and o.shape == e.shape
        torch.testing.assert_close(o, e, rtol=0, atol=0)


def test_mixed_dtype_inputs_promote_like_pytorch(strategy, make):
    def scaled_norm(x, w):
        return F.rms_norm(x.float(), (300,), eps=1e-6) * w

    check_against_torch(
        rblock.compile(scaled_norm), scaled_norm, [make(5, 300, dtype=torch.bfloat16), make(300)], strategy=strategy
    )


@pytest.mark.parametrize(
    "pointwise",
    [
        torch.sigmoid,
        F.silu,
        F.relu,
        torch.exp,
        lambda x: torch.log(x.abs() + 1),
        lambda x: torch.sqrt(x.abs()),
        lambda x: torch.rsqrt(x.abs() + 1),
        torch.abs,
        torch.neg,
        torch.square,
        lambda x: torch.reciprocal(x.abs() + 1),
        lambda x: x.pow(3),
        lambda x: x.abs().pow(0.5),
        lambda x: torch.where(x > 0, x, 0.1 * x),
        lambda x: torch.maximum(x, x.abs() * 0.5),
        lambda x: torch.minimum(x, x.abs() * -0.5 + 0.5),
        lambda x: torch.clamp_min(x, -0.5),
        lambda x: (x > 0.5).float() - (x <= -0.5).to(x.dtype),
        lambda x: x.masked_fill(x < 0, -1.0),
        lambda x: 1.0 - torch.sigmoid(x),
        lambda x: 2.0 / (x.abs() + 1),
        lambda x: torch.tanh(x * 3.0),
    ],
    ids=[
        "sigmoid", "silu", "relu", "exp", "log", "sqrt", "rsqrt", "abs", "neg", "square", "reciprocal", "pow3",
        "pow_half", "where", "maximum", "minimum", "clamp_min", "compare_and_cast", "masked_fill",
        "scalar_minus_tensor", "scalar_over_tensor", "tanh",
    ],
)  # fmt: skip
def test_pointwise_ops_around_a_reduction(pointwise, strategy, make):
    def fn(x):
        y = pointwise(x)
        return y.sum(-1), y * torch.rsqrt(y.pow(2).mean(-1, keepdim=True) + 1e-6)

    check_against_torch(rblock.compile(fn), fn, [make(5, 64)], strategy=strategy, sum_of=(64, 0))


@pytest.mark.parametrize("scale", [1.0, 100.0], ids=["inside_the_cap", "past_the_cap"])
def test_soft_capped_logsumexp(scale, dtype, strategy, make):
    """30 * tanh(x / 30) before a logsumexp (soft-capped logits): tanh in every dtype, saturated or not."""
    check_against_torch(
        rblock.compile(soft_capped_logsumexp),
        soft_capped_logsumexp,
        [make(5, 300, dtype=dtype, scale=scale)],
        strategy=strategy,
    )


def test_tensor_passed_as_a_keyword_argument(strategy, make):
    def weighted_sum(x, *, weight):
        return (x * weight).sum(-1)

    x, w = make(5, 300), make(300)
    check_against_torch(
        lambda x, w: rblock.compile(weighted_sum)(x, weight=w),
        lambda x, w: weighted_sum(x, weight=w),
        [x, w],
        strategy=strategy,
        sum_of=300,
    )


@pytest.mark.parametrize(
    ("shape", "fn"),
    [
        ((5, 10, 30), lambda x: x.flatten(1).softmax(-1)),
        ((5, 10, 30), lambda x: x.reshape(5, 300).sum(-1)),
        ((5, 300), lambda x: x.view(5, 10, 30).sum(-1)),
    ],
    ids=["flatten_then_softmax", "reshape_then_sum", "view_then_sum"],
)
def test_reshaped_input_is_reduced_like_pytorch_or_refused_naming_the_reshape(shape, fn, strategy, make):
    """A view of an input is read with its own strides. If rblock cannot, it says that the view is the problem."""
    x = make(*shape)
    try:
        with rblock.settings(strategy=strategy):
            out = rblock.compile(fn)(x)
    except rblock.UnsupportedOperation as e:
        assert "view" in str(e) or "reshape" in str(e), str(e)
        return
    assert_matches(out, fn(x), fn(x.double()), sum_of=300 if out.dim() == 1 else 0)  # the sums, not the softmax


def test_decorator_forms(make):
    @rblock.compile
    def row_sum(x):
        return x.sum(-1)

    @rblock.compile(name="my kernel")
    def row_max(x):
        return x.amax(-1)

    x = make(5, 30)
    assert_matches(row_sum(x), x.sum(-1), x.double().sum(-1), sum_of=30)
    assert_matches(row_max(x), x.amax(-1), x.double().amax(-1))
    assert "my_kernel" in row_max.compiled_for(x).specs[0].source


# ---------------------------------------------------------------------------------------------------------------
# Per-signature caching
# ---------------------------------------------------------------------------------------------------------------


def test_same_signature_reuses_the_compiled_kernel(make):
    fn = rblock.compile(softmax_by_hand)
    x = make(5, 300)
    assert fn.compiled_for(x) is fn.compiled_for(x)
    assert fn.compiled_for(x) is fn.compiled_for(make(5, 300)), "new data, same shape/strides/dtype: same kernel"


def test_calling_twice_reuses_the_kernel_and_gives_the_same_result(make):
    fn = rblock.compile(softmax_by_hand)
    x = make(5, 300)
    first = fn(x)
    entry = fn.compiled_for(x)
    second = fn(x)
    assert fn.compiled_for(x) is entry
    torch.testing.assert_close(first, second, rtol=0, atol=0)
    assert_matches(second, softmax_by_hand(x), softmax_by_hand(x.double()))


@pytest.mark.parametrize(
    "other",
    [
        lambda make: make(7, 300),
        lambda make: make(5, 301),
        lambda make: make(5, 300, dtype=torch.bfloat16),
        lambda make: make(300, 5).t(),
        lambda make: make(5, 600)[:, ::2],
    ],
    ids=["more_rows", "longer_rows", "other_dtype", "transposed", "strided"],
)
def test_different_signatures_get_their_own_kernel_and_are_both_correct(other, make):
    fn = rblock.compile(softmax_by_hand)
    x, y = make(5, 300), other(make)
    assert fn.compiled_for(x) is not fn.compiled_for(y)
    for t in (x, y, x):
        assert_matches(fn(t), softmax_by_hand(t), softmax_by_hand(t.double()), ulps=by_hand_ulps(t.dtype))


def test_settings_are_part_of_the_signature(make):
    fn = rblock.compile(softmax_by_hand)
    x = make(5, 300)
    with rblock.settings(strategy="persistent"):
        persistent = fn.compiled_for(x)
    with rblock.settings(strategy="looped"):
        looped = fn.compiled_for(x)
    assert persistent is not looped
    assert persistent.config.kind == "persistent" and looped.config.kind == "looped"


@pytest.mark.parametrize(("a", "b"), [(1e-6, 1e-5), (2, 2.0), (1, True)], ids=["floats", "int_vs_float", "int_vs_bool"])
def test_scalar_arguments_are_part_of_the_signature(a, b, make):
    """Two scalars give one kernel only if they give the same result: 2 and 2.0 do not (int * 2 stays an int)."""

    def scale_and_sum(x, s):
        return (x * s).sum(-1)

    fn = rblock.compile(scale_and_sum)
    x = torch.arange(12, dtype=torch.int64).reshape(3, 4) if isinstance(a, int) else make(3, 4)
    for s in (a, b, a):
        out, expected = fn(x, s), scale_and_sum(x, s)
        assert out.dtype == expected.dtype, f"s={s!r}: rblock {out.dtype}, PyTorch {expected.dtype}"
        assert_matches(out, expected, scale_and_sum(upcast(x), s), sum_of=4)


@pytest.mark.parametrize("strategy_name", ["persistent", "looped"])
def test_settings_strategy_restricts_the_chosen_kind(strategy_name, make):
    fn = rblock.compile(residual_rms_norm)
    args = (make(5, 1000), make(5, 1000), make(1000))
    with rblock.settings(strategy=strategy_name):
        assert fn.compiled_for(*args).config.kind == strategy_name


@pytest.mark.parametrize(
    "config",
    [rblock.Config("persistent", 2, 1024, 4), rblock.Config("looped", 1, 128, 2), rblock.Config("looped", 4, 64, 2)],
    ids=str,
)
def test_settings_config_runs_exactly_that_config(config, make):
    fn = rblock.compile(residual_rms_norm)
    args = (make(5, 1000), make(5, 1000), make(1000))
    with rblock.settings(config=config):
        assert fn.compiled_for(*args).config == config
        out = fn(*args)
    for o, e, r in zip(out, residual_rms_norm(*args), residual_rms_norm(*upcast(list(args)))):
        assert_matches(o, e, r)


# ---------------------------------------------------------------------------------------------------------------
# explain
# ---------------------------------------------------------------------------------------------------------------

EXPLAIN_KEYS = {"strategy", "hint", "xnumel", "rnumel", "features", "candidates", "chosen", "ir", "source"}


@pytest.mark.parametrize("compiled", [False, True], ids=["plain_function", "compiled_function"])
def test_explain_reports_the_decision_and_the_source(compiled, make):
    fn = rblock.compile(silu_gated_norm) if compiled else silu_gated_norm
    report = rblock.explain(fn, make(6, 300), make(6, 300), make(300))
    assert EXPLAIN_KEYS <= set(report)
    assert report["strategy"] in ("persistent", "looped")
    assert (report["xnumel"], report["rnumel"]) == (6, 300)
    assert isinstance(report["features"], dict)
    assert report["candidates"] and all({"kind", "reason"} <= set(c) for c in report["candidates"])
    assert isinstance(report["chosen"], str) and report["chosen"]
    assert isinstance(report["ir"], str) and report["ir"]
    assert "@triton.jit" in report["source"]


def test_explain_of_a_reduction_over_dim_0(make):
    report = rblock.explain(lambda x: x.sum(0), make(300, 5))
    assert (report["xnumel"], report["rnumel"]) == (5, 300)
    assert "@triton.jit" in report["source"]


@pytest.mark.parametrize("strategy_name", ["persistent", "looped"])
def test_explain_follows_the_settings(strategy_name, make):
    with rblock.settings(strategy=strategy_name):
        report = rblock.explain(softmax_by_hand, make(5, 300))
    assert report["strategy"] == strategy_name
    assert report["chosen"].startswith(strategy_name)
    assert all(c["kind"] == strategy_name for c in report["candidates"])


def test_explain_does_not_change_the_compiled_function(make):
    fn = rblock.compile(softmax_by_hand)
    x = make(5, 300)
    rblock.explain(fn, x)
    assert_matches(fn(x), softmax_by_hand(x), softmax_by_hand(x.double()))


def test_one_build_per_call_pattern_through_either_signature_path():
    f = rblock.compile(lambda x, dims, scale: (x.float() * scale).sum(dims))
    x = torch.randn(4, 300)
    for _ in range(3):  # positional plain arguments: the flat path
        f(x, [1], 2.0)
    assert_near(f(x, dims=[1], scale=2.0), (x.double() * 2.0).sum(1), sum_of=300)  # keywords: the general path
    assert len(f._entries) == 2
    f(x, [1], 3)  # an int scale traces to other math: a new entry
    assert len(f._entries) == 3
