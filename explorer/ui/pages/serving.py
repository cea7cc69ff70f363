"""Serving: which layouts fit, their latency and throughput, and the Pareto frontier."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd
import streamlit as st

from explorer.cost import CostAssumptions, serving_cost
from explorer.scenario import Scenario
from explorer.serving.capacity import capacity_rows, capacity_sentences
from explorer.serving.estimate import fitted
from explorer.ui import cached, inputs
from explorer.ui.assumptions import serving_assumptions
from explorer.ui.format import seconds
from explorer.ui.pages import chart, expected_error, header, run_page
from explorer.units import GiB

if TYPE_CHECKING:
    from explorer.serving import ServingEstimate, ServingPlan
    from explorer.ui.inputs import ServingCase

MEMORY_LAYOUTS = 8  # layouts drawn in the memory chart (the best by tokens/s; the table: all)


def _row(e: ServingEstimate) -> dict[str, object]:
    return {
        "layout": e.layout.label,
        "TP": e.layout.tp,
        "PP": e.layout.pp,
        "EP": e.layout.ep,
        "replicas": e.layout.replicas,
        "fits": e.fits,
        "weights (GiB/GPU)": e.memory.weights / GiB,
        "KV cache (GiB/GPU)": e.memory.kv_cache / GiB,
        "KV per token (KiB)": e.kv_bytes_per_token / 1024,
        "max sequences": e.max_concurrency,
        "TTFT (ms)": None if e.ttft_s is None else e.ttft_s * 1e3,
        "ITL (ms)": None if e.itl_s is None else e.itl_s * 1e3,
        "output tokens/s": e.tokens_per_s,
        "tokens/s per GPU": e.tokens_per_s_per_gpu,
        "decode bound": e.decode.bound,
        "why not": e.reason,
    }


def _table(plan: ServingPlan) -> None:
    table = pd.DataFrame([_row(e) for e in plan.layouts])
    fmt = st.column_config.NumberColumn
    st.dataframe(
        table,
        hide_index=True,
        width="stretch",
        column_config={
            "weights (GiB/GPU)": fmt(format="%.1f"),
            "KV cache (GiB/GPU)": fmt(format="%.1f"),
            "KV per token (KiB)": fmt(format="%.1f"),
            "TTFT (ms)": fmt(format="%.1f"),
            "ITL (ms)": fmt(format="%.2f"),
            "output tokens/s": fmt(format="%.0f"),
            "tokens/s per GPU": fmt(format="%.1f"),
        },
    )
    if plan.rejected:
        with st.expander(f"{len(plan.rejected)} layouts rejected, with reasons"):
            st.dataframe(
                pd.DataFrame(
                    [{"layout": lay.label, "reason": reason} for lay, reason in plan.rejected]
                ),
                hide_index=True,
                width="stretch",
            )


def _capacity(case: ServingCase, scenario: Scenario, plan: ServingPlan) -> None:
    """Which layouts fit, users by context and why (explorer.serving.capacity)."""
    st.markdown("#### Concurrent users by context")
    a = serving_assumptions(dict(scenario.assumptions))
    rows = capacity_rows(case.model, case.cluster, plan, case.workload, a)
    for sentence in capacity_sentences(case.model, case.cluster, rows, case.workload):
        st.markdown(f"- {sentence}")
    table = pd.DataFrame(
        [
            {
                "layout": r.label,
                **{f"users at {c // 1024}K": n for c, n in r.users},
                "weights (GiB/GPU)": r.weights_bytes / GiB,
                "free for KV (GiB/GPU)": r.kv_free_bytes / GiB,
                "KV bytes a token a GPU": r.kv_bytes_per_token_per_gpu,
            }
            for r in rows
        ]
    )
    fmt = st.column_config.NumberColumn
    st.dataframe(
        table,
        hide_index=True,
        width="stretch",
        column_config={
            "weights (GiB/GPU)": fmt(format="%.1f"),
            "free for KV (GiB/GPU)": fmt(format="%.1f"),
            "KV bytes a token a GPU": fmt(format="%.0f"),
        },
    )


def _under_load(case: ServingCase, scenario: Scenario, best: ServingEstimate) -> None:
    """The best layout's engine simulated under a number of closed-loop users."""
    st.markdown("#### Engine under load")
    users = st.number_input(
        "Concurrent users (closed loop; 0: not simulated)",
        min_value=0,
        max_value=4096,
        value=0,
        step=8,
        key="serving_load_users",
        help="Each user sends its next request when the last finishes; in-flight batching of "
        "up to 256 sequences and 8192 tokens a step (vLLM's defaults), chunked prefill, paged "
        "KV admission and preemption (explorer.serving.scheduler).",
    )
    if not users:
        return
    r = cached.serving_under_load(
        case.model, case.cluster, case.workload, scenario.assumptions, best.layout, int(users)
    )
    rows = [
        {"latency": name, "p50 (ms)": p.p50_s * 1e3, "p90 (ms)": p.p90_s * 1e3,
         "p99 (ms)": p.p99_s * 1e3}
        for name, p in (("time to first token", r.ttft), ("time per output token", r.tpot),
                        ("end to end", r.e2e))
    ]  # fmt: skip
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")
    st.caption(
        f"{best.layout.label}: {r.finished:,} requests, {r.tokens_per_s:,.0f} output tokens/s "
        f"({r.tokens_per_s / best.layout.world_size:,.1f} per GPU), {r.preemptions} preemptions."
        + (f" {r.note.capitalize()}." if r.note else "")
    )


