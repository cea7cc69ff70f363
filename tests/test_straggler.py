"""Stragglers: a slow replica, pipeline rank or link, their cost and the mitigations."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from explorer import cli
from explorer.compute import PassTimes
from explorer.estimate import DEFAULT_ESTIMATE_ASSUMPTIONS as A
from explorer.estimate import estimate
from explorer.estimate.stages import StageTime
from explorer.presets import load_cluster, load_model
from explorer.specs import Layout, TrainingWorkload
from explorer.straggler import (
    FLOOR_MARGIN,
    STRAGGLER_WHERE,
    Straggler,
    slowed_stages,
    step_floor_s,
    step_s,
    straggler_cost,
    uneven_batch,
)
from explorer.units import GiB

EXACT = 1e-12


def _stage(index: int) -> StageTime:
    """F = B = W = 1 s of compute, no collectives, a 0.5 s optimizer step."""
    passes = PassTimes(
        forward_s=1.0, backward_input_s=1.0, weight_s=1.0, recompute_s=0.0,
        attention_forward_s=0.0, dense_efficiency=1.0,
    )  # fmt: skip
    return StageTime(stage=index, layers=(index,), compute=passes, collectives=(), optimizer_s=0.5)


def test_a_slow_pipeline_stage_stretches_the_1f1b_steady_state():
    # 1F1B, P = 4, M = 8, cycle C = 3 s; stage 2 50% slower: C' = 4.5 s. Bottleneck form
    # (Narayanan et al. 2021 sec. 2.2): M C_max + (sum C - C_max) = 36 + 9 = 45 s, plus the
    # slowest tail, 0.5 x 1.5 = 0.75 s; at speed 8 x 3 + 9 + 0.5 = 33.5 s.
    stages, layout = tuple(_stage(i) for i in range(4)), Layout(pp=4)
    slow = slowed_stages(stages, layout, Straggler(slowdown=0.5, where="pp-stage", stage=2))
    assert step_s(stages, layout, 8, A) == pytest.approx(33.5, rel=EXACT)
    assert step_s(slow, layout, 8, A) == pytest.approx(45.75, rel=EXACT)


def _varied(index: int, scale: float) -> StageTime:
    """``_stage`` with F, B and W scaled apart per stage (unequal stages)."""
    s = _stage(index)
    passes = replace(s.compute, forward_s=scale, backward_input_s=1.5 * scale, weight_s=0.7 * scale)
    return replace(s, compute=passes, optimizer_s=0.1 * index)


@pytest.mark.parametrize(
    ("schedule", "virtual", "microbatches"),
    [("1f1b", 1, 8), ("interleaved", 2, 8), ("zb-h1", 1, 12), ("dualpipe", 1, 16),
     ("zb-v", 1, 16), ("dualpipev", 1, 16)],
)  # fmt: skip
def test_the_step_floor_is_the_busiest_ranks_compute_and_never_above_the_step(
    schedule, virtual, microbatches
):
    # The floor lets the straggler search skip simulating layouts that cannot enter its top.
    layout = Layout(pp=4, schedule=schedule, virtual_stages=virtual)
    stages = tuple(_varied(i, 1.0 + 0.3 * i) for i in range(4))
    for slow in (0.0, 0.5, 2.0):
        for rank in range(4):
            straggler = Straggler(slowdown=slow, where="pp-stage", stage=rank)
            slowed = slowed_stages(stages, layout, straggler)
            floor = step_floor_s(slowed, layout, microbatches)
            assert floor <= step_s(slowed, layout, microbatches, A)


def test_the_step_floor_of_a_slow_stage_hand_worked():
    # 1F1B, P = 4, M = 8, F = B = W = 1 s, stage 2 50% slower: its 8 cycles of 4.5 s, then
    # its tail 0.75 s: 36.75 s (the step is 45.75 s, the test above), less the margin.
    even, flat = tuple(_stage(i) for i in range(4)), Layout(pp=4)
    slow2 = slowed_stages(even, flat, Straggler(slowdown=0.5, where="pp-stage", stage=2))
    assert step_floor_s(slow2, flat, 8) == pytest.approx(36.75 * (1 - FLOOR_MARGIN), rel=EXACT)
    # DualPipe, P = 4, M = 8: rank 2 holds model stages 2 and 1, so both run slow; ranks 1
    # and 2 run both, 4 micro-batches each way: 4 x (4.5 + 4.5) = 36 s, and both parts'
    # tails, 0.75 + 0.75 s.
    dual = Layout(pp=4, schedule="dualpipe")
    slowed = slowed_stages(even, dual, Straggler(slowdown=0.5, where="pp-stage", stage=2))
    assert step_floor_s(slowed, dual, 8) == pytest.approx(37.5 * (1 - FLOOR_MARGIN), rel=EXACT)


def test_a_slow_rank_hides_no_more_of_its_per_step_collectives_than_at_speed():
    # A 1 s gradient reduce-scatter once a step, hidden behind a quarter of one backward
    # (B + W = 2 s): 0.5 s exposed. On a GPU 50% slower the backward is 3 s, so re-timed alone
    # it would hide 0.75 s and expose 0.25 s, shortening the tail the step adds after the
    # pipeline; the slow rank's passes end later too, so it stays exposed as at speed.
    from explorer.comm.step import BACKWARD, Collective
    from explorer.straggler import retimed, slowed_passes

    reduce = Collective(axis="dp", kind="reduce-scatter", what="gradients", phase="step",
                        size_bytes=1.0, count=1.0, time_s=1.0, hidden_s=0.5, share=0.25,
                        window=BACKWARD)  # fmt: skip
    stage = replace(_stage(0), collectives=(reduce,), optimizer_s=0.1)
    assert stage.step_comm_s == pytest.approx(0.5, rel=EXACT)
    alone = retimed(reduce, 1.0, slowed_passes(stage.compute, 1.5))
    assert alone.exposed_s == pytest.approx(0.25, rel=EXACT)
    slow = slowed_stages((stage,), Layout(), Straggler(slowdown=0.5))[0]
    assert slow.step_comm_s == pytest.approx(0.5, rel=EXACT)
    assert slow.optimizer_s == pytest.approx(0.15, rel=EXACT)  # the step's own compute: x 1.5


def test_an_uneven_batch_lets_the_slow_replica_run_fewer_microbatches():
    # DP 4, M = 8 each (32 in all), no pipeline, C = 3 s; one replica twice as slow: 8 x 6 + 1
    # = 49 s. k micro-batches on it, ceil((32 - k) / 3) on the others: k = 4 gives
    # max(4 x 6 + 1, 10 x 3 + 0.5) = 30.5 s, the least (k = 2, 3 tie; the largest is taken).
    stages, layout = (_stage(0),), Layout(dp=4)
    straggler = Straggler(slowdown=1.0)
    assert step_s(slowed_stages(stages, layout, straggler), layout, 8, A) == pytest.approx(49.0)
    found = uneven_batch(stages, layout, 8, straggler, A)
    assert found is not None
    assert found.step_s == pytest.approx(30.5, rel=EXACT)
    assert "runs 4 micro-batches instead of 8" in found.detail


MODEL, CLUSTER = load_model("llama-3.1-70b"), load_cluster("hgx-h100", 8)
WORKLOAD = TrainingWorkload(seq_len=4096, global_batch_size=256)
LAYOUT = Layout(tp=8, pp=4, dp=2, zero=1, micro_batch_size=1, recompute="full")


@pytest.mark.parametrize("where", STRAGGLER_WHERE)
def test_a_straggler_at_zero_percent_changes_nothing(where):
    cost = straggler_cost(MODEL, CLUSTER, LAYOUT, WORKLOAD, Straggler(slowdown=0.0, where=where))
    assert cost.step_s == estimate(MODEL, CLUSTER, LAYOUT, WORKLOAD).step_time_s
    assert cost.step_s == cost.baseline_step_s and cost.mitigations == ()


def test_a_slow_replica_costs_at_most_its_slowdown_and_the_uneven_batch_wins_some_back():
    # Its compute and optimizer step stretch by 10%; the collectives do not (only hide more).
    cost = straggler_cost(MODEL, CLUSTER, LAYOUT, WORKLOAD, Straggler(slowdown=0.1))
    assert 0 < cost.cost_fraction <= 0.1
    assert [m.name for m in cost.mitigations] == ["uneven-batch"]
    assert cost.baseline_step_s < cost.mitigations[0].step_s < cost.step_s


def test_fewer_layers_on_a_slow_stage_beat_leaving_it_and_fit():
    straggler = Straggler(slowdown=0.2, where="pp-stage", stage=1)
    cost = straggler_cost(MODEL, CLUSTER, LAYOUT, WORKLOAD, straggler)
    fewer = {m.name: m for m in cost.mitigations}["fewer-layers"]
    assert fewer.layout is not None and fewer.layout.stage_layers is not None
    layers = fewer.layout.stage_layers
    assert layers[1] == min(layers) and sum(layers) == MODEL.num_hidden_layers
    assert fewer.step_s < cost.step_s


def _slowed_step(layers, straggler, cluster=CLUSTER):
    moved = replace(LAYOUT, stage_layers=layers)
    est = estimate(MODEL, cluster, moved, WORKLOAD)
    return step_s(slowed_stages(est.stages, moved, straggler), moved, est.microbatches, A), est


def test_fewer_layers_balance_the_ranks_cycles_not_their_layer_counts():
    # Rank 1 50% slower, 80 layers on 4 ranks: layer counts in proportion to speed give
    # 22, 14, 22, 22 (min-max layers / speed), which leaves the embedding and the head on ranks
    # 0 and 3 on top of 22 blocks; balancing the cycles (blocks x per-block time + what a rank
    # holds beside them) takes a block off the head's rank for the slow one, and is faster.
    from explorer.hetero import balanced_layers, rank_costs

    straggler = Straggler(slowdown=0.5, where="pp-stage", stage=1)
    fewer = {m.name: m for m in straggler_cost(MODEL, CLUSTER, LAYOUT, WORKLOAD,
                                               straggler).mitigations}["fewer-layers"]  # fmt: skip
    assert fewer.layout is not None and fewer.layout.stage_layers is not None
    est = estimate(MODEL, CLUSTER, LAYOUT, WORKLOAD)
    block_s, beside_s = rank_costs(est.stages)
    factor = (1.0, 1.5, 1.0, 1.0)
    extra = tuple(e * f for e, f in zip(beside_s, factor, strict=True))
    expected = balanced_layers(80, tuple(block_s * f for f in factor), extra)
    assert fewer.layout.stage_layers == expected
    proportional, _ = _slowed_step((22, 14, 22, 22), straggler)
    assert fewer.step_s == pytest.approx(_slowed_step(expected, straggler)[0], rel=EXACT)
    assert fewer.step_s < proportional


def test_fewer_layers_that_do_not_fit_are_held_to_the_gpus_memory():
    # 30 GiB GPUs: the cycle-balanced split overfills a fast rank; held to what each rank
    # holds, the split is balanced again and fits, checked by its own estimate
    straggler = Straggler(slowdown=0.5, where="pp-stage", stage=1)
    small = replace(CLUSTER, gpu=replace(CLUSTER.gpu, memory_bytes=int(30 * GiB)))
    fewer = {m.name: m for m in straggler_cost(MODEL, small, LAYOUT, WORKLOAD,
                                               straggler).mitigations}["fewer-layers"]  # fmt: skip
    assert fewer.detail.endswith("held to the GPUs' memory")
    assert fewer.layout is not None and fewer.layout.stage_layers is not None
    step, est = _slowed_step(fewer.layout.stage_layers, straggler, small)
    assert est.memory.fits and fewer.step_s == pytest.approx(step, rel=EXACT)
    roomy = {m.name: m for m in straggler_cost(MODEL, CLUSTER, LAYOUT, WORKLOAD,
                                               straggler).mitigations}["fewer-layers"]  # fmt: skip
    assert roomy.layout is not None and roomy.layout.stage_layers != fewer.layout.stage_layers
    assert not _slowed_step(roomy.layout.stage_layers, straggler, small)[1].memory.fits


def test_a_slow_link_on_the_tensor_parallel_axis_costs_more_than_on_data_parallel():
    # TP all-reduces run every micro-batch in the critical path; DP's hide behind the backward.
    slow = {axis: Straggler(slowdown=1.0, where="link", axis=axis) for axis in ("tp", "dp")}
    tp, dp = (straggler_cost(MODEL, CLUSTER, LAYOUT, WORKLOAD, slow[a]) for a in ("tp", "dp"))
    assert tp.step_s > dp.step_s > tp.baseline_step_s


def test_bad_stragglers_say_what_is_wrong():
    with pytest.raises(ValueError, match="slowdown must be zero or more"):
        Straggler(slowdown=-0.1)
    with pytest.raises(ValueError, match="outside the 4 pipeline ranks"):
        straggler = Straggler(slowdown=0.1, where="pp-stage", stage=4)
        straggler_cost(MODEL, CLUSTER, LAYOUT, WORKLOAD, straggler)


def test_the_estimate_cli_reports_the_straggler_under_its_own_key(capsys, monkeypatch):
    monkeypatch.setattr(cli, "COMMANDS", ("estimate",))
    argv = ["estimate", "--model", "llama-3.1-70b", "--gpu", "h100-sxm", "--tp", "8", "--pp",
            "4", "--dp", "2", "--zero", "1", "--gbs", "256", "--seq", "4096", "--recompute",
            "full", "--straggler-slowdown", "0.2", "--straggler-where", "pp-stage",
            "--straggler-stage", "1", "--json"]  # fmt: skip
    assert cli.main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    found = out["straggler"]
    assert found["where"] == "pp-stage" and found["baseline_step_time_s"] == out["step_time_s"]
    assert found["step_time_s"] > out["step_time_s"]
    assert found["mitigations"][0]["step_time_s"] < found["step_time_s"]
