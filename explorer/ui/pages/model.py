"""Model: parameters by component (all and active per token) and FLOPs per token."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from explorer.charts.model import flops_figure, label, params_figure
from explorer.report.markdown import escaped
from explorer.scenario import Scenario
from explorer.specs import ModelSpec
from explorer.ui import cached, gallery, inputs
from explorer.ui.format import (
    billions,
    flop,
    gib,
    layout_label,
    percent,
    seconds,
    sentence,
    tokens,
)
from explorer.ui.pages import chart, expected_error, number_columns, run_page

FLOPS_PARTS = ("attention_projections", "attention_core", "mlp", "router", "logits", "mtp")


def _shape(model: ModelSpec) -> dict[str, str]:
    """Architecture facts as label -> text."""
    heads = f"{model.num_attention_heads} query / {model.kv_heads} key-value"
    facts = {
        "Layers": f"{model.num_hidden_layers}",
        "Hidden size": f"{model.hidden_size:,}",
        "Attention heads": heads + (" (MLA)" if model.is_mla else ""),
        "Vocabulary": f"{model.vocab_size:,}",
        "Trained context": f"{model.max_position_embeddings:,} tokens",
    }
    if model.is_moe:
        facts["Experts"] = (
            f"{model.n_routed_experts} routed (top-{model.num_experts_per_tok}) + "
            f"{model.n_shared_experts} shared, width {model.moe_intermediate_size:,}, "
            f"in {model.num_moe_layers} of {model.num_hidden_layers} layers"
        )
    if not model.is_moe or model.first_k_dense_replace:
        facts["Dense FFN width"] = f"{model.intermediate_size:,} ({model.ffn_kind})"
    return facts


def _official(scenario: Scenario) -> str | None:
    if scenario.model.source != "preset":
        return None
    source, total, active = cached.model_source(scenario.model.preset)
    published = f"published {billions(total)}" + (f" / {billions(active)} active" if active else "")
    return f"{published} ([source]({source}))"


def _current_layout(scenario: Scenario) -> None:
    """Headline numbers of the current training layout, or why there are none."""
    try:
        case = inputs.training_case(scenario)
        est = cached.estimate(
            case.model, case.cluster, case.layout, case.workload, scenario.assumptions
        )
    except ValueError as error:
        st.error(sentence(error))
        return
    st.markdown(
        f"**Current layout** · {layout_label(scenario.layout)} on "
        f"{case.cluster.world_size:,} × {case.cluster.gpu.name}"
    )
    cols = st.columns(5)
    cols[0].metric(
        "Fits",
        "yes" if est.fits else "no",
        help="Whether the most loaded GPU's peak is within its memory.",
    )
    cols[1].metric(
        "Peak memory per GPU",
        gib(est.memory.peak_bytes),
        help="The Memory page's peak (GiB = 2^30 bytes).",
    )
    cols[2].metric("Step time", seconds(est.step_time_s), help="One optimizer step.")
    cols[3].metric(
        "Tokens/s",
        f"{est.tokens_per_s:,.0f}",
        help="Tokens per step (global batch x sequence) / step time, whole cluster.",
    )
    cols[4].metric(
        "MFU",
        percent(est.mfu),
        help="Model FLOPs utilisation: model FLOPs per second / the GPUs' dense peak.",
    )
    expected_error("step_time")


def render(scenario: Scenario) -> None:
    model = inputs.model(scenario)
    training = scenario.workload == "training"
    seq = scenario.training.seq_len if training else scenario.serving.prompt_len
    total, active = cached.params(model)
    forward = cached.forward_flops(model, seq)
    st.subheader(escaped(model.name), anchor=False)
    cols = st.columns(4)
    with_mtp = f"{total.total:,} with the multi-token-prediction modules" if total.mtp else None
    cols[0].metric(
        "Parameters",
        billions(total.total_without_mtp),
        help=with_mtp or "Every weight of the model, counted from its config.",
    )
    cols[1].metric(
        "Active per token",
        billions(active.total_without_mtp),
        help="Parameters one token runs through: all of them for a dense model, "
        "the shared parts and the top-k experts for a MoE.",
    )
    cols[2].metric(
        f"Training per token at {tokens(seq)}",
        flop(cached.training_flops(model, seq)),
        help="Forward and backward FLOPs per token (3 x forward).",
    )
    cols[3].metric(
        "Forward per token",
        flop(forward.total),
        help="Matrix-multiply FLOPs of one token's forward pass at this sequence "
        "length (2 per multiply-add, causal attention halved).",
    )
    official = _official(scenario)
    caption = "Counts exclude multi-token-prediction modules, as model cards do."
    st.caption(f"{caption} Official: {official}." if official else caption)
    expected_error("params")
    if scenario.workload == "training":
        _current_layout(scenario)
    left, right = st.columns([3, 2])
    with left:
        chart(params_figure(total.as_dict(), active.as_dict()), "params_chart")
        parts = {name: getattr(forward, name) for name in FLOPS_PARTS}
        chart(flops_figure(parts, seq), "flops_chart")
        st.caption(
            "Training FLOPs are 3 × forward (backward = 2 × forward). FLOPs count matrix "
            "multiplies only (2 per multiply-add), causal attention halved (Megatron-LM "
            "convention); the embedding lookup is free."
        )
    with right:
        st.markdown("**Architecture**")
        facts = _shape(model)
        st.table(pd.DataFrame({"value": list(facts.values())}, index=list(facts)))
        table = pd.DataFrame(
            {
                "all": total.as_dict(),
                "active per token": active.as_dict(),
            }
        )
        table = table[table["all"] > 0]
        table.index = [label(name) for name in table.index]
        st.markdown("**Parameters by component** (exact counts)")
        st.dataframe(
            table, width="stretch", column_config=number_columns(table.columns, "localized")
        )
    gallery.render(scenario.model.preset if scenario.model.source == "preset" else None)


if __name__ == "__main__":
    run_page("model")