def _cost(case: ServingCase, plan: ServingPlan) -> None:
    """Each fitting layout priced: US$ per million output tokens at the planned load and the
    GPUs a target request rate needs (explorer.cost.serving_cost, as ``serve
    --price-per-gpu-hour --target-rps``)."""
    st.markdown("#### Cost")
    gpu = case.cluster.gpu
    cols = st.columns(2)
    price = cols[0].number_input(
        "Price per GPU-hour (US$)",
        min_value=0.0,
        value=float(gpu.price_per_gpu_hour or 0.0),
        step=0.1,
        key="serving_price_per_gpu_hour",
        help=gpu.price_source or "no published price for this GPU",
    )
    rate = cols[1].number_input(
        "Target requests per second (0: none)",
        min_value=0.0,
        value=0.0,
        step=1.0,
        key="serving_target_rps",
        help="Replicas (and GPUs) that sustain this rate, each at the planned load: "
        "output tokens/s / output tokens per request (Little's law at steady state).",
    )
    priced = CostAssumptions(price_per_gpu_hour=price or None)
    rows = []
    for e in plan.layouts:
        if not e.fits or not e.tokens_per_s:
            continue
        c = serving_cost(
            output_tokens_per_s_per_replica=e.tokens_per_s / e.layout.replicas,
            output_len=case.workload.output_len,
            gpus_per_replica=e.layout.gpus_per_replica,
            gpu=gpu,
            target_requests_per_s=rate or None,
            assumptions=priced,
        )
        rows.append(
            {
                "layout": e.layout.label,
                "US$ per M output tokens": c.cost_per_million_output_tokens_usd,
                "requests/s per replica": c.requests_per_s_per_replica,
                "replicas for the target": c.replicas_needed,
                "GPUs for the target": c.gpus_needed,
            }
        )
    if not rows:
        st.markdown("- No layout fits, so none is priced.")
        return
    fmt = st.column_config.NumberColumn
    st.dataframe(
        pd.DataFrame(rows),
        hide_index=True,
        placeholder="–",
        width="stretch",
        column_config={
            "US$ per M output tokens": fmt(format="%.3f"),
            "requests/s per replica": fmt(format="%.2f"),
        },
    )
    st.caption(
        "The replica's GPUs' price over its decode throughput at the planned load; prefill "
        "time is not taken out of it, so at long prompts the GPUs needed are a lower bound."
    )


# Model presets offered as separate draft models (the model's MTP module comes first).
DRAFT_MODELS = ("llama-3.1-8b", "qwen3-32b", "mistral-7b", "gpt2")


