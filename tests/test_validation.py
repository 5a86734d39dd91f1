"""Nothing silently wrong: rblock takes what PyTorch takes and refuses, by name, what PyTorch refuses, and its
reports cover what a call ran."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import rblock
from conftest import DTYPE_IDS, check_against_torch

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
