"""Validation: the memory estimate against PyTorch measurements of real training steps."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from explorer.scenario import Scenario
from explorer.ui import cached
from explorer.ui.charts.validation import category_figure, measured_vs_estimated_figure
from explorer.ui.format import percent
from explorer.ui.pages import chart, run_page
from explorer.units import GiB

SUMMARY = {
    "id": "configuration",
    "model": "model",
    "precision": "precision",
    "dp": "DP",
    "zero": "ZeRO",
    "recompute": "recompute",
    "seq_len": "seq (tokens)",
    "micro_batch_size": "micro-batch",
    "peak_phase": "peak in",
}


def _summary(table: pd.DataFrame) -> pd.DataFrame:
    errors = pd.DataFrame(
        {
            "configuration": table["id"],
            "measured peak (GiB)": table["measured_peak_bytes"] / GiB,
            "estimated peak (GiB)": table["estimated_peak_bytes"] / GiB,
            # rounded, then + 0.0 so that a tiny negative error is not shown as -0.0
            "peak error (%)": (table["peak_error"] * 100).round(1) + 0.0,
            "model states error (%)": (table["model_states_error"] * 100).round(1) + 0.0,
        }
    )
    settings = table[list(SUMMARY)].rename(columns=SUMMARY).drop(columns="configuration")
    return pd.concat([errors, settings], axis=1)


def render(scenario: Scenario) -> None:
    st.subheader("Validation: estimated against measured memory")
    table, categories = cached.validation_table()
    st.caption(
        "Measured with PyTorch's MemTracker / FSDPMemTracker on fake tensors (one rank, the "
        "second training step; `python -m validation.run_all`). Trackers see tensor storage "
        "only, so CUDA context, allocator headroom and NCCL buffers are left out of both sides."
    )
    errors = table["peak_error"].abs()
    cols = st.columns(3)
    cols[0].metric("Configurations", f"{len(table)}")
    cols[1].metric("Median |peak error|", percent(float(errors.median())))
    cols[2].metric("Worst |peak error|", percent(float(errors.max())))
    chart(
        measured_vs_estimated_figure(
            table["id"].tolist(),
            table["measured_peak_bytes"].tolist(),
            table["estimated_peak_bytes"].tolist(),
        ),
        "validation_scatter",
    )
    st.dataframe(
        _summary(table),
        hide_index=True,
        width="stretch",
        column_config={
            name: st.column_config.NumberColumn(format="%.3f" if "GiB" in name else "%+.1f")
            for name in (
                "measured peak (GiB)",
                "estimated peak (GiB)",
                "peak error (%)",
                "model states error (%)",
            )
        },
    )
    _categories(table, categories)


@st.fragment  # choosing a configuration reruns this panel only
def _categories(table: pd.DataFrame, categories: tuple[str, ...]) -> None:
    chosen = st.selectbox("Configuration", table["id"].tolist(), key="validation_config")
    row = table.set_index("id").loc[chosen]
    measured = {c: float(row[f"measured_{c}_bytes"]) for c in categories}
    estimated = {c: float(row[f"estimated_{c}_bytes"]) for c in categories}
    chart(category_figure(measured, estimated, f"{chosen}: by category"), "validation_categories")


if __name__ == "__main__":
    run_page("validation")
