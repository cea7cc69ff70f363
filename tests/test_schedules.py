"""Pipeline schedules and the simulator against closed forms, papers and dependency rules."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from explorer.schedules import (
    Action,
    StageTimes,
    Timeline,
    build_schedule,
    group_size,
    peak_inflight,
    simulate,
)
from explorer.schedules.builders import microbatch_grid, require_valid
from explorer.specs import SCHEDULES

EXACT = 1e-9
"""Relative tolerance where the simulation should reproduce a closed form exactly."""
TIME_TOLERANCE_S = 1e-9
"""Slack when comparing simulated times, s."""
SPLIT = ("zb-h1", "dualpipe", "zb-v", "dualpipev")


def _route(name: str, stages: int, microbatches: int, virtual: int, mb: int) -> list:
    """(stage, chunk) positions a micro-batch's forward visits, written out independently."""
    if name == "dualpipe":
        if mb < microbatches // 2:
            return [(s, 0) for s in range(stages)]
        return [(stages - 1 - s, 1) for s in range(stages)]
    if name in ("zb-v", "dualpipev"):  # down the ranks on chunk 0, back up on chunk 1
        return [(s, 0) for s in range(stages)] + [(stages - 1 - s, 1) for s in range(stages)]
    return [(s, c) for c in range(virtual) for s in range(stages)]


def _route_of(schedule, event) -> list:
    return _route(
        schedule.name, schedule.stages, schedule.microbatches, schedule.virtual, event.microbatch
    )


def _unit_times(name: str, stages: int, p2p_s: float = 0.0) -> StageTimes:
    """F = 1, full backward = 2; split schedules run it as B = 1 and W = 1."""
    if name in SPLIT:
        return StageTimes.uniform(stages, 1.0, 1.0, 1.0, p2p_s=p2p_s)
    return StageTimes.uniform(stages, 1.0, 2.0, 0.0, p2p_s=p2p_s)


def _expected_actions(name: str, stages: int, microbatches: int, virtual: int) -> Counter:
    kinds = "FBW" if name in SPLIT else "FB"
    expected: Counter = Counter()
    for mb in range(microbatches):
        for stage, chunk in _route(name, stages, microbatches, virtual, mb):
            for kind in kinds:
                expected[(stage, kind, mb, chunk)] += 1
    return expected


def _ready_s(timeline: Timeline, ends: dict, event, route: list) -> float:
    """When ``event``'s input is there, from the rules written out independently, s."""
    p2p = timeline.times.p2p_s
    k = route.index((event.stage, event.chunk))
    if event.kind == "W":
        return ends[("B", event.microbatch, event.stage, event.chunk)]
    if event.kind == "F":
        if k == 0:
            return 0.0
        there = route[k - 1]
    elif k == len(route) - 1:
        return ends[("F", event.microbatch, event.stage, event.chunk)]
    else:
        there = route[k + 1]
    hop = p2p if there[0] != event.stage else 0.0
    return ends[(event.kind, event.microbatch, there[0], there[1])] + hop


def check_timeline(timeline: Timeline) -> None:
    """Every action once on the right stage, in list order, after its inputs, as soon as it can."""
    s = timeline.schedule
    events = list(timeline.events)
    got = Counter((e.stage, e.kind, e.microbatch, e.chunk) for e in events)
    assert got == _expected_actions(s.name, s.stages, s.microbatches, s.virtual)
    ends = {(e.kind, e.microbatch, e.stage, e.chunk): e.end_s for e in events}
    pairs = s.pairs or ((),) * s.stages
    for stage, actions in enumerate(s.actions):
        mine = [e for e in events if e.stage == stage]
        assert [(e.kind, e.microbatch, e.chunk) for e in mine] == [
            (a.kind, a.microbatch, a.chunk) for a in actions
        ]
        free = 0.0
        for i, e in enumerate(mine):
            ready = _ready_s(timeline, ends, e, _route_of(s, e))
            if i in pairs[stage]:  # an F&B pair's F also waits for its B's input
                ready = max(ready, _ready_s(timeline, ends, mine[i + 1], _route_of(s, mine[i + 1])))
            assert e.start_s >= ready - TIME_TOLERANCE_S
            assert e.start_s >= free - TIME_TOLERANCE_S
            assert e.start_s == pytest.approx(max(ready, free), abs=TIME_TOLERANCE_S)
            free = e.end_s


