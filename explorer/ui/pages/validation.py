"""Validation: how accurate each estimate is, from PyTorch memory measurements of training
steps and the step times of published training runs."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from explorer.charts.validation import (
    category_figure,
    measured_vs_estimated_figure,
    published_runs_figure,
)
from explorer.scenario import Scenario
from explorer.ui import cached
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
    return pd.concat([errors, table[["set"]], settings], axis=1)


PUBLISHED = {
    "model": "model",
    "metric": "metric",
    "published": "published",
    "ours": "ours",
    "error (%)": "error (%)",
    "gpus": "GPUs",
    "layout": "layout",
    "source": "paper",
}


def _published(table: pd.DataFrame) -> pd.DataFrame:
    # rounded, then + 0.0 so that a tiny negative error is not shown as -0.0
    errors = (table["relative_error"] * 100).round(1) + 0.0
    return table.assign(**{"error (%)": errors})[list(PUBLISHED)].rename(columns=PUBLISHED)


def _statements() -> None:
    """Every estimate's expected error, the label in bold."""
    lines = []
    for kind in cached.trust_kinds():
        label, _, rest = cached.expected_error(kind).partition(": ")
        lines.append(f"- **{label}:** {rest}")
    st.markdown("\n".join(lines))


def _published_runs() -> None:
    st.markdown("#### Published runs: step time")
    table = cached.calibration_table()
    summary = cached.error_summary("step_time")
    st.caption(
        "Megatron-LM runs on A100s as the papers report them: Narayanan et al. 2021 Table 1 "
        "(TFLOP/s per GPU, full recompute) and Korthikanti et al. 2022 Table 5 (iteration time "
        "with full recompute and with SP + selective recompute, MFU). The settings describe the "
        "runs (GPT layers, classic attention, DGX A100 with one 200 Gb/s NIC per GPU); nothing "
        "is fitted per run. No H100, H800 or B200 run is compared yet; DeepSeek-V3's H800 run "
        "only bounds the estimate (its report gives a run average, not a step time)."
    )
    cols = st.columns(3)
    cols[0].metric("Published figures", f"{summary.count}")
    cols[1].metric("Median |error| vs papers", summary.median_text)
    cols[2].metric("Worst |error| vs papers", summary.worst_text)
    chart(published_runs_figure(table), "validation_published")
    st.dataframe(
        _published(table),
        hide_index=True,
        width="stretch",
        height="content",
        column_config={
            "GPUs": st.column_config.NumberColumn(format="localized"),
            "published": st.column_config.NumberColumn(format="%.4g"),
            "ours": st.column_config.NumberColumn(format="%.4g"),
            "error (%)": st.column_config.NumberColumn(format="%+.1f"),
        },
    )


TODAY = {
    "id": "run",
    "gpu": "GPU",
    "gpus": "GPUs",
    "framework": "framework",
    "model": "model",
    "precision": "precision",
    "layout": "layout",
    "published_tokens_per_s_per_gpu": "published tokens/s/GPU",
    "estimated_tokens_per_s_per_gpu": "estimated tokens/s/GPU",
    "error (%)": "error (%)",
    "estimated_peak_gib": "estimated peak (GiB)",
    "gpu_gib": "GPU memory (GiB)",
    "fits": "fits",
    "measured_memory_gib": "measured peak (GiB)",
    "exact": "exact layout",
}


