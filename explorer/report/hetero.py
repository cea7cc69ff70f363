"""The training report's mixed-cluster and straggler sections, when the scenario has them.

A mixed cluster (``Scenario.mixed``) times the chosen layout data parallel across its GPU types
(``explorer.hetero.hetero_dp``), memory per type; a straggler (``Scenario.straggler``, above 0%)
gives its cost and the mitigations of ``explorer.straggler``. Without either the report is
today's: no section, no result key.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from explorer.hetero import hetero_dict, hetero_dp
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
        try:
            step = hetero_dp(case.model, groups, case.layout, case.workload, split,
                             case.assumptions)  # fmt: skip
        except ValueError as error:
            sections.append(Section("mixed", "Mixed cluster", paragraphs=(
                f"On the mixed cluster {kinds} the chosen layout cannot run data parallel "
                f"across the types: {error}.",)))  # fmt: skip
            results["mixed"] = {"error": str(error)}
        else:
            frame = pd.DataFrame(
                [(t.gpu, t.replicas, t.microbatches, t.step_s, t.peak_bytes / GiB, t.fits)
                 for t in step.types],
                columns=["GPU", "replicas", "micro-batches per replica", "step alone (s)",
                         "peak (GiB)", "fits"],
            )  # fmt: skip
            today = case.estimate.step_time_s
            text = (
                f"On the mixed cluster {kinds}, data parallel across the types with the batch "
                f"split {'evenly' if split == 'even' else 'in proportion to speed'}, the step "
                f"takes {step.step_s:.3f} s (the slowest replica's), against {today:.3f} s on "
                f"the cluster above; "
                + ("every GPU type holds its share." if step.fits
                   else "some GPU type does not hold its share (see the table).")
            )  # fmt: skip
            sections.append(Section("mixed", "Mixed cluster", paragraphs=(text,),
                                    tables=(Table("Per GPU type", frame, {"peak (GiB)": "{:.1f}",
                                            "step alone (s)": "{:.3f}"}),)))  # fmt: skip
            results["mixed"] = hetero_dict(step, "dp", split)
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
