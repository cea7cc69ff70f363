"""Which widths a parallel degree splits evenly, and the three places that word it alike."""

from __future__ import annotations

import pytest

from explorer.divisibility import (
    kv_heads_split,
    uneven_cp_sequence,
    uneven_expert_width,
    uneven_experts,
    uneven_ffn_widths,
    uneven_heads,
)
from explorer.memory.checks import ffn_not_divisible, heads_not_divisible
from explorer.memory.serving import ServingLayout
from explorer.mesh import Candidate, Problem
from explorer.mesh.rules import tp_ffn, tp_heads, tp_kv_heads
from explorer.presets import load_cluster, load_model, model_ids
from explorer.serving.assumptions import ServingAssumptions
from explorer.serving.layouts import layout_problem
from explorer.specs import Layout, TrainingWorkload

WORKLOAD = TrainingWorkload(seq_len=4096, global_batch_size=64)


@pytest.mark.parametrize(
    ("model_id", "tp", "split"),
    [
        ("llama-3.1-70b", 8, "split"),  # 8 KV heads
        ("llama-3.1-70b", 16, "replicated"),
        ("qwen2.5-72b", 16, "replicated"),  # 8 KV heads
        ("qwen2.5-72b", 3, "uneven"),
        ("deepseek-v3", 16, "latent"),  # MLA: one latent, no KV heads
    ],
)
def test_kv_heads_are_split_replicated_or_uneven(model_id, tp, split):
    assert kv_heads_split(load_model(model_id), tp) == split


def test_query_heads_need_tp_to_divide_them():
    llama = load_model("llama-3.1-70b")  # 64 heads
    assert not uneven_heads(llama, 8) and uneven_heads(llama, 3)


def test_only_the_dense_and_shared_widths_split_over_tp():
    deepseek = load_model("deepseek-v3")  # dense 18432 in 3 layers, shared expert 2048
    assert uneven_ffn_widths(deepseek, 8) == ()
    assert uneven_ffn_widths(deepseek, 5) == (18432, 2048)
    mixtral = load_model("mixtral-8x7b")  # every layer MoE, no shared expert: no dense width
    assert uneven_ffn_widths(mixtral, 3) == ()
    assert uneven_expert_width(mixtral, 3) and not uneven_expert_width(mixtral, 2)


def test_experts_and_sequences_split_evenly_or_not():
    deepseek, llama = load_model("deepseek-v3"), load_model("llama-3.1-8b")  # 256 experts
    assert uneven_experts(deepseek, 3) and not uneven_experts(deepseek, 64)
    assert not uneven_experts(llama, 3)  # a dense model has no experts to split
    assert uneven_cp_sequence(8192, 3) and not uneven_cp_sequence(8192, 4)
    assert not uneven_cp_sequence(8191, 1)


@pytest.mark.parametrize("model_id", model_ids())
@pytest.mark.parametrize("tp", [2, 3, 4, 6, 8, 16])
def test_training_rules_training_warnings_and_serving_rules_agree_on_heads_and_ffn(model_id, tp):
    model = load_model(model_id)
    problem = Problem(
        model=model, cluster=load_cluster("hgx-h100", 2), workload=WORKLOAD, num_gpus=16
    )
    node = Candidate(tp=tp, pp=1, cp=1, dp=1)
    rejected = any(rule(problem, node) for rule in (tp_heads, tp_kv_heads))
    split = kv_heads_split(model, tp)
    # training rejects what serving replicates; both reject what neither can run
    assert rejected == (uneven_heads(model, tp) or split in ("replicated", "uneven"))
    warned = heads_not_divisible(model, Layout(tp=tp), WORKLOAD, 1, 8) is not None
    assert warned == rejected
    serving = layout_problem(
        model, load_cluster("hgx-h100", 2), ServingLayout(tp=tp), ServingAssumptions()
    )
    assert ("attention heads" in serving or "KV heads" in serving) == (
        uneven_heads(model, tp) or split == "uneven"
    )
    ffn = ffn_not_divisible(model, Layout(tp=tp), WORKLOAD, 1, 8)
    assert (tp_ffn(problem, node) is None) == (ffn is None or "expert" in ffn)
