"""Mixed GPU types: data parallel across them, pipeline stages on different types."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import pytest

from explorer.estimate import estimate
from explorer.hetero import balanced_layers, hetero_dp, hetero_pp
from explorer.presets import load_cluster, load_model
from explorer.specs import Layout, TrainingWorkload
from explorer.units import GiB

MODEL = load_model("llama-3.1-70b")
WORKLOAD = TrainingWorkload(seq_len=4096, global_batch_size=256)
DP_LAYOUT = Layout(tp=8, pp=4, dp=2, zero=1, micro_batch_size=1, recompute="full")
PP_LAYOUT = Layout(tp=8, pp=4, dp=1, zero=1, micro_batch_size=1, recompute="full")
H100, A100 = load_cluster("hgx-h100", 4), load_cluster("dgx-a100", 4)


@pytest.mark.parametrize("split", ["even", "speed"])
def test_a_homogeneous_mixed_cluster_equals_todays_estimate(split):
    today = estimate(MODEL, load_cluster("hgx-h100", 8), DP_LAYOUT, WORKLOAD)
    mixed = hetero_dp(MODEL, (H100, H100), DP_LAYOUT, WORKLOAD, split)
    assert mixed.step_s == today.step_time_s
    assert [t.microbatches for t in mixed.types] == [today.microbatches] * 2


def test_one_type_in_every_pipeline_rank_equals_todays_estimate():
    group = load_cluster("hgx-h100", 4)
    today = estimate(MODEL, group, PP_LAYOUT, WORKLOAD)
    mixed = hetero_pp(MODEL, (group,), (0, 0, 0, 0), PP_LAYOUT, WORKLOAD)
    assert mixed.step_s == today.step_time_s and mixed.stage_layers is None


def test_an_even_batch_waits_for_the_slow_type_and_a_speed_split_does_not():
    even = hetero_dp(MODEL, (H100, A100), DP_LAYOUT, WORKLOAD, "even")
    speed = hetero_dp(MODEL, (H100, A100), DP_LAYOUT, WORKLOAD, "speed")
    h100, a100 = even.types
    assert even.step_s == a100.step_s > h100.step_s
    assert sum(t.microbatches * t.replicas for t in speed.types) == 2 * 128
    # The H100 replica takes more, about its speed ratio (its step per micro-batch).
    ratio = a100.step_s / h100.step_s
    fast, slow = (t.microbatches for t in speed.types)
    assert fast / slow == pytest.approx(ratio, rel=0.1)
    assert h100.step_s < speed.step_s < even.step_s


@pytest.mark.parametrize(("schedule", "batch"), [("dualpipe", 256), ("dualpipe", 64),
                                               ("dualpipev", 64)])  # fmt: skip
def test_a_speed_split_gives_each_type_a_count_its_schedule_runs_min_max(schedule, batch):
    # DualPipe runs an even count of at least 2P micro-batches: the split by speed alone gives
    # the H100 replica 179 of 256 (45 of 64), which it cannot run; held to the grid, no move of
    # one grid step between the two replicas lowers the slower one's count / speed.
    layout = replace(DP_LAYOUT, schedule=schedule)
    workload = replace(WORKLOAD, global_batch_size=batch)
    even = hetero_dp(MODEL, (H100, A100), layout, workload, "even")
    speed = hetero_dp(MODEL, (H100, A100), layout, workload, "speed")
    m = batch // 2
    speeds = [m / t.step_s for t in even.types]  # micro-batches per second at the even count
    counts = [t.microbatches for t in speed.types]
    step = 2 if schedule == "dualpipe" else 1
    assert sum(counts) == batch and all(k >= 8 and k % step == 0 for k in counts)

    def slowest(ks: list[int]) -> float:
        return max(k / v for k, v in zip(ks, speeds, strict=True))

    for moved in ([counts[0] + step, counts[1] - step], [counts[0] - step, counts[1] + step]):
        assert slowest(counts) <= slowest(moved)
    assert speed.step_s < even.step_s


def test_a_speed_split_holds_the_slow_type_at_its_schedules_least_count():
    # 24 micro-batches on two replicas: by speed the A100 would run about 7, below DualPipeV's
    # 2P = 8 on four stages; it runs 8 and the H100 the other 16.
    layout = replace(DP_LAYOUT, schedule="dualpipev")
    speed = hetero_dp(MODEL, (H100, A100), layout, replace(WORKLOAD, global_batch_size=24),
                      "speed")  # fmt: skip
    assert [t.microbatches for t in speed.types] == [16, 8]


def test_the_layer_split_balances_a_slow_type_min_max():
    # Ranks 0, 1 at 1 s a block, ranks 2, 3 at 2 s, 10 blocks: the slowest rank takes 4 s at
    # best (4 4 1 1 or 3 3 2 2); an even split 3 3 2 2 happens to tie, 1 1 4 4 would take 8 s.
    layers = balanced_layers(10, (1.0, 1.0, 2.0, 2.0), (0.0,) * 4)
    assert sum(layers) == 10
    assert max(n * t for n, t in zip(layers, (1.0, 1.0, 2.0, 2.0), strict=True)) == 4.0


def test_pipeline_ranks_on_a_slower_type_get_fewer_layers_and_memory_is_checked_per_type():
    h, a = load_cluster("hgx-h100", 2), load_cluster("dgx-a100", 2)
    mixed = hetero_pp(MODEL, (h, a), (0, 0, 1, 1), PP_LAYOUT, WORKLOAD)
    assert mixed.stage_layers is not None and sum(mixed.stage_layers) == MODEL.num_hidden_layers
    assert min(mixed.stage_layers[:2]) > max(mixed.stage_layers[2:])
    even = hetero_pp(MODEL, (a,), (0, 0, 0, 0), PP_LAYOUT, WORKLOAD)
    assert mixed.step_s < even.step_s  # better than all-A100
    tiny = replace(a, gpu=replace(a.gpu, memory_bytes=int(4 * GiB)))  # not one block fits
    tight = hetero_pp(MODEL, (h, tiny), (0, 0, 1, 1), PP_LAYOUT, WORKLOAD)
    assert [t.fits for t in tight.types] == [True, False] and not tight.fits
    assert tight.stage_layers == mixed.stage_layers  # the fastest split, reported as not fitting


def test_a_balanced_split_a_type_cannot_hold_moves_blocks_to_the_type_that_can():
    # 16 GiB A100s cannot hold the 70B's balanced split (12 and 11 blocks at TP 8, DP 1: about
    # 2 GB of states a block); the blocks over their memory go to the H100 ranks, and the
    # split is checked exactly (the full estimate on each type of the capped layout).
    h, a = load_cluster("hgx-h100", 2), load_cluster("dgx-a100", 2)
    balanced = hetero_pp(MODEL, (h, a), (0, 0, 1, 1), PP_LAYOUT, WORKLOAD)
    small = replace(a, gpu=replace(a.gpu, memory_bytes=int(16 * GiB)))
    assert balanced.types[1].peak_bytes > small.gpu.memory_bytes
    capped = hetero_pp(MODEL, (h, small), (0, 0, 1, 1), PP_LAYOUT, WORKLOAD)
    assert balanced.stage_layers is not None and capped.stage_layers is not None
    assert capped.fits and sum(capped.stage_layers) == MODEL.num_hidden_layers
    assert max(capped.stage_layers[2:]) < min(balanced.stage_layers[2:])
    assert capped.step_s > balanced.step_s  # slower than the split it could not hold
    step, peaks = _per_type_estimates((h, small), (0, 0, 1, 1), capped.stage_layers, PP_LAYOUT)
    assert capped.step_s == step and [t.peak_bytes for t in capped.types] == peaks
    assert peaks[1] <= small.gpu.memory_bytes
    # One block more on either A100 rank (one fewer on an H100 rank) would not fit: the cap
    # is the most the 16 GiB holds, not a guess below it.
    more = list(capped.stage_layers)
    more[0], more[3] = more[0] - 1, more[3] + 1
    _, over = _per_type_estimates((h, small), (0, 0, 1, 1), tuple(more), PP_LAYOUT)
    assert over[1] > small.gpu.memory_bytes


def test_caps_bound_the_blocks_of_each_rank_and_must_hold_them_all():
    # Ranks 2 and 3 held to one block each: the other 8 go to ranks 0 and 1, 4 and 4.
    assert balanced_layers(10, (1.0, 1.0, 2.0, 2.0), (0.0,) * 4, (5, 5, 1, 1)) == (4, 4, 1, 1)
    # Rank 0 held to 3: the slowest rank still ends at 4 s, the uncapped optimum (4 4 1 1).
    held = balanced_layers(10, (1.0, 1.0, 2.0, 2.0), (0.0,) * 4, (3, 9, 9, 9))
    assert held[0] == 3 and sum(held) == 10
    assert max(n * t for n, t in zip(held, (1.0, 1.0, 2.0, 2.0), strict=True)) == 4.0
    with pytest.raises(ValueError, match="do not hold 10 blocks"):
        balanced_layers(10, (1.0,) * 4, (0.0,) * 4, (2, 2, 2, 2))


def test_a_mixed_pipeline_a_type_cannot_hold_is_left_untimed_only_when_asked():
    # 4 GiB A100s: no split of the 70B fits them (rejected by the pipeline search by its
    # memory alone); untimed, every step is infinite, memory per type the same.
    h, a = load_cluster("hgx-h100", 2), load_cluster("dgx-a100", 2)
    small = replace(a, gpu=replace(a.gpu, memory_bytes=int(4 * GiB)))
    timed = hetero_pp(MODEL, (h, small), (0, 0, 1, 1), PP_LAYOUT, WORKLOAD)
    untimed = hetero_pp(MODEL, (h, small), (0, 0, 1, 1), PP_LAYOUT, WORKLOAD, time_unfit=False)
    assert math.isfinite(timed.step_s) and untimed.step_s == math.inf and not untimed.fits
    assert untimed.stage_layers == timed.stage_layers
    assert [(t.peak_bytes, t.fits, t.replicas, t.microbatches) for t in untimed.types] == [
        (t.peak_bytes, t.fits, t.replicas, t.microbatches) for t in timed.types]  # fmt: skip
    assert all(t.step_s == math.inf for t in untimed.types)
    fitting = hetero_pp(MODEL, (h, a), (0, 0, 1, 1), PP_LAYOUT, WORKLOAD, time_unfit=False)
    assert fitting == hetero_pp(MODEL, (h, a), (0, 0, 1, 1), PP_LAYOUT, WORKLOAD)


def _per_type_estimates(groups, placement, layers, layout):
    """A mixed pipeline the long way: the balanced layout's full estimate on every type, each
    rank's stage from its own type, the schedule timed on those stages, peaks per type."""
    from explorer.estimate import time_step
    from explorer.hetero import _on

    split = replace(layout, stage_layers=layers)
    ests = [estimate(MODEL, _on(g, split.world_size), split, WORKLOAD) for g in groups]
    stages = tuple(ests[g].stages[r] for r, g in enumerate(placement))
    pipe, tail = time_step(stages, split, ests[0].microbatches)
    peaks = [max(ests[i].memory.stages[r].total_bytes for r, g in enumerate(placement) if g == i)
             for i in range(len(groups))]  # fmt: skip
    return pipe.makespan_s + tail, peaks