CASES = [
    ("gpipe", 1, 1, 1),
    ("gpipe", 4, 3, 1),
    ("gpipe", 4, 8, 1),
    ("1f1b", 1, 5, 1),
    ("1f1b", 4, 2, 1),
    ("1f1b", 4, 8, 1),
    ("1f1b", 7, 13, 1),
    ("interleaved", 4, 8, 1),
    ("interleaved", 1, 3, 2),
    ("interleaved", 2, 4, 4),
    ("interleaved", 4, 8, 2),
    ("interleaved", 4, 10, 3),
    ("interleaved", 3, 7, 2),
    ("zb-h1", 1, 4, 1),
    ("zb-h1", 5, 3, 1),
    ("zb-h1", 4, 8, 1),
    ("zb-h1", 6, 17, 1),
    ("dualpipe", 2, 4, 1),
    ("dualpipe", 4, 8, 1),
    ("dualpipe", 6, 14, 1),
    ("dualpipe", 8, 20, 1),
    ("zb-v", 1, 3, 1),
    ("zb-v", 4, 3, 1),
    ("zb-v", 4, 7, 1),
    ("zb-v", 5, 16, 1),
    ("dualpipev", 1, 2, 1),
    ("dualpipev", 3, 6, 1),
    ("dualpipev", 4, 11, 1),
]


def _uneven(stages: int, p2p_s: float) -> StageTimes:
    """Deterministic, unequal stage times."""
    return StageTimes(
        forward_s=tuple(1.0 + 0.3 * (s % 3) for s in range(stages)),
        backward_s=tuple(1.5 + 0.4 * ((s + 1) % 2) for s in range(stages)),
        weight_s=tuple(0.5 + 0.2 * (s % 4) for s in range(stages)),
        p2p_s=p2p_s,
    )


@pytest.mark.parametrize(("name", "stages", "microbatches", "virtual"), CASES)
@pytest.mark.parametrize("p2p_s", [0.0, 0.25])
def test_every_action_runs_once_on_its_stage_after_its_inputs(
    name, stages, microbatches, virtual, p2p_s
):
    schedule = build_schedule(name, stages, microbatches, virtual)
    check_timeline(simulate(schedule, _unit_times(name, stages, p2p_s)))
    check_timeline(simulate(schedule, _uneven(stages, p2p_s)))


@st.composite
def _valid_requests(draw):
    name = draw(st.sampled_from(SCHEDULES))
    virtual = 1
    if name == "dualpipe":
        stages = 2 * draw(st.integers(1, 5))
        microbatches = 2 * draw(st.integers(stages, 3 * stages))
    elif name == "dualpipev":
        stages = draw(st.integers(1, 8))
        microbatches = draw(st.integers(2 * stages, 4 * stages + 3))
    elif name == "interleaved":
        stages, virtual = draw(st.integers(1, 6)), draw(st.integers(1, 4))
        microbatches = draw(st.integers(stages if virtual > 1 else 1, 4 * stages + 3))
    else:
        stages, microbatches = draw(st.integers(1, 8)), draw(st.integers(1, 24))
    seconds = st.floats(0.05, 3.0, allow_nan=False)
    times = StageTimes(
        forward_s=tuple(draw(st.lists(seconds, min_size=stages, max_size=stages))),
        backward_s=tuple(draw(st.lists(seconds, min_size=stages, max_size=stages))),
        weight_s=tuple(draw(st.lists(seconds, min_size=stages, max_size=stages))),
        p2p_s=draw(st.sampled_from([0.0, 0.1, 0.7])),
    )
    return name, stages, microbatches, virtual, times


@settings(max_examples=60, deadline=None)
@given(_valid_requests())
def test_valid_requests_never_raise_and_respect_every_dependency(request_):
    name, stages, microbatches, virtual, times = request_
    timeline = simulate(build_schedule(name, stages, microbatches, virtual), times)
    check_timeline(timeline)
    assert 0.0 <= timeline.bubble_fraction < 1.0
    for curve, peak in zip(timeline.inflight, timeline.peak_inflight, strict=True):
        assert min(curve.count) >= 0 and curve.count[-1] == 0
        assert max(curve.count) == peak