def _speculative(case: ServingCase, scenario: Scenario, best: ServingEstimate) -> None:
    """The best layout decoding speculatively (explorer.serving.speculative)."""
    st.markdown("#### Speculative decoding")
    mtp = case.model.num_nextn_predict_layers > 0
    drafts = (["its MTP module"] if mtp else []) + list(DRAFT_MODELS)
    cols = st.columns(3)
    k = cols[0].number_input("Draft tokens a step (0: off)", min_value=0, max_value=8, value=0,
                             key="serving_spec_tokens",
                             help="k tokens drafted, then verified in one target step "
                             "(Leviathan et al. 2023); 0 is plain decode.")  # fmt: skip
    acceptance = cols[1].slider("Acceptance of each draft token", 0.0, 1.0, 0.85, 0.05,
                                key="serving_spec_acceptance",
                                help="DeepSeek-V3 measures 85-90% for its MTP module (report "
                                "sec. 5.4.3); a named input.")  # fmt: skip
    draft = cols[2].selectbox("Draft", drafts, key="serving_spec_draft")
    if not k:
        return
    draft_id = None if draft == "its MTP module" else draft
    e, sd = cached.serving_speculative(case.model, case.cluster, case.workload,
                                       scenario.assumptions, best.layout, draft_id, int(k),
                                       float(acceptance))  # fmt: skip
    if not e.fits:
        st.markdown(f"- {best.layout.label} with this draft does not fit: {e.reason}.")
        return
    st.markdown(
        f"- {best.layout.label}: {sd.tokens_per_step:.2f} tokens a step of "
        f"{seconds(sd.step_s)} (verify {seconds(sd.verify_step_s)} + {int(k)} draft passes of "
        f"{seconds(sd.draft_step_s)}): {seconds(fitted(e.itl_s))} a token with the prompts mixed "
        f"in, against {seconds(fitted(best.itl_s))} plain; {fitted(e.tokens_per_s):,.0f} output "
        f"tokens/s against {fitted(best.tokens_per_s):,.0f} ({sd.speedup:.2f}x the decode "
        f"step's speed); the draft adds {sd.extra_bytes_per_gpu / GiB:.2f} GiB a GPU."
    )


def render(scenario: Scenario) -> None:
    case = inputs.serving_case(scenario)
    load = scenario.serving
    header(
        "Serving",
        scenario,
        case.model.name,
        case.cluster.gpu.name,
        f"{load.prompt_len:,} prompt + {load.output_len:,} output tokens, "
        f"{load.concurrency} sequences per replica, weights {load.weights_dtype}, "
        f"KV {load.kv_dtype}",
    )
    plan = cached.serving_plan(case.model, case.cluster, case.workload, scenario.assumptions)
    fitting = [e for e in plan.layouts if e.fits]
    cols = st.columns(4)
    cols[0].metric(
        "Layouts that fit",
        f"{len(fitting)} of {len(plan.layouts)}",
        help="Serving layouts (TP, PP, EP, replicas) whose weights, KV cache and "
        "buffers fit one GPU's memory at the requested concurrency.",
    )
    if fitting:
        best = fitting[0]
        cols[1].metric("Most tokens/s", f"{fitted(best.tokens_per_s):,.0f}", help=best.layout.label)
        cols[2].metric(
            "Its ITL",
            seconds(fitted(best.itl_s)),
            help="Inter-token latency: time between two output tokens of one "
            "request while decoding.",
        )
        cols[3].metric(
            "Its TTFT",
            seconds(fitted(best.ttft_s)),
            help="Time to first token: the prompt's prefill (and queueing) before "
            "the first output token.",
        )
    expected_error("serving")
    for answer in cached.serving_answers(plan):
        st.markdown(f"- {answer}")
    memory, frontier = cached.serving_charts(
        case.model, case.cluster, case.workload, scenario.assumptions, MEMORY_LAYOUTS
    )
    if memory is not None:
        chart(memory, "serving_memory")
    if frontier is not None:
        chart(frontier, "serving_frontier")
    st.markdown("#### Every layout (best first)")
    _table(plan)
    _cost(case, plan)
    _capacity(case, scenario, plan)
    if fitting:
        _speculative(case, scenario, fitting[0])
        _under_load(case, scenario, fitting[0])
    st.caption(f"Left out of the serving model: {cached.serving_leaves_out()}.")


if __name__ == "__main__":
    run_page("serving")
