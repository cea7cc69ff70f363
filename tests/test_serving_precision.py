"""FP4 weights (NVFP4, MXFP4) with their scales, FP4 compute only on Blackwell, FP8 KV."""

from __future__ import annotations

from dataclasses import replace

import pytest

from explorer.memory.serving import (
    MemoryAssumptions,
    ServingLayout,
    kv_bytes_per_token,
    weight_bytes_per_param,
)
from explorer.presets import load_gpu, load_model
from explorer.serving import ServingAssumptions, estimate_serving, peak_flops_per_s
from explorer.specs import ClusterSpec, ServingWorkload

DEEPSEEK_V3 = load_model("deepseek-v3")
M = MemoryAssumptions()


def test_fp4_bytes_per_weight_include_one_scale_byte_per_block():
    # NVFP4: 4 bits + one E4M3 byte per 16 values = 0.5 + 0.0625; MXFP4: + one E8M0 per 32
    assert weight_bytes_per_param("nvfp4", M) == 0.5625
    assert weight_bytes_per_param("mxfp4", M) == 0.53125


@pytest.mark.parametrize(
    ("gpu", "fp4_peak"),
    [("b200", 144e15 / 8 / 2), ("gb200", 1440e15 / 72 / 2), ("h200", None), ("h100-sxm", None)],
)
def test_fp4_gemms_run_at_the_fp4_peak_only_on_blackwell(gpu, fp4_peak):
    # datasheets: HGX B200 144 and GB200 NVL72 1,440 FP4 PFLOPS with sparsity, halved dense
    cluster = ClusterSpec(gpu=load_gpu(gpu))
    assert cluster.gpu.fp4_flops_per_s == fp4_peak
    for dtype in ("nvfp4", "mxfp4"):
        expected = fp4_peak or cluster.gpu.bf16_flops_per_s  # weight-only on Hopper
        assert peak_flops_per_s(cluster, dtype) == expected


def test_nvfp4_deepseek_weights_shrink_to_the_fp4_share_of_fp8():
    cluster = ClusterSpec(gpu=load_gpu("b200"))
    w = ServingWorkload(prompt_len=2000, output_len=1000, concurrency=8, weights_dtype="fp8")
    layout = ServingLayout(ep=8)
    fp8 = estimate_serving(DEEPSEEK_V3, cluster, layout, w)
    fp4 = estimate_serving(DEEPSEEK_V3, cluster, layout, replace(w, weights_dtype="nvfp4"))
    # the routed experts dominate; norms, router, embeddings stay bf16 in both
    ratio = fp4.memory.weights / fp8.memory.weights
    assert 0.5625 / weight_bytes_per_param("fp8", M) < ratio < 0.62
    assert fp4.max_concurrency > fp8.max_concurrency
    # FP4 GEMMs at twice the FP8 peak: the prefill's GEMMs and experts halve; the attention
    # core reads the bf16 KV cache and runs at the BF16 peak in both
    from explorer.serving.latency import _Case, _compute_parts, _stage_flops

    f = _stage_flops(DEEPSEEK_V3, tuple(range(61)), True)
    parts = _compute_parts(_Case(DEEPSEEK_V3, cluster, layout, w, ServingAssumptions()), f,
                           2000.0, 1000.0, True, 2000.0)  # fmt: skip
    halved = (parts.gemms + parts.experts) / 2
    assert fp8.prefill.compute_s - fp4.prefill.compute_s == pytest.approx(halved, rel=0.02)


def test_fp8_kv_halves_the_latent_cache():
    # (512 + 64) x 61 blocks: 70,272 bytes a token in bf16, 35,136 in fp8
    assert kv_bytes_per_token(DEEPSEEK_V3, "bf16") == 70_272
    assert kv_bytes_per_token(DEEPSEEK_V3, "fp8") == 35_136