@settings(max_examples=80, deadline=None)
@given(
    st.sampled_from([*SCHEDULES, "pipedream"]),
    st.integers(-1, 9),
    st.integers(-1, 20),
    st.integers(-1, 4),
)
def test_any_request_builds_or_raises_a_value_error(name, stages, microbatches, virtual):
    try:
        schedule = build_schedule(name, stages, microbatches, virtual)
    except ValueError as error:
        assert str(error) and "\n" not in str(error)
    else:
        assert len(schedule.actions) == stages


def _bubble(name: str, stages: int, microbatches: int, virtual: int = 1) -> float:
    schedule = build_schedule(name, stages, microbatches, virtual)
    return simulate(schedule, _unit_times(name, stages)).bubble_fraction


@pytest.mark.parametrize(
    ("name", "stages", "microbatches"),
    [
        pytest.param("gpipe", 4, 8, id="narayanan2021-sec2.2.1-gpipe-p4-m8"),
        pytest.param("gpipe", 8, 3, id="narayanan2021-sec2.2.1-gpipe-p8-m3"),
        pytest.param("gpipe", 16, 64, id="narayanan2021-sec2.2.1-gpipe-p16-m64"),
        pytest.param("1f1b", 4, 8, id="narayanan2021-sec2.2.1-1f1b-p4-m8"),
        pytest.param("1f1b", 8, 32, id="narayanan2021-sec2.2.1-1f1b-p8-m32"),
        pytest.param("1f1b", 5, 2, id="narayanan2021-sec2.2.1-1f1b-p5-m2"),
        pytest.param("interleaved", 4, 8, id="narayanan2021-sec2.2.1-interleaved-v1-is-1f1b"),
    ],
)
def test_gpipe_and_1f1b_bubble_is_p_minus_1_over_m_plus_p_minus_1(name, stages, microbatches):
    expected = (stages - 1) / (microbatches + stages - 1)
    assert _bubble(name, stages, microbatches) == pytest.approx(expected, rel=EXACT)


@pytest.mark.parametrize(
    ("stages", "microbatches", "virtual"),
    [
        pytest.param(4, 8, 2, id="narayanan2021-sec2.2.2-p4-m8-v2"),
        pytest.param(4, 16, 4, id="narayanan2021-sec2.2.2-p4-m16-v4"),
        pytest.param(8, 32, 2, id="narayanan2021-sec2.2.2-p8-m32-v2"),
        pytest.param(16, 64, 4, id="narayanan2021-sec2.2.2-p16-m64-v4"),
        pytest.param(4, 10, 2, id="megatron-core-group-size-p4-m10-v2"),
    ],
)
def test_interleaved_bubble_shrinks_by_v(stages, microbatches, virtual):
    expected = (stages - 1) / (virtual * microbatches + stages - 1)
    got = _bubble("interleaved", stages, microbatches, virtual)
    assert got == pytest.approx(expected, rel=EXACT)


@pytest.mark.parametrize(
    ("stages", "microbatches"),
    [
        pytest.param(4, 8, id="qi2024-sec3.1-zbh1-p4-m8"),
        pytest.param(8, 24, id="qi2024-sec3.1-zbh1-p8-m24"),
        pytest.param(16, 64, id="qi2024-sec3.1-zbh1-p16-m64"),
    ],
)
def test_zb_h1_bubble_is_a_third_of_1f1b_when_f_b_w_equal(stages, microbatches):
    times = StageTimes.uniform(stages, 1.0, 1.0, 1.0)  # 1F1B runs B + W = 2 as one backward
    zb = simulate(build_schedule("zb-h1", stages, microbatches), times)
    one = simulate(build_schedule("1f1b", stages, microbatches), times)
    # Table: 1F1B (p-1)(F+B), ZB-H1 (p-1)(F+B-2W), B the full backward
    assert one.idle_s[0] == pytest.approx((stages - 1) * 3.0, rel=EXACT)
    assert zb.idle_s[0] == pytest.approx((stages - 1) * 1.0, rel=EXACT)
    assert zb.makespan_s - zb.busy_s[0] == pytest.approx(one.idle_s[0] / 3, rel=EXACT)


@pytest.mark.parametrize(
    ("stages", "microbatches"),
    [
        pytest.param(4, 8, id="narayanan2021-sec2.2.1-1f1b-memory-p4"),
        pytest.param(8, 32, id="narayanan2021-sec2.2.1-1f1b-memory-p8"),
        pytest.param(6, 4, id="narayanan2021-sec2.2.1-1f1b-memory-m-below-p"),
    ],
)
def test_1f1b_holds_p_minus_i_microbatches_and_gpipe_holds_m(stages, microbatches):
    expected = tuple(float(min(stages - i, microbatches)) for i in range(stages))
    assert peak_inflight("1f1b", stages, microbatches) == expected
    assert peak_inflight("gpipe", stages, microbatches) == (float(microbatches),) * stages


