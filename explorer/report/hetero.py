"""The training report's mixed-cluster and straggler sections, when the scenario has them.

A mixed cluster (``Scenario.mixed``) times the chosen layout data parallel across its GPU types
(``explorer.hetero.hetero_dp``), memory per type; a straggler (``Scenario.straggler``, above 0%)
gives its cost and the mitigations of ``explorer.straggler``. Without either the report is
today's: no section, no result key.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from explorer.hetero import HELD_TO_MEMORY, hetero_dict
from explorer.hetero_search import mixed_step
from explorer.report.tables import Section, Table
from explorer.report.training import TrainingCase
from explorer.scenario import Scenario, resolve_mixed, resolve_straggler
from explorer.straggler import straggler_cost, straggler_dict, straggler_sentence
from explorer.units import GiB


def hetero_parts(
    case: TrainingCase, scenario: Scenario
) -> tuple[tuple[Section, ...], dict[str, Any]]:
    """(sections, results) for the mixed cluster and the straggler; both empty without them."""
    sections: list[Section] = []
    results: dict[str, Any] = {}
    groups = resolve_mixed(scenario.mixed)
    if groups:
        split = scenario.mixed.split
        kinds = " + ".join(f"{g.num_nodes} × {g.gpus_per_node} {g.gpu.name}" for g in groups)
        mode = scenario.mixed.mode
        across = "data parallel across" if mode == "dp" else "with its pipeline ranks on"
        try:
            step = mixed_step(case.model, groups, case.layout, case.workload, mode, split,
                              case.assumptions)  # fmt: skip
        except ValueError as error:
            sections.append(Section("mixed", "Mixed cluster", paragraphs=(
                f"On the mixed cluster {kinds} the chosen layout cannot run {across} "
                f"the types: {error}.",)))  # fmt: skip
            results["mixed"] = {"error": str(error)}
        else:
            frame = pd.DataFrame(
                [(t.gpu, t.replicas, t.microbatches, t.step_s, t.peak_bytes / GiB, t.fits)
                 for t in step.types],
                columns=["GPU", "replicas" if mode == "dp" else "pipeline ranks",
                         "micro-batches per replica", "step alone (s)" if mode == "dp"
                         else "step (s)", "peak (GiB)", "fits"],
            )  # fmt: skip
            today = case.estimate.step_time_s
            by_speed = "in proportion to speed, in counts the schedule runs"
            how = (f"data parallel across the types with the batch split "
                   f"{'evenly' if split == 'even' else by_speed}"
                   if mode == "dp" else "its pipeline ranks on the types in the groups' order "
                   f"(layers per rank {','.join(map(str, step.stage_layers or ()))}"
                   + (f", {HELD_TO_MEMORY})" if step.memory_held else ")"))  # fmt: skip
            text = (
                f"On the mixed cluster {kinds}, {how}, the step takes {step.step_s:.3f} s, "
                f"against {today:.3f} s on the cluster above; "
                + ("every GPU type holds its share." if step.fits
                   else "some GPU type does not hold its share (see the table).")
            )  # fmt: skip
            formats = {"peak (GiB)": "{:.1f}", "step alone (s)": "{:.3f}", "step (s)": "{:.3f}"}
            table = Table("Per GPU type", frame, formats)
            sections.append(Section("mixed", "Mixed cluster", paragraphs=(text,), tables=(table,)))
            results["mixed"] = hetero_dict(step, mode, split)
    straggler = resolve_straggler(scenario.straggler)
    if straggler is not None:
        try:
            cost = straggler_cost(case.model, case.cluster, case.layout, case.workload, straggler,
                                  case.assumptions)  # fmt: skip
        except ValueError as error:
            sections.append(Section("straggler", "Straggler", paragraphs=(f"{error}.",)))
            results["straggler"] = {"error": str(error)}
        else:
            bullets = tuple(f"{m.name}: {m.detail} (step {m.step_s:.3f} s)"
                            for m in cost.mitigations)  # fmt: skip
            sections.append(
                Section(
                    "straggler",
                    "Straggler",
                    paragraphs=(straggler_sentence(cost),),
                    bullets=bullets,
                )
            )
            results["straggler"] = straggler_dict(cost)
    return tuple(sections), results