def test_a_mixed_pipeline_equals_each_types_full_estimate_of_its_ranks():
    # hetero_pp reads each type's stages and memory without timing the type's own pipeline.
    h, a = load_cluster("hgx-h100", 2), load_cluster("dgx-a100", 2)
    mixed = hetero_pp(MODEL, (h, a), (0, 0, 1, 1), PP_LAYOUT, WORKLOAD)
    assert mixed.stage_layers is not None
    step, peaks = _per_type_estimates((h, a), (0, 0, 1, 1), mixed.stage_layers, PP_LAYOUT)
    assert mixed.step_s == step and [t.peak_bytes for t in mixed.types] == peaks


def test_groups_that_do_not_hold_the_replicas_are_refused():
    with pytest.raises(ValueError, match="do not hold dp = 2 replicas"):
        hetero_dp(MODEL, (H100, load_cluster("dgx-a100", 2)), DP_LAYOUT, WORKLOAD)
    with pytest.raises(ValueError, match="for each of the 4 pipeline ranks"):
        hetero_pp(MODEL, (H100,), (0, 0, 1), PP_LAYOUT, WORKLOAD)


def _estimate_json(capsys, monkeypatch, *extra: str) -> dict:
    from explorer import cli

    monkeypatch.setattr(cli, "COMMANDS", ("estimate",))
    argv = ["estimate", "--model", "llama-3.1-70b", "--gpu", "h100-sxm", "--tp", "8", "--pp",
            "4", "--zero", "1", "--gbs", "256", "--seq", "4096", "--recompute", "full",
            *extra, "--json"]  # fmt: skip
    assert cli.main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_the_estimate_cli_reports_a_mixed_data_parallel_step(capsys, monkeypatch):
    out = _estimate_json(capsys, monkeypatch, "--dp", "2", "--mixed-groups",
                         "hgx-h100:4,dgx-a100:4", "--mixed-split", "speed")  # fmt: skip
    mixed = out["mixed"]
    assert mixed["mode"] == "dp" and [t["replicas"] for t in mixed["types"]] == [1, 1]
    assert mixed["step_time_s"] == max(t["step_time_s"] for t in mixed["types"])
    assert sum(t["microbatches"] for t in mixed["types"]) == 2 * out["microbatches"]


