"""Nothing silently wrong: rblock takes what PyTorch takes and refuses, by name, what PyTorch refuses, and its
reports cover what a call ran."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import rblock
from conftest import DTYPE_IDS, check_against_torch
from rblock.ops.registry import OPS

FLOATS = [torch.float32, torch.bfloat16, torch.float16]


def _ids(v: object) -> str:
    return DTYPE_IDS[v] if v in DTYPE_IDS else "none"


# ---------------------------------------------------------------------------------------------------------------
# layer_norm's weight and bias dtypes
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("b_dtype", [*FLOATS, None], ids=_ids)
@pytest.mark.parametrize("w_dtype", [*FLOATS, None], ids=_ids)
@pytest.mark.parametrize("x_dtype", FLOATS, ids=_ids)
def test_layer_norm_takes_the_parameter_dtypes_pytorch_takes(x_dtype, w_dtype, b_dtype, make):
    """PyTorch's CPU layer_norm takes weight and bias of x's dtype, or float32 ones for a 16-bit x, both of one dtype;
    rblock takes the same and gives the same, and refuses the rest as an InvalidDtype naming the parameter."""
    x = make(3, 40, dtype=x_dtype)
    w = None if w_dtype is None else make(40, dtype=w_dtype)
    b = None if b_dtype is None else make(40, dtype=b_dtype)
    try:
        F.layer_norm(x, (40,), w, b)
    except RuntimeError:
        with pytest.raises(rblock.InvalidDtype, match=r"^rblock\.layer_norm: (weight|bias) has dtype .*; allowed: "):
            rblock.layer_norm(x, (40,), w, b)
    else:
        check_against_torch(
            lambda *t: rblock.layer_norm(t[0], (40,), *t[1:]), lambda *t: F.layer_norm(t[0], (40,), *t[1:]), [x, w, b]
        )


@pytest.mark.parametrize(
    ("x_dtype", "w_dtype", "b_dtype", "message"),
    [
        (torch.float32, torch.bfloat16, None, "weight has dtype bfloat16 and x float32; allowed: float32 (x's dtype"),
        (torch.float16, None, torch.bfloat16, "bias has dtype bfloat16 and x float16; allowed: float16, float32"),
        (
            torch.bfloat16,
            torch.float32,
            torch.bfloat16,
            "bias has dtype bfloat16 and weight float32; allowed: weight's",
        ),
    ],
    ids=["bf16_weight_of_fp32_x", "bf16_bias_of_fp16_x", "bf16_bias_beside_fp32_weight"],
)
def test_layer_norm_parameter_dtype_message(x_dtype, w_dtype, b_dtype, message):
    x = torch.randn(2, 8, dtype=x_dtype)
    w = None if w_dtype is None else torch.ones(8, dtype=w_dtype)
    b = None if b_dtype is None else torch.zeros(8, dtype=b_dtype)
    with pytest.raises(rblock.InvalidDtype, match=r"^rblock\.layer_norm: " + message.replace("(", r"\(")):
        rblock.layer_norm(x, (8,), w, b)


# ---------------------------------------------------------------------------------------------------------------
# explain: rblock's ops, and any function that calls compiled kernels
# ---------------------------------------------------------------------------------------------------------------

REPORT_KEYS = {"strategy", "hint", "xnumel", "rnumel", "features", "candidates", "chosen", "ir", "source"}


def test_explain_of_an_op_reports_its_kernel():
    report = rblock.explain(rblock.softmax, torch.randn(6, 300), -1)
    assert REPORT_KEYS <= report.keys() and "kernels" not in report
    assert (report["xnumel"], report["rnumel"]) == (6, 300)
    assert "@triton.jit" in report["source"] and report["candidates"]


def test_explain_of_an_op_of_two_kernels_reports_each():
    """cross_entropy's mean is a second kernel over the rows' losses: the report keeps the first kernel's keys at the
    top (as for one kernel) and lists both, in the order they ran."""
    report = rblock.explain(rblock.cross_entropy, torch.randn(6, 300), torch.zeros(6, dtype=torch.int64))
    first, mean = report["kernels"]
    assert REPORT_KEYS <= first.keys() and {k: report[k] for k in first} == first
    assert (first["xnumel"], first["rnumel"], mean["rnumel"]) == (6, 300, 6)
    assert "cross_entropy_mean" in mean["ir"] and "@triton.jit" in mean["source"]


@pytest.mark.parametrize("name", sorted(OPS))
def test_explain_of_every_op(name):
    spec = OPS[name]
    report = rblock.explain(spec.run, spec.make_inputs(3, 40, torch.float32, "cpu"), -1)
    for kernel in report.get("kernels", [report]):
        assert REPORT_KEYS <= kernel.keys() and "@triton.jit" in kernel["source"]


def test_explain_of_a_function_that_calls_an_op():
    def scaled_norm(x, w):
        return rblock.rms_norm(x, (300,), w) * 2.0

    report = rblock.explain(scaled_norm, torch.randn(5, 300), torch.randn(300))
    assert (report["xnumel"], report["rnumel"]) == (5, 300) and "kernels" not in report


def test_explain_of_an_op_follows_the_settings_and_leaves_its_results_alone():
    x = torch.randn(5, 300)
    with rblock.settings(strategy="looped"):
        report = rblock.explain(rblock.log_softmax, x, 1)
        got = rblock.log_softmax(x, 1)
    assert report["chosen"].startswith("looped") and all(c["kind"] == "looped" for c in report["candidates"])
    torch.testing.assert_close(got, torch.log_softmax(x, 1), atol=1e-5, rtol=1e-5)


def test_explain_of_an_op_checks_its_arguments_as_the_op_does():
    with pytest.raises(rblock.InvalidArgument, match=r"^rblock\.softmax: dim is 2, but x has 2 dims"):
        rblock.explain(rblock.softmax, torch.randn(4, 8), 2)


@pytest.mark.parametrize("fn", [torch.randn(4, 8), "softmax", None], ids=["tensor", "name", "None"])
def test_explain_of_something_not_callable(fn):
    with pytest.raises(rblock.InvalidArgument, match=r"^rblock\.explain: fn must be a function or an rblock\.compile"):
        rblock.explain(fn, torch.randn(4, 8))


# ---------------------------------------------------------------------------------------------------------------
# Tensors whose memory is not their values
# ---------------------------------------------------------------------------------------------------------------


def negative_view(*shape: int) -> torch.Tensor:
    """A float tensor whose values are its memory negated (PyTorch's neg bit): a conjugated complex tensor's .imag."""
    v = torch.randn(*shape, dtype=torch.complex64).conj().imag
    assert v.is_neg() and v.dtype == torch.float32
    return v


@pytest.mark.parametrize(
    ("op", "argument", "call"),
    [
        ("sum", "x", lambda v: rblock.sum(v, -1)),
        ("softmax", "x", lambda v: rblock.softmax(v, -1)),
        ("rms_norm", "weight", lambda v: rblock.rms_norm(torch.randn(4, 8), (8,), v[0])),
        ("layer_norm", "bias", lambda v: rblock.layer_norm(torch.randn(4, 8), (8,), None, v[0])),
        ("cross_entropy", "logits", lambda v: rblock.cross_entropy(v, torch.zeros(4, dtype=torch.int64))),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_a_negative_view_is_refused_where_its_signs_would_be_lost(op, argument, call):
    """The kernels read memory: a negative view's values would come out with every sign flipped, without a word."""
    with pytest.raises(rblock.InvalidArgument, match=rf"^rblock\.{op}: {argument} is a negative view .*resolve_neg"):
        call(negative_view(4, 8))


def test_a_resolved_negative_view_gives_pytorchs_values():
    v = negative_view(4, 8).resolve_neg()
    torch.testing.assert_close(rblock.sum(v, -1), v.sum(-1))


@pytest.mark.parametrize(
    ("make", "shown"),
    [
        (lambda x: x.to_sparse(), "has layout sparse_coo; rblock takes dense \\(strided\\) tensors: pass t.to_dense"),
        (lambda x: x.to_sparse_csr(), "has layout sparse_csr"),
        (lambda x: torch.nested.nested_tensor(list(x)), "is a nested tensor"),
        (lambda x: torch.nested.nested_tensor(list(x), layout=torch.jagged), "is a nested tensor"),
        pytest.param(
            lambda x: x.to_mkldnn(),
            "has layout _mkldnn",
            marks=pytest.mark.skipif(not torch.backends.mkldnn.is_available(), reason="no oneDNN"),
        ),
    ],
    ids=["sparse_coo", "sparse_csr", "nested", "jagged", "mkldnn"],
)
@pytest.mark.filterwarnings("ignore::UserWarning")  # nested tensors are a prototype
def test_a_tensor_that_is_not_dense_is_refused_by_name(make, shown):
    with pytest.raises(rblock.InvalidArgument, match=rf"^rblock\.amax: x {shown}"):
        rblock.amax(make(torch.randn(4, 8)), -1)
    with pytest.raises(rblock.InvalidArgument, match=rf"^rblock\.layer_norm: weight {shown}"):
        rblock.layer_norm(torch.randn(4, 8), (8,), make(torch.randn(1, 8)))  # refused before its shape is


# ---------------------------------------------------------------------------------------------------------------
# Numbers PyTorch takes, or refuses
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("correction", [8, 9.5, 1e30, 2**60], ids=str)
def test_var_with_a_correction_past_the_row_length_is_inf_as_in_pytorch(correction):
    x = torch.randn(3, 8)
    with pytest.warns(UserWarning, match="degrees of freedom"):
        want = torch.var(x, -1, correction=correction)
    torch.testing.assert_close(rblock.var(x, -1, correction=correction), want)
    torch.testing.assert_close(rblock.std(x, -1, correction=correction), want.sqrt())


@pytest.mark.parametrize("op", ["rms_norm", "layer_norm"])
def test_normalized_shape_of_bools_is_refused_as_in_pytorch(op):
    """(True,) equals (1,): without a check, a row of one element would be normalized by a bool."""
    with pytest.raises(rblock.InvalidArgument, match=rf"^rblock\.{op}: normalized_shape must be an int or a seq"):
        getattr(rblock, op)(torch.randn(4, 1), (True,))


@pytest.mark.parametrize("ignore_index", [2**63, -(2**63) - 1, 2**70], ids=str)
def test_cross_entropy_ignore_index_past_int64(ignore_index):
    with pytest.raises(rblock.InvalidArgument, match=r"^rblock\.cross_entropy: ignore_index is .*; allowed: -2\^63"):
        rblock.cross_entropy(torch.randn(4, 8), torch.zeros(4, dtype=torch.int64), ignore_index)


@pytest.mark.parametrize("ignore_index", [2**63 - 1, -(2**63), 2**40], ids=str)
def test_cross_entropy_ignore_index_anywhere_in_int64(ignore_index):
    x, t = torch.randn(4, 8), torch.tensor([0, 1, 2, 3])
    want = F.cross_entropy(x, t, ignore_index=ignore_index)
    torch.testing.assert_close(rblock.cross_entropy(x, t, ignore_index), want)


def test_an_eps_past_floats_range_is_refused_by_name():
    with pytest.raises(rblock.InvalidArgument, match=r"^rblock\.rms_norm: eps is an int of 1329 bits, too large"):
        rblock.rms_norm(torch.randn(4, 8), (8,), None, 10**400)