@pytest.mark.parametrize(
    ("stages", "microbatches", "virtual"),
    [
        pytest.param(4, 8, 2, id="korthikanti2022-sec4.2.3-p4-v2"),
        pytest.param(4, 16, 4, id="korthikanti2022-sec4.2.3-p4-v4"),
        pytest.param(8, 32, 2, id="korthikanti2022-sec4.2.3-p8-v2"),
        pytest.param(16, 64, 3, id="korthikanti2022-sec4.2.3-p16-v3"),
    ],
)
def test_interleaved_first_stage_holds_megatrons_factor(stages, microbatches, virtual):
    factor = stages * (1 + (stages - 1) / (stages * virtual))
    assert peak_inflight("interleaved", stages, microbatches, virtual)[0] == pytest.approx(
        factor, rel=EXACT
    )


@pytest.mark.parametrize("microbatches", [8, 16, 32])
def test_zb_h1_holds_p_microbatches_on_every_stage_like_1f1b_first(microbatches):
    assert peak_inflight("zb-h1", 4, microbatches) == (4.0,) * 4


@pytest.mark.parametrize(
    ("stages", "microbatches"),
    [
        pytest.param(4, 8, id="deepseekv3-table2-p4-m8"),
        pytest.param(8, 20, id="deepseekv3-table2-p8-m20"),
        pytest.param(16, 64, id="deepseekv3-table2-p16-m64"),
    ],
)
def test_dualpipe_holds_p_plus_1_microbatches_and_two_parameter_copies(stages, microbatches):
    schedule = build_schedule("dualpipe", stages, microbatches)
    assert schedule.parameter_copies == (2,) * stages
    assert peak_inflight("dualpipe", stages, microbatches) == (stages + 1.0,) * stages


@pytest.mark.parametrize(
    ("stages", "f", "b", "w"),
    [
        pytest.param(4, 1.0, 1.0, 1.0, id="deepseekv3-table2-p4-equal"),
        pytest.param(8, 1.0, 1.0, 1.0, id="deepseekv3-table2-p8-equal"),
        pytest.param(8, 1.0, 2.0, 1.0, id="deepseekv3-table2-p8-slow-b"),
        pytest.param(16, 2.0, 2.0, 1.0, id="deepseekv3-table2-p16-slow-f"),
        pytest.param(8, 1.0, 0.5, 1.0, id="deepseekv3-table2-p8-slow-w"),
    ],
)
def test_dualpipe_bubble_is_within_table2_and_below_zb1p(stages, f, b, w):
    times = StageTimes.uniform(stages, f, b, w)
    full_b = b + w
    table2 = (stages / 2 - 1) * ((f + full_b) + full_b - 3 * w)  # F&B = F + B, no overlap
    zb1p = (stages - 1) * (f + full_b - 2 * w)
    idle = [simulate(build_schedule("dualpipe", stages, m), times).idle_s for m in (2 * stages, 64)]
    assert idle[0] == pytest.approx(idle[1], rel=EXACT)  # a fixed cost, whatever M
    assert max(idle[0]) <= table2 + TIME_TOLERANCE_S
    assert max(idle[0]) < zb1p


@pytest.mark.parametrize(
    ("stages", "microbatches"), [(2, 3), (4, 7), (4, 32), (8, 15), (8, 64), (16, 40)]
)
def test_zb_v_idles_only_for_the_first_forward_chain_when_f_b_w_equal(stages, microbatches):
    # Qi et al. 2024 sec. 6: with T_F = T_B = T_W ZB-V has no bubble once M >= 2P - 1; within
    # one step the only idle time is the last rank waiting for micro-batch 0's chunk-0
    # forwards, (P-1) T_F of a chunk, which post-validation overlaps with the step before.
    # A chunk is half a rank: F = B = W = 1 per rank, 0.5 per chunk.
    timeline = simulate(build_schedule("zb-v", stages, microbatches), _unit_times("zb-v", stages))
    assert timeline.makespan_s == pytest.approx(3 * microbatches + (stages - 1) * 0.5, rel=EXACT)
    assert timeline.idle_s == pytest.approx(((stages - 1) * 0.5,) * stages, rel=EXACT)


