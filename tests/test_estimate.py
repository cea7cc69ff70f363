"""One layout end to end: the pipeline's closed forms against the simulator, the step's
consistency, the JSON form, and invariants (faster links, more overlap, fewer collectives)."""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest
from hand_models import H100_LIKE as GPU
from hand_models import LLAMA_LIKE_8B as MODEL
from hypothesis import given, settings
from hypothesis import strategies as st
from test_cli_estimate import LLAMA_70B

from explorer.comm import CommAssumptions, LinkEfficiency
from explorer.compute import ComputeAssumptions
from explorer.estimate import (
    DEFAULT_ESTIMATE_ASSUMPTIONS,
    EstimateAssumptions,
    estimate,
    estimate_dict,
    estimate_timeline,
    pipeline_time,
    time_step,
)
from explorer.flops import utilisation
from explorer.memory import training_memory
from explorer.schedules import StageTimes
from explorer.specs import (
    ClusterSpec,
    Layout,
    ScheduleName,
    TrainingWorkload,
)

REL = 1e-9
"""Exact agreement: only float rounding."""
BOUND = 0.10
"""The bottleneck closed form may exceed the simulator by this share for synthetic stages
within +-10% of each other (7.7% seen at worst over 3000 random cases, at M <= P)."""
PRESET_BOUND = 0.03
"""The same on real layouts of preset models (+2.2% at worst over 168 layouts)."""

CLUSTER = ClusterSpec(gpu=GPU, gpus_per_node=8, num_nodes=16)
MOE = replace(MODEL, n_routed_experts=32, num_experts_per_tok=4, moe_intermediate_size=1408)
WORKLOAD = TrainingWorkload(seq_len=4096, global_batch_size=256)
LAYOUT = Layout(tp=4, pp=4, dp=8, zero=1)


# --- the pipeline ---------------------------------------------------------------------------

EXACT_CASES = [
    ("gpipe", 4, 8, 1),
    ("1f1b", 4, 8, 1),
    ("1f1b", 8, 3, 1),
    ("1f1b", 8, 64, 1),
    ("interleaved", 4, 8, 2),
    ("interleaved", 4, 12, 4),
    ("interleaved", 8, 16, 2),
    ("zb-h1", 4, 8, 1),
    ("zb-h1", 8, 32, 1),
]


@pytest.mark.parametrize(("name", "stages", "microbatches", "virtual"), EXACT_CASES)
@pytest.mark.parametrize("fbw", [(1.0, 2.0, 0.0), (1.0, 1.0, 1.0), (1.0, 1.5, 0.5)])
def test_closed_form_equals_the_simulator_for_equal_stages(
    name: ScheduleName,
    stages: int,
    microbatches: int,
    virtual: int,
    fbw: tuple[float, float, float],
) -> None:
    times = StageTimes.uniform(stages, *fbw)
    closed = pipeline_time(name, microbatches, virtual, times)
    simulated = pipeline_time(name, microbatches, virtual, times, "simulate")
    assert closed.method == "closed-form"
    assert closed.makespan_s == pytest.approx(simulated.makespan_s, rel=REL)
    assert closed.bubble_fraction == pytest.approx(simulated.bubble_fraction, rel=REL, abs=REL)


def test_one_f_one_b_bubble_is_p_minus_one_over_m_plus_p_minus_one() -> None:
    # Narayanan et al. 2021 (arXiv:2104.04473) sec. 2.2.1
    timed = pipeline_time("1f1b", 16, 1, StageTimes.uniform(8, 1.0, 2.0))
    assert timed.bubble_fraction == pytest.approx(7 / 23, rel=REL)


