"""The search on a mixed cluster and with a straggler (explorer.hetero_search), the scenario's
mixed cluster and straggler (URL and JSON), the report's sections and the CLI flags."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from explorer.hetero import hetero_dp, hetero_pp
from explorer.hetero_search import (
    contiguous_placement,
    merge_groups,
    mixed_search,
    pipeline_search,
    straggler_search,
)
from explorer.mesh import SearchSpace
from explorer.presets import load_cluster, load_model
from explorer.scenario import (
    MixedInputs,
    Scenario,
    StragglerInputs,
    from_json,
    from_query,
    resolve_mixed,
    to_json,
    to_query,
)
from explorer.search import search
from explorer.specs import TrainingWorkload
from explorer.straggler import Straggler
from explorer.units import GiB

MODEL = load_model("llama-3.1-8b")
WORKLOAD = TrainingWorkload(seq_len=4096, global_batch_size=64)
# A small space keeps each search short; the certificate does not depend on its size.
SPACE = SearchSpace(schedules=("1f1b",), zero_stages=(1,), recomputes=("selective", "full"),
                    micro_batch_sizes=(1,))  # fmt: skip
H100, A100 = load_cluster("hgx-h100", 2), load_cluster("dgx-a100", 2)


@pytest.mark.parametrize("split", ["even", "speed"])
def test_a_homogeneous_mixed_cluster_ranks_todays_search_top(split):
    today = search(MODEL, load_cluster("hgx-h100", 4), WORKLOAD, space=SPACE, ranked=5)
    mixed = mixed_search(MODEL, (H100, H100), WORKLOAD, split=split, space=SPACE, ranked=5)
    assert len(mixed.groups) == 1 and mixed.groups[0].num_nodes == 4 and mixed.certain
    assert [r.layout for r in mixed.rows] == [e.layout for e in today.estimates]
    assert [r.step_s for r in mixed.rows] == [e.step_time_s for e in today.estimates]


def test_merging_keeps_different_gpus_apart_and_adds_the_nodes_of_equal_ones():
    merged = merge_groups((H100, A100, load_cluster("hgx-h100", 3)))
    assert [(g.gpu.name, g.num_nodes) for g in merged] == [(H100.gpu.name, 5), (A100.gpu.name, 2)]


@pytest.mark.parametrize("split", ["even", "speed"])
def test_the_mixed_ranking_is_the_mixed_step_of_every_layout_in_order(split):
    found = mixed_search(MODEL, (H100, A100), WORKLOAD, split=split, space=SPACE, ranked=3)
    assert found.certain and found.rows
    steps = [r.step_s for r in found.rows]
    assert steps == sorted(steps) and steps[-1] <= found.bound_s
    for r in found.rows:  # each row is hetero_dp's own step of its layout, memory per type
        again = hetero_dp(MODEL, (H100, A100), r.layout, WORKLOAD, split)
        assert again.step_s == r.step_s and again.fits
        assert 32 % (r.layout.tp * r.layout.pp * r.layout.cp) == 0  # a replica in one group


def test_an_even_split_waits_for_the_a100s_and_a_speed_split_does_better():
    even = mixed_search(MODEL, (H100, A100), WORKLOAD, split="even", space=SPACE, ranked=1)
    speed = mixed_search(MODEL, (H100, A100), WORKLOAD, split="speed", space=SPACE, ranked=1)
    all_a100 = search(MODEL, load_cluster("dgx-a100", 4), WORKLOAD, space=SPACE, ranked=1)
    all_h100 = search(MODEL, load_cluster("hgx-h100", 4), WORKLOAD, space=SPACE, ranked=1)
    # Even: no faster than 32 A100 replicas' pace; speed: between all-H100 and the even split.
    assert even.rows[0].step_s >= all_a100.estimates[0].step_time_s - 1e-9
    assert all_h100.estimates[0].step_time_s < speed.rows[0].step_s < even.rows[0].step_s


def test_a_straggler_at_zero_changes_nothing_in_the_search():
    cluster = load_cluster("hgx-h100", 4)
    today = search(MODEL, cluster, WORKLOAD, space=SPACE, ranked=5)
    slow = straggler_search(MODEL, cluster, WORKLOAD, Straggler(slowdown=0.0), space=SPACE,
                            ranked=5)  # fmt: skip
    assert [r.layout for r in slow.rows] == [e.layout for e in today.estimates]
    assert [r.step_s for r in slow.rows] == [e.step_time_s for e in today.estimates]
    assert slow.top is not None and slow.top.mitigations == () and slow.certain


def test_a_slow_replica_slows_every_ranked_step_and_the_top_gets_a_mitigation():
    cluster = load_cluster("hgx-h100", 4)
    slow = straggler_search(MODEL, cluster, WORKLOAD, Straggler(slowdown=0.5), space=SPACE,
                            ranked=3)  # fmt: skip
    for r in slow.rows:  # a dp straggler scales every compute second of one replica by 1.5
        assert r.baseline_step_s < r.step_s <= 1.5 * r.baseline_step_s + 1e-9
    assert slow.top is not None and slow.top.step_s == slow.rows[0].step_s
    if slow.rows[0].layout.dp > 1:  # the slow replica takes fewer micro-batches
        assert slow.top.mitigations and slow.top.mitigations[0].name == "uneven-batch"


def test_a_slow_stage_ranks_as_timing_every_layout_would_and_skips_what_cannot_enter(monkeypatch):
    import explorer.hetero_search as hs
    from explorer.straggler import slowed_stages, step_s

    space = SearchSpace(schedules=("1f1b", "zb-h1", "dualpipe"), zero_stages=(1,),
                        recomputes=("full",), micro_batch_sizes=(1,))  # fmt: skip
    cluster, straggler = load_cluster("hgx-h100", 4), Straggler(slowdown=0.3, where="pp-stage")
    timed = []
    monkeypatch.setattr(hs, "step_s", lambda *a: timed.append(a) or step_s(*a))
    slow = straggler_search(MODEL, cluster, WORKLOAD, straggler, space=space, ranked=4)
    every = search(MODEL, cluster, WORKLOAD, space=space, ranked=slow.searched).estimates
    steps = [(step_s(slowed_stages(e.stages, e.layout, straggler), e.layout, e.microbatches,
                     hs.DEFAULT_ESTIMATE_ASSUMPTIONS), e.layout) for e in every]  # fmt: skip
    steps.sort(key=lambda t: t[0])  # stable: the search's order among equal steps
    assert [(r.step_s, r.layout) for r in slow.rows] == steps[:4]
    assert len(timed) < len(every)  # layouts whose floor is above the 4th step: not timed


def test_a_pipeline_across_types_gives_the_faster_type_more_layers_and_is_hetero_pp():
    found = pipeline_search(MODEL, (H100, A100), WORKLOAD, space=SPACE, ranked=2)
    assert found.mode == "pp" and not found.certain and found.rows
    for r in found.rows:
        assert r.placement == contiguous_placement((H100, A100), r.layout)
        half = r.layout.pp // 2  # 16 GPUs per group: half the ranks on each
        assert r.placement == (0,) * half + (1,) * half
        layers = r.hetero.stage_layers
        assert layers is not None and sum(layers) == MODEL.num_hidden_layers
        assert min(layers[:half]) > max(layers[half:])  # the H100 ranks hold more
        again = hetero_pp(MODEL, (H100, A100), r.placement, r.layout, WORKLOAD)
        assert again.step_s == r.step_s and again.fits
    one = pipeline_search(MODEL, (H100, H100), WORKLOAD, space=SPACE, ranked=2)
    today = search(MODEL, load_cluster("hgx-h100", 4), WORKLOAD, space=SPACE, ranked=2)
    assert [r.layout for r in one.rows] == [e.layout for e in today.estimates] and one.certain


def _rounds(model, groups, workload, space, ranked):
    """The pipeline search the long way: round K = 20, 40, ... reads every type's fresh
    ``search(..., ranked=K)`` and times each layout not seen on the mixed pipeline with
    ``hetero_pp`` (fully), until ``ranked`` fit; rows by step, rejected in the order seen."""
    from explorer.hetero import _on
    from explorer.hetero_search import ONE_STAGE_PER_RANK, _mixed_space

    world = sum(g.world_size for g in groups)
    chosen = replace(
        space,
        schedules=tuple(x for x in space.schedules if x not in ONE_STAGE_PER_RANK),
        max_virtual=1,
        pp_values=tuple(d for d in range(2, world + 1) if world % d == 0),
        tp_values=_mixed_space(replace(space, pp_values=None), groups).tp_values,
    )
    rows, rejected, seen, k = [], [], set(), max(2 * ranked, 20)  # fmt: skip
    while True:
        for g in groups:
            for e in search(model, _on(g, world), workload, num_gpus=world, space=chosen,
                            ranked=k).estimates:  # fmt: skip
                if e.layout in seen:
                    continue
                seen.add(e.layout)
                try:
                    placement = contiguous_placement(groups, e.layout)
                    step = hetero_pp(model, groups, placement, e.layout, workload)
                except ValueError as error:
                    rejected.append((e.layout, str(error)))
                    continue
                (rows if step.fits else rejected).append((e.layout, step))
        if len(rows) >= ranked or k >= 160:
            return sorted(rows, key=lambda r: r[1].step_s), rejected, k
        k *= 2


def test_the_pipeline_rows_are_the_rounds_of_fresh_searches_timed_in_full():
    # Each type's search is ranked further round by round (resumable) and a balanced split a
    # type cannot hold is not timed: neither changes a row, a rejection or the K reached.
    # Llama 3.1 70B on 16 H100 + 16 A100 of 24 GiB: few layouts fit the mixed pipeline even
    # with the blocks each type holds capped, so asking for 10 runs more than one round (K =
    # 20, 40, ...).
    big, space = load_model("llama-3.1-70b"), replace(SPACE, micro_batch_sizes=(1, 2),
                                                      zero_stages=(0, 1))  # fmt: skip
    small = replace(A100, gpu=replace(A100.gpu, memory_bytes=int(24 * GiB)))
    found = pipeline_search(big, (H100, small), WORKLOAD, space=space, ranked=10)
    rows, rejected, k = _rounds(big, (H100, small), WORKLOAD, space, 10)
    assert found.searched == k > 20 and len(rows) > 3
    assert [(r.layout, r.step_s, r.hetero) for r in found.rows] == [
        (layout, step.step_s, step) for layout, step in rows[:10]]  # fmt: skip
    assert [lay for lay, _ in found.rejected] == [lay for lay, _ in rejected]
    for (_, why), (_, step) in zip(found.rejected, rejected, strict=True):
        if not isinstance(step, str):  # the memory message per type that does not fit
            assert why == "; ".join(f"needs {t.peak_bytes / GiB:.1f} GiB on the {t.gpu}"
                                    for t in step.types if not t.fits)  # fmt: skip


def test_a_placement_the_groups_cannot_hold_is_one_sentence():
    from explorer.specs import Layout

    with pytest.raises(ValueError, match="do not hold whole pipeline ranks"):
        contiguous_placement((H100, A100), Layout(tp=8, pp=1, dp=4))


MIXED = replace(
    Scenario(),
    mixed=MixedInputs(groups=(("h100-sxm", 8, 4), ("a100-80g", 8, 4)), split="speed"),
    straggler=StragglerInputs(slowdown_pct=20.0, where="pp-stage", stage=1),
)


def test_the_mixed_cluster_and_straggler_round_trip_through_the_url_and_json():
    query = to_query(MIXED)
    assert query["mixed"] == "h100-sxm:8:4,a100-80g:8:4" and query["slow"] == "20.0"
    assert from_query(query) == (MIXED, [])
    assert from_json(to_json(MIXED)) == MIXED
    assert "mixed" not in to_query(Scenario()) and "slow" not in to_query(Scenario())
    groups = resolve_mixed(MIXED.mixed)
    assert [(g.gpu.name, g.world_size) for g in groups] == [
        ("NVIDIA H100 SXM 80GB", 32), ("NVIDIA A100 SXM 80GB", 32)]  # fmt: skip


def test_a_bad_group_in_a_link_is_one_sentence_and_the_default():
    scenario, messages = from_query({"mixed": "h100-sxm:8", "slow": "-5"})
    assert scenario == Scenario() and len(messages) == 2
    assert "GPU:PER_NODE:NODES" in messages[0]
    with pytest.raises(ValueError, match="Unknown GPU 'h1000'"):
        resolve_mixed(MixedInputs(groups=(("h1000", 8, 1),)))


def test_the_report_has_the_sections_only_when_the_scenario_has_them_and_loads_back():
    from explorer.report import build_report
    from explorer.report.json_io import load_report_json, report_json

    plain = build_report(Scenario())
    zero = build_report(replace(Scenario(), straggler=StragglerInputs(slowdown_pct=0.0)))
    keys = [s.key for s in plain.sections]
    assert "mixed" not in keys and "straggler" not in keys
    assert [s.key for s in zero.sections] == keys and report_json(zero) == report_json(plain)
    report = build_report(MIXED)
    assert {"mixed", "straggler"} <= {s.key for s in report.sections}
    mixed = report.results["mixed"]
    h100, a100 = (t["microbatches"] for t in mixed["types"])
    assert h100 > a100  # the speed split gives the H100 replicas more
    slow = report.results["straggler"]
    assert slow["step_time_s"] > slow["baseline_step_time_s"]
    assert "slower the step takes" in report.section("straggler").paragraphs[0]
    assert load_report_json(report_json(report)) == MIXED
    assert json.loads(report_json(report))["results"]["mixed"]["split"] == "speed"


def _cli(capsys, *args: str) -> tuple[int, dict | str]:
    from explorer import cli

    try:
        code = cli.main(list(args))
    except SystemExit as stop:  # bad input: one sentence, exit 2
        code = int(stop.code or 0)
    out = capsys.readouterr()
    return code, json.loads(out.out) if code == 0 else out.err


SEARCH = ("search", "--json", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--gpus", "32",
          "--seq", "4096", "--gbs", "64", "--schedules", "1f1b", "--zero-stages", "1",
          "--mbs-values", "1", "--recomputes", "selective", "full", "--top", "3")  # fmt: skip


def test_search_takes_a_mixed_cluster_and_a_straggler_and_refuses_bad_input(capsys):
    code, out = _cli(capsys, *SEARCH, "--mixed-groups", "hgx-h100:2,dgx-a100:2")
    assert code == 0 and isinstance(out, dict)
    mixed = out["mixed"]
    assert mixed["certain"] and len(mixed["layouts"]) == 3
    assert [g["num_nodes"] for g in mixed["groups"]] == [2, 2]
    code, out = _cli(capsys, *SEARCH, "--straggler-slowdown", "0")
    assert code == 0 and isinstance(out, dict)
    assert [r["step_time_s"] for r in out["straggler"]["layouts"]] == [
        r["step_time_s"] for r in out["layouts"]]  # fmt: skip
    code, err = _cli(capsys, *SEARCH, "--mixed-groups", "hgx-h100:two")
    assert code == 2 and isinstance(err, str) and len(err.strip().splitlines()) == 1
    code, err = _cli(capsys, *SEARCH, "--mixed-groups", "hgx-h100:2", "--straggler-slowdown", "1")
    assert code == 2 and "not both" in str(err)
