"""Helix (arXiv:2507.07120): KV-parallel attention, then TP over the same GPUs, for decode."""

from __future__ import annotations

import pytest

from explorer.memory.serving import ServingLayout
from explorer.presets import load_cluster, load_model
from explorer.serving.assumptions import ServingAssumptions
from explorer.serving.helix import helix_decode_step, helix_points
from explorer.serving.latency import replica_latency
from explorer.specs import ServingWorkload

A = ServingAssumptions()
NVL72 = load_cluster("gb200-nvl72", 1)


@pytest.mark.parametrize(
    ("model_id", "tp", "prompt"),
    [("llama-3.1-405b", 8, 8192), ("llama-3.1-70b", 4, 131072), ("qwen3-235b-a22b", 8, 32768)],
)
def test_kv_parallel_degree_1_is_todays_tp_decode(model_id, tp, prompt):
    model, layout = load_model(model_id), ServingLayout(tp=tp)
    w = ServingWorkload(prompt_len=prompt, output_len=512, concurrency=16, weights_dtype="fp8")
    today = replica_latency(model, NVL72, layout, w, A)
    helix = helix_decode_step(model, NVL72, layout, 1, w, A)
    assert helix.token_latency_s == pytest.approx(today.decode_step_s, rel=1e-12)
    assert helix.roofline.communication_s == pytest.approx(today.decode.communication_s, rel=1e-12)


def test_at_a_million_tokens_helix_beats_tp_over_the_same_gpus():
    # Helix sec. 2: Llama-3.1-405B has 8 KV heads, so TP 64 duplicates the KV cache 8 times and
    # every GPU still reads 1/8 of it; TPA 8 x KVP 8 reads 1/64. The KV read dominates at 1M.
    model = load_model("llama-3.1-405b")
    w = ServingWorkload(prompt_len=1_000_000, output_len=512, concurrency=8,
                        weights_dtype="fp8", kv_dtype="fp8")  # fmt: skip
    tp64 = replica_latency(model, NVL72, ServingLayout(tp=64), w, A).decode_step_s
    helix = helix_decode_step(model, NVL72, ServingLayout(tp=8), 8, w, A)
    assert helix.token_latency_s < tp64 / 1.5
    kvp2 = helix_decode_step(model, NVL72, ServingLayout(tp=8), 2, w, A)
    assert helix.roofline.memory_s < kvp2.roofline.memory_s  # KV reads fall with KVP
    assert helix.roofline.communication_s > kvp2.roofline.communication_s  # all-reduce over N


def test_helix_refuses_kvp_below_one_and_pipelines():
    model, w = load_model("llama-3.1-70b"), ServingWorkload()
    with pytest.raises(ValueError, match="kvp must be at least 1"):
        helix_decode_step(model, NVL72, ServingLayout(tp=4), 0, w, A)
    with pytest.raises(ValueError, match="one pipeline stage"):
        helix_decode_step(model, NVL72, ServingLayout(tp=4, pp=2), 2, w, A)


def test_the_latency_users_trade_off_puts_helix_ahead_of_tp_and_kv_parallel_alone():
    # Helix fig. 1 / sec. 4, in kind: Llama-3.1-405B (fp8) at 1M tokens on 64 GPUs. TP 64 holds
    # the KV of 8 heads 8 times over and fits few users; KV parallel alone (TPA 1) replicates
    # the attention weights 64 times; TPA 8 x KVP 8 fits the most users at the least latency.
    model = load_model("llama-3.1-405b")
    w = ServingWorkload(prompt_len=1_000_000, output_len=512, weights_dtype="fp8", kv_dtype="fp8")
    points = helix_points(model, NVL72, 64, w, (1, 4, 16, 32, 64), A)

    def most_users(kvp: int) -> float:
        return max(p.decode_seqs for p in points if p.kvp == kvp and p.fits)

    def latency(kvp: int, users: int) -> float:
        (p,) = [p for p in points if p.kvp == kvp and p.decode_seqs == users]
        return p.token_latency_s

    assert most_users(8) >= 4 * most_users(1)
    assert latency(8, 4) < latency(1, 4) and latency(8, 4) < latency(64, 4)
    assert latency(8, 4) == min(latency(k, 4) for k in (1, 2, 4, 8, 16, 32, 64))


def test_beyond_the_window_a_helix_step_reads_the_same_bytes_at_any_context():
    from explorer.presets import load_gpu
    from explorer.specs import ClusterSpec

    mistral = load_model("mistral-7b")  # a window of 4096 on every block
    node = ClusterSpec(gpu=load_gpu("h100-sxm"))
    steps = [
        helix_decode_step(
            mistral, node, ServingLayout(tp=4), 2,
            ServingWorkload(prompt_len=prompt, output_len=1024, concurrency=8),
            ServingAssumptions(), 8,
        ).roofline
        for prompt in (16_384, 65_536)
    ]  # fmt: skip
    # each block reads its 4096-key window, so KV parallelism takes half of those bytes off
    assert steps[0].memory_s == pytest.approx(steps[1].memory_s, rel=1e-12)
    assert steps[0].compute_s == pytest.approx(steps[1].compute_s, rel=1e-12)
    assert steps[0].memory_s > 0
