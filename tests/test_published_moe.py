"""Published MoE runs: the overlap and SM reservation their sources state reach the core."""

from __future__ import annotations

import pytest

from explorer.published_runs.scenario import scenario
from explorer.published_runs.table import load_published_runs

RUNS = {r.id: r for r in load_published_runs().run}


def test_megatron_batch_level_a2a_overlap_hides_the_all_to_alls_as_dualpipe_does() -> None:
    # Megatron-Bridge recipe: moe_a2a_overlap (--overlap-moe-expert-parallel-comm)
    overlapped = scenario(RUNS["mbridge-25.11-h100-qwen3-235b-fp8cs"])
    assert overlapped.assumptions.comm.ep_overlap == 1.0
    assert "MoE all-to-all overlap" not in overlapped.unmodelled
    plain = scenario(RUNS["mbridge-25.11-b200-qwen3-235b-mxfp8"])  # no overlap in its recipe
    assert plain.assumptions.comm.ep_overlap == 0.0


def test_dualpipe_with_deepep_holds_twenty_of_the_h800s_132_sms() -> None:
    # DeepSeek-V3 report sec. 3.2.2: 20 SMs for communication
    s = scenario(RUNS["deepseek-v3-report-2048-h800"])
    assert s.assumptions.compute.comm_sm_share == pytest.approx(20 / 132)
    no_overlap = scenario(RUNS["automodel-2510-h100-deepseek-v3-1024gpu"])  # DeepEP, 1F1B
    assert no_overlap.assumptions.compute.comm_sm_share == 0


def test_only_the_all_to_all_dispatcher_sorts_tokens_by_local_expert() -> None:
    alltoall = scenario(RUNS["mbridge-25.11-b200-qwen3-235b-mxfp8"]).assumptions.compute
    deepep = scenario(RUNS["mbridge-25.09-h100-deepseek-v3"]).assumptions.compute
    assert (alltoall.ep_chunk_sort, deepep.ep_chunk_sort) == (True, False)


def test_megatron_overlap_with_deepep_runs_the_compute_on_the_sms_deepep_leaves() -> None:
    from dataclasses import replace

    from explorer.compute import ComputeContext, pass_times, stage_work

    s = scenario(RUNS["mbridge-25.09-h100-deepseek-v3"])  # DeepEP, moe_a2a_overlap
    a = s.assumptions.compute
    assert a.a2a_overlap and a.comm_sm_share == pytest.approx(20 / 132)  # moe_deepep_num_sms
    work = stage_work(s.model, tuple(range(3, 10)), 4096, False, False)
    ctx = ComputeContext(model=s.model, gpu=s.cluster.gpu, layout=s.layout, workload=s.workload,
                         assumptions=a)  # fmt: skip
    free = replace(ctx, assumptions=replace(a, a2a_overlap=False))
    held, alone = pass_times(work, ctx), pass_times(work, free)
    # GEMMs and attention take 132 / 112 as long; memory-bound kernels are unchanged
    assert held.attention_forward_s == pytest.approx(alone.attention_forward_s * 132 / 112)
    assert alone.forward_s < held.forward_s < alone.forward_s * 132 / 112
    alltoall = scenario(RUNS["mbridge-25.11-h100-qwen3-235b-fp8cs"]).assumptions.compute
    assert alltoall.a2a_overlap and alltoall.comm_sm_share == 0.0  # NCCL: no published count
