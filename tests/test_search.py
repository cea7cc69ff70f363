"""The mesh search: hand-checkable winners, exact rows, sound pruning, published layouts."""

from __future__ import annotations

import dataclasses
import math
import random

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from explorer.calibration import dgx_a100, gpt
from explorer.estimate import DEFAULT_ESTIMATE_ASSUMPTIONS, estimate
from explorer.mesh import Candidate, Problem, SearchSpace, check, enumerate_layouts, to_layout
from explorer.presets import load_cluster, load_gpu, load_model
from explorer.report.assumptions import with_overrides
from explorer.scenario import DEEPSEEK_V3
from explorer.scenario.resolve import resolve_cluster, resolve_model
from explorer.schedules import StageTimes, build_schedule, simulate
from explorer.search import compare, explain, search
from explorer.search.bounds import Bounds
from explorer.search.floor import MemoryFloor
from explorer.search.rows import TIME_COLUMNS, estimate_row
from explorer.search.shapes import arrival_bound_s
from explorer.specs import SCHEDULES, ClusterSpec, ModelSpec, TrainingWorkload

NEAR_TOP = 0.82
"""A published layout ranks "near the top" when its tokens/s is within 18% of the best's.
Loosened twice by model changes, not by the runs: 15% before the published A100 all-reduce
sweep priced the 18.4B row's TP8 all-reduces of 100 MB at ~170 GB/s busbw instead of 240
(its ratio 0.866 -> 0.848), 16% before the kernel model anchored A100 GEMMs on a 2025
measurement and timed each GEMM at its shape (0.848 -> 0.830). Open question for the next
change: which layout the search prefers for 18.4B, and whether Megatron's 2021 stack could
have run it."""
SUM_TOLERANCE = 1e-9

SIMULATED = dataclasses.replace(DEFAULT_ESTIMATE_ASSUMPTIONS, pipeline_model="simulate")
"""Every pipeline timed by the simulator (the closed forms' bounds do not apply)."""
PYTORCH = dataclasses.replace(
    DEFAULT_ESTIMATE_ASSUMPTIONS,
    memory=dataclasses.replace(DEFAULT_ESTIMATE_ASSUMPTIONS.memory, framework="pytorch"),
)
"""PyTorch's memory behaviours: no persistent gradient buffer (gradients appear with the
second micro-batch), FSDP2 keeps no 16-bit shard."""
SM_SHARE = dataclasses.replace(
    DEFAULT_ESTIMATE_ASSUMPTIONS,
    compute=dataclasses.replace(DEFAULT_ESTIMATE_ASSUMPTIONS.compute, comm_sm_share=20 / 132),
)
"""DualPipe with EP computes on the SMs its all-to-alls leave (DeepSeek-V3: 112 of 132)."""


TINY = ModelSpec(
    name="gpt-350m",
    num_hidden_layers=24,
    hidden_size=1024,
    num_attention_heads=16,
    intermediate_size=4096,
    ffn_kind="gelu",
    vocab_size=51200,
    norm_kind="layernorm",
)
SLOW_FABRIC = ClusterSpec(
    gpu=load_gpu("h100-sxm"), gpus_per_node=8, num_nodes=4, scale_out_bytes_per_s=2e9
)


def deepseek_v3_problem(space: SearchSpace | None = None) -> Problem:
    """DeepSeek-V3 on 2,048 H800s, 4K tokens, 15,360 sequences, FP8 (the report's run)."""
    return Problem(
        model=load_model("deepseek-v3"),
        cluster=load_cluster("h800-deepseek", 256),
        workload=TrainingWorkload(seq_len=4096, global_batch_size=15360, precision="fp8-mixed"),
        num_gpus=2048,
        space=space or SearchSpace(),
    )


@pytest.fixture(scope="module")
def llama70b_result():
    """Llama 3.1 70B on 256 H100s: a mid-size search most tests read."""
    workload = TrainingWorkload(seq_len=8192, global_batch_size=512)
    return search(load_model("llama-3.1-70b"), load_cluster("hgx-h100", 32), workload)