@pytest.mark.parametrize(("stages", "microbatches"), [(4, 8), (4, 32), (8, 15), (8, 64)])
def test_zb_v_holds_1f1b_peak_on_every_rank_with_one_parameter_copy(stages, microbatches):
    # Qi et al. 2024 sec. 6: 2P chunk activations of half a rank each, 1F1B's first-stage P.
    schedule = build_schedule("zb-v", stages, microbatches)
    assert schedule.parameter_copies == (1,) * stages
    assert peak_inflight("zb-v", stages, microbatches) == (float(stages),) * stages
    assert max(peak_inflight("1f1b", stages, microbatches)) == stages


@pytest.mark.parametrize(
    ("stages", "f", "b", "w"),
    [
        pytest.param(2, 1.0, 1.0, 1.0, id="dualpipe-readme-dualpipev-p2-equal"),
        pytest.param(4, 1.0, 1.0, 1.0, id="dualpipe-readme-dualpipev-p4-equal"),
        pytest.param(8, 1.0, 1.0, 1.0, id="dualpipe-readme-dualpipev-p8-equal"),
        pytest.param(8, 1.0, 2.0, 1.0, id="dualpipe-readme-dualpipev-p8-slow-b"),
        pytest.param(8, 2.0, 2.0, 1.0, id="dualpipe-readme-dualpipev-p8-slow-f"),
    ],
)
def test_dualpipev_bubble_is_the_readme_formula_over_its_2p_stages(stages, f, b, w):
    # deepseek-ai/DualPipe README: DualPipeV ("cut-in-half" DualPipe) on PP/2 ranks has the
    # bubble (PP/2 - 1)(F&B + B - 3W), PP = 2P chunk-stages, F, B (full), W of one chunk; here
    # F&B = F + B (the overlap is not modelled). A chunk is half a rank's times.
    times = StageTimes.uniform(stages, f, b, w)
    cf, cb, cw = f / 2, (b + w) / 2, w / 2  # per chunk; cb the full backward
    readme = (stages - 1) * ((cf + cb) + cb - 3 * cw)
    zb1p = (2 * stages - 1) * (cf + cb - 2 * cw)  # ZB-H1 over the same 2P chunk-stages
    runs = [simulate(build_schedule("dualpipev", stages, m), times) for m in (2 * stages, 64)]
    idle = [run.idle_s for run in runs]
    assert idle[0] == pytest.approx(idle[1], rel=EXACT)  # a fixed cost, whatever M
    assert max(idle[0]) <= readme + TIME_TOLERANCE_S
    assert max(idle[0]) < zb1p


@pytest.mark.parametrize(("stages", "microbatches"), [(2, 4), (4, 8), (8, 40)])
def test_dualpipev_holds_pp_plus_1_chunks_and_one_parameter_copy(stages, microbatches):
    # deepseek-ai/DualPipe README: activation PP + 1 chunk sets (2P + 1 halves of a rank).
    schedule = build_schedule("dualpipev", stages, microbatches)
    assert schedule.parameter_copies == (1,) * stages
    assert peak_inflight("dualpipev", stages, microbatches) == ((2 * stages + 1) / 2,) * stages


def test_dualpipev_ranks_follow_torchs_steps():
    # torch ScheduleDualPipeV, P = 2, M = 4, rank 1: step 1 none, step 2 F0 F1 twice, step 3
    # none, step 4 (M - 2P + r + 1 = 2): the first F0 B1 unpaired on the last rank, F1 B0
    # pairs; steps 5-8.
    labels = " ".join(a.label for a in build_schedule("dualpipev", 2, 4).actions[1])
    assert labels.startswith("F0 F0.1 F1 F1.1 F2 B0.1 W0.1 F2.1 B0 W0 F3 B1.1 W1.1 F3.1 B1 W1")


def test_zb_v_first_rank_follows_torchs_warmup():
    # torch ScheduleZBVZeroBubble, rank 0 of 2: 2P - 1 = 3 F0, no F1 F0 pairs, P = 2 groups
    # F1 B1 W1, then F0 B0 W0 F1 B1 W1.
    labels = " ".join(a.label for a in build_schedule("zb-v", 2, 6).actions[0][:15])
    assert labels == "F0 F1 F2 F0.1 B0.1 W0.1 F1.1 B1.1 W1.1 F3 B0 W0 F2.1 B2.1 W2.1"


