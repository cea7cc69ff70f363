"""Serving attention reads the keys each block reads: windows, chunks, DeepSeek-V3.2's top-k."""

from __future__ import annotations

from dataclasses import replace

import pytest

from explorer.hf_config import model_from_config
from explorer.memory.serving import ServingLayout
from explorer.memory.serving_layout import indexer_key_bytes_per_token, kv_bytes_per_token_per_layer
from explorer.presets import load_model
from explorer.serving import estimate_serving
from explorer.serving.kernels import DECODE_ATTENTION_COMPUTE_SHARE, DECODE_ATTENTION_HBM_SHARE
from explorer.serving.keys import (
    attention_flops_share,
    decode_keys,
    decode_kv_share,
    prefill_keys,
)
from explorer.serving.latency import _stage_flops
from explorer.specs import ClusterSpec, ServingWorkload
from tests.architecture_configs import DEEPSEEK_V32, LLAMA4_SCOUT, QWEN3_NEXT
from tests.test_serving import ROUND_GPU, TINY

REL = 1e-9
ROUND = ClusterSpec(gpu=ROUND_GPU)


def test_a_window_block_reads_the_windows_bytes_beyond_it_and_the_other_its_context() -> None:
    # Mistral-style window of 256 on block 0 only; context 1000 + 2 / 2 = 1001 keys
    windowed = replace(TINY, sliding_window=256, window_layers=(0,))
    w = ServingWorkload(prompt_len=1000, output_len=2, concurrency=1)
    e = estimate_serving(windowed, ROUND, ServingLayout(), w)
    full = estimate_serving(TINY, ROUND, ServingLayout(), w)
    # KV per block and token 2 x 8 heads x 128 x 2 bytes = 4,096: block 0 reads 256 keys
    # instead of 1001, at the decode attention kernel's share of HBM; nothing else changes
    saved = (1001 - 256) * 4096
    hbm = DECODE_ATTENTION_HBM_SHARE * 1e12
    assert full.decode.memory_s - e.decode.memory_s == pytest.approx(saved / hbm, rel=1e-9)
    # scores and values 2 x 2 x 8 x 128 = 4,096 FLOPs per key, at the decode kernel's share of
    # the 1e15 peak
    flops = 4096 * (1001 - 256)
    peak = DECODE_ATTENTION_COMPUTE_SHARE * 1e15
    assert full.decode.compute_s - e.decode.compute_s == pytest.approx(flops / peak, rel=1e-9)


def test_without_a_window_or_top_k_every_figure_is_unchanged_to_the_last_digit() -> None:
    llama = load_model("llama-3.1-8b")
    layers = tuple(range(32))
    assert decode_kv_share(llama, layers, "bf16", 16_896.0) == 1.0
    assert attention_flops_share(llama, layers, 8192.0, True) == 1.0
    w = ServingWorkload(prompt_len=1000, output_len=2, concurrency=4)
    # a window longer than every context changes nothing either, exactly
    wide = replace(TINY, sliding_window=4096)
    assert estimate_serving(wide, ROUND, ServingLayout(), w) == estimate_serving(
        TINY, ROUND, ServingLayout(), w
    )


def test_prefill_of_a_window_block_reads_the_causal_window_mean() -> None:
    mistral = load_model("mistral-7b")  # window 4096 on every block
    # a prompt of 8192: (4096 x 4097 / 2 + 4096 x 4096) / 8192 = 3072.25 keys, not 4096
    assert prefill_keys(mistral, 0, 4096.0) == pytest.approx(3072.25, rel=REL)
    assert attention_flops_share(mistral, (0, 1), 4096.0, True) == pytest.approx(3072.25 / 4096)
    assert prefill_keys(mistral, 0, 1000.0) == 1000.0  # inside the window


def test_chunked_blocks_read_half_a_chunk_on_average_past_the_first() -> None:
    scout = model_from_config(LLAMA4_SCOUT)  # chunks of 8192 on three blocks of four
    assert decode_keys(scout, 0, 16_896.0) == pytest.approx(8193 / 2)
    assert decode_keys(scout, 0, 5000.0) == 5000.0 and decode_keys(scout, 3, 16_896.0) == 16_896.0


def test_deepseek_v32_reads_top_k_latents_and_every_indexer_key() -> None:
    v32 = model_from_config(DEEPSEEK_V32)
    # indexer key: 128 fp8 values + one fp32 scale = 132 bytes; MLA latent (512 + 64) x 2
    assert indexer_key_bytes_per_token(v32) == 132.0
    assert kv_bytes_per_token_per_layer(v32, "bf16") == 1152 + 132
    assert indexer_key_bytes_per_token(load_model("deepseek-v3")) == 0.0
    layers = tuple(range(61))
    # at 16,896 keys: 2,048 latents + 16,896 indexer keys over 16,896 x 1,284 bytes
    share = (2048 * 1152 + 16_896 * 132) / (16_896 * 1284)
    assert decode_kv_share(v32, layers, "bf16", 16_896.0) == pytest.approx(share, rel=REL)
    # decode FLOPs: absorbed 2 x 128 x (2 x 512 + 64) = 278,528 a key on 2,048 keys, indexer
    # 2 x 64 x 128 = 16,384 on all, over 278,528 x 16,896
    flops = (278_528 * 2048 + 16_384 * 16_896) / (278_528 * 16_896)
    assert attention_flops_share(v32, layers, 16_896.0, False) == pytest.approx(flops, rel=REL)


def test_gated_deltanet_blocks_cost_no_flops_per_key() -> None:
    next80 = model_from_config(QWEN3_NEXT)  # 12 softmax blocks of 48, 16 heads of 256
    f = _stage_flops(next80, tuple(range(48)), True)
    assert f.attention_per_key == 12 * 2 * 16 * (256 + 256)