def test_pure_data_parallel_wins_for_a_model_that_fits_one_gpu_on_a_slow_fabric():
    result = search(TINY, SLOW_FABRIC, TrainingWorkload(seq_len=2048, global_batch_size=256))
    best = result.layouts.iloc[0]
    assert (best.tp, best.pp, best.cp, best.dp) == (1, 1, 1, 32)


def test_tp_never_leaves_the_node_in_the_top_rows_when_the_fabric_is_slow():
    space = SearchSpace(tp_across_domain=True)
    workload = TrainingWorkload(seq_len=4096, global_batch_size=512)
    result = search(load_model("llama-3.1-8b"), SLOW_FABRIC, workload, space=space, ranked=10)
    assert len(result.layouts) == 10
    assert (SLOW_FABRIC.domain_size % result.layouts["tp"] == 0).all()


def test_every_ranked_layout_fits(llama70b_result):
    layouts = llama70b_result.layouts
    assert len(layouts) > 0
    assert (layouts["peak_bytes"] <= layouts["gpu_bytes"]).all()
    assert (layouts["spare_bytes"] >= 0).all()


def test_every_rejected_row_has_a_kind_a_reason_and_a_size(llama70b_result):
    rejected = llama70b_result.rejected
    assert len(rejected) > 0
    assert rejected["reason"].map(lambda r: isinstance(r, str) and len(r) > 10).all()
    assert (rejected["num_layouts"] >= 1).all()
    assert {"memory", "tp-domain", "layers", "slower"} <= set(rejected["kind"].astype(str))


def test_rejected_layouts_filter_by_kind(llama70b_result):
    rejected = llama70b_result.rejected
    memory = rejected[rejected["kind"] == "memory"]
    assert len(memory) > 0 and set(memory["kind"].astype(str)) == {"memory"}


def test_ranking_is_monotone_in_step_time_ties_broken_by_spare_memory(llama70b_result):
    layouts = llama70b_result.layouts
    pairs = zip(layouts.iloc[:-1].itertuples(), layouts.iloc[1:].itertuples(), strict=True)
    for a, b in pairs:
        assert a.step_time_s <= b.step_time_s
        if a.step_time_s == b.step_time_s:
            assert a.spare_bytes >= b.spare_bytes


def test_step_components_are_positive_and_sum_to_the_step(llama70b_result):
    layouts = llama70b_result.layouts
    assert (layouts[list(TIME_COLUMNS)] >= 0).all().all()
    total = layouts[list(TIME_COLUMNS)].sum(axis=1)
    assert total.to_numpy() == pytest.approx(layouts["step_time_s"].to_numpy(), rel=SUM_TOLERANCE)


def test_each_row_agrees_exactly_with_a_single_estimate(llama70b_result):
    p = llama70b_result.problem
    for (_, row), e in zip(
        llama70b_result.layouts.iterrows(), llama70b_result.estimates, strict=True
    ):
        alone = estimate(p.model, p.cluster, e.layout, p.workload)
        expected = estimate_row(alone)
        assert {k: row[k] for k in expected} == expected


def test_evaluated_counts_every_layout_of_the_space_once(llama70b_result):
    assert llama70b_result.evaluated == enumerate_layouts(llama70b_result.problem).considered


def _ranked_keys(layouts: pd.DataFrame) -> list[tuple]:
    return list(layouts[["tp", "pp", "dp", "cp", "zero", "mbs", "recompute", "schedule",
                         "virtual", "step_time_s"]].itertuples(index=False))  # fmt: skip


@pytest.mark.parametrize("assumptions", [DEFAULT_ESTIMATE_ASSUMPTIONS, SIMULATED],
                         ids=["closed-form", "simulated"])  # fmt: skip
def test_the_pruned_top_equals_an_exhaustive_search(assumptions):
    workload = TrainingWorkload(seq_len=2048, global_batch_size=128)
    space = SearchSpace(micro_batch_sizes=(1, 2), max_virtual=2)
    model = load_model("llama-3.1-8b")
    cluster = dgx_a100(16)
    kwargs = {"space": space, "assumptions": assumptions}
    pruned = search(model, cluster, workload, ranked=12, **kwargs)
    full = search(model, cluster, workload, ranked=None, **kwargs)
    assert full.estimated > pruned.estimated
    assert _ranked_keys(pruned.layouts) == _ranked_keys(full.layouts.head(12))
    assert full.evaluated == pruned.evaluated