def test_v_shaped_chunks_take_half_their_ranks_time():
    times = StageTimes(forward_s=(2.0, 4.0), backward_s=(2.0, 2.0), weight_s=(1.0, 1.0))
    for name in ("zb-v", "dualpipev"):
        events = simulate(build_schedule(name, 2, 4), times).events
        for e in events:
            if e.kind == "F":
                assert e.end_s - e.start_s == pytest.approx(times.forward_s[e.stage] / 2)


def test_dualpipe_with_two_stages_has_no_bubble():
    timeline = simulate(build_schedule("dualpipe", 2, 8), StageTimes.uniform(2, 1.0, 1.0, 1.0))
    assert timeline.bubble_fraction == pytest.approx(0.0, abs=EXACT)


@pytest.mark.parametrize("slowdown", [1.5, 2.0, 3.0])
def test_a_slow_last_stage_adds_m_times_its_extra_time_to_1f1b(slowdown):
    # By hand: the last stage is the bottleneck and never waits once started, so
    # makespan = (P-1)F [fill] + M a (F+B) [last stage busy] + (P-1)B [drain].
    stages, microbatches = 4, 8
    base = StageTimes.uniform(stages, 1.0, 2.0)
    slow = StageTimes(
        forward_s=(1.0, 1.0, 1.0, slowdown),
        backward_s=(2.0, 2.0, 2.0, 2.0 * slowdown),
        weight_s=(0.0,) * stages,
    )
    schedule = build_schedule("1f1b", stages, microbatches)
    extra = simulate(schedule, slow).makespan_s - simulate(schedule, base).makespan_s
    assert extra == pytest.approx(microbatches * (slowdown - 1) * 3.0, rel=EXACT)


def test_p2p_adds_two_transfers_per_link_to_gpipe():
    stages, microbatches, p2p = 4, 8, 0.1
    timeline = simulate(build_schedule("gpipe", stages, microbatches), _unit_times("gpipe", 4, p2p))
    expected = (microbatches + stages - 1) * 3.0 + 2 * (stages - 1) * p2p  # forward and back
    assert timeline.makespan_s == pytest.approx(expected, rel=EXACT)


@pytest.mark.parametrize(("name", "stages", "microbatches", "virtual"), CASES)
def test_p2p_time_increases_the_makespan(name, stages, microbatches, virtual):
    schedule = build_schedule(name, stages, microbatches, virtual)
    free = simulate(schedule, _unit_times(name, stages)).makespan_s
    paid = simulate(schedule, _unit_times(name, stages, p2p_s=0.2)).makespan_s
    if stages == 1:
        assert paid == pytest.approx(free, rel=EXACT)
    else:
        assert paid > free


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("1f1b", 0, 4, 1), "stages must be at least 1"),
        (("gpipe", 4, 0, 1), "microbatches must be at least 1"),
        (("interleaved", 4, 8, 0), "virtual must be at least 1"),
        (("1f1b", 4, 8, 2), "needs the interleaved schedule"),
        (("interleaved", 4, 3, 2), "needs microbatches >= stages"),
        (("dualpipe", 3, 12, 1), "even number of stages"),
        (("dualpipe", 4, 9, 1), "even number of microbatches, at least twice the stages"),
        (("dualpipe", 4, 6, 1), "at least twice the stages"),
        (("dualpipe", 4, 8, 2), "virtual must be 1"),
        (("zb-v", 4, 8, 2), "virtual must be 1"),
        (("dualpipev", 4, 7, 1), r"at least twice the stages \(8\) microbatches"),
        (("pipedream", 4, 8, 1), "schedule must be one of"),
    ],
)
def test_invalid_requests_say_what_p_and_m_must_satisfy(args, message):
    with pytest.raises(ValueError, match=message):
        build_schedule(*args)


def test_actions_print_compactly():
    assert str(Action(2, "F", 0)) == "2F0"
    assert str(Action(1, "B", 3, 1)) == "1B3.1"
    assert Action(0, "W", 5).label == "W5"


def test_1f1b_actions_are_warmup_steady_cooldown():
    schedule = build_schedule("1f1b", 4, 6)
    assert " ".join(a.label for a in schedule.actions[1]) == "F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 B4 B5"
    assert schedule.text().splitlines()[3] == "stage  3: F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5"


