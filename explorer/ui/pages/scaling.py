"""Scaling: strong and weak scaling of the model on this node type, efficiency vs a baseline."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd
import streamlit as st

from explorer.charts.scaling import ScalingRow, scaling_figure
from explorer.cost import point_cost
from explorer.limits import MAX_GPUS
from explorer.scenario import Scenario
from explorer.ui import cached, inputs
from explorer.ui.format import layout_label
from explorer.ui.pages import chart, expected_error, header, run_page

if TYPE_CHECKING:
    from explorer.scaling import ScalingSweep

RANGE_KEY = "scaling_range"
TABS_KEY = "scaling_kind"
AXES = ("tp", "pp", "dp", "ep")


def _counts(scenario: Scenario) -> tuple[int, ...]:
    """GPU counts to sweep: powers of two chosen on a range slider around the cluster."""
    per_node = max(1, scenario.cluster.gpus_per_node)
    world = max(per_node, scenario.cluster.num_gpus)
    options = []
    count = per_node
    while count <= min(4 * world, MAX_GPUS):
        options.append(count)
        count *= 2
    low = max(per_node, world // 4)
    default = (min(low, options[-1]), min(2 * world, options[-1]))
    if st.session_state.get(RANGE_KEY) and not set(st.session_state[RANGE_KEY]) <= set(options):
        del st.session_state[RANGE_KEY]  # the cluster changed under the slider
    first, last = st.select_slider(
        "GPU counts swept", options=options, value=default, key=RANGE_KEY,
        format_func=lambda n: f"{n:,}",
        help="The smallest and largest cluster sizes (GPUs, doubling) the sweep estimates.",
    )  # fmt: skip
    return tuple(n for n in options if first <= n <= last)


def _rows(sweep: ScalingSweep) -> list[ScalingRow]:
    rows = []
    for point in sweep.points:
        est = point.estimate
        rows.append(
            ScalingRow(
                num_gpus=point.num_gpus,
                global_batch_size=point.global_batch_size,
                efficiency=point.efficiency,
                tokens_per_s=est.tokens_per_s if est else None,
                tokens_per_s_per_gpu=est.tokens_per_s_per_gpu if est else None,
                mfu=est.mfu if est else None,
                layout=f"{layout_label(est.layout)}, {est.layout.recompute} recompute"
                if est
                else "",
            )
        )
    return rows


def _table(sweep: ScalingSweep, price_per_gpu_hour: float | None = None) -> pd.DataFrame:
    table = pd.DataFrame(sweep.rows())
    table["US$ per M tokens"] = [
        point_cost(p.num_gpus, p.estimate.tokens_per_s if p.estimate else None, price_per_gpu_hour)[
            "cost_per_million_tokens_usd"
        ]
        for p in sweep.points
    ]
    table["US$ per M tokens"] = table["US$ per M tokens"].astype(float)
    numbers = ["tp", "pp", "dp", "ep", "step_time_s", "tokens_per_s", "tokens_per_s_per_gpu"]
    table[numbers] = table[numbers].astype(float)  # None (nothing fits) shows as an empty cell
    table["recompute"] = table["recompute"].fillna("no layout fits")
    table["efficiency (%)"] = table["efficiency"].astype(float) * 100
    table["MFU (%)"] = table["mfu"].astype(float) * 100
    return table.drop(columns=["efficiency", "mfu"]).rename(
        columns={
            "num_gpus": "GPUs",
            "global_batch_size": "global batch (seqs)",
            "step_time_s": "step (s)",
            "tokens_per_s": "tokens/s",
            "tokens_per_s_per_gpu": "tokens/s per GPU",
        }
    )


def render(scenario: Scenario) -> None:
    case = inputs.search_case(scenario)
    header("Scaling", scenario, case.model.name, case.cluster.gpu.name)
    counts = _counts(scenario)
    st.caption(
        "At each GPU count the fastest fitting layout of a small family is taken (TP a power of "
        "two inside a node, PP dividing the rest, DP the remainder, EP for MoE; ZeRO-1, "
        "micro-batch 1, every recompute setting). Strong scaling keeps the sidebar's global "
        "batch; weak scaling grows it in proportion to the GPUs, from the smallest count."
    )
    expected_error("scaling")
    gpu = case.cluster.gpu
    price = st.number_input(
        "Price per GPU-hour (US$)",
        min_value=0.0,
        value=float(gpu.price_per_gpu_hour or 0.0),
        step=0.1,
        key="scaling_price_per_gpu_hour",
        help=gpu.price_source or "no published price for this GPU",
    )
    specs = (case.model, case.cluster, counts, case.workload, scenario.assumptions)
    labels = {"strong": "Strong scaling", "weak": "Weak scaling"}
    tabs = st.tabs(list(labels.values()), key=TABS_KEY, on_change="rerun")
    active = st.session_state.get(TABS_KEY) or labels["strong"]
    for tab, kind in zip(tabs, labels, strict=True):
        # a sweep takes seconds: only the tab in view runs one (open is None before the
        # browser has reported which tab shows)
        if not (tab.open or (tab.open is None and labels[kind] == active)):
            continue
        with tab:
            sweep = cached.scaling(kind, *specs)
            chart(
                scaling_figure(kind, _rows(sweep), denominator=sweep.denominator), f"{kind}_scaling"
            )
            st.dataframe(
                _table(sweep, price or None),
                hide_index=True,
                placeholder="–",
                width="stretch",
                column_config={
                    **{axis: st.column_config.NumberColumn(format="%d") for axis in AXES},
                    "step (s)": st.column_config.NumberColumn(format="%.2f"),
                    "tokens/s": st.column_config.NumberColumn(format="%.0f"),
                    "tokens/s per GPU": st.column_config.NumberColumn(format="%.1f"),
                    "efficiency (%)": st.column_config.NumberColumn(format="%.1f"),
                    "MFU (%)": st.column_config.NumberColumn(format="%.1f"),
                    "US$ per M tokens": st.column_config.NumberColumn(format="%.4f"),
                },
            )


if __name__ == "__main__":
    run_page("scaling")