@settings(max_examples=40)
@given(
    name=st.sampled_from(["gpipe", "1f1b", "interleaved"]),
    forward=st.lists(st.floats(0.9, 1.1), min_size=4, max_size=4),
    last_heaviest=st.booleans(),
)
def test_bottleneck_form_bounds_the_simulator_for_unequal_stages(
    name: ScheduleName, forward: list[float], last_heaviest: bool
) -> None:
    forward[0] = min(forward)  # explorer.partition takes layers off the ends first
    if last_heaviest:
        forward[-1] = max(forward) * 1.1
    times = StageTimes(
        forward_s=tuple(forward),
        backward_s=tuple(2 * f for f in forward),
        weight_s=(0.0,) * 4,
    )
    virtual = 2 if name == "interleaved" else 1
    closed = pipeline_time(name, 8, virtual, times).makespan_s
    simulated = pipeline_time(name, 8, virtual, times, "simulate").makespan_s
    assert simulated * (1 - REL) <= closed <= simulated * (1 + BOUND)
    if last_heaviest:
        assert closed == pytest.approx(simulated, rel=REL)


@pytest.mark.parametrize(
    ("preset", "layout"),
    [
        ("llama-3.1-405b", Layout(tp=8, pp=8, dp=2, schedule="interleaved", virtual_stages=2)),
        ("mixtral-8x22b", Layout(tp=4, pp=16, dp=2, ep=8)),
        ("deepseek-v3", Layout(tp=1, pp=16, dp=8, ep=8, recompute="full")),
    ],
)
def test_closed_form_stays_near_the_simulator_on_preset_layouts(
    preset: str, layout: Layout
) -> None:
    from explorer.presets import load_model

    model, cluster = load_model(preset), replace(CLUSTER, num_nodes=layout.world_size // 8)
    workload = replace(WORKLOAD, global_batch_size=layout.dp * layout.pp * 4)
    closed = estimate(model, cluster, layout, workload)
    exact = EstimateAssumptions(pipeline_model="simulate")
    simulated = estimate(model, cluster, layout, workload, exact)
    ratio = closed.pipeline.makespan_s / simulated.pipeline.makespan_s
    assert 1 - REL <= ratio <= 1 + PRESET_BOUND


def test_dualpipe_is_always_simulated() -> None:
    timed = pipeline_time("dualpipe", 8, 1, StageTimes.uniform(4, 1.0, 1.0, 1.0))
    assert timed.method == "simulated"


def test_a_schedule_that_cannot_run_raises_one_sentence() -> None:
    with pytest.raises(ValueError, match="dualpipe"):
        pipeline_time("dualpipe", 4, 1, StageTimes.uniform(4))


# --- one estimate ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def est():
    return estimate(MODEL, CLUSTER, LAYOUT, WORKLOAD)


def test_the_1f1b_step_is_narayanans_bottleneck_form_plus_the_slowest_stages_tail(est) -> None:
    """Worked from the stages alone: M = 256 / (dp 8 x micro-batch 1) = 32 micro-batches; 1F1B
    takes M C_max + (sum C - C_max) for stage cycles C (Narayanan et al. 2021,
    arXiv:2104.04473, sec. 2.2, the ramp generalised to unequal stages), then the slowest
    stage's exposed per-step communication and optimizer step."""
    cycles = [s.cycle_s for s in est.stages]
    assert est.microbatches == 32
    makespan = 32 * max(cycles) + sum(cycles) - max(cycles)
    tail = max(s.step_comm_s + s.optimizer_s for s in est.stages)
    assert est.step_time_s == pytest.approx(makespan + tail, rel=REL)
    assert min(s.optimizer_s for s in est.stages) > 0


def test_a_dualpipe_ranks_tail_adds_its_two_stages() -> None:
    """Under DualPipe rank r holds stages r and P - 1 - r (DeepSeek-V3 report,
    arXiv:2412.19437, sec. 3.2.1), so the slowest tail is the largest pair's sum: with the
    embedding on stage 0 and the head on stage P - 1, both ends' tails land on rank 0, longer
    than any single stage's."""
    layout = Layout(tp=4, pp=4, dp=8, zero=1, schedule="dualpipe")
    e = estimate(MODEL, CLUSTER, layout, WORKLOAD)
    tails = [s.step_comm_s + s.optimizer_s for s in e.stages]
    pairs = [tails[r] + tails[3 - r] for r in range(4)]
    assert e.tail_s == pytest.approx(max(pairs), rel=REL)
    assert e.tail_s > max(tails) * 1.5  # two stages' tails, not one
    assert e.step_time_s == pytest.approx(e.pipeline.makespan_s + max(pairs), rel=REL)


def test_throughput_and_utilisation_are_consistent(est) -> None:
    assert est.tokens_per_s * est.step_time_s == pytest.approx(256 * 4096, rel=REL)
    assert est.num_gpus == 128
    expected = utilisation(est.model_flops_per_token, est.tokens_per_s, 128, 989e12)
    assert est.mfu == pytest.approx(expected, rel=REL)
    assert 0 < est.mfu <= est.hfu < 1


def test_exposed_time_by_kind_and_axis_agree(est) -> None:
    assert sum(est.exposed_comm_s.values()) == pytest.approx(
        sum(est.exposed_comm_by_axis_s.values()), rel=REL
    )
    assert est.exposed_comm_by_axis_s["tp"] > 0
    assert est.exposed_comm_by_axis_s["pp"] > 0


def test_json_form_has_the_contract_keys(est) -> None:
    data = estimate_dict(est)
    for key in ("step_time_s", "tokens_per_s", "mfu", "bubble_fraction", "exposed_comm_s"):
        assert key in data
    assert set(data["exposed_comm_s"]) == {
        "all-reduce",
        "all-gather",
        "reduce-scatter",
        "all-to-all",
        "point-to-point",
    }
    assert len(data["stage_times"]) == 4


def test_the_timeline_matches_the_estimate_where_the_closed_form_is_exact(est) -> None:
    timeline = estimate_timeline(est)
    assert timeline.makespan_s <= est.pipeline.makespan_s * (1 + REL)
    assert timeline.makespan_s >= est.pipeline.makespan_s * (1 - BOUND)


def test_no_pipeline_means_no_bubble() -> None:
    one = estimate(MODEL, CLUSTER, Layout(tp=8, dp=16), WORKLOAD)
    assert one.bubble_fraction == 0.0
    assert one.pipeline.method == "no pipeline"


def test_tp_pushed_across_nodes_by_the_mesh_order_is_warned() -> None:
    layout = Layout(tp=4, dp=8, pp=4, mesh_order=("dp", "tp", "cp", "ep", "pp"))
    warned = estimate(MODEL, CLUSTER, layout, WORKLOAD).warnings
    assert any(w.startswith("TP group of 4 GPUs spans") for w in warned)


def test_a_layout_larger_than_the_cluster_is_warned() -> None:
    small = replace(CLUSTER, num_nodes=2)
    assert any("cluster has 16" in w for w in estimate(MODEL, small, LAYOUT, WORKLOAD).warnings)


def test_moe_layouts_report_expert_all_to_all() -> None:
    moe = estimate(MOE, CLUSTER, Layout(tp=2, pp=2, dp=32, ep=8), WORKLOAD)
    assert moe.exposed_comm_s["all-to-all"] > 0


def test_a_tied_embedding_reduces_its_gradient_between_the_two_ends_once_a_step() -> None:
    # Megatron-LM's _allreduce_word_embedding_grads: V / TP x h fp32 main gradients, first and
    # last stage only; none where one rank holds both ends (DualPipe's rank 0) or when untied.
    tied = replace(MODEL, tie_word_embeddings=True)

    def reductions(model, layout):
        found = estimate(model, CLUSTER, layout, WORKLOAD).stages
        return [(s.stage, c.size_bytes, c.phase, c.axis) for s in found for c in s.collectives
                if c.what == "tied embedding gradients"]  # fmt: skip

    size = tied.vocab_size * tied.hidden_size / 4 * 4
    assert reductions(tied, LAYOUT) == [(0, size, "step", "pp"), (3, size, "step", "pp")]
    assert reductions(tied, replace(LAYOUT, schedule="dualpipe")) == []
    assert reductions(MODEL, LAYOUT) == []
    first = estimate(tied, CLUSTER, LAYOUT, WORKLOAD).stages[0]
    (reduction,) = [c for c in first.collectives if c.what == "tied embedding gradients"]
    assert reduction.exposed_s == reduction.time_s > 0  # nothing to hide behind
    untied = estimate(MODEL, CLUSTER, LAYOUT, WORKLOAD).stages[0]
    assert first.step_comm_s - untied.step_comm_s == pytest.approx(reduction.time_s, rel=REL)


def test_long_sequences_ask_for_the_attention_kernels_efficiency() -> None:
    def warned(seq: int, assumptions: EstimateAssumptions = DEFAULT_ESTIMATE_ASSUMPTIONS) -> bool:
        workload = replace(WORKLOAD, seq_len=seq, global_batch_size=64)
        found = estimate(MODEL, CLUSTER, Layout(tp=8, cp=8, dp=2), workload, assumptions)
        return any("set compute.attention_efficiency" in w for w in found.warnings)

    assert warned(65536) and not warned(4096)
    fa3 = ComputeAssumptions(attention_efficiency=0.75)
    assert not warned(65536, replace(DEFAULT_ESTIMATE_ASSUMPTIONS, compute=fa3))


def test_dualpipe_estimate_runs_and_holds_two_parts_per_rank() -> None:
    layout = Layout(tp=4, pp=4, dp=8, schedule="dualpipe")
    dual = estimate(MODEL, CLUSTER, layout, WORKLOAD)
    assert dual.pipeline.method == "simulated"
    assert len(dual.stages) == 4


@pytest.mark.parametrize(
    "layout",
    [Layout(tp=4, pp=4, dp=8, zero=1), Layout(tp=4, pp=4, dp=8, schedule="dualpipe")],
)
def test_a_memory_given_by_the_caller_gives_the_same_estimate(layout) -> None:
    # The search checks memory first and hands it over instead of computing it twice.
    fresh = estimate(MODEL, CLUSTER, layout, WORKLOAD)
    memory = training_memory(MODEL, GPU, layout, WORKLOAD, domain_size=CLUSTER.domain_size)
    assert estimate(MODEL, CLUSTER, layout, WORKLOAD, memory=memory) == fresh


# --- invariants -----------------------------------------------------------------------------

LAYOUTS = st.sampled_from(
    [
        Layout(tp=4, pp=4, dp=8, zero=1),
        Layout(tp=8, pp=2, dp=8),
        Layout(tp=2, pp=1, dp=32, cp=2, zero=3),
        Layout(tp=4, pp=8, dp=4, schedule="interleaved", virtual_stages=2),
        Layout(tp=2, pp=4, dp=16, schedule="zb-h1", recompute="full"),
    ]
)


@settings(max_examples=25)
@given(layout=LAYOUTS, factor=st.floats(1.0, 8.0), which=st.sampled_from(["up", "out", "both"]))
def test_faster_links_never_slow_a_step(layout: Layout, factor: float, which: str) -> None:
    up = CLUSTER.fast_bytes_per_s * (factor if which != "out" else 1)
    out = CLUSTER.scale_out_bytes_per_s * (factor if which != "up" else 1)
    quick = replace(CLUSTER, scale_up_bytes_per_s=up, scale_out_bytes_per_s=out)
    slow = estimate(MODEL, CLUSTER, layout, WORKLOAD).step_time_s
    assert estimate(MODEL, quick, layout, WORKLOAD).step_time_s <= slow * (1 + REL)


OVERLAPS = ("dp_overlap", "tp_overlap", "cp_overlap", "ep_overlap", "pp_overlap")


@settings(max_examples=25)
@given(layout=LAYOUTS, name=st.sampled_from(OVERLAPS), low=st.floats(0, 1), high=st.floats(0, 1))
def test_more_overlap_never_exposes_more_time(
    layout: Layout, name: str, low: float, high: float
) -> None:
    low, high = sorted((low, high))

    def step(share: float) -> float:
        comm = replace(CommAssumptions(), **{name: share})  # type: ignore[arg-type]
        assumptions = replace(DEFAULT_ESTIMATE_ASSUMPTIONS, comm=comm)
        return estimate(MODEL, CLUSTER, layout, WORKLOAD, assumptions).step_time_s

    assert step(high) <= step(low) * (1 + REL)


@settings(max_examples=25)
@given(layout=LAYOUTS, data=st.data())
def test_removing_a_collective_never_slows_a_step(layout: Layout, data: st.DataObject) -> None:
    full = estimate(MODEL, CLUSTER, layout, WORKLOAD)
    part = data.draw(st.integers(0, len(full.stages) - 1))
    collectives = full.stages[part].collectives
    if not collectives:
        return
    drop = data.draw(st.integers(0, len(collectives) - 1))
    fewer = collectives[:drop] + collectives[drop + 1 :]
    stages = list(full.stages)
    stages[part] = replace(stages[part], collectives=fewer)
    pipe, tail = time_step(tuple(stages), layout, full.microbatches)
    assert pipe.makespan_s + tail <= full.step_time_s * (1 + REL)


@settings(max_examples=20)
@given(tp=st.sampled_from([1, 2, 4, 8]), pp=st.sampled_from([1, 2, 4]))
def test_more_gpus_with_a_fixed_global_batch_never_raise_work_per_gpu(tp: int, pp: int) -> None:
    work = []
    for dp in (1, 2, 4, 8):
        layout = Layout(tp=tp, pp=pp, dp=dp)
        cluster = replace(CLUSTER, num_nodes=max(1, layout.world_size // 8))
        e = estimate(MODEL, cluster, layout, WORKLOAD)
        busiest = max(s.compute.forward_s + s.compute.backward_s for s in e.stages)
        work.append(
            (e.hardware_flops_per_token * e.tokens_per_step / e.num_gpus, e.microbatches * busiest)
        )
    for (flops_a, compute_a), (flops_b, compute_b) in itertools.pairwise(work):
        assert flops_b <= flops_a * (1 + REL)
        assert compute_b <= compute_a * (1 + REL)


def test_link_efficiency_is_an_assumption_of_the_estimate() -> None:
    slow_links = EstimateAssumptions(comm=CommAssumptions(links=LinkEfficiency(scale_up=0.4)))
    base = estimate(MODEL, CLUSTER, LAYOUT, WORKLOAD).step_time_s
    assert estimate(MODEL, CLUSTER, LAYOUT, WORKLOAD, slow_links).step_time_s > base


# --- the estimate command -------------------------------------------------------------------

ESTIMATE_ARGS = LLAMA_70B  # the estimate command's own test case


def test_estimate_command_adds_the_step_time_keys(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from explorer.cli import main

    assert main([*ESTIMATE_ARGS, "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    for key in ("step_time_s", "tokens_per_s", "mfu", "bubble_fraction", "exposed_comm_s"):
        assert key in result
    assert result["peak_bytes"] > 0  # the memory keys stay
    assert result["tokens_per_s"] * result["step_time_s"] == pytest.approx(64 * 4096)


def test_estimate_command_prints_the_step_in_words(capsys: pytest.CaptureFixture[str]) -> None:
    from explorer.cli import main

    assert main(ESTIMATE_ARGS) == 0
    text = capsys.readouterr().out
    assert "tokens/s" in text and "MFU" in text and "exposed communication" in text