def test_zb_h1_stage_i_defers_i_weight_passes():
    labels = " ".join(a.label for a in build_schedule("zb-h1", 4, 6).actions[2])
    assert labels == "F0 F1 B0 F2 B1 F3 B2 W0 F4 B3 W1 F5 B4 W2 B5 W3 W4 W5"


def test_dualpipe_first_rank_follows_the_reference_steps():
    # deepseek-ai/DualPipe step(): nF0, nF0F1, nB1W1F1, then F0 B1 F1 B0 pairs
    labels = " ".join(a.label for a in build_schedule("dualpipe", 4, 8).actions[0][:12])
    assert labels == "F0 F1 F2 F4.1 B4.1 W4.1 F5.1 F3 B5.1 W5.1 F6.1 B0"


def test_interleaved_group_size_is_p_when_p_divides_m():
    assert group_size(4, 8) == 4
    assert group_size(4, 10) == 5  # 10 % 4 = 2 < 4; 10 % 5 = 0
    assert group_size(4, 11) == 6  # 11 % 6 = 5 >= 4: groups of 6 and 5
    assert group_size(4, 5) == 5


def test_interleaved_with_one_chunk_is_1f1b():
    assert build_schedule("interleaved", 4, 8).actions == build_schedule("1f1b", 4, 8).actions


def test_unsplit_schedules_fold_the_weight_pass_into_b():
    times = StageTimes.uniform(4, 1.0, 1.0, 1.0)
    a = simulate(build_schedule("1f1b", 4, 8), times)
    b = simulate(build_schedule("1f1b", 4, 8), StageTimes.uniform(4, 1.0, 2.0, 0.0))
    assert a.makespan_s == b.makespan_s and a.busy_s == b.busy_s


def test_stage_times_reject_bad_values():
    with pytest.raises(ValueError, match="entries"):
        StageTimes(forward_s=(1.0, 1.0), backward_s=(1.0,), weight_s=(0.0, 0.0))
    with pytest.raises(ValueError, match="zero or more"):
        StageTimes.uniform(2, forward_s=-1.0)
    with pytest.raises(ValueError, match="p2p_s"):
        StageTimes.uniform(2, p2p_s=float("nan"))
    with pytest.raises(ValueError, match="times are for 2 stages"):
        simulate(build_schedule("1f1b", 4, 8), StageTimes.uniform(2))


def test_events_and_timeline_fields_agree():
    timeline = simulate(build_schedule("zb-h1", 4, 8), StageTimes.uniform(4, 1.0, 1.0, 1.0))
    assert len(timeline.events) == 3 * 8 * 4
    assert timeline.events[0] == next(iter(timeline.events))
    assert timeline.makespan_s == max(timeline.events.end_s)
    assert timeline.parameter_copies == (1, 1, 1, 1)
    busy = sum(e.end_s - e.start_s for e in timeline.events)
    assert timeline.bubble_fraction == pytest.approx(1 - busy / (4 * timeline.makespan_s))


def test_each_pass_takes_its_parts_time_over_v():
    times = StageTimes(forward_s=(1.0, 2.0, 3.0, 4.0), backward_s=(1.0,) * 4, weight_s=(0.5,) * 4)
    dual = simulate(build_schedule("dualpipe", 4, 8), times)
    reverse_f = next(e for e in dual.events if e.stage == 0 and e.kind == "F" and e.chunk == 1)
    assert reverse_f.end_s - reverse_f.start_s == 4.0  # stage 0 runs part 3 backwards
    inter = simulate(build_schedule("interleaved", 4, 8, 2), times)
    f = next(e for e in inter.events if e.stage == 2 and e.kind == "F")
    b = next(e for e in inter.events if e.stage == 2 and e.kind == "B")
    assert (f.end_s - f.start_s, b.end_s - b.start_s) == (1.5, 0.75)  # W folded into B, / V