def _todays_runs() -> None:
    """Published runs on H100, H200, H800, B200 and GB200 (and A100), none fitted."""
    st.markdown("#### Published runs on today's GPUs: tokens/s per GPU")
    table, summary = cached.published_runs()
    st.caption(
        "Megatron-Bridge, NeMo, NeMo AutoModel and torchtitan performance tables, Meta's Llama 3 "
        "405B run and the DeepSeek-V3 report (`validation/published_runs.toml`, each row with "
        "its document and table; `python -m validation.published`). Every run uses the same "
        "defaults, set only to describe how it ran; nothing is fitted. A layout the tool cannot "
        "express exactly is estimated at the nearest one and marked."
    )
    shown = summary.assign(
        **{
            "mean |error| (%)": (summary["mean_abs_error"] * 100).round(1) + 0.0,
            "worst error (%)": (summary["worst_error"] * 100).round(1) + 0.0,
        }
    )[
        [
            "group",
            "runs",
            "exact_layouts",
            "mean |error| (%)",
            "worst error (%)",
            "too_high",
            "not_fitting",
        ]
    ]
    st.dataframe(shown, hide_index=True, width="stretch")
    errors = (table["error"] * 100).round(1) + 0.0
    st.dataframe(
        table.assign(**{"error (%)": errors})[list(TODAY)].rename(columns=TODAY),
        hide_index=True,
        width="stretch",
        column_config={
            "GPUs": st.column_config.NumberColumn(format="localized"),
            "published tokens/s/GPU": st.column_config.NumberColumn(format="%.4g"),
            "estimated tokens/s/GPU": st.column_config.NumberColumn(format="%.4g"),
            "error (%)": st.column_config.NumberColumn(format="%+.1f"),
            "estimated peak (GiB)": st.column_config.NumberColumn(format="%.1f"),
            "GPU memory (GiB)": st.column_config.NumberColumn(format="%.1f"),
            "measured peak (GiB)": st.column_config.NumberColumn(format="%.1f"),
        },
    )


def _serving_runs() -> None:
    st.markdown("#### Published serving runs: tokens/s per GPU")
    st.caption(
        "TensorRT-LLM's performance overview, SGLang's large-scale EP deployment and "
        "DeepSeek's production decode (`validation/serving_runs.toml`; `python -m "
        "validation.serving`), each at its engine, layout, precision and lengths; nothing "
        "fitted. A run whose KV cache cannot hold its batch has no estimate."
    )
    st.dataframe(
        cached.published_serving(),
        hide_index=True,
        width="stretch",
        column_config={
            "published tokens/s/GPU": st.column_config.NumberColumn(format="%.4g"),
            "estimated tokens/s/GPU": st.column_config.NumberColumn(format="%.4g"),
            "error (%)": st.column_config.NumberColumn(format="%+.1f"),
        },
    )


def render(scenario: Scenario) -> None:
    st.subheader("Validation: how accurate is it?", anchor=False)
    _statements()
    st.markdown("#### Memory: estimated against measured")
    table, categories = cached.validation_table()
    st.caption(
        "Measured with PyTorch's MemTracker / FSDPMemTracker on fake tensors (one rank, the "
        "second training step; `python -m validation.run_all`). Trackers see tensor storage "
        "only, so CUDA context, allocator headroom and NCCL buffers are left out of both sides. "
        "The first set taught the model its PyTorch behaviours; the held-out set was chosen and "
        "measured after the model was frozen (`python -m validation.run_all --heldout`)."
    )
    summary, held = cached.error_summary("memory"), cached.error_summary("memory_heldout")
    cols = st.columns(5)
    cols[0].metric("Configurations", f"{summary.count}")
    cols[1].metric("Median |peak error|", summary.median_text)
    cols[2].metric("Worst |peak error|", summary.worst_text)
    cols[3].metric("Held out", f"{held.count}")
    cols[4].metric("Held-out worst |peak error|", held.worst_text)
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
    _todays_runs()
    _published_runs()
    _serving_runs()


@st.fragment  # choosing a configuration reruns this panel only
def _categories(table: pd.DataFrame, categories: tuple[str, ...]) -> None:
    chosen = st.selectbox("Configuration", table["id"].tolist(), key="validation_config",
                          help="A measured run: its memory by category beside the estimate.",
                          )  # fmt: skip
    row = table.set_index("id").loc[chosen]
    measured = {c: float(row[f"measured_{c}_bytes"]) for c in categories}
    estimated = {c: float(row[f"estimated_{c}_bytes"]) for c in categories}
    chart(category_figure(measured, estimated, f"{chosen}: by category"), "validation_categories")


if __name__ == "__main__":
    run_page("validation")
