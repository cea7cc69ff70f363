"""Collective costs, group placement on the topology, and a step's collectives per axis."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from explorer.comm import (
    DEFAULT_LINK_EFFICIENCY,
    CommAssumptions,
    Fabric,
    GroupPlacement,
    LinkEfficiency,
    Protocol,
    StageContext,
    all_gather_s,
    all_reduce_s,
    all_to_all_group_s,
    all_to_all_s,
    exposed_by_axis,
    exposed_by_kind,
    hidden_s,
    place_group,
    place_groups,
    point_to_point_s,
    reduce_scatter_s,
    ring_all_gather_s,
    ring_all_reduce_s,
    ring_reduce_scatter_s,
    stage_collectives,
    tree_all_reduce_s,
)
from explorer.comm.step import CpComm
from explorer.compute import PassTimes, stage_work
from explorer.precision import precision_policy
from explorer.specs import ClusterSpec, GpuSpec, Layout, ModelSpec

REL = 1e-9
"""Exact formulas: only float rounding."""

GPU = GpuSpec(
    name="test",
    memory_bytes=80 * 10**9,
    bf16_flops_per_s=1e15,
    hbm_bytes_per_s=3e12,
    scale_up_bytes_per_s=400e9,
)
CLUSTER = ClusterSpec(gpu=GPU, gpus_per_node=8, num_nodes=64, scale_out_bytes_per_s=50e9)
NO_LATENCY = replace(CLUSTER, intra_node_latency_s=0.0, inter_node_latency_s=0.0)
PERFECT = LinkEfficiency(scale_up=1.0, scale_out=1.0)
MODEL = ModelSpec(
    num_hidden_layers=8,
    hidden_size=4096,
    num_attention_heads=32,
    num_key_value_heads=8,
    intermediate_size=14336,
    vocab_size=32000,
)
MOE = replace(MODEL, n_routed_experts=64, num_experts_per_tok=4, moe_intermediate_size=1024)


# --- alpha-beta formulas -------------------------------------------------------------------


def test_ring_all_reduce_moves_two_n_minus_one_over_n_of_the_buffer() -> None:
    # NCCL tests PERFORMANCE.md: busbw = algbw x 2(n-1)/n
    assert ring_all_reduce_s(8e9, 8, 1e11, 0.0) == pytest.approx(2 * 7 / 8 * 8e9 / 1e11, rel=REL)


def test_all_gather_and_reduce_scatter_move_n_minus_one_over_n() -> None:
    assert ring_all_gather_s(8e9, 8, 1e11, 0.0) == pytest.approx(7 / 8 * 8e9 / 1e11, rel=REL)
    assert ring_reduce_scatter_s(8e9, 8, 1e11, 0.0) == ring_all_gather_s(8e9, 8, 1e11, 0.0)


def test_ring_all_reduce_is_a_reduce_scatter_then_an_all_gather() -> None:
    both = ring_reduce_scatter_s(1e9, 16, 1e11, 5e-6) + ring_all_gather_s(1e9, 16, 1e11, 5e-6)
    assert ring_all_reduce_s(1e9, 16, 1e11, 5e-6) == pytest.approx(both, rel=REL)


def test_tree_all_reduce_has_logarithmic_latency_and_wins_on_small_messages() -> None:
    assert tree_all_reduce_s(0.0, 1024, 1e11, 1e-5) == 0.0
    small_ring = ring_all_reduce_s(1e3, 1024, 1e11, 1e-5)
    small_tree = tree_all_reduce_s(1e3, 1024, 1e11, 1e-5)
    assert small_tree < small_ring
    assert tree_all_reduce_s(1e3, 1024, 1e11, 1e-5) == pytest.approx(
        2 * 10 * 1e-5 + 2 * 1e3 / 1e11, rel=REL
    )


def test_all_to_all_sends_all_but_the_local_share_once() -> None:
    assert all_to_all_s(1e9, 4, 1e11, 1e-6) == pytest.approx(1e-6 + 3 / 4 * 1e9 / 1e11, rel=REL)


def test_point_to_point_is_latency_plus_bytes_over_bandwidth() -> None:
    assert point_to_point_s(1e6, 1e10, 1e-5) == pytest.approx(1e-5 + 1e-4, rel=REL)


@pytest.mark.parametrize("n", [1])
def test_a_group_of_one_costs_nothing(n: int) -> None:
    assert ring_all_reduce_s(1e9, n, 1e11, 1e-5) == 0.0
    assert ring_all_gather_s(1e9, n, 1e11, 1e-5) == 0.0
    assert all_to_all_s(1e9, n, 1e11, 1e-5) == 0.0


# --- placement ------------------------------------------------------------------------------


def test_tp_innermost_fills_a_node_and_dp_spans_nodes() -> None:
    layout = Layout(tp=8, dp=16, pp=4)
    tp, dp = place_group("tp", CLUSTER, layout), place_group("dp", CLUSTER, layout)
    assert (tp.size, tp.ranks_per_domain, tp.num_domains, tp.crosses_domains) == (8, 8, 1, False)
    assert (dp.size, dp.ranks_per_domain, dp.num_domains) == (16, 1, 16)


def test_tp_wider_than_a_node_crosses_with_eight_ranks_per_domain() -> None:
    tp = place_group("tp", CLUSTER, Layout(tp=16, dp=2))
    assert (tp.ranks_per_domain, tp.num_domains) == (8, 2)
    assert tp.bandwidth_bytes_per_s == pytest.approx(min(400e9, 8 * 50e9))


def test_mesh_order_with_dp_innermost_pushes_tp_across_nodes() -> None:
    layout = Layout(tp=8, dp=8, mesh_order=("dp", "tp", "cp", "ep", "pp"))
    tp = place_group("tp", CLUSTER, layout)
    assert tp.crosses_domains and tp.ranks_per_domain == 1
    assert not place_group("dp", CLUSTER, layout).crosses_domains


def test_an_nvl72_domain_keeps_tp8_by_dp9_inside_one_domain() -> None:
    rack = replace(CLUSTER, gpus_per_node=4, num_nodes=18, scale_up_domain_size=72)
    group = place_group("dp_cp", rack, Layout(tp=8, dp=9))
    assert (group.size, group.ranks_per_domain, group.crosses_domains) == (9, 9, False)


def test_dp_cp_group_combines_both_axes() -> None:
    group = place_group("dp_cp", CLUSTER, Layout(tp=4, cp=2, dp=4))
    assert group.size == 8
    assert group.ranks_per_domain == 2  # cp=2 inside the node, dp strides 8 ranks


def test_uneven_groups_report_the_worst_group() -> None:
    # tp = 3 on 8-GPU nodes: ranks 6, 7, 8 straddle two nodes
    tp = place_group("tp", CLUSTER, Layout(tp=3, dp=8))
    assert tp.num_domains == 2


def test_ep_folds_into_the_tp_ranks_with_the_default_order() -> None:
    # Megatron-Core: with tp = ep = 8 the EP group is the TP group (one node)
    ep = place_group("ep", CLUSTER, Layout(tp=8, dp=8, ep=8))
    assert (ep.size, ep.num_domains) == (8, 1)
    wide = place_group("ep", CLUSTER, Layout(tp=8, dp=8, ep=16))
    assert (wide.size, wide.ranks_per_domain, wide.num_domains) == (16, 8, 2)


def test_ep_takes_consecutive_data_parallel_ranks_without_tp() -> None:
    ep = place_group("ep", CLUSTER, Layout(tp=1, dp=64, ep=8))
    assert not ep.crosses_domains
    edp = place_group("edp", CLUSTER, Layout(tp=1, dp=64, ep=8))
    assert (edp.size, edp.ranks_per_domain, edp.num_domains) == (8, 1, 8)


def test_ep_must_divide_the_folded_ranks() -> None:
    with pytest.raises(ValueError, match="must divide"):
        place_group("ep", CLUSTER, Layout(tp=2, dp=3, ep=4))


def test_place_groups_names_every_group() -> None:
    groups = place_groups(CLUSTER, Layout(tp=2, dp=4, pp=2, cp=2, ep=2))
    assert set(groups) == {"tp", "cp", "ep", "dp", "pp", "dp_cp", "etp", "edp"}


# --- collectives on groups ------------------------------------------------------------------

IDEAL = Fabric(
    id="ideal",
    name="ideal links (hand-worked cases)",
    large_message_share=1.0,
    ring=(Protocol(name="Simple", base_latency_s=0.0, step_latency_s=0.0, bandwidth_share=1.0),),
    tree=(Protocol(name="Simple", base_latency_s=0.0, step_latency_s=0.0, bandwidth_share=1.0),),
)
"""Line-rate links without latency: the textbook alpha-beta volumes, exactly."""


def _group(size: int, per_domain: int, domains: int) -> GroupPlacement:
    return GroupPlacement(
        group="dp",
        size=size,
        ranks_per_domain=per_domain,
        num_domains=domains,
        fast_bytes_per_s=400e9,
        fabric_bytes_per_s=50e9,
        fast_latency_s=0.0,
        fabric_latency_s=0.0,
        scale_up_fabric=IDEAL,
        scale_out_fabric=IDEAL,
    )


def test_hierarchical_all_reduce_is_intra_rs_inter_ar_intra_ag() -> None:
    # slow NICs (8 x 5 GB/s per domain): the hierarchy beats one ring through all 16 ranks
    size, group = 8e9, replace(_group(16, 8, 2), fabric_bytes_per_s=5e9)
    intra = 2 * 7 / 8 * size / 400e9
    inter = 2 * 1 / 2 * (size / 8) / 5e9  # each of 8 ranks drives its own NIC with 1/8
    one_ring = 2 * 15 / 16 * size / (8 * 5e9)
    assert intra + inter < one_ring
    assert all_reduce_s(size, group, PERFECT) == pytest.approx(intra + inter, rel=REL)


def test_one_ring_through_every_rank_wins_when_the_nics_keep_up_with_the_fast_links() -> None:
    # 8 NICs x 50 GB/s = the 400 GB/s fast links: NCCL's flat ring (NVIDIA/nccl#812)
    size, group = 8e9, _group(32, 8, 4)
    one_ring = 2 * 31 / 32 * size / min(400e9, 8 * 50e9)
    hierarchical = 2 * 7 / 8 * size / 400e9 + 2 * 3 / 4 * (size / 8) / 50e9
    assert one_ring < hierarchical
    assert all_reduce_s(size, group, PERFECT) == pytest.approx(one_ring, rel=REL)
    assert all_gather_s(size, group, PERFECT) == pytest.approx(one_ring / 2, rel=REL)


def test_hierarchical_all_gather_and_reduce_scatter_mirror_each_other() -> None:
    size, group = 4e9, replace(_group(16, 4, 4), fabric_bytes_per_s=5e9)
    expected = 3 / 4 * (size / 4) / 5e9 + 3 / 4 * size / 400e9
    assert expected < 15 / 16 * size / (4 * 5e9)  # the flat ring is slower here
    assert all_gather_s(size, group, PERFECT) == pytest.approx(expected, rel=REL)
    assert reduce_scatter_s(size, group, PERFECT) == all_gather_s(size, group, PERFECT)


def test_all_to_all_across_domains_is_bound_by_the_nic_share() -> None:
    size, group = 1e9, _group(16, 8, 2)
    assert all_to_all_group_s(size, group, PERFECT) == pytest.approx(8 / 16 * size / 50e9)


def test_link_efficiency_divides_the_bandwidth() -> None:
    group = _group(8, 8, 1)
    half = LinkEfficiency(scale_up=0.5, scale_out=0.5)
    assert all_reduce_s(1e9, group, half) == pytest.approx(2 * all_reduce_s(1e9, group, PERFECT))


@pytest.mark.parametrize("value", [0.0, -0.5, 2.5])
def test_link_efficiency_rejects_values_outside_zero_two(value: float) -> None:
    with pytest.raises(ValueError, match="scale_up"):
        LinkEfficiency(scale_up=value)


@given(
    size=st.floats(1e3, 1e11),
    per_domain=st.sampled_from([1, 2, 4, 8]),
    domains=st.integers(1, 64),
    faster=st.floats(1.0, 10.0),
)
def test_faster_links_never_slow_a_collective(
    size: float, per_domain: int, domains: int, faster: float
) -> None:
    group = _group(per_domain * domains, per_domain, domains)
    quick = replace(
        group,
        fast_bytes_per_s=group.fast_bytes_per_s * faster,
        fabric_bytes_per_s=group.fabric_bytes_per_s * faster,
    )
    for cost in (all_reduce_s, all_gather_s, reduce_scatter_s, all_to_all_group_s):
        assert cost(size, quick, PERFECT) <= cost(size, group, PERFECT) * (1 + 1e-12)


# --- a step's collectives -------------------------------------------------------------------

PASSES = PassTimes(
    forward_s=1.0,
    backward_input_s=1.0,
    weight_s=1.0,
    recompute_s=0.0,
    attention_forward_s=0.2,
    dense_efficiency=0.7,
)


def _context(
    model: ModelSpec,
    layout: Layout,
    comm: CommAssumptions | None = None,
    cluster: ClusterSpec = CLUSTER,
) -> StageContext:
    return StageContext(
        model=model,
        layout=layout,
        policy=precision_policy("bf16-mixed"),
        seq_len=4096,
        groups=place_groups(cluster, layout),
        assumptions=comm or CommAssumptions(),
    )


def _collectives(
    model: ModelSpec,
    layout: Layout,
    comm: CommAssumptions | None = None,
    cluster: ClusterSpec = CLUSTER,
):
    work = stage_work(model, tuple(range(4)), 4096, False, False)
    return stage_collectives(work, PASSES, _context(model, layout, comm, cluster))


def test_tp_runs_two_all_reduces_per_layer_each_way() -> None:
    found = _collectives(MODEL, Layout(tp=8, sequence_parallel=False))
    forward = [c for c in found if c.axis == "tp" and c.phase == "forward"]
    assert [(c.kind, c.count) for c in forward] == [("all-reduce", 8)]
    assert forward[0].size_bytes == 4096 * 4096 * 2  # b s h x 2 bytes


def test_sequence_parallel_swaps_each_all_reduce_for_gather_plus_scatter_of_equal_time() -> None:
    rings = replace(CLUSTER, nvls=False)  # a ring all-reduce is a reduce-scatter + all-gather
    plain = _collectives(MODEL, Layout(tp=8, sequence_parallel=False), cluster=rings)
    sp = _collectives(MODEL, Layout(tp=8, sequence_parallel=True), cluster=rings)
    tp_time = lambda cs: sum(c.time_s for c in cs if c.axis == "tp")  # noqa: E731
    assert tp_time(sp) == pytest.approx(tp_time(plain), rel=REL)
    assert {c.kind for c in sp if c.axis == "tp"} == {"all-gather", "reduce-scatter"}


def test_nvls_makes_the_plain_tp_all_reduce_faster_than_gather_plus_scatter() -> None:
    # NVLS reduces in the switch: algbw ~275 GB/s vs the ring's 370 x 8 / 14 (nccl-tests#212)
    plain = _collectives(MODEL, Layout(tp=8, sequence_parallel=False))
    sp = _collectives(MODEL, Layout(tp=8, sequence_parallel=True))
    tp_time = lambda cs: sum(c.time_s for c in cs if c.axis == "tp")  # noqa: E731
    assert tp_time(plain) < 0.85 * tp_time(sp)


def test_full_recompute_repeats_the_forward_tp_collectives_in_backward() -> None:
    found = _collectives(MODEL, Layout(tp=8, sequence_parallel=False, recompute="full"))
    backward = [c for c in found if c.axis == "tp" and c.phase == "backward"]
    assert backward[0].count == 16


def test_op_level_sac_regathers_the_sequence_parallel_inputs_in_backward() -> None:
    # torchtitan's op SAC saves reduce_scatter_tensor but not all_gather_into_tensor: the 2
    # all-gathers per block (4 blocks here) run again in the backward, the scatters do not
    def backward(layout: Layout) -> dict[str, float]:
        found = _collectives(MODEL, layout)
        return {c.kind: c.count for c in found if c.axis == "tp" and c.phase == "backward"}

    assert backward(Layout(tp=8, recompute="selective")) == {
        "all-gather": 8,
        "reduce-scatter": 8,
    }
    assert backward(Layout(tp=8, recompute="selective", recompute_ops=True)) == {
        "all-gather": 16,
        "reduce-scatter": 8,
    }


def test_tp_is_exposed_by_default_and_hidden_with_tp_overlap() -> None:
    layout = Layout(tp=8)
    exposed = sum(c.exposed_s for c in _collectives(MODEL, layout) if c.axis == "tp")
    assert exposed == pytest.approx(
        sum(c.time_s for c in _collectives(MODEL, layout) if c.axis == "tp")
    )
    hidden = _collectives(MODEL, layout, CommAssumptions(tp_overlap=1.0))
    assert sum(c.exposed_s for c in hidden if c.axis == "tp") < exposed


def test_ddp_all_reduces_gradients_once_a_step_leaving_the_last_bucket_exposed() -> None:
    found = _collectives(MODEL, Layout(dp=8, tp=8))
    (dp,) = [c for c in found if c.axis == "dp"]
    assert (dp.kind, dp.phase, dp.count) == ("all-reduce", "step", 1)
    work = stage_work(MODEL, tuple(range(4)), 4096, False, False)
    assert dp.size_bytes == pytest.approx(work.dense_params / 8 * 4)  # fp32 main grads
    floor = 40e6 / (work.dense_params / 8) * dp.time_s
    assert dp.exposed_s >= floor * (1 - 1e-9)


def test_zero1_reduce_scatters_gradients_and_gathers_parameters() -> None:
    found = [c for c in _collectives(MODEL, Layout(dp=8, zero=1)) if c.axis == "dp"]
    assert [(c.kind, c.phase) for c in found] == [
        ("reduce-scatter", "step"),
        ("all-gather", "step"),
    ]


def test_zero3_gathers_twice_and_scatters_once_per_microbatch() -> None:
    found = [c for c in _collectives(MODEL, Layout(dp=8, zero=3)) if c.axis == "dp"]
    assert [(c.kind, c.phase) for c in found] == [
        ("all-gather", "forward"),
        ("all-gather", "backward"),
        ("reduce-scatter", "backward"),
    ]


def test_zero2_reduce_scatters_per_microbatch_unless_the_stack_accumulates_first() -> None:
    # FSDP SHARD_GRAD_OP / DeepSpeed ZeRO-2: a reduce-scatter per micro-batch; Llama 3
    # (arXiv:2407.21783) sec. 3.3.2-3.3.4: accumulate, then reduce once a step
    def phases(layout: Layout, per_step: bool) -> list[tuple[str, str]]:
        comm = CommAssumptions(zero2_grad_sync_per_step=per_step)
        return [(c.kind, c.phase) for c in _collectives(MODEL, layout, comm) if c.axis == "dp"]

    for layout in (Layout(dp=8, zero=2), Layout(dp=8, pp=2, zero=2)):
        assert phases(layout, False) == [("reduce-scatter", "backward"), ("all-gather", "step")]
        assert phases(layout, True) == [("reduce-scatter", "step"), ("all-gather", "step")]


def test_backward_post_prefetch_exposes_the_backward_gather_and_frees_the_scatter() -> None:
    # BACKWARD_POST issues the next unit's all-gather after the current unit's gradients: the
    # gather waits in full; the reduce-scatter hides behind the whole backward (PASSES: 2 s)
    def calls(prefetch: str) -> list:
        comm = CommAssumptions(links=PERFECT, dp_overlap_slowdown=0.0,
                               fsdp_backward_prefetch=prefetch)  # type: ignore[arg-type]  # fmt: skip
        return [c for c in _collectives(MODEL, Layout(dp=8, zero=3), comm) if c.axis == "dp"]

    _, gather, scatter = calls("post")
    assert gather.exposed_s == pytest.approx(gather.time_s, rel=REL)
    t = scatter.time_s
    short = replace(PASSES, backward_input_s=t / 4, weight_s=t / 4)  # a backward of t / 2
    assert scatter.exposed_for(short) == pytest.approx(t / 2, rel=REL)
    _, pre_gather, pre_scatter = calls("pre")
    assert pre_gather.exposed_s < gather.exposed_s
    assert pre_scatter.exposed_for(short) == pytest.approx(t - t / 4, rel=REL)  # half of it
    with pytest.raises(ValueError, match="fsdp_backward_prefetch"):
        CommAssumptions(fsdp_backward_prefetch="later")  # type: ignore[arg-type]


def test_zero3_under_pp_gathers_once_hidden_and_scatters_once_exposed_per_step() -> None:
    # torch.distributed.pipelining: parameters stay unsharded over the micro-batches and the
    # FSDP post-backward (the reduce-scatters) runs after the last backward's compute
    comm = CommAssumptions(links=PERFECT, dp_overlap_slowdown=0.0)
    layout = Layout(dp=8, pp=2, zero=3)
    work = stage_work(MODEL, tuple(range(4)), 4096, False, False)
    ctx = replace(_context(MODEL, layout, comm), pipeline_keeps_unsharded=True)
    found = [c for c in stage_collectives(work, PASSES, ctx) if c.axis == "dp"]
    gather, scatter = found
    assert [(c.kind, c.phase, c.count) for c in found] == [
        ("all-gather", "step", 1),
        ("reduce-scatter", "step", 1),
    ]
    assert scatter.exposed_s == pytest.approx(scatter.time_s, rel=REL)
    # the gather hides behind the first forward (PASSES.forward_s) but for its first block
    # (1 of the stage's 4): exposed = max(t / 4, t - forward)
    t = gather.time_s
    expected = max(t / 4, t - PASSES.forward_s)
    assert gather.exposed_s == pytest.approx(expected, rel=REL)
    short = replace(PASSES, forward_s=t / 2)  # a forward half the gather: half stays exposed
    assert gather.exposed_for(short) == pytest.approx(t / 2, rel=REL)
    # Megatron (the memory model's megatron behaviour) reshards per micro-batch under PP
    megatron = [c for c in _collectives(MODEL, layout, comm) if c.axis == "dp"]
    assert [c.phase for c in megatron] == ["forward", "backward", "backward"]


def test_ring_context_parallel_sends_cp_minus_one_hops_per_layer() -> None:
    found = [c for c in _collectives(MODEL, Layout(cp=4)) if c.axis == "cp"]
    forward, backward = found
    assert (forward.kind, forward.count, backward.count) == ("point-to-point", 12, 24)
    # K and V of 1024 tokens, 8 KV heads of 128, 2 bytes
    assert forward.size_bytes == 1024 * 2 * 8 * 128 * 2


@pytest.mark.parametrize("mode", ["all-gather", "all-to-all"])
def test_other_context_parallel_variants_do_not_overlap(mode: CpComm) -> None:
    found = _collectives(MODEL, Layout(cp=4), CommAssumptions(cp_comm=mode))
    cp = [c for c in found if c.axis == "cp"]
    assert cp and all(c.exposed_s == c.time_s for c in cp)


def test_ep_dispatches_and_combines_per_moe_layer_each_way() -> None:
    found = [c for c in _collectives(MOE, Layout(dp=8, ep=8)) if c.axis == "ep"]
    assert [(c.kind, c.phase, c.count) for c in found] == [
        ("all-to-all", "forward", 8),
        ("all-to-all", "backward", 8),
    ]
    assert found[0].size_bytes == 4096 * 4 * 4096 * 2  # tokens x top-k x h x 2 bytes


def test_expert_tp_gathers_and_scatters_the_dispatched_tokens_per_moe_layer() -> None:
    # ETP 2 with TP 2 (sequence parallel): 4096 / 2 tokens per rank, top-4, gathered over 2.
    etp = [c for c in _collectives(MOE, Layout(tp=2, dp=8, ep=8, etp=2)) if "expert TP" in c.what]
    assert [(c.kind, c.phase, c.count) for c in etp] == [
        ("all-gather", "forward", 4),
        ("all-gather", "backward", 4),
        ("reduce-scatter", "forward", 4),
        ("reduce-scatter", "backward", 4),
    ]
    assert {c.axis for c in etp} == {"tp"}
    assert etp[0].size_bytes == 2 * (4096 / 2) * 4 * 4096 * 2  # etp x tokens x top-k x h x 2 B
    assert all(c.time_s > 0 for c in etp)
    plain = _collectives(MOE, Layout(tp=2, dp=8, ep=8))
    assert not [c for c in plain if "expert TP" in c.what]
    full = _collectives(MOE, Layout(tp=2, dp=8, ep=8, etp=2, recompute="full"))
    assert [c.count for c in full if "expert TP" in c.what and c.phase == "backward"] == [8, 8]


def test_dualpipe_hides_ep_all_to_all_behind_compute() -> None:
    plain = [c for c in _collectives(MOE, Layout(dp=8, ep=8, pp=2)) if c.axis == "ep"]
    dual = [
        c
        for c in _collectives(MOE, Layout(dp=8, ep=8, pp=2, schedule="dualpipe"))
        if c.axis == "ep"
    ]
    assert sum(c.exposed_s for c in dual) < sum(c.exposed_s for c in plain)


def test_pipeline_sends_one_activation_each_way_per_chunk() -> None:
    found = [c for c in _collectives(MODEL, Layout(pp=4, tp=2)) if c.axis == "pp"]
    assert [(c.kind, c.phase, c.count) for c in found] == [
        ("point-to-point", "forward", 1),
        ("point-to-point", "backward", 1),
    ]
    assert found[0].size_bytes == 4096 * 4096 * 2 / 2  # scattered over TP (SP)


def test_exposed_time_by_kind_and_by_axis_add_up_to_the_same_total() -> None:
    found = _collectives(MOE, Layout(tp=2, dp=8, pp=2, cp=2, ep=4, zero=1))
    by_kind, by_axis = exposed_by_kind(found, 16), exposed_by_axis(found, 16)
    assert sum(by_kind.values()) == pytest.approx(sum(by_axis.values()), rel=REL)
    assert set(by_axis) == {"tp", "cp", "ep", "dp", "pp"}


@pytest.mark.parametrize("zero", [0, 1, 2, 3])
@pytest.mark.parametrize("recompute", ["none", "full"])
def test_a_collective_re_exposed_under_other_pass_times_equals_one_timed_under_them(
    zero: int, recompute: str
) -> None:
    # The search times a stage's calls once and re-exposes them for each micro-batch size and
    # recompute policy (Collective.exposed_for): it must give what timing afresh gives.
    layout = Layout(tp=2, dp=8, pp=2, cp=2, ep=4, zero=zero, recompute=recompute)
    ctx = _context(MOE, layout, CommAssumptions(tp_overlap=0.5, ep_overlap=0.3, dp_overlap=0.8))
    work = stage_work(MOE, tuple(range(4)), 4096, False, False)
    other = replace(PASSES, forward_s=1e-5, backward_input_s=3e-5, attention_forward_s=1e-6)
    first, again = stage_collectives(work, PASSES, ctx), stage_collectives(work, other, ctx)
    assert [c.exposed_for(PASSES) for c in first] == [c.exposed_s for c in first]
    assert [c.exposed_for(other) for c in first] == [c.exposed_s for c in again]
    assert [c.exposed_s for c in first] != [c.exposed_s for c in again]


@given(
    time_s=st.floats(0, 10),
    floor=st.floats(0, 1),
    window=st.floats(0, 10),
    low=st.floats(0, 1),
    high=st.floats(0, 1),
)
def test_more_overlap_never_exposes_more_time(
    time_s: float, floor: float, window: float, low: float, high: float
) -> None:
    low, high = sorted((low, high))
    exposed_low = time_s - hidden_s(time_s, floor * time_s, low, window)
    exposed_high = time_s - hidden_s(time_s, floor * time_s, high, window)
    assert exposed_high <= exposed_low + 1e-12
    assert exposed_high >= floor * time_s - 1e-12


def test_default_link_efficiency_keeps_the_published_figures() -> None:
    assert (DEFAULT_LINK_EFFICIENCY.scale_up, DEFAULT_LINK_EFFICIENCY.scale_out) == (1.0, 1.0)


def test_remote_domains_per_token_caps_at_the_node_limit() -> None:
    from explorer.comm.collectives import remote_domains_per_token

    # DeepSeek-V3 on EP64 over 8 nodes, top-8: 8 (1 - (7/8)^8) = 5.25 distinct nodes, capped
    # at topk_group = 4 (report sec. 2.1.2), of which 7/8 are remote.
    assert remote_domains_per_token(8, 8, None) == pytest.approx(8 * (1 - (7 / 8) ** 8) * 7 / 8)
    assert remote_domains_per_token(8, 8, 4) == pytest.approx(4 * 7 / 8)
    assert remote_domains_per_token(8, 1, 4) == 0.0


def test_deduplicated_dispatch_sends_one_copy_per_remote_node() -> None:
    from explorer.comm.collectives import deduplicated_all_to_all_s

    group = _group(64, 8, 8)
    size = 8 * 1e8  # top-8 copies of 100 MB of tokens
    inter = 4 * 7 / 8 * 1e8 / 50e9
    intra = 7 / 8 * size / 400e9
    assert deduplicated_all_to_all_s(size, 8, group, PERFECT, 4) == pytest.approx(
        max(inter, intra), rel=REL
    )
    plain = all_to_all_group_s(size, group, PERFECT)
    assert deduplicated_all_to_all_s(size, 8, group, PERFECT, 4) < plain


def _span_by_every_rank(sizes, members, domain):
    """The placement span counted over every rank (the reference for the period shortcut)."""
    import numpy as np

    world = int(np.prod(sizes))
    ranks = np.arange(world)
    strides = np.cumprod((1, *sizes[:-1]))
    group_id = ranks.copy()
    for size, stride, member in zip(sizes, strides, members, strict=True):
        if member:
            group_id -= (ranks // stride) % size * stride
    pairs = np.unique(group_id * world + ranks // domain)
    per_group = np.bincount(pairs // world)
    per_group = per_group[per_group > 0]
    group_size = int(np.prod([s for s, m in zip(sizes, members, strict=True) if m]))
    return max(1, group_size // int(per_group.max())), int(per_group.max())


def test_the_closed_form_span_equals_counting_every_rank_and_covers_powers_of_two() -> None:
    # explorer.comm.topology._aligned_span: where a domain is whole blocks of one axis every
    # group spans the same domains; over every shape here it must equal the count over ranks,
    # and with every size and the domain a power of two the domain always falls on a block.
    from itertools import product

    from explorer.comm.topology import _aligned_span

    closed = shapes = 0
    for n in (1, 2, 3):
        for sizes in product((1, 2, 3, 4, 8), repeat=n):
            for members in product((False, True), repeat=n):
                if not any(members):
                    continue
                for domain in (1, 2, 4, 8, 16, 72):
                    found = _aligned_span(sizes, members, domain)
                    shapes += 1
                    powers = all(s & (s - 1) == 0 for s in (*sizes, domain))
                    assert found is not None or not powers, (sizes, members, domain)
                    if found is not None:
                        closed += 1
                        assert found == _span_by_every_rank(sizes, members, domain)
    assert closed > shapes / 2  # the rest cut an axis unevenly (sizes 3, domain 72)


@given(
    sizes=st.lists(st.sampled_from([1, 2, 3, 4, 8, 16]), min_size=1, max_size=5),
    data=st.data(),
    domain=st.sampled_from([1, 2, 4, 8, 16, 72]),
)
def test_group_span_shortcut_equals_counting_every_rank(sizes, data, domain) -> None:
    from explorer.comm.topology import _span

    members = tuple(data.draw(st.lists(st.booleans(), min_size=len(sizes), max_size=len(sizes))))
    if not any(members):
        return
    expected = _span_by_every_rank(tuple(sizes), members, domain)
    assert _span.__wrapped__(tuple(sizes), members, domain) == expected