@pytest.mark.parametrize("name", ["1f1b", "interleaved", "zb-h1", "dualpipe", "zb-v", "dualpipev"])
def test_a_second_sweep_replays_the_first_sweeps_order_to_the_same_times(name):
    # explorer.schedules.engine: the first sweep of a compiled schedule records its order,
    # later ones replay it; each must equal a sweep of a fresh compile of its own times.
    from explorer.schedules.builders import route_for, stage_orders
    from explorer.schedules.engine import compile_orders, sweep

    p, m, v = 4, 8, 2 if name == "interleaved" else 1

    def fresh():
        orders, pairs = stage_orders(name, p, m, v)
        return compile_orders(route_for(name, p, v), orders, pairs, m)

    first = StageTimes(forward_s=(1.0, 2.0, 1.5, 1.0), backward_s=(2.0, 3.0, 2.5, 4.0),
                       weight_s=(1.0, 0.5, 1.0, 2.0))  # fmt: skip
    second = StageTimes(forward_s=(3.0, 0.5, 1.0, 2.0), backward_s=(1.0, 1.0, 6.0, 2.0),
                        weight_s=(0.5, 2.0, 0.25, 1.0))  # fmt: skip

    def same(a, b):
        return all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))

    shared = fresh()
    assert same(sweep(shared, first), sweep(fresh(), first)) and len(shared.runs) == 1
    replayed = sweep(shared, second)
    assert same(replayed, sweep(fresh(), second))
    assert not same(replayed, sweep(fresh(), first))  # the times differ: the replay used its own
    with_p2p = StageTimes(forward_s=second.forward_s, backward_s=second.backward_s,
                          weight_s=second.weight_s, p2p_s=0.5)  # fmt: skip
    assert same(sweep(shared, with_p2p), sweep(fresh(), with_p2p))  # p2p: checked, not replayed


@pytest.mark.parametrize("name", ["1f1b", "interleaved", "zb-h1", "dualpipe", "zb-v", "dualpipev"])
@pytest.mark.parametrize("width", [None, 1])
def test_a_replay_by_waves_gives_the_first_sweeps_times_to_the_last_bit(name, width, monkeypatch):
    # explorer.schedules.engine: a later sweep times a wave of independent actions per array
    # operation where waves are wide (P 32 here; width 1 forces waves at any size).
    from explorer.schedules import engine
    from explorer.schedules.builders import route_for, stage_orders

    p, m, v = 32, 96, 2 if name == "interleaved" else 1
    if width is not None:
        monkeypatch.setattr(engine, "WAVE_WIDTH", width)

    def fresh():
        orders, pairs = stage_orders(name, p, m, v)
        return engine.compile_orders(route_for(name, p, v), orders, pairs, m)

    def times(seed):
        rng = np.random.default_rng(seed)
        f, b, w = (tuple(rng.uniform(0.5, 3.0, p).tolist()) for _ in range(3))
        return StageTimes(forward_s=f, backward_s=b, weight_s=w)

    shared = fresh()
    engine.sweep(shared, times(0))
    for seed in (1, 2):
        replayed, first = engine.sweep(shared, times(seed)), engine.sweep(fresh(), times(seed))
        assert all(np.array_equal(a, b) for a, b in zip(replayed, first, strict=True))
    assert shared.waves[0] is not None  # each schedule's waves at P 32 are wide enough
    assert not shared.levels  # read once, then freed


def test_a_schedule_whose_stages_wait_on_each_other_is_a_deadlock():
    # Stage 0 runs B before F: its B waits for stage 1's B, which waits for stage 1's F, which
    # waits for stage 0's F, queued behind that B.
    from explorer.schedules.builders import route_for
    from explorer.schedules.engine import compile_orders, sweep

    orders = [[("B", 0, 0), ("F", 0, 0)], [("F", 0, 0), ("B", 0, 0)]]
    compiled = compile_orders(route_for("1f1b", 2, 1), orders, [[], []], 1)
    with pytest.raises(RuntimeError, match="deadlocks"):
        sweep(compiled, StageTimes.uniform(2))


@pytest.mark.parametrize("name", SCHEDULES)
def test_the_micro_batch_grid_is_what_the_schedule_accepts(name):
    for stages in (2, 4, 6):  # one stage runs no pipeline: no rule (pipeline_time)
        for virtual in (1, 2):
            least, step = microbatch_grid(name, stages, virtual)
            for m in range(1, 6 * stages + 4):
                on_grid = m >= least and (m - least) % step == 0
                try:
                    require_valid(name, stages, m, virtual)
                except ValueError as error:
                    # a V the schedule never takes fails for every M: the grid says nothing
                    assert not on_grid or "virtual" in str(error), (name, stages, virtual, m)
                else:
                    assert on_grid, (name, stages, virtual, m)
