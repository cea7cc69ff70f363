"""EP all-to-alls under Megatron-Core's 1F1B A2A overlap: what each call hides behind, and the
compute NCCL's all-to-all kernels cost while they hide."""

from __future__ import annotations

from dataclasses import replace

import pytest

from explorer.comm import CommAssumptions, StageContext, place_groups
from explorer.comm.model_parallel import ep_collectives, paired_share
from explorer.compute import ComputeContext, PassTimes, pass_times, stage_work
from explorer.precision import precision_policy
from explorer.presets import load_cluster, load_model
from explorer.specs import Layout, TrainingWorkload

QWEN3 = load_model("qwen3-235b-a22b")
H100 = load_cluster("hgx-h100", 32)
LAYOUT = Layout(dp=32, ep=32, pp=1)  # 32 experts' ranks over 4 nodes: the fabric carries it
LAYERS = 4
MS = 1e-3
PASSES = PassTimes(
    forward_s=10 * MS,
    backward_input_s=14 * MS,
    weight_s=16 * MS,
    recompute_s=0.0,
    attention_forward_s=2 * MS,
    dense_efficiency=0.7,
    expert_forward_s=3 * MS,
    expert_backward_s=8 * MS,
)
"""Forward 10 ms of which the experts 3; backward 30 ms of which the experts 8."""


def _calls(comm: CommAssumptions, passes: PassTimes = PASSES, layout: Layout = LAYOUT):
    ctx = StageContext(
        model=QWEN3,
        layout=layout,
        policy=precision_policy("bf16-mixed"),
        seq_len=4096,
        groups=place_groups(H100, layout),
        assumptions=comm,
    )
    work = stage_work(QWEN3, tuple(range(LAYERS)), 4096, False, False)
    return ep_collectives(work, passes, ctx)


def test_each_all_to_all_hides_behind_its_phase_partner() -> None:
    # Megatron-Core TransformerLayerSchedulePlan.run: forward dispatch beside the experts'
    # backward (8 ms), forward combine beside the rest of the backward (30 - 8 = 22 ms), the
    # combine's gradient beside the forward outside the experts (10 - 3 = 7 ms), the
    # dispatch's gradient beside the experts' forward (3 ms)
    calls = _calls(CommAssumptions(ep_overlap=1.0, ep_overlap_slowdown=0.0))
    windows = {"token dispatch": 8 * MS, "token combine": 22 * MS,
               "combine gradients": 7 * MS, "dispatch gradients": 3 * MS}  # fmt: skip
    assert sorted(c.what for c in calls) == sorted(windows)
    one = calls[0].time_s
    # 4 layers of 4096 x 8 tokens x 4096 x 2 bytes, 24/32 of them through a 47 GB/s NIC:
    # about 4 x 268 MB x 0.75 / 47 GB/s = 17 ms, between the windows
    assert one == pytest.approx(4 * 4096 * 8 * 4096 * 2 * 0.75 / 47e9, rel=0.03)
    for c in calls:
        assert c.count == LAYERS and c.time_s == pytest.approx(one)
        assert c.exposed_s == pytest.approx(max(0.0, one - windows[c.what]))


def test_phase_pairing_exposes_at_least_what_whole_passes_expose() -> None:
    # the same calls hidden behind whole passes (forward calls behind the forward, backward
    # calls behind the backward) expose (2t - 10 ms) + (2t - 30 ms); the phases hide less: the
    # combine's 22 ms window is wider than the call, so 5 ms of it goes unused
    paired = _calls(CommAssumptions(ep_overlap=1.0, ep_overlap_slowdown=0.0))
    t = paired[0].time_s
    whole = max(0.0, 2 * t - 10 * MS) + max(0.0, 2 * t - 30 * MS)
    exposed = sum(c.exposed_s for c in paired)
    assert exposed == pytest.approx(4 * t - (8 + 7 + 3) * MS - t)
    assert exposed > whole + 4 * MS


def test_nccl_all_to_alls_slow_the_compute_they_hide_behind() -> None:
    # CommAssumptions.ep_overlap_slowdown 0.189: each hidden second costs 0.189 / 1.189 s
    free = _calls(CommAssumptions(ep_overlap=1.0, ep_overlap_slowdown=0.0))
    slowed = _calls(CommAssumptions(ep_overlap=1.0))
    lost = 0.189 / 1.189
    for a, b in zip(free, slowed, strict=True):
        assert b.contention == pytest.approx(lost)
        assert b.hidden_s == pytest.approx(a.hidden_s * (1 - lost))
        assert b.exposed_for(PASSES) == pytest.approx(b.exposed_s)


