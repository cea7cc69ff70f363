"""The estimate's fast step timing against the full simulation: to the last bit, or extrapolated
from a shorter step's settled steady state within rounding."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from explorer.schedules import StageTimes, build_schedule, simulate, step_time
from explorer.schedules.builders import stage_orders
from explorer.schedules.periodic import SHAPES, extrapolated, steady_part

EXTRAPOLATED = 1e-11
"""Relative tolerance of an extrapolated step: rounding of the ends, times the extra
iterations (explorer.schedules.periodic's bound is below 2^-45 x iterations)."""


def _times(kind: str, stages: int, seed: int = 0) -> StageTimes:
    """Stage times of one shape: equal, heavier ends, a heavy middle, random, with p2p."""
    rng = np.random.default_rng(seed)
    f = np.ones(stages)
    if kind == "ends":  # the embedding's stage lighter, the head's heavier
        f[0], f[-1] = 0.8, 1.4
    elif kind == "middle":
        f[stages // 2] = 1.5
    elif kind in ("random", "p2p"):
        f = rng.uniform(0.5, 1.5, stages)
    b = 1.2 * f if kind != "random" else rng.uniform(0.5, 2.0, stages)
    w = 0.7 * f if kind != "random" else rng.uniform(0.0, 1.5, stages)
    return StageTimes(
        forward_s=tuple(f), backward_s=tuple(b), weight_s=tuple(w),
        p2p_s=0.05 if kind == "p2p" else 0.0,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("name", "stages", "microbatches", "virtual"),
    [
        ("gpipe", 4, 12, 1),
        ("1f1b", 4, 6, 1),
        ("1f1b", 6, 4, 1),
        ("interleaved", 4, 10, 2),
        ("interleaved", 3, 9, 3),
        ("zb-h1", 8, 16, 1),
        ("dualpipe", 8, 16, 1),
        ("dualpipe", 4, 24, 1),
        ("zb-v", 4, 7, 1),
        ("zb-v", 8, 20, 1),
        ("dualpipev", 4, 8, 1),
        ("dualpipev", 6, 17, 1),
    ],
)
@pytest.mark.parametrize("kind", ["equal", "ends", "middle", "random", "p2p"])
def test_short_steps_equal_the_simulator_to_the_last_bit(name, stages, microbatches, virtual, kind):
    times = _times(kind, stages)
    timeline = simulate(build_schedule(name, stages, microbatches, virtual), times)
    timed = step_time(name, stages, microbatches, virtual, times)
    assert timed.makespan_s == timeline.makespan_s
    assert timed.busy_s == timeline.busy_s


@pytest.mark.parametrize(
    ("name", "stages", "microbatches"),
    [
        ("1f1b", 4, 200),
        ("1f1b", 16, 300),
        ("zb-h1", 4, 200),
        ("zb-h1", 8, 400),
        ("dualpipe", 4, 120),
        ("dualpipe", 8, 400),
        ("dualpipe", 16, 240),
        ("zb-v", 4, 200),
        ("zb-v", 6, 300),
        ("dualpipev", 4, 200),
        ("dualpipev", 8, 300),
    ],
)
@pytest.mark.parametrize("kind", ["equal", "ends", "middle", "random", "p2p"])
def test_long_steps_are_extrapolated_within_rounding(name, stages, microbatches, kind):
    times = _times(kind, stages)
    timeline = simulate(build_schedule(name, stages, microbatches), times)
    assert extrapolated(name, stages, microbatches, times) is not None  # the fast path runs
    timed = step_time(name, stages, microbatches, 1, times)
    assert timed.makespan_s == pytest.approx(timeline.makespan_s, rel=EXTRAPOLATED)
    assert timed.busy_s == pytest.approx(timeline.busy_s, rel=EXTRAPOLATED)


@settings(max_examples=30, deadline=None)
@given(
    name=st.sampled_from(sorted(SHAPES)),
    half_stages=st.integers(1, 4),
    extra=st.integers(0, 120),
    seed=st.integers(0, 10_000),
)
def test_any_step_matches_the_simulator(name, half_stages, extra, seed):
    stages = 2 * half_stages
    microbatches = 2 * (stages + extra)
    times = _times("random", stages, seed)
    timeline = simulate(build_schedule(name, stages, microbatches), times)
    timed = step_time(name, stages, microbatches, 1, times)
    assert timed.makespan_s == pytest.approx(timeline.makespan_s, rel=EXTRAPOLATED)
    assert timed.busy_s == pytest.approx(timeline.busy_s, rel=EXTRAPOLATED)


PATTERNS = {
    "1f1b": "FB", "zb-h1": "FBW", "dualpipe": "FBWFBW", "zb-v": "FBWFBW", "dualpipev": "FBWFBW",
}  # fmt: skip
"""One steady iteration's kinds (DualPipe: F0 B1 W1 F1 B0 W0; ZB-V: F0 B0 W0 F1 B1 W1)."""


@pytest.mark.parametrize("name", sorted(SHAPES))
@pytest.mark.parametrize(("stages", "microbatches"), [(4, 40), (8, 64)])
def test_more_microbatches_add_one_steady_iteration_per_stage(name, stages, microbatches):
    # The lemma behind the extrapolation: M + delta runs the same actions as M, with one more
    # steady iteration on every stage at steady_part's position.
    period, delta = SHAPES[name]
    short, long = (stage_orders(name, stages, m)[0] for m in (microbatches, microbatches + delta))
    for stage in range(stages):
        first, count = steady_part(name, stages, stage, microbatches)
        assert steady_part(name, stages, stage, microbatches + delta) == (first, count + 1)
        kinds = [(k, c) for k, _, c in short[stage]]
        more = [(k, c) for k, _, c in long[stage]]
        assert more == kinds[: first + period] + kinds[first:]
        steady = "".join(k for k, _ in kinds[first : first + period])
        assert steady == PATTERNS[name]


@pytest.mark.parametrize("name", ["zb-h1", "zb-v", "dualpipev", "dualpipe"])
def test_steps_of_one_times_and_many_counts_share_the_short_step_and_match_the_simulator(name):
    # The speed split and the uneven batch time one stage-times at many micro-batch counts: the
    # shorter step they are extrapolated from is simulated once (cached) and serves them all.
    from explorer.schedules.periodic import _short

    times = _times("ends", 8, seed=3)
    _short.cache_clear()
    counts = (200, 96, 300, 202)  # even (DualPipe), each past the first shorter step tried
    timed = [step_time(name, 8, m, 1, times) for m in counts]
    assert _short.cache_info().misses == 1 and _short.cache_info().hits == len(counts) - 1
    for m, t in zip(counts, timed, strict=True):
        timeline = simulate(build_schedule(name, 8, m), times)
        assert t.makespan_s == pytest.approx(timeline.makespan_s, rel=EXTRAPOLATED)
        assert t.busy_s == pytest.approx(timeline.busy_s, rel=EXTRAPOLATED)


@pytest.mark.parametrize("stages", [16, 32])
@pytest.mark.parametrize("kind", ["ends", "middle"])
def test_zb_h1_with_unequal_stages_settles_before_4p_and_matches_the_simulator(stages, kind):
    # periodic.tries: a try shorter than the 4P + 32 one (P + 16 or 2P + 32 steady iterations)
    # settles for unequal stages, and the step extrapolated from it is the full simulation's
    # within rounding.
    from explorer.schedules.periodic import _short, tries

    times = _times(kind, stages)
    settling = [e for e in tries(stages) if stages + e < 6 * stages
                and _short("zb-h1", stages, stages + e, times) is not None]  # fmt: skip
    assert settling and settling[0] in (stages + 16, 2 * stages + 32)
    microbatches = 6 * stages + 40  # past every try before 4P + 32
    timeline = simulate(build_schedule("zb-h1", stages, microbatches), times)
    timed = step_time("zb-h1", stages, microbatches, 1, times)
    assert timed.makespan_s == pytest.approx(timeline.makespan_s, rel=EXTRAPOLATED)
    assert timed.busy_s == pytest.approx(timeline.busy_s, rel=EXTRAPOLATED)