def test_the_estimate_cli_reports_a_mixed_pipeline(capsys, monkeypatch):
    out = _estimate_json(capsys, monkeypatch, "--dp", "1", "--mixed-groups",
                         "hgx-h100:2,dgx-a100:2", "--mixed-placement", "0,0,1,1")  # fmt: skip
    assert out["mixed"]["mode"] == "pp" and sum(out["mixed"]["stage_layers"]) == 80


def test_a_split_held_to_memory_says_so_in_the_json_and_the_estimate_text():
    from explorer.cli.estimate import _mixed_lines
    from explorer.hetero import hetero_dict

    h, a = load_cluster("hgx-h100", 2), load_cluster("dgx-a100", 2)
    small = replace(a, gpu=replace(a.gpu, memory_bytes=int(16 * GiB)))
    held = hetero_dict(hetero_pp(MODEL, (h, small), (0, 0, 1, 1), PP_LAYOUT, WORKLOAD), "pp",
                       "layers by speed")  # fmt: skip
    free = hetero_dict(hetero_pp(MODEL, (h, a), (0, 0, 1, 1), PP_LAYOUT, WORKLOAD), "pp",
                       "layers by speed")  # fmt: skip
    assert held["memory_held"] is True and free["memory_held"] is False
    assert "held to each GPU's memory" in _mixed_lines(held)[0]
    assert "held to each GPU's memory" not in _mixed_lines(free)[0]
