"""The specs a page needs, resolved from the scenario through the cache, or one sentence why not.

Pages call these first, so an impossible input shows its error at the top of the page, where
the person is looking, and nothing below it is drawn from a half-valid scenario.
"""

from __future__ import annotations

from dataclasses import dataclass

from explorer.scenario import Scenario, world_size_error
from explorer.specs import ClusterSpec, Layout, ModelSpec, ServingWorkload, TrainingWorkload
from explorer.ui import cached


@dataclass(frozen=True, slots=True, kw_only=True)
class TrainingCase:
    """Everything one training estimate takes."""

    model: ModelSpec
    cluster: ClusterSpec
    layout: Layout
    workload: TrainingWorkload


@dataclass(frozen=True, slots=True, kw_only=True)
class ServingCase:
    model: ModelSpec
    cluster: ClusterSpec
    workload: ServingWorkload


def model(scenario: Scenario) -> ModelSpec:
    return cached.model(scenario.model)


def training_case(scenario: Scenario) -> TrainingCase:
    """Model, cluster, layout and workload; ValueError (one sentence) if any is impossible."""
    spec = model(scenario)
    cluster = cached.cluster(scenario.cluster)
    mismatch = world_size_error(scenario.layout, scenario.cluster)
    if mismatch:
        raise ValueError(mismatch)
    return TrainingCase(
        model=spec,
        cluster=cluster,
        layout=scenario.layout_spec(),
        workload=scenario.training_spec(),
    )


def serving_case(scenario: Scenario) -> ServingCase:
    return ServingCase(
        model=model(scenario),
        cluster=cached.cluster(scenario.cluster),
        workload=scenario.serving_spec(),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchCase:
    """What the mesh search takes: no layout (it finds them)."""

    model: ModelSpec
    cluster: ClusterSpec
    workload: TrainingWorkload


def search_case(scenario: Scenario) -> SearchCase:
    return SearchCase(
        model=model(scenario),
        cluster=cached.cluster(scenario.cluster),
        workload=scenario.training_spec(),
    )
