"""ZB-V and DualPipeV in the search: its bounds stay below the estimate, and they rank."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_search import SIMULATED, _check_bounds_on_sampled_layouts

from explorer.estimate import DEFAULT_ESTIMATE_ASSUMPTIONS, estimate
from explorer.mesh import Problem, SearchSpace, enumerate_layouts
from explorer.presets import load_cluster, load_model
from explorer.schedules import StageTimes, build_schedule, simulate
from explorer.search import search
from explorer.search.shapes import arrival_bound_s
from explorer.specs import V_SHAPED, Layout, TrainingWorkload


@settings(max_examples=40, deadline=None)
@given(
    schedule=st.sampled_from(V_SHAPED),
    stages=st.sampled_from([2, 3, 4, 8]),
    extra=st.integers(min_value=0, max_value=10),
    seed=st.integers(min_value=0, max_value=10_000),
)
def test_the_arrival_bound_with_half_rank_chunks_stays_below_the_simulation(
    schedule, stages, extra, seed
):
    # A V's rank r waits for chunk 0 (half of each rank's forward) of the ranks before it.
    rng = random.Random(seed)
    microbatches = 2 * stages + extra
    times = StageTimes(
        forward_s=tuple(rng.uniform(0.5, 2) for _ in range(stages)),
        backward_s=tuple(rng.uniform(0.5, 3) for _ in range(stages)),
        weight_s=tuple(rng.uniform(0, 1) for _ in range(stages)),
    )
    timeline = simulate(build_schedule(schedule, stages, microbatches), times)
    bound = arrival_bound_s(times, microbatches, False, 2)
    assert bound <= timeline.makespan_s * (1 + 1e-12)


@pytest.mark.parametrize(
    "assumptions", [DEFAULT_ESTIMATE_ASSUMPTIONS, SIMULATED], ids=["closed-form", "simulated"]
)
@pytest.mark.parametrize(
    ("model_id", "cluster_id", "gpus", "seq", "gbs"),
    [
        pytest.param("llama-3.1-70b", "hgx-h100", 256, 8192, 512, id="llama-70b"),
        pytest.param("deepseek-v3", "h800-deepseek", 512, 4096, 1920, id="deepseek-v3"),
    ],
)
def test_bounds_never_exceed_the_estimate_on_v_shaped_layouts(
    model_id, cluster_id, gpus, seq, gbs, assumptions
):
    p = Problem(
        model=load_model(model_id),
        cluster=load_cluster(cluster_id, gpus // 8),
        workload=TrainingWorkload(seq_len=seq, global_batch_size=gbs),
        num_gpus=gpus,
        space=SearchSpace(schedules=V_SHAPED),
    )
    pool = [c for c in enumerate_layouts(p).valid if c.pp > 1]
    assert {c.schedule for c in pool} == set(V_SHAPED)
    _check_bounds_on_sampled_layouts(p, assumptions, pool)


def test_the_pruned_top_equals_an_exhaustive_search_over_v_shaped_schedules():
    p_model, cluster = load_model("llama-3.1-8b"), load_cluster("hgx-h100", 4)
    workload = TrainingWorkload(seq_len=4096, global_batch_size=128)
    space = SearchSpace(micro_batch_sizes=(1, 2), schedules=("1f1b", *V_SHAPED))
    pruned = search(p_model, cluster, workload, ranked=10, space=space)
    full = search(p_model, cluster, workload, ranked=None, space=space)
    keys = ["tp", "pp", "dp", "cp", "zero", "mbs", "recompute", "schedule"]
    top = full.layouts.head(10)
    assert pruned.layouts[keys].values.tolist() == top[keys].values.tolist()
    assert set(V_SHAPED) <= set(full.layouts["schedule"])


def test_dualpipev_hides_the_expert_all_to_alls_as_dualpipe_does():
    # deepseek-ai/DualPipe: DualPipeV keeps DualPipe's overlapped F&B pairs, so the EP
    # all-to-alls hide at CommAssumptions.dualpipe_ep_overlap; ZB-V, on the same V, does not.
    model, cluster = load_model("mixtral-8x7b"), load_cluster("hgx-h100", 8)
    workload = TrainingWorkload(seq_len=4096, global_batch_size=256)
    exposed = {}
    for name in ("zb-v", "dualpipev", "dualpipe"):
        layout = Layout(tp=2, pp=4, dp=8, ep=8, zero=1, schedule=name, recompute="full")
        exposed[name] = estimate(model, cluster, layout, workload).exposed_comm_by_axis_s["ep"]
    assert exposed["zb-v"] > 0
    assert exposed["dualpipev"] == exposed["dualpipe"] < exposed["zb-v"]