def test_deepep_style_dispatch_pays_its_sms_in_the_compute_not_here() -> None:
    calls = _calls(CommAssumptions(ep_overlap=1.0, ep_domain_dedup=True))
    assert all(c.contention == 0.0 for c in calls)


def test_without_overlap_nothing_hides_and_nothing_slows() -> None:
    calls = _calls(CommAssumptions())
    assert [c.what for c in calls] == ["token dispatch and combine", "their gradients"]
    assert all(c.hidden_s == 0.0 and c.contention == 0.0 for c in calls)


def test_dualpipe_keeps_its_whole_pass_overlap() -> None:
    layout = replace(LAYOUT, pp=2, schedule="dualpipe")
    calls = _calls(CommAssumptions(ep_overlap_slowdown=0.0), layout=layout)
    t = calls[0].time_s  # both ways the same bytes and count
    assert [c.what for c in calls] == ["token dispatch and combine", "their gradients"]
    assert calls[0].exposed_s == pytest.approx(max(0.0, t - 10 * MS))
    assert calls[1].exposed_s == pytest.approx(max(0.0, t - 30 * MS))


def test_the_experts_share_of_each_pass_is_part_of_it() -> None:
    # PassTimes.expert_forward_s / _backward_s: the routed experts' GEMMs and the sort, inside
    # the pass times; none for a dense model
    gpu = H100.gpu
    workload = TrainingWorkload(seq_len=4096, global_batch_size=256, precision="bf16-mixed")
    work = stage_work(QWEN3, tuple(range(LAYERS)), 4096, False, False)
    found = pass_times(work, ComputeContext(model=QWEN3, gpu=gpu, layout=LAYOUT,
                                            workload=workload))  # fmt: skip
    assert 0 < found.expert_forward_s < found.forward_s
    assert 0 < found.expert_backward_s < found.backward_s
    # backward: input and weight gradients of the same GEMMs, about twice the forward
    assert found.expert_backward_s == pytest.approx(2 * found.expert_forward_s, rel=0.15)
    dense = load_model("llama-3.1-8b")
    plain = pass_times(
        stage_work(dense, tuple(range(LAYERS)), 4096, False, False),
        ComputeContext(model=dense, gpu=gpu, layout=Layout(dp=32), workload=workload),
    )
    assert plain.expert_forward_s == 0.0 and plain.expert_backward_s == 0.0


def _ctx(layout: Layout, microbatches: int) -> StageContext:
    return StageContext(
        model=QWEN3,
        layout=layout,
        policy=precision_policy("bf16-mixed"),
        seq_len=4096,
        groups=place_groups(H100, layout),
        assumptions=CommAssumptions(ep_overlap=1.0, ep_overlap_slowdown=0.0),
        microbatches=microbatches,
    )


def test_paired_share_leaves_out_the_warm_up_of_megatron_interleaved_schedule() -> None:
    # schedules.py get_pp_rank_microbatches with the A2A overlap: PP8 VP4, 128 micro-batches:
    # 512 chunks a rank; rank r warms up 2 (7 - r) + 3 x 8 + 1 forwards: 39 on rank 0, 25 on
    # rank 7, 32 on the mean; 480 of 512 paired
    layout = Layout(dp=4, pp=8, ep=4, schedule="interleaved", virtual_stages=4)
    assert paired_share(_ctx(layout, 128)) == pytest.approx(480 / 512)
    # no pipeline: the first forward and the last backward alone
    assert paired_share(_ctx(Layout(dp=32, ep=32), 16)) == pytest.approx(15 / 16)
    # not known (the search's bounds): all paired
    assert paired_share(_ctx(layout, 0)) == 1.0
    # fewer chunks than a warm-up: nothing pairs
    assert paired_share(_ctx(layout, 1)) == 0.0


def test_unpaired_chunks_expose_their_share_of_every_call() -> None:
    work = stage_work(QWEN3, tuple(range(LAYERS)), 4096, False, False)
    known = ep_collectives(work, PASSES, _ctx(LAYOUT, 16))
    unknown = ep_collectives(work, PASSES, _ctx(LAYOUT, 0))
    for a, b in zip(known, unknown, strict=True):
        # 1 of 16 micro-batches unpaired: a sixteenth of each call can never hide, and the
        # rest hides behind 15/16 of its window
        assert a.hidden_s == pytest.approx(min(a.time_s * 15 / 16, b.hidden_s * 15 / 16))
        assert a.exposed_for(PASSES) == pytest.approx(a.exposed_s)
