"""Communication: exposed time per collective and per axis; which links each group uses."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pandas as pd
import streamlit as st

from explorer.charts.comm import GroupRow, exposed_figure, placement_figure
from explorer.scenario import Scenario
from explorer.ui import cached, inputs
from explorer.ui.format import percent, seconds
from explorer.ui.pages import chart, expected_error, header, run_page
from explorer.units import GB, MiB

if TYPE_CHECKING:
    from explorer.comm import GroupPlacement
    from explorer.estimate import Estimate

EXPERT_GROUPS = ("ep", "etp", "edp")
# Process groups drawn, in order: label and the axis whose colour they take. (Comments, not
# docstrings: Streamlit's magic would draw a bare string of a page script on the page.)
GROUP_NAMES = {
    "tp": ("TP", "tp"),
    "cp": ("CP", "cp"),
    "dp_cp": ("DP × CP", "dp"),
    "pp": ("PP", "pp"),
    "ep": ("EP", "ep"),
    "etp": ("Expert TP", "tp"),
    "edp": ("Expert DP", "dp"),
}


def _link(group: GroupPlacement) -> str:
    bandwidth = f"{group.bandwidth_bytes_per_s / GB:,.0f} GB/s"
    if group.crosses_domains:
        return f"<b>fabric</b>, {group.num_domains} nodes, {bandwidth}"
    return f"<b>fast links</b>, one node, {bandwidth}"


def _group_rows(est: Estimate, moe: bool) -> list[GroupRow]:
    rows = []
    for name, (label, axis) in GROUP_NAMES.items():
        group = est.groups.get(name)
        if group is None or group.size <= 1 or (name in EXPERT_GROUPS and not moe):
            continue
        rows.append(
            GroupRow(
                label, axis, group.size, group.ranks_per_domain, group.num_domains, _link(group)
            )
        )
    return rows


def _collectives_table(est: Estimate) -> pd.DataFrame:
    part = cached.pacing_part(est)
    rows = [
        {
            "axis": c.axis.upper(),
            "collective": c.kind,
            "what": c.what,
            "phase": c.phase,
            "size per call (MiB)": c.size_bytes / MiB,
            "calls": c.count,
            "time (ms)": c.time_s * 1e3,
            "hidden (ms)": c.hidden_s * 1e3,
            "exposed (ms)": c.exposed_s * 1e3,
        }
        for c in part.collectives
        if c.time_s > 0
    ]
    return pd.DataFrame(rows)


def render(scenario: Scenario) -> None:
    case = inputs.training_case(scenario)
    header("Communication", scenario, case.model.name, case.cluster.gpu.name)
    est = cached.estimate(
        case.model, case.cluster, case.layout, case.workload, scenario.assumptions
    )
    exposed = sum(est.exposed_comm_s.values())
    cols = st.columns(4)
    cols[0].metric(
        "Step time",
        seconds(est.step_time_s),
        help="One optimizer step: the pipelined passes, the exposed communication "
        "and the optimizer.",
    )
    cols[1].metric(
        "Exposed communication", seconds(exposed), help="Per step, on the critical path."
    )
    cols[2].metric(
        "Share of the step",
        percent(exposed / est.step_time_s),
        help="Exposed communication / step time.",
    )
    cols[3].metric(
        "MFU",
        percent(est.mfu),
        help="Model FLOPs utilisation: the model's training FLOPs per step (3 x the forward's "
        "matrix multiplies, as on the Model page) / (step time x the GPUs' dense peak).",
    )
    expected_error("communication")
    chart(
        exposed_figure(est.exposed_comm_s, est.exposed_comm_by_axis_s, est.step_time_s), "exposed"
    )
    st.caption(
        "Exposed = time a collective is not hidden behind compute: the per-micro-batch "
        "collectives of the stage that paces the pipeline × micro-batches, plus the per-step "
        "gradient reduction and parameter gathers of the slowest rank."
    )
    rows = _group_rows(est, case.model.is_moe)
    if rows:
        chart(placement_figure(rows, case.cluster.domain_size), "placement")
        st.caption(
            "Each row shows one group of that axis: its GPUs coloured, grey GPUs belong to other "
            "groups. A group inside one node uses NVLink/NVSwitch; a group across nodes runs "
            "over the fabric (one NIC per GPU), each node's share in parallel. Bandwidths are "
            "the bus bandwidth per GPU of the group's ring, GB/s = 10^9 bytes/s, link peak."
        )
    st.markdown(f"#### Collectives of the pacing stage ({cached.pacing_part(est).stage})")
    table = _collectives_table(est)
    if table.empty:
        st.caption("This layout has no communication (one GPU).")
    else:
        st.dataframe(table, hide_index=True, width="stretch", column_config=_number_columns())
    if est.warnings:
        st.warning("\n".join(f"- {w[0].upper()}{w[1:]}" for w in est.warnings))


def _number_columns() -> dict[str, Any]:
    fmt = st.column_config.NumberColumn
    return {
        "size per call (MiB)": fmt(format="%.2f"),
        "calls": fmt(format="%.0f"),
        "time (ms)": fmt(format="%.3f"),
        "hidden (ms)": fmt(format="%.3f"),
        "exposed (ms)": fmt(format="%.3f"),
    }


if __name__ == "__main__":
    run_page("communication")