BOUND_CASES = [
    pytest.param("llama-3.1-70b", "hgx-h100", 256, 8192, 512, id="llama-70b"),
    pytest.param("mixtral-8x7b", "hgx-h100", 64, 4096, 256, id="mixtral-8x7b"),
    pytest.param("deepseek-v3", "h800-deepseek", 512, 4096, 1920, id="deepseek-v3"),
]


@pytest.mark.parametrize(
    "assumptions",
    [DEFAULT_ESTIMATE_ASSUMPTIONS, SIMULATED, PYTORCH, SM_SHARE],
    ids=["closed-form", "simulated", "pytorch", "sm-share"],
)
@pytest.mark.parametrize(("model_id", "cluster_id", "gpus", "seq", "gbs"), BOUND_CASES)
def test_bounds_never_exceed_the_estimate_on_sampled_layouts(
    model_id, cluster_id, gpus, seq, gbs, assumptions
):
    p = Problem(
        model=load_model(model_id),
        cluster=load_cluster(cluster_id, gpus // 8),
        workload=TrainingWorkload(seq_len=seq, global_batch_size=gbs),
        num_gpus=gpus,
    )
    _check_bounds_on_sampled_layouts(p, assumptions)


def test_bounds_never_exceed_the_estimate_with_expert_tensor_parallelism():
    # ETP 2 adds the expert-TP all-gathers and reduce-scatters to the collectives.
    p = Problem(
        model=load_model("mixtral-8x7b"),
        cluster=load_cluster("hgx-h100", 8),
        workload=TrainingWorkload(seq_len=4096, global_batch_size=256),
        num_gpus=64,
        space=SearchSpace(etp_values=(2,)),
    )
    _check_bounds_on_sampled_layouts(p, DEFAULT_ESTIMATE_ASSUMPTIONS)


def test_bounds_never_exceed_the_estimate_when_dualpipe_computes_on_fewer_sms():
    # DualPipe with EP computes on the SMs its all-to-alls leave: slower compute, wider
    # windows. Every tier must stay below the estimate for those layouts (and for the others,
    # which the widened windows also bound).
    p = deepseek_v3_problem(SearchSpace(micro_batch_sizes=(1,), zero_stages=(1,)))
    dualpipe = [c for c in enumerate_layouts(p).valid if c.schedule == "dualpipe" and c.ep > 1]
    assert len(dualpipe) > 40
    _check_bounds_on_sampled_layouts(p, SM_SHARE, dualpipe)
    _check_bounds_on_sampled_layouts(p, SM_SHARE)


def test_bounds_never_exceed_the_estimate_with_nvfp4_and_bf16_end_blocks():
    # NVFP4 on B200 with the first two and last eight blocks in BF16: the bounds take the
    # NVFP4 blocks (the cheaper), the estimate every stage's own mix
    work = TrainingWorkload(seq_len=8192, global_batch_size=512, precision="nvfp4-mixed",
                            bf16_layers_at_start=2, bf16_layers_at_end=8)  # fmt: skip
    p = Problem(model=load_model("llama-3.1-70b"), cluster=load_cluster("dgx-b200", 8),
                workload=work, num_gpus=64)  # fmt: skip
    _check_bounds_on_sampled_layouts(p, DEFAULT_ESTIMATE_ASSUMPTIONS)


def _check_bounds_on_sampled_layouts(
    p: Problem, assumptions, candidates: list[Candidate] | None = None
) -> None:
    floor = MemoryFloor(p, assumptions)
    bounds = Bounds(p, assumptions, floor)
    pool = enumerate_layouts(p).valid if candidates is None else candidates
    fitting = 0
    for seen, c in enumerate(random.Random(7).sample(pool, min(len(pool), 200))):
        if seen >= 40 and fitting >= 5:  # 40 layouts, more until 5 fit (PyTorch PP needs more)
            break
        e = estimate(p.model, p.cluster, to_layout(c), p.workload, assumptions)
        assert floor.states_bytes(c) <= e.memory.peak_bytes
        acts = floor._activations(c, (c.schedule, c.virtual), c.recompute)
        assert floor._first(c, (c.schedule, c.virtual), c.zero, acts) <= e.memory.peak_bytes
        assert floor.layout_bytes(c) <= e.memory.peak_bytes  # the ZeRO level's rule
        if not e.fits:
            continue
        assert c.schedule and c.virtual and c.recompute and c.zero is not None
        assert floor.least_zero(c, (c.schedule, c.virtual), c.recompute) <= c.zero
        open_zero = c._replace(zero=None)
        tiers = [bounds.leaf_s(c), bounds.zero_s(c), bounds.pipeline_s(open_zero)]
        tiers += [bounds.node_s(open_zero), bounds.node_s(c._replace(recompute=None,
                  schedule=None, virtual=None, zero=None), comm=False)]  # fmt: skip
        tiers.append(bounds.degrees_s(c._replace(mbs=None, recompute=None, schedule=None,
                                                 virtual=None, zero=None)))  # fmt: skip
        assert max(tiers) <= e.step_time_s
        fitting += 1
    assert fitting >= 5


@pytest.mark.parametrize(("framework", "gbs", "held"), [("megatron", 1920, True),
                         ("pytorch", 1920, True), ("pytorch", 128, False)])  # fmt: skip
def test_the_memory_floor_counts_gradients_where_the_backward_start_holds_them(
    framework, gbs, held
):
    # DeepSeek-V3, TP1 PP32 DP16 EP4 ZeRO-1 on 512 H800s: 23 GB of fp32 gradients on the fullest
    # rank. Megatron's buffer holds them from the start; PyTorch only once a second micro-batch
    # has accumulated (128 sequences over DP 16 at micro-batch 8 is one micro-batch).
    a = dataclasses.replace(DEFAULT_ESTIMATE_ASSUMPTIONS, memory=dataclasses.replace(
        DEFAULT_ESTIMATE_ASSUMPTIONS.memory, framework=framework))  # fmt: skip
    p = Problem(
        model=load_model("deepseek-v3"),
        cluster=load_cluster("h800-deepseek", 64),
        workload=TrainingWorkload(seq_len=4096, global_batch_size=gbs),
        num_gpus=512,
    )
    c = Candidate(tp=1, pp=32, cp=1, dp=16, ep=4, etp=1, mbs=8, recompute="full",
                  schedule="1f1b", virtual=1, zero=1)  # fmt: skip
    floor = MemoryFloor(p, a)
    acts = floor._activations(c, ("1f1b", 1), "full")
    with_grads = floor._first(c, ("1f1b", 1), 1, acts) - floor._fixed(c)
    ranks = floor._weights(c, 1, False, 1)
    assert max(g for _, g in ranks) > 20e9
    everything = max(w + g + a for (w, g), a in zip(ranks, acts, strict=True))
    assert (with_grads >= everything) is held
    memory = estimate(p.model, p.cluster, to_layout(c), p.workload, a).memory
    assert with_grads + floor._fixed(c) <= memory.peak_bytes


@pytest.mark.parametrize(("model_id", "cluster_id", "gpus", "seq", "gbs"), BOUND_CASES)
def test_a_pipeline_node_bounded_by_its_parent_gets_its_own_bound(
    model_id, cluster_id, gpus, seq, gbs
):
    # Bounds cache what nodes share (units, floors, collectives); a child's bound after its
    # parent's must equal the bound it gets from fresh caches.
    p = Problem(
        model=load_model(model_id),
        cluster=load_cluster(cluster_id, gpus // 8),
        workload=TrainingWorkload(seq_len=seq, global_batch_size=gbs),
        num_gpus=gpus,
    )
    a = DEFAULT_ESTIMATE_ASSUMPTIONS
    parents = {c._replace(schedule=None, virtual=None, zero=None)
               for c in random.Random(3).sample(enumerate_layouts(p).valid, 60)}  # fmt: skip
    for parent in parents:
        warm = Bounds(p, a, MemoryFloor(p, a))
        warm.node_s(parent)
        for schedule, virtual in warm._variants(parent):
            child = parent._replace(schedule=schedule, virtual=virtual)
            alone = Bounds(p, a, MemoryFloor(p, a)).node_s(child)
            assert warm.node_s(child) == alone


def test_a_dualpipe_node_bound_counts_the_all_to_all_dualpipe_cannot_hide():
    # DeepSeek-V3 with EP 256 over 32 nodes: each all-to-all outlasts the compute DualPipe
    # overlaps it with, so tier 1 must carry the rest (whole-model figures, M / P of it).
    p = deepseek_v3_problem()
    a = DEFAULT_ESTIMATE_ASSUMPTIONS
    bounds = Bounds(p, a, MemoryFloor(p, a))
    c = Candidate(tp=1, pp=8, cp=1, dp=256, ep=256, etp=1, mbs=2, recompute="full",
                  schedule="dualpipe", virtual=1)  # fmt: skip
    whole = bounds.ctx.whole_of(c, dualpipe=True)
    m = 15360 // (256 * 2)
    assert whole.expert_s > whole.compute_s
    assert bounds.node_s(c) >= 0.999 * m * (whole.compute_s + whole.expert_s) / 8


# Narayanan et al. 2021 (arXiv:2104.04473) Table 1: params (B), h, L, heads, TP, PP, GPUs, batch.
TABLE1 = [
    (1.7, 2304, 24, 24, 1, 1, 32, 512),
    (3.6, 3072, 30, 32, 2, 1, 64, 512),
    (7.5, 4096, 36, 32, 4, 1, 128, 512),
    (18.4, 6144, 40, 48, 8, 1, 256, 1024),
    (39.1, 8192, 48, 64, 8, 2, 512, 1536),
    (76.1, 10240, 60, 80, 8, 4, 1024, 1792),
    (145.6, 12288, 80, 96, 8, 8, 1536, 2304),
    (310.1, 16384, 96, 128, 8, 16, 1920, 2160),
    (529.6, 20480, 105, 128, 8, 35, 2520, 2520),
    (1008.0, 25600, 128, 160, 8, 64, 3072, 3072),
]
MEGATRON_2021 = SearchSpace(zero_stages=(0,), schedules=("1f1b", "interleaved"))
"""What Megatron-LM ran in 2021: no distributed optimizer, 1F1B or interleaved 1F1B."""


@pytest.mark.parametrize(
    "row", [pytest.param(r, id=f"narayanan2021-table1-{r[0]}b") for r in TABLE1]
)
def test_megatron_table1_layouts_are_valid_and_rank_near_the_top(row):
    _, h, layers, heads, tp, pp, gpus, batch = row
    cluster = dgx_a100(gpus)
    workload = TrainingWorkload(seq_len=2048, global_batch_size=batch)
    model = gpt(h, layers, heads)
    p = Problem(model=model, cluster=cluster, workload=workload, num_gpus=gpus)
    published = Candidate(dp=gpus // (tp * pp), tp=tp, pp=pp, cp=1, ep=1, etp=1, zero=0, mbs=1,
                          recompute="full", schedule="1f1b", virtual=1)  # fmt: skip
    assert check(p, published) == []
    best = search(model, cluster, workload, space=MEGATRON_2021, ranked=1)
    own = dataclasses.replace(MEGATRON_2021, tp_values=(tp,), pp_values=(pp,))
    theirs = search(model, cluster, workload, space=own, ranked=1)
    assert len(theirs.layouts) == 1, "no variant of the published layout fits"
    ratio = theirs.layouts.iloc[0].tokens_per_s / best.layouts.iloc[0].tokens_per_s
    assert ratio >= NEAR_TOP


def test_the_deepseek_v3_layout_is_ranked_when_the_search_is_held_to_it():
    # DeepSeek-V3 report (arXiv:2412.19437) sec. 3.2: PP16, EP64 over 8 nodes, ZeRO-1, no TP.
    space = SearchSpace(tp_values=(1,), pp_values=(16,), ep_values=(64,), zero_stages=(1,))
    workload = TrainingWorkload(seq_len=4096, global_batch_size=15360, precision="fp8-mixed")
    result = search(
        load_model("deepseek-v3"), load_cluster("h800-deepseek", 256), workload, space=space,
        ranked=1,
    )  # fmt: skip
    best = result.layouts.iloc[0]
    assert (best.tp, best.pp, best.dp, best.ep, best.zero) == (1, 16, 128, 64, 1)


def test_with_the_deepseek_v3_reports_settings_the_published_layout_ranks_near_the_top():
    # The app's DeepSeek-V3 example: the report's memory recipe, DeepEP-style FP8 dispatch on
    # 20 of 132 SMs, experts at even load (explorer.scenario.DEEPSEEK_V3). Of every layout of
    # 2,048 H800s, the search ranks the published one (sec. 3.2) among its first twenty and
    # within 10% of the fastest, among the schedules of the report's time (DualPipeV,
    # deepseek-ai/DualPipe 2025, is left out). It ranked first until the LM head and MTP
    # logits ran in BF16 as the report says (sec. 3.3.1): our even layer split then leaves the
    # head's rank ~22% heavier; with the H800's memory as nvidia-smi reports it (81559 MiB, not
    # 80 GB) TP2 layouts fit and rank first (13.59 s against the published 14.01 s, 6th, with
    # the MoE all-to-all overlapped phase by phase; 13.70 s against 14.46 s, 11th, once the
    # H800's BF16 GEMMs run at the Hopper training-shape share, presets/gpus/h800.toml);
    # DeepSeek's own stage split is not published.
    assumptions = with_overrides(DEFAULT_ESTIMATE_ASSUMPTIONS, DEEPSEEK_V3.assumption_overrides())
    model, cluster = resolve_model(DEEPSEEK_V3.model), resolve_cluster(DEEPSEEK_V3.cluster)
    space = SearchSpace(schedules=tuple(s for s in SCHEDULES if s != "dualpipev"))
    result = search(model, cluster, DEEPSEEK_V3.training_spec(), assumptions=assumptions,
                    ranked=20, space=space)  # fmt: skip
    rows = list(result.layouts.itertuples())
    ranked = [(r.tp, r.pp, r.dp, r.cp, r.ep, r.schedule, r.zero) for r in rows]
    published = ranked.index((1, 16, 128, 1, 64, "dualpipe", 1))
    assert rows[published].step_time_s <= 1.10 * rows[0].step_time_s


def test_explain_lists_limits_largest_first_and_one_knob_neighbours(llama70b_result):
    explanation = explain(llama70b_result, 0)
    shares = explanation.limits["share"].tolist()
    assert shares == sorted(shares, reverse=True)
    assert "memory" in set(explanation.limits["factor"])
    changes = explanation.what_if["change"].tolist()
    assert any(c.startswith("PP ") for c in changes)
    assert any(c.startswith("ZeRO ") for c in changes)
    estimated = explanation.what_if.dropna(subset=["step_time_s"])
    assert estimated["text"].str.contains("GiB on stage").all()
    rejected = explanation.what_if[explanation.what_if["step_time_s"].isna()]
    assert rejected["status"].str.startswith("rejected").all()


def test_explain_a_neighbour_already_ranked_reuses_its_row(llama70b_result):
    explanation = explain(llama70b_result, 0)
    assert explanation.what_if["status"].str.startswith("ranked #").any()


def test_explain_refuses_a_rank_beyond_the_table(llama70b_result):
    with pytest.raises(ValueError, match="rank must be between"):
        explain(llama70b_result, len(llama70b_result.layouts))


def test_compare_gives_deltas_of_b_minus_a(llama70b_result):
    a, b = llama70b_result.layouts.iloc[0], llama70b_result.layouts.iloc[1]
    table = compare(a, b)
    assert table.loc["step_time_s", "delta"] == pytest.approx(b.step_time_s - a.step_time_s)
    assert math.isnan(table.loc["tp", "delta"])
    same = compare(llama70b_result.estimates[0], llama70b_result.estimates[0])
    assert (same["delta"].dropna() == 0).all()


@pytest.mark.parametrize("gpus", [3, 7, 12])
@pytest.mark.parametrize("assumptions", [DEFAULT_ESTIMATE_ASSUMPTIONS, SM_SHARE],
                         ids=["default", "sm-share"])  # fmt: skip
def test_odd_pipeline_depths_are_searched_without_dualpipe(gpus, assumptions):
    # DualPipe needs an even number of stages: a bound must not build it for PP 3 or 7.
    workload = TrainingWorkload(seq_len=2048, global_batch_size=48)
    for model_id in ("llama-3.1-8b", "mixtral-8x7b"):
        result = search(load_model(model_id), load_cluster("hgx-h100", 2), workload,
                        num_gpus=gpus, assumptions=assumptions, ranked=3)  # fmt: skip
        odd = result.layouts[result.layouts["pp"] % 2 == 1]
        assert "dualpipe" not in set(odd["schedule"])
        assert len(result.layouts) + result.rejected["num_layouts"].sum() == result.evaluated


def test_a_cluster_too_small_for_the_gpus_is_refused():
    with pytest.raises(ValueError, match="number of GPUs"):
        search(TINY, SLOW_FABRIC, TrainingWorkload(), num_gpus=64)


def test_ranking_nothing_is_refused():
    with pytest.raises(ValueError, match="ranked must be at least 1"):
        search(TINY, SLOW_FABRIC, TrainingWorkload(), ranked=0)


@settings(max_examples=40)
@given(
    schedule=st.sampled_from(["gpipe", "1f1b", "interleaved", "zb-h1", "dualpipe"]),
    stages=st.sampled_from([2, 4, 6]),
    extra=st.integers(min_value=0, max_value=10),
    seed=st.integers(min_value=0, max_value=10_000),
)
def test_the_arrival_bound_never_exceeds_the_simulated_makespan(schedule, stages, extra, seed):
    rng = random.Random(seed)
    virtual = 2 if schedule == "interleaved" else 1
    microbatches = 2 * stages + 2 * extra  # even and >= 2P: every schedule can run it
    times = StageTimes(
        forward_s=tuple(rng.uniform(0.5, 2) for _ in range(stages)),
        backward_s=tuple(rng.uniform(0.5, 3) for _ in range(stages)),
        weight_s=tuple(rng.uniform(0, 1) for _ in range(stages)),
    )
    timeline = simulate(build_schedule(schedule, stages, microbatches, virtual), times)
    bound = arrival_bound_s(times, microbatches, schedule == "dualpipe", virtual)
    assert bound <= timeline.makespan_s * (1 + 1e-12)


def test_a_model_too_big_for_the_cluster_ranks_nothing_and_says_memory():
    cluster = ClusterSpec(gpu=load_gpu("a100-80g"), num_nodes=1)
    workload = TrainingWorkload(seq_len=4096, global_batch_size=64)
    result = search(load_model("llama-3.1-405b"), cluster, workload)
    assert result.layouts.empty and result.estimated == 0
    assert set(result.rejected["kind"].astype(str)) == {"memory"}
    assert result.rejected["num_layouts"].sum() == result.evaluated


def test_a_v_placements_memory_floor_takes_its_fullest_rank_and_rejects_what_cannot_fit():
    # Llama 3.1 405B, TP4 PP32 CP2 DP64 ZeRO-1 ZB-V on H100 (80 GB), 8K tokens, M = 32: under a
    # V placement rank r holds min(P, M, (M + 1 + r) / 2) micro-batches (Qi et al. 2024 sec.
    # 6), 16.5 on rank 1 and 32 on rank 31, which hold the same blocks. The floor takes rank 31
    # (86.4 GiB, the memory model's peak to 0.03%), so the ZeRO level rejects the layout; rank
    # 1's count would give 56.6 GiB, under the GPU's 74.5 GiB.
    workload = TrainingWorkload(seq_len=8192, global_batch_size=2048)
    cluster = load_cluster("hgx-h100", 2048)
    p = Problem(model=load_model("llama-3.1-405b"), cluster=cluster, workload=workload,
                num_gpus=16384)  # fmt: skip
    c = Candidate(tp=4, pp=32, cp=2, dp=64, ep=1, etp=1, mbs=1, schedule="zb-v", virtual=1,
                  zero=1, recompute="none")  # fmt: skip
    floor = MemoryFloor(p, DEFAULT_ESTIMATE_ASSUMPTIONS)
    memory = estimate(p.model, cluster, to_layout(c), workload).memory
    assert not memory.fits and memory.peak_stage == 31
    assert 0.999 * memory.peak_bytes <= floor.layout_bytes(c) <= memory.peak_bytes
    assert floor.layout_rule(p, c) is not None
    assert floor.layout_rule(p, c._replace(schedule="1f1b")) is not None
