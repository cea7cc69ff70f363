"""The fast paths of the mixed-cluster and straggler searches against exhaustive ones: every
layout of a small space timed on the mixed cluster (or with the straggler in place) and sorted
gives the same top rows as the searches that re-rank only each type's K fastest, and the
pruned uneven-batch mitigation picks what a pass over every micro-batch count picks."""

from __future__ import annotations

import math

import pytest

from explorer.hetero import _on, hetero_dp
from explorer.hetero_search import _mixed_space, merge_groups, mixed_search, straggler_search
from explorer.mesh import SearchSpace
from explorer.presets import load_cluster, load_model
from explorer.search import search
from explorer.specs import TrainingWorkload
from explorer.straggler import Straggler, slowed_stages, step_s, uneven_batch

MODEL = load_model("llama-3.1-8b")
WORKLOAD = TrainingWorkload(seq_len=4096, global_batch_size=64)
SPACE = SearchSpace(schedules=("1f1b", "interleaved"), zero_stages=(1,),
                    recomputes=("selective", "full"), micro_batch_sizes=(1, 2))  # fmt: skip
H100, A100 = load_cluster("hgx-h100", 2), load_cluster("dgx-a100", 2)


def _every_mixed_step(split, groups=(H100, A100)):
    """Every layout of the space on either type, timed by hetero_dp, fitting ones by step."""
    groups = merge_groups(groups)
    world = sum(g.gpus_per_node * g.num_nodes for g in groups)
    space = _mixed_space(SPACE, groups)
    layouts = {}
    for g in groups:
        for e in search(MODEL, _on(g, world), WORKLOAD, num_gpus=world, space=space,
                        ranked=None).estimates:  # fmt: skip
            layouts.setdefault(e.layout, None)
    rows = []
    for layout in layouts:
        try:
            step = hetero_dp(MODEL, groups, layout, WORKLOAD, split)
        except ValueError:
            continue
        if step.fits:
            rows.append((step.step_s, layout))
    rows.sort(key=lambda r: r[0])
    return rows


@pytest.mark.parametrize("split", ["even", "speed"])
def test_the_mixed_search_top_is_the_exhaustive_top(split):
    found = mixed_search(MODEL, (H100, A100), WORKLOAD, split=split, space=SPACE, ranked=5)
    every = _every_mixed_step(split)
    assert found.certain and len(every) > 40  # the space holds far more than the top five
    assert [r.step_s for r in found.rows] == [s for s, _ in every[:5]]
    assert found.rows[0].layout == every[0][1]


def test_a_slower_type_searched_for_its_best_alone_keeps_the_exhaustive_top(monkeypatch):
    # 24 A100s to 8 H100s: the A100s weigh in the speed split's bound (by their weight they
    # would start from the start K); forced here to start from their best layout alone.
    import explorer.hetero_search as hs

    monkeypatch.setattr(hs, "SLOW_WEIGHT", 10.0)
    asked = []  # the K each type's search is ranked to, in turn
    real = hs.resumable_search

    def recorded(*a, **k):
        rank = real(*a, **k)
        return lambda n: asked.append(n) or rank(n)

    monkeypatch.setattr(hs, "resumable_search", recorded)
    groups = (load_cluster("dgx-a100", 3), load_cluster("hgx-h100", 1))
    found = mixed_search(MODEL, groups, WORKLOAD, split="speed", space=SPACE, ranked=5)
    every = _every_mixed_step("speed", groups)
    # the A100s' best, then the H100s' FAST_START x the start K of 40 (54 fastest)
    assert asked[:2] == [1, math.ceil(hs.FAST_START * 40)] == [1, 54]
    assert found.certain and [r.step_s for r in found.rows] == [s for s, _ in every[:5]]


def test_a_type_searched_for_its_best_alone_is_searched_next_from_the_start_k():
    # Two types of 8 GPUs: the fast one's 64 steps climb 0.5 -> 1.0 s evenly, the slow one's
    # best is 2.0 s; the 5th row takes 1.5 s, above the bound 16 / (8 / 1.0 + 8 / 2.0) = 1.333.
    # The fast type would need a K-th step of 8 / (16 / 1.5 - 8 / 2.0) = 1.2 s: 51 more
    # layouts at its slope (x EXTRAPOLATE_MARGIN); the slow one, searched for 1, goes to the
    # start K of 40, 39 more: it goes again.
    from types import SimpleNamespace

    from explorer.hetero_search import _more

    fast = tuple(SimpleNamespace(step_time_s=0.5 + 0.5 * i / 63) for i in range(64))
    slow = (SimpleNamespace(step_time_s=2.0),)
    g = load_cluster("hgx-h100", 1)
    more = _more((g, g), "speed", [fast, slow], [64, 1], {0: 1.0, 1: 2.0}, 1.5, 40)
    assert more == {1: 40}


def test_the_straggler_search_top_is_the_exhaustive_top():
    cluster = load_cluster("hgx-h100", 4)
    slow = Straggler(slowdown=0.3, where="pp-stage", stage=1)
    found = search(MODEL, cluster, WORKLOAD, space=SPACE, ranked=None).estimates
    every = sorted(
        step_s(slowed_stages(e.stages, e.layout, slow), e.layout, e.microbatches, e.assumptions)
        for e in found
        if e.layout.pp > slow.stage
    )
    fast = straggler_search(MODEL, cluster, WORKLOAD, slow, space=SPACE, ranked=5)
    assert fast.certain and [r.step_s for r in fast.rows] == every[:5]


def _every_count(stages, layout, m, straggler, a):
    """The uneven batch by a pass over every micro-batch count of the slow replica."""
    slow = slowed_stages(stages, layout, straggler)
    best = None
    for k in range(1, m + 1):
        fast = math.ceil((layout.dp * m - k) / (layout.dp - 1))
        try:
            t = max(step_s(slow, layout, k, a), step_s(stages, layout, fast, a))
        except ValueError:
            continue
        if best is None or t <= best[0]:
            best = (t, k)
    return best


@pytest.mark.parametrize("slowdown", [0.05, 0.3, 1.0])
def test_the_pruned_uneven_batch_picks_what_every_count_picks(slowdown):
    cluster = load_cluster("hgx-h100", 4)
    straggler = Straggler(slowdown=slowdown, where="dp")
    uneven = 0
    many = TrainingWorkload(seq_len=4096, global_batch_size=512)  # 16 to 128 micro-batches
    for e in search(MODEL, cluster, many, space=SPACE, ranked=8).estimates:
        if e.layout.dp == 1:
            continue
        best = _every_count(e.stages, e.layout, e.microbatches, straggler, e.assumptions)
        got = uneven_batch(e.stages, e.layout, e.microbatches, straggler, e.assumptions)
        if best is None or best[1] == e.microbatches:
            assert got is None
        else:
            assert got is not None and got.step_s == best[0]
            assert f"runs {best[1]} micro-batches" in got.detail
            uneven += 1
    assert uneven > 0  # some layouts do gain from an uneven batch
