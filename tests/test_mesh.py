"""Candidate enumeration and the named validity rules: each rule has a layout that breaks it."""

from __future__ import annotations

import dataclasses

import pytest

from explorer.mesh import (
    RULES,
    Candidate,
    Problem,
    SearchSpace,
    check,
    divisors,
    enumerate_layouts,
    from_layout,
    to_layout,
)
from explorer.presets import load_cluster, load_model
from explorer.specs import ClusterSpec, GpuSpec, Layout, ModelSpec, TrainingWorkload

GPU = GpuSpec(
    name="test-80g",
    memory_bytes=80 * 10**9,
    bf16_flops_per_s=1e15,
    hbm_bytes_per_s=3e12,
    scale_up_bytes_per_s=400e9,
)
DENSE = ModelSpec(
    name="dense",
    num_hidden_layers=32,
    hidden_size=4096,
    num_attention_heads=32,
    num_key_value_heads=8,
    intermediate_size=14336,
    vocab_size=32000,
)
MOE = dataclasses.replace(
    DENSE,
    name="moe",
    n_routed_experts=64,
    num_experts_per_tok=4,
    moe_intermediate_size=1408,
    first_k_dense_replace=1,
)


def problem(model=DENSE, gpus=64, seq=4096, gbs=512, **space) -> Problem:
    cluster = ClusterSpec(gpu=GPU, gpus_per_node=8, num_nodes=max(1, gpus // 8))
    workload = TrainingWorkload(seq_len=seq, global_batch_size=gbs)
    return Problem(
        model=model, cluster=cluster, workload=workload, num_gpus=gpus, space=SearchSpace(**space)
    )


def full(tp=1, pp=1, cp=1, dp=64, ep=1, etp=1, mbs=1, schedule="1f1b", virtual=1, zero=1,
         recompute="none") -> Candidate:  # fmt: skip
    return Candidate(dp=dp, tp=tp, pp=pp, cp=cp, ep=ep, etp=etp, zero=zero, mbs=mbs,
                     recompute=recompute, schedule=schedule, virtual=virtual)  # fmt: skip


def test_divisors_are_sorted_and_complete():
    assert divisors(12) == (1, 2, 3, 4, 6, 12)
    assert divisors(1) == (1,)
    assert divisors(2048) == tuple(2**k for k in range(12))


def test_a_plain_data_parallel_layout_breaks_no_rule():
    assert check(problem(), full()) == []


# Each case: (problem kwargs, candidate, the kind that must be reported).
BROKEN = [
    pytest.param({}, full(dp=32), "world-size", id="world-size"),
    pytest.param({}, full(tp=16, dp=4), "tp-domain", id="tp-domain"),
    pytest.param(
        {"model": dataclasses.replace(DENSE, num_key_value_heads=32), "gpus": 48},
        full(tp=6, dp=8),
        "heads",
        id="heads",
    ),
    pytest.param({}, full(tp=16, dp=4), "kv-heads", id="kv-heads-fewer-than-tp"),
    pytest.param(
        {"model": dataclasses.replace(DENSE, hidden_size=4100, head_dim=128)},
        full(tp=8, dp=8),
        "hidden",
        id="hidden",
    ),
    pytest.param(
        {"model": dataclasses.replace(DENSE, intermediate_size=14340)},
        full(tp=8, dp=8),
        "ffn",
        id="ffn",
    ),
    pytest.param({}, full(pp=64, dp=1), "layers", id="layers-more-stages-than-layers"),
    pytest.param(
        {"model": dataclasses.replace(DENSE, num_hidden_layers=40)},
        full(pp=16, dp=4),
        "layers",
        id="layers-too-uneven",
    ),
    pytest.param({"seq": 4098}, full(cp=2, dp=32), "sequence", id="sequence-vs-2cp"),
    pytest.param({"seq": 4100}, full(tp=8, dp=8), "sequence", id="sequence-vs-tp-sp"),
    pytest.param({}, full(ep=8), "ep-dense", id="ep-on-dense"),
    pytest.param(
        {"model": dataclasses.replace(MOE, n_routed_experts=48)},
        full(ep=32),
        "experts",
        id="experts-vs-ep",
    ),
    pytest.param({"model": MOE}, full(tp=1, pp=2, dp=32, ep=64), "ep-fold", id="ep-fold"),
    pytest.param(
        {"model": dataclasses.replace(MOE, moe_intermediate_size=1410)},
        full(tp=4, dp=16, etp=4),
        "expert-ffn",
        id="expert-ffn-vs-etp",
    ),
    pytest.param({}, full(mbs=3), "batch", id="batch-vs-dp-mbs"),
    pytest.param(
        {},
        full(pp=4, dp=16, schedule="interleaved", virtual=2, mbs=16),
        "schedule",
        id="interleaved-needs-m-at-least-p",
    ),
    pytest.param(
        {},
        full(pp=4, dp=16, schedule="dualpipe", mbs=8),
        "schedule",
        id="dualpipe-needs-m-at-least-2p",
    ),
    pytest.param(
        {"model": dataclasses.replace(DENSE, num_hidden_layers=30), "gpus": 48},
        full(pp=3, dp=16, schedule="dualpipe"),
        "schedule",
        id="dualpipe-needs-even-p",
    ),
    pytest.param({"gpus": 8}, full(tp=8, dp=1, zero=2), "zero-dp", id="zero-without-dp"),
]


@pytest.mark.parametrize(("kwargs", "candidate", "kind"), BROKEN)
def test_each_rule_names_the_layout_that_breaks_it(kwargs, candidate, kind):
    p = problem(**kwargs)
    kinds = dict(check(p, candidate))
    assert kind in kinds, f"expected {kind}, got {kinds}"
    reason = kinds[kind]
    assert reason and reason[0].isalnum() and "\n" not in reason


def test_every_rule_has_a_breaking_case():
    tested = {param.values[2] for param in BROKEN}
    assert tested == set(RULES)


def test_heads_rule_uses_the_query_heads():
    p = problem(
        model=dataclasses.replace(
            DENSE, num_attention_heads=24, num_key_value_heads=24, hidden_size=3072
        )
    )
    assert RULES["heads"](p, full(tp=16, dp=4)) == "24 attention heads do not split over TP 16"


def test_tp_across_the_domain_is_allowed_when_asked():
    p = problem(tp_across_domain=True, model=dataclasses.replace(DENSE, num_key_value_heads=32))
    assert check(p, full(tp=16, dp=4)) == []


def test_mla_has_no_kv_heads_to_split():
    model = load_model("deepseek-v3")
    p = Problem(
        model=model,
        cluster=load_cluster("h800-deepseek", 256),
        workload=TrainingWorkload(seq_len=4096, global_batch_size=15360),
        num_gpus=2048,
    )
    assert RULES["kv-heads"](p, full(tp=8, dp=256)) is None


@pytest.mark.parametrize(
    ("model_id", "layers"), [("llama-3.1-405b", 126), ("deepseek-v3", 61)], ids=str
)
def test_published_uneven_pipelines_on_16_stages_are_allowed(model_id, layers):
    model = load_model(model_id)
    assert model.num_hidden_layers == layers
    p = problem(model=model, gpus=64)
    assert RULES["layers"](p, full(pp=16, dp=4)) is None


def test_stage_imbalance_tolerance_is_a_setting():
    model = dataclasses.replace(DENSE, num_hidden_layers=40)  # 40 on 16 leaves 17% idle
    assert RULES["layers"](problem(model=model, max_stage_idle=0.2), full(pp=16, dp=4)) is None


DEEPSEEK_V3 = Layout(dp=128, tp=1, pp=16, ep=64, zero=1, schedule="dualpipe")
"""PP16, EP64, ZeRO-1, no TP on 2048 H800s (DeepSeek-V3 report, arXiv:2412.19437, sec. 3.2)."""


def deepseek_problem() -> Problem:
    return Problem(
        model=load_model("deepseek-v3"),
        cluster=load_cluster("h800-deepseek", 256),
        workload=TrainingWorkload(seq_len=4096, global_batch_size=15360, precision="fp8-mixed"),
        num_gpus=2048,
    )


def test_the_deepseek_v3_layout_breaks_no_rule():
    assert check(deepseek_problem(), from_layout(DEEPSEEK_V3)) == []


def test_the_deepseek_v3_layout_is_enumerated_as_valid():
    p = dataclasses.replace(
        deepseek_problem(),
        space=SearchSpace(zero_stages=(1,), micro_batch_sizes=(1,), recomputes=("none",)),
    )
    valid = set(enumerate_layouts(p).valid)
    assert from_layout(DEEPSEEK_V3) in valid


def test_layout_round_trips_through_a_candidate():
    assert to_layout(from_layout(DEEPSEEK_V3)) == DEEPSEEK_V3


@pytest.fixture(scope="module")
def moe_enumeration():
    p = problem(model=MOE, gpus=64, gbs=256)
    return p, enumerate_layouts(p)


def test_every_valid_candidate_passes_every_rule(moe_enumeration):
    p, e = moe_enumeration
    assert e.valid
    assert all(check(p, c) == [] for c in e.valid)


def test_every_rejected_row_has_a_reason_and_a_count(moe_enumeration):
    _, e = moe_enumeration
    assert e.rejected
    assert all(r.reason and r.kind and r.num_layouts >= 1 for r in e.rejected)


def test_considered_counts_each_layout_once(moe_enumeration):
    p, e = moe_enumeration
    space = p.space
    assert len(set(e.valid)) == len(e.valid)
    assert e.considered == len(e.valid) + sum(r.num_layouts for r in e.rejected)
    # Rejections from the mesh level stand for every knob below them.
    knobs = len(space.zero_stages) * len(space.recomputes) * len(space.micro_batch_sizes)
    mesh_level = [r for r in e.rejected if r.candidate.ep is None]
    assert all(r.num_layouts % knobs == 0 for r in mesh_level)


def test_every_valid_candidate_uses_all_gpus(moe_enumeration):
    p, e = moe_enumeration
    assert all(c.dp * c.tp * c.pp * c.cp == p.num_gpus for c in e.valid)


def test_without_a_pipeline_only_1f1b_is_enumerated(moe_enumeration):
    _, e = moe_enumeration
    assert {(c.schedule, c.virtual) for c in e.valid if c.pp == 1} == {("1f1b", 1)}


def test_interleaving_is_enumerated_from_two_virtual_stages(moe_enumeration):
    _, e = moe_enumeration
    virtual = {c.virtual for c in e.valid if c.schedule == "interleaved"}
    assert virtual and min(virtual) == 2


@pytest.mark.parametrize(
    "kwargs",
    [
        {"zero_stages": ()},
        {"zero_stages": (4,)},
        {"schedules": ("pipedream",)},
        {"recomputes": ("some",)},
        {"micro_batch_sizes": (0,)},
        {"max_virtual": 0},
        {"max_stage_idle": 1.0},
        {"ep_values": ()},
    ],
    ids=str,
)
def test_a_bad_search_space_is_refused_in_one_sentence(kwargs):
    with pytest.raises(ValueError, match=r"^[a-z_]+ "):
        SearchSpace(**kwargs)


def test_more_gpus_than_the_cluster_is_refused():
    with pytest.raises(ValueError, match="number of GPUs"):
        Problem(
            model=DENSE,
            cluster=ClusterSpec(gpu=GPU, num_nodes=1),
            workload=TrainingWorkload(),
            num_gpus=16,
        )
