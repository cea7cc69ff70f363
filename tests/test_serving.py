"""Serving latency and layouts: decode roofline by hand, bounds, rules with reasons, frontier."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from explorer.memory.serving import ServingLayout
from explorer.presets import load_gpu, load_model
from explorer.serving import (
    ParetoPoint,
    ServingAssumptions,
    estimate_serving,
    experts_touched,
    layout_problem,
    layout_warnings,
    mark_pareto,
    plan_serving,
    serving_answers,
    serving_layouts,
)
from explorer.specs import ClusterSpec, GpuSpec, ModelSpec, ServingWorkload

REL = 1e-9

LLAMA_70B = load_model("llama-3.1-70b")
DEEPSEEK_V3 = load_model("deepseek-v3")
MIXTRAL = load_model("mixtral-8x7b")
H100_NODE = ClusterSpec(gpu=load_gpu("h100-sxm"))
H200_TWO_NODES = ClusterSpec(gpu=load_gpu("h200"), num_nodes=2)
A = ServingAssumptions()

TINY = ModelSpec(
    name="tiny",
    num_hidden_layers=2,
    hidden_size=1024,
    num_attention_heads=8,
    num_key_value_heads=8,
    intermediate_size=4096,
    vocab_size=32_000,
)
ROUND_GPU = GpuSpec(
    name="round",
    memory_bytes=80 * 10**9,
    bf16_flops_per_s=1e15,
    hbm_bytes_per_s=1e12,
    scale_up_bytes_per_s=1e11,
)


def test_decode_roofline_of_a_tiny_model_matches_the_hand_count():
    workload = ServingWorkload(prompt_len=1000, output_len=2, concurrency=1)
    e = estimate_serving(TINY, ClusterSpec(gpu=ROUND_GPU), ServingLayout(), workload)
    # Weights read per step (bf16), embedding table not read:
    #   per block: attention 4 h^2 = 4,194,304; SwiGLU 3 h f = 12,582,912; 2 RMSNorms 2,048
    #   2 blocks 33,558,528 + LM head V h 32,768,000 + final norm 1,024 = 66,327,552 params
    # KV read: 1 sequence x 1001 keys (prompt + output / 2) x 2 blocks x 2 x 8 x 128 x 2 bytes
    # GEMM activations (one row, bf16 in and out): per block QKV 2 (h + 3 h), output 2 (h + h),
    # gate-up 2 (h + 2 f), down 2 (f + h) = 40,960; LM head 2 (h + V) = 66,048
    # norms and residuals 10 h and SwiGLU 3 f, 2 bytes: 45,056 a block (the fused ledger)
    weights = 66_327_552 * 2 + 2 * 40_960 + 66_048 + 2 * 45_056
    kv = 1001 * 8192  # at FlashMLA's 2,826 of 3,352 GB/s
    memory = weights / (0.8 * 1e12) + kv / (2826 / 3352 * 1e12)
    assert e.decode.memory_s == pytest.approx(memory, rel=REL)
    # FLOPs: GEMMs 2 x (4 h^2 + 3 h f) x 2 blocks + logits 2 h V on one row in a tile of at
    # least 64 rows (at most 0.8 / 64 of peak: no measured GEMMs, the generic ceiling);
    # scores and values 2 x 8 x 256 x 1001 x 2 blocks at FlashMLA's 660 of 989.4 TFLOPS
    gemms = 2 * (4_194_304 + 12_582_912) * 2 + 2 * 1024 * 32_000
    attention = 4096 * 1001 * 2
    least = gemms / (0.8 / 64 * 1e15) + attention / (660 / 989.4 * 1e15)
    assert e.decode.compute_s >= least
    assert e.decode.compute_s < memory
    assert e.decode.communication_s == 0.0
    assert e.decode.bound == "memory"
    assert e.decode_step_s == pytest.approx(memory, rel=REL)


@pytest.mark.parametrize(
    ("tokens", "expected"),
    [(0, 0.0), (1, 8.0), (2, 256 * (1 - (248 / 256) ** 2)), (10_000, 256.0)],
)
def test_experts_touched_grows_from_top_k_to_all_experts(tokens, expected):
    assert experts_touched(256, 8, tokens) == pytest.approx(expected, rel=1e-9)


def test_tensor_parallel_halves_the_decode_reads_and_pays_in_all_reduces():
    workload = ServingWorkload(concurrency=8)
    four, eight = (
        estimate_serving(LLAMA_70B, H100_NODE, ServingLayout(tp=tp), workload) for tp in (4, 8)
    )
    # the weights and KV halve; the norms' whole hidden state and the activations do not
    assert eight.decode.memory_s == pytest.approx(four.decode.memory_s / 2, rel=1e-2)
    assert eight.decode.memory_s > four.decode.memory_s / 2
    assert eight.decode.communication_s > four.decode.communication_s > 0


def test_prefill_is_compute_bound_and_decode_memory_bound_for_a_dense_70b():
    e = estimate_serving(LLAMA_70B, H100_NODE, ServingLayout(tp=8), ServingWorkload())
    assert e.prefill.bound == "compute"
    assert e.decode.bound == "memory"


def test_ttft_is_prompt_flops_over_the_replicas_achievable_peak_plus_communication():
    workload = ServingWorkload(prompt_len=2048, concurrency=1)
    e = estimate_serving(LLAMA_70B, H100_NODE, ServingLayout(tp=8), workload)
    compute_only = e.prefill.compute_s  # one chunk of 2048 tokens = the whole prompt
    # plus the memory-bound kernels between the GEMMs: 2048 tokens x 80 blocks x 2 bytes x
    # (10 h + 3 f / 8) = 14,827,520 bytes a token over 0.8 x 3.35e12 B/s
    elementwise = 2048 * 80 * 2 * (10 * 8192 + 3 * 28672 / 8) / (0.8 * 3.35e12)
    expected = compute_only + elementwise + e.prefill.communication_s
    assert e.ttft_s == pytest.approx(expected, rel=REL)


def test_pipeline_parallel_does_not_shorten_the_decode_step():
    workload = ServingWorkload(concurrency=8)
    tp4, tp4pp2 = (
        estimate_serving(LLAMA_70B, H100_NODE, ServingLayout(tp=4, pp=pp), workload)
        for pp in (1, 2)
    )
    assert tp4pp2.decode_step_s == pytest.approx(tp4.decode_step_s, rel=0.2)


VALID_16 = [
    lay for lay in serving_layouts(16) if not layout_problem(DEEPSEEK_V3, H200_TWO_NODES, lay, A)
]


@given(
    layout=st.sampled_from(VALID_16),
    concurrency=st.integers(min_value=1, max_value=2048),
    dtype=st.sampled_from(["bf16", "fp8", "int4"]),
    kv_dtype=st.sampled_from(["bf16", "fp8"]),
)
def test_decode_throughput_never_exceeds_the_memory_bandwidth_bound(
    layout, concurrency, dtype, kv_dtype
):
    workload = ServingWorkload(concurrency=concurrency, weights_dtype=dtype, kv_dtype=kv_dtype)
    for model in (DEEPSEEK_V3, LLAMA_70B):
        if model is LLAMA_70B and layout.ep > 1:
            layout = replace(layout, ep=1, replicas=layout.replicas * layout.ep)
        e = estimate_serving(model, H200_TWO_NODES, layout, workload)
        assert (e.tokens_per_s is None) is (not e.fits)
        if e.tokens_per_s is not None:
            assert e.tokens_per_s <= e.memory_bound_tokens_per_s


@given(concurrency=st.integers(min_value=1, max_value=246))  # 495 fit (max_concurrency)
def test_more_concurrency_means_more_tokens_per_s_and_a_longer_step(concurrency):
    # one more sequence never shortens the step; twice as many always serve more tokens/s
    # (one more can cost a tile of GEMM rows: 257 rows pad to 320, so not tokens/s +1)
    lay = ServingLayout(tp=8)
    low, high, double = (
        estimate_serving(LLAMA_70B, H100_NODE, lay, ServingWorkload(concurrency=c))
        for c in (concurrency, concurrency + 1, 2 * concurrency)
    )
    assert high.decode_step_s >= low.decode_step_s
    assert double.tokens_per_s > low.tokens_per_s


@pytest.mark.parametrize(
    ("model", "layout", "reason"),
    [
        (LLAMA_70B, ServingLayout(tp=3), "TP 3 does not divide the 64 attention heads"),
        (
            replace(LLAMA_70B, num_attention_heads=48, num_key_value_heads=12, head_dim=128),
            ServingLayout(tp=8),
            "TP 8 neither divides nor is a multiple of the 12 KV heads",
        ),
        (LLAMA_70B, ServingLayout(ep=2), "EP 2 needs an MoE model"),
        (MIXTRAL, ServingLayout(ep=3), "EP 3 does not divide the 8 routed experts"),
        (LLAMA_70B, ServingLayout(pp=81), "PP 81 exceeds the 80 blocks"),
        (LLAMA_70B, ServingLayout(tp=16), "the TP group of 16 GPUs crosses the 8-GPU NVLink"),
    ],
    ids=["heads", "kv-heads-uneven", "ep-dense", "ep-experts", "pp-layers", "tp-across-nodes"],
)
def test_invalid_layouts_are_rejected_with_a_reason_in_words(model, layout, reason):
    cluster = ClusterSpec(gpu=H100_NODE.gpu, num_nodes=11)
    assert reason in layout_problem(model, cluster, layout, A)


def test_tp_across_nodes_can_be_allowed_and_is_then_a_warning():
    allow = ServingAssumptions(allow_tp_across_nodes=True)
    layout = ServingLayout(tp=16)
    assert layout_problem(DEEPSEEK_V3, H200_TWO_NODES, layout, allow) == ""
    warnings = layout_warnings(DEEPSEEK_V3, H200_TWO_NODES, layout)
    assert any("TP 16 crosses nodes" in w for w in warnings)


@pytest.mark.parametrize(
    ("model", "layout", "warning"),
    [
        (LLAMA_70B, ServingLayout(tp=16), "8 KV heads over TP 16: each stored 2x"),
        (DEEPSEEK_V3, ServingLayout(tp=8), "latent KV cache is replicated on all 8 TP ranks"),
        (DEEPSEEK_V3, ServingLayout(ep=16), "EP 16 all-to-all crosses nodes"),
        (DEEPSEEK_V3, ServingLayout(pp=2), "61 blocks on PP 2: uneven"),
    ],
)
def test_layouts_that_run_at_a_cost_carry_warnings(model, layout, warning):
    assert any(warning in w for w in layout_warnings(model, H200_TWO_NODES, layout))


def test_every_factorisation_of_16_gpus_is_enumerated_once():
    layouts = serving_layouts(16)
    assert len(layouts) == len(set(layouts)) == 35  # 4 factors of 2^4: C(4 + 3, 3)
    assert all(lay.world_size == 16 for lay in layouts)


def test_deepseek_v3_on_two_h200_nodes_weighs_expert_against_tensor_parallel():
    plan = plan_serving(DEEPSEEK_V3, H200_TWO_NODES, 16, ServingWorkload(weights_dtype="fp8"))
    fitting = {e.layout for e in plan.layouts if e.fits}
    assert ServingLayout(ep=16) in fitting
    assert ServingLayout(tp=8, pp=2) in fitting
    assert ServingLayout(tp=8, replicas=2) in fitting  # 671B in fp8 fits one 8 x 141 GB node
    assert (ServingLayout(tp=16), "the TP group of 16 GPUs crosses the 8-GPU NVLink domain") in (
        plan.rejected
    )
    not_fitting = [e for e in plan.layouts if not e.fits]
    assert not_fitting and all(e.reason for e in not_fitting)


def _point(itl: float, rate: float) -> ParetoPoint:
    return ParetoPoint("x", 1, 1, 1, 1, 1, itl, 0.0, rate, rate, "memory", False)


def test_pareto_marks_exactly_the_points_nobody_beats_on_both_axes():
    points = [_point(1, 10), _point(2, 5), _point(2, 20), _point(3, 15), _point(4, 30)]
    marked = {(p.itl_s, p.tokens_per_s_per_gpu): p.pareto for p in mark_pareto(points)}
    assert marked == {(1, 10): True, (2, 5): False, (2, 20): True, (3, 15): False, (4, 30): True}


def test_plan_frontier_is_non_dominated():
    plan = plan_serving(LLAMA_70B, H100_NODE, 8, ServingWorkload())
    front = [p for p in plan.pareto if p.pareto]
    assert front
    for p in front:
        assert not any(
            q.itl_s < p.itl_s and q.tokens_per_s_per_gpu > p.tokens_per_s_per_gpu
            for q in plan.pareto
        )


def test_answers_name_the_smallest_fitting_replica_and_the_bounds():
    plan = plan_serving(LLAMA_70B, H100_NODE, 8, ServingWorkload())
    answers = serving_answers(plan)
    assert answers[0].startswith("The smallest replica that fits is 4 GPUs")
    assert any(a.startswith("Prefill is bound by") for a in answers)
    assert any(a.startswith("TP 4 to 8") for a in answers)


def test_a_plan_larger_than_the_cluster_is_refused():
    with pytest.raises(ValueError, match="16 GPUs requested but the cluster has 8"):
        plan_serving(LLAMA_70B, H100_NODE, 16, ServingWorkload())


@pytest.mark.parametrize(
    ("field", "value"),
    [("hbm_efficiency", 0.0), ("prefill_compute_efficiency", 1.5), ("comm_overlap", -0.1)],
)
def test_bad_efficiencies_name_the_field(field, value):
    with pytest.raises(ValueError, match=field):
        ServingAssumptions(**{field: value})
