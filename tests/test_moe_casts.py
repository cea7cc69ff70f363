"""The routed experts' low-precision casts read their BF16 input in kernels of their own
(Transformer Engine GroupedLinear's split_quantize): the bytes, hand-worked at Qwen3-235B's
B200 EP8 shape, and which published stacks pay them."""

from __future__ import annotations

import pytest

from explorer.compute.kernels import expert_gemms, gemm_times
from explorer.presets import load_gpu, load_model
from explorer.specs import Layout

B200 = load_gpu("b200")
QWEN3 = load_model("qwen3-235b-a22b")
BANDWIDTH = B200.hbm_bytes_per_s * 0.8
LAYOUT = Layout(dp=8, ep=8)  # 16 local experts, 4096 x 8 x 8 / 128 = 2048 tokens each


def test_cast_elements_of_the_expert_gemms_at_qwen3_ep8() -> None:
    gemms = tuple(expert_gemms(QWEN3, LAYOUT, tokens=4096, fp8_dispatch=False)[1:])
    _, experts = gemm_times(gemms, "fp8", B200, BANDWIDTH)
    # forward inputs: dispatched tokens 2048 x 4096 and the SwiGLU output 2048 x 1536, 16 experts
    assert experts.cast_forward == 16 * 2048 * (4096 + 1536) == 184_549_376
    # backward output gradients: the down projection's 2048 x 4096, the up one's 2048 x 3072
    assert experts.cast_backward == 16 * 2048 * (4096 + 3072) == 234_881_024


def test_the_expert_casts_pay_their_bf16_read_once() -> None:
    # Transformer Engine GroupedLinear quantizes each expert's BF16 input in a kernel of its own
    # (split_quantize): explorer.compute.casts.cast_weight charges that 2-byte read for every
    # cast whose input is not a fused norm's. MXFP8 moves 2 + 2/32 bytes per cast element, so
    # each element weighs 1 + 2 / 2.0625 = 1.969697: 184,549,376 x 1.969697 = 363,506,346.67
    gemms = tuple(expert_gemms(QWEN3, LAYOUT, tokens=4096, fp8_dispatch=False)[1:])
    _, experts = gemm_times(gemms, "fp8", B200, BANDWIDTH, recipe="mxfp8")
    assert experts.cast_forward == pytest.approx(363_506_346.67)
    assert experts.cast_backward == pytest.approx(234_881_024 * 1.969697)
