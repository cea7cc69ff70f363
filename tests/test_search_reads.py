"""The views of ``explorer.search.reads``: each estimate function reads nothing of a layout
outside its view, so the bounds' caches keyed on a view cannot return another layout's value.

Every searched field is changed one at a time from a base layout (MoE, every degree above 1);
where the view's key stays the same, the function's result must too. A compute or comm change
that starts reading another field fails here, naming the function and the field.
"""

from __future__ import annotations

import dataclasses

import pytest

from explorer.comm.data_parallel import dp_collectives
from explorer.comm.inventory import model_collectives
from explorer.compute import optimizer_step_s, pass_times
from explorer.estimate import DEFAULT_ESTIMATE_ASSUMPTIONS
from explorer.memory.setting import nccl_parts
from explorer.memory.states import stage_params
from explorer.mesh import Problem
from explorer.mesh.dims import MeshDims
from explorer.partition import pipeline_plan
from explorer.presets import load_cluster, load_model
from explorer.search.context import Contexts
from explorer.search.reads import GROUPS_READ, SEARCHED, VIEWS, placement_key
from explorer.specs import Layout, TrainingWorkload

BASE = Layout(dp=4, tp=2, pp=2, cp=2, ep=4, etp=1, zero=1, micro_batch_size=1,
              recompute="selective", schedule="1f1b")  # fmt: skip
"""Every degree above 1, so that no change below is a no-op by accident."""

CHANGES: tuple[dict[str, object], ...] = (
    {"dp": 8}, {"tp": 4}, {"pp": 4}, {"cp": 1}, {"ep": 2}, {"etp": 2}, {"ep": 8},
    {"zero": 0}, {"zero": 2}, {"zero": 3}, {"micro_batch_size": 2},
    {"recompute": "none"}, {"recompute": "full"},
    {"schedule": "gpipe"}, {"schedule": "zb-h1"}, {"schedule": "interleaved", "virtual_stages": 2},
    {"schedule": "dualpipe"}, {"schedule": "dualpipev"}, {"schedule": "zb-v"},
)  # fmt: skip
"""One searched field (or a schedule with its virtual stages) changed at a time."""


@pytest.fixture(scope="module", params=["mixtral-8x7b", "deepseek-v3"])
def contexts(request) -> Contexts:
    """Two MoE models: Mixtral (GQA, tied nothing) and DeepSeek-V3 (MLA, dense first blocks,
    multi-token prediction)."""
    problem = Problem(
        model=load_model(request.param),
        cluster=load_cluster("hgx-h100", 16),
        workload=TrainingWorkload(seq_len=4096, global_batch_size=64),
        num_gpus=32,
    )
    return Contexts(problem, DEFAULT_ESTIMATE_ASSUMPTIONS)


def _result(name: str, ctx: Contexts, layout: Layout) -> object:
    """What the named function returns for ``layout``, as the estimate calls it."""
    work, base_passes = ctx.whole_model, pass_times(ctx.whole_model, ctx.compute(BASE))
    if name == "pass_times":
        return pass_times(work, ctx.compute(layout))
    if name == "optimizer_step_s":
        return optimizer_step_s(work, ctx.compute(layout))
    if name == "nccl_parts":
        edp = MeshDims.of(layout).edp
        return nccl_parts(ctx.p.model, layout, ctx.a.memory, edp)
    if name == "stage_params":  # for the same plan: the view leaves pp and schedules to it
        plan = pipeline_plan(ctx.p.model, BASE)[0]
        return stage_params(ctx.p.model, layout, plan)
    if name == "dp_collectives":
        return tuple(dp_collectives(work, base_passes, ctx.comm(layout)))
    calls = model_collectives(work, base_passes, ctx.comm(layout), pp=False)
    return tuple(c for c in calls if c.phase in ("forward", "backward"))


def _key(name: str, ctx: Contexts, layout: Layout) -> tuple[object, ...]:
    """The view's key, completed by the placements of the groups it reads (by content)."""
    groups = ctx.placements(layout)
    placed = tuple(placement_key(groups[g]) for g in GROUPS_READ.get(name, ()))
    return (VIEWS[name].key(layout), placed)


def test_every_change_is_a_searched_field_and_every_view_reads_only_searched_fields():
    assert {f for change in CHANGES for f in change} == set(SEARCHED)
    assert all(set(v.fields) <= set(SEARCHED) | {"sequence_parallel"} for v in VIEWS.values())


@pytest.mark.parametrize("name", sorted(VIEWS))
def test_an_estimate_function_reads_nothing_outside_its_view(name, contexts):
    base, base_key = _result(name, contexts, BASE), _key(name, contexts, BASE)
    checked = 0
    for change in CHANGES:
        layout = dataclasses.replace(BASE, **change)
        if _key(name, contexts, layout) != base_key:
            continue  # the view sees this change: the cache keeps it apart
        checked += 1
        assert _result(name, contexts, layout) == base, f"{name} reads {change} (not in its view)"
    assert checked >= 3  # each view leaves several searched fields out


@pytest.mark.parametrize("name", sorted(VIEWS))
def test_a_change_inside_a_view_changes_the_result(name, contexts):
    """The test above can fail: every view's key sees a change that moves its result."""
    base, base_key = _result(name, contexts, BASE), _key(name, contexts, BASE)
    moved = [
        change
        for change in CHANGES
        if _key(name, contexts, dataclasses.replace(BASE, **change)) != base_key
        and _result(name, contexts, dataclasses.replace(BASE, **change)) != base
    ]
    assert moved
