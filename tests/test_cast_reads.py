"""The BF16 read of an FP8 cast whose input no fused norm produced (explorer.compute.casts)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from explorer.compute.casts import cast_bytes, cast_weight
from explorer.compute.kernels import block_gemms, gemm_times
from explorer.presets import load_gpu, load_model
from explorer.specs import Layout

H100 = load_gpu("h100-sxm")
# GPT3-5B as NeMo's launcher sets it (launcher_scripts/conf/training/gpt3/5b.yaml): GELU, MHA
GPT3_5B = replace(
    load_model("gpt3-175b"),
    num_hidden_layers=24, hidden_size=4096, num_attention_heads=32, intermediate_size=16384,
)  # fmt: skip
H, T = 4096, 2048


def _casts(recipe: str) -> tuple[float, float]:
    gemms = tuple(block_gemms(GPT3_5B, Layout(micro_batch_size=1), T, moe=False))
    dense, _ = gemm_times(gemms, "fp8", H100, H100.hbm_bytes_per_s * 0.8, recipe=recipe)
    return cast_bytes(dense.cast_forward, recipe), cast_bytes(dense.cast_backward, recipe)


def test_a_megatron_block_reads_in_bf16_every_cast_input_but_its_two_norm_outputs() -> None:
    # forward inputs per token: QKV and fc1 take a fused norm's output (h each), the output
    # projection the attention output (h), fc2 the GELU output (4 h); backward every output
    # gradient (3 h + h + 4 h + h)
    forward, backward = _casts("delayed")
    assert forward == pytest.approx(T * (2 * 2 * H + 4 * (H + 4 * H)))  # 2 B fused, 4 B unfused
    assert backward == pytest.approx(T * 4 * 9 * H)
    forward, backward = _casts("current")  # 4 B where the norm took the amax, else 6 B
    assert forward == pytest.approx(T * (4 * 2 * H + 6 * 5 * H))
    assert backward == pytest.approx(T * 6 * 9 * H)
    forward, _ = _casts("mxfp8")  # TE's norm writes BF16 and quantizes after: all 7 h read
    assert forward == pytest.approx(T * 7 * H * (2 + 2 / 32 + 2))


def test_an_unnamed_recipe_and_the_fused_norm_cases_add_no_read() -> None:
    assert cast_weight("", False) == 1.0
    assert cast_weight("delayed", True) == 1.0 and cast_weight("current", True) == 1.0
    assert cast_weight("delayed", False) == pytest.approx(2.0)  # (2 + 2) / 2
    assert cast_weight("blockwise", True) == pytest.approx(1 + 2 / (2 + 8 / 128))


def test_the_ledger_brackets_transformer_engines_published_autocast_overhead() -> None:
    # TE docs/examples/gemm_profiling/gemm_profiling.rst, "Worked Example: 5B Model on H200"
    # (H200 NVL, 4.8 TB/s): te.Linear in autocast quantizes its BF16 input and weight on every
    # call; per layer FP8 delayed 18.978 ms and current 20.285 ms against the pre-quantized
    # kernels' 16.785 ms. The 12 GEMMs of hidden 4096, MLP 16384, M = 15,872 (m x k x n):
    m, h, f, qkv = 15872, 4096, 16384, 12288
    fprop = [(m, h, qkv), (m, h, h), (m, h, f), (m, f, h)]
    dgrad = [(m, qkv, h), (m, h, h), (m, f, h), (m, h, f)]
    wgrad = [(h, m, qkv), (h, m, h), (h, m, f), (f, m, h)]
    elements = sum(a * k + k * n for a, k, n in fprop + dgrad + wgrad)
    assert elements == 2_483_027_968
    bandwidth = 4.8e12
    for recipe, published_ms in (("delayed", 18.978 - 16.785), ("current", 20.285 - 16.785)):
        moved = cast_bytes(elements, recipe) * cast_weight(recipe, False)  # 4 B and 6 B
        full_ms, achievable_ms = (moved / (bandwidth * e) * 1e3 for e in (1.0, 0.8))
        # no faster than the bytes at the full bandwidth; no slower than at the core's 80%
        assert full_ms < published_ms < achievable_ms
