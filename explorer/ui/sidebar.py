"""The shared sidebar: every input of the scenario, seeded from and written to the URL.

Each widget's key is the URL key with an ``in_`` prefix (``explorer.ui.state``); widgets get
their values only through session state, never a ``value=`` argument, so a link, an example
button or a row picked in the meshes table can set them before they are drawn.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import streamlit as st

from explorer.hf_config import ConfigError
from explorer.limits import MAX_CONFIG_BYTES, limit
from explorer.report.markdown import escaped
from explorer.scenario import (
    EXAMPLES,
    LayoutInputs,
    Scenario,
    fitted_dp,
    from_query,
    model_ref_from_upload,
    to_query,
    world_size_error,
)
from explorer.specs import PRECISIONS, RECOMPUTES, SCHEDULES
from explorer.ui import advanced, cached, calibration_upload, import_box, recipe_inputs
from explorer.ui.format import billions, sentence, tokens
from explorer.ui.help_text import HELP, inert_reason, with_reason
from explorer.ui.pages import LANDING, SHOWN, landing_after
from explorer.ui.state import (
    GENERIC,
    MODEL_CHOICE,
    SCENARIO,
    STATE_KEYS,
    UPLOAD,
    key,
    layout_state,
    scenario_from_state,
    state_from_scenario,
)

SEQ_LENGTHS: tuple[int, ...] = tuple(1 << n for n in range(9, 21))
"""512 to 1M tokens, doubling: the sequence-length slider's stops."""
GENERIC_SIZES_B: tuple[float, ...] = (
    1, 1.5, 2, 3, 5, 7, 10, 15, 20, 30, 50, 70, 100, 150, 200, 300, 500, 700, 1000, 1500, 2000,
)  # fmt: skip
"""Billions of parameters on a 1-1.5-2-3-5-7 log grid: the generic-size slider's stops."""
PRECISION_LABELS = {
    "fp32": "FP32",
    "bf16-mixed": "BF16 mixed",
    "bf16-pure": "BF16 pure",
    "fp8-mixed": "FP8 mixed",
    "nvfp4-mixed": "NVFP4 mixed",
}
PRECISION_HELP = (
    "FP32: fp32 everything, TF32 GEMMs. BF16 mixed: bf16 weights, fp32 master weights and "
    "gradients, fp32 Adam (16 bytes per parameter). BF16 pure: bf16 everything, no master "
    "copy. FP8 mixed: the DeepSeek-V3 recipe (FP8 GEMMs, fp32 master and gradients, bf16 Adam). "
    "NVFP4 mixed: NVIDIA's NVFP4 recipe (FP4 GEMMs in the linear layers, Blackwell only; "
    "bf16-mixed states)."
)
SCHEDULE_LABELS = {
    "gpipe": "GPipe",
    "1f1b": "1F1B",
    "interleaved": "Interleaved 1F1B",
    "zb-h1": "ZB-H1 (zero bubble)",
    "dualpipe": "DualPipe",
    "zb-v": "ZB-V (zero bubble, V)",
    "dualpipev": "DualPipeV",
}
ZERO_HELP = (
    "ZeRO stage over the data-parallel ranks: 0 replicates everything (DDP); 1 shards optimizer "
    "states and master weights; 2 also gradients; 3 also the weights (FSDP full shard)."
)
_SEEDED = "_seeded"
_KEPT = "_kept_inputs"
"""The scenario's widget values at the end of the last run. Streamlit drops a widget's value
once a run does not draw it (a closed expander, the other workload's inputs); the next run
puts it back from here. Only the dropped ones: assigning a widget's key, even to the value it
has, makes Streamlit send that widget as changed, and the browser redraws it in full."""
_RUN_OPEN = "_run_open"
"""True from the sidebar's start to the page's end (``run_finished``): still True at the next
run's start when that run was cut short (a click while it ran, ``st.rerun``). After such a run
the browser can hold a widget at its element's default (a select box's first option, a number
input's minimum) and send that back on the next click: seen in Chromium as every sidebar input
falling to its first value after Cancel and "Search again" on a loaded machine. So the run
after a cut-short one assigns every scenario widget its value again, which the browser takes
as set; other runs leave the widgets alone (``_KEPT``)."""
_LINK_MESSAGES = "_link_messages"
_UPLOAD_ERROR = "_upload_error"
_UPLOADER = "upload_file"


# ------------------------------------------------------------------------------ state


def apply(scenario: Scenario) -> None:
    """Make the widgets show ``scenario`` (call from a callback or before the widgets)."""
    st.session_state.update(state_from_scenario(scenario))


def apply_layout(layout: LayoutInputs) -> None:
    """Make the layout widgets show ``layout`` (a row picked in the meshes table)."""
    st.session_state.update(layout_state(layout))


def current() -> Scenario:
    """The scenario the sidebar built in this run."""
    scenario = st.session_state.get(SCENARIO)
    return scenario if isinstance(scenario, Scenario) else Scenario()


def _seed_or_keep() -> None:
    """First run: widgets from the link. Later runs: keep the values of hidden widgets."""
    state = st.session_state
    cut_short = state.get(_RUN_OPEN, False)
    state[_RUN_OPEN] = True
    if _SEEDED not in state:
        scenario, messages = from_query(st.query_params.to_dict())
        apply(scenario)
        state[_SEEDED] = True
        state[_LINK_MESSAGES] = messages
        default = state_from_scenario(Scenario())
        models = [*dict(cached.model_choices()), GENERIC, UPLOAD]
        _ensure_option(MODEL_CHOICE, models, "model", default[MODEL_CHOICE])
        _ensure_option(key("gpu"), list(dict(cached.gpu_choices())), "GPU", default[key("gpu")])
        return
    present = state.to_dict()  # one copy: each `in` on session state would build one
    kept = state.get(_KEPT, {})
    for name in STATE_KEYS:
        if name in present:
            if cut_short:  # the browser may hold a default: send the value as set
                state[name] = present[name]
        elif name in kept:  # a widget hidden last run lost its value: its last one back
            state[name] = kept[name]


def run_finished() -> None:
    """Mark this run as run to its end (app.py calls it after the page); see ``_RUN_OPEN``."""
    st.session_state[_RUN_OPEN] = False


def _ensure_option(name: str, options: Sequence[Any], what: str, fallback: Any) -> None:
    """Reset a value that a link put outside the choices, with a message."""
    state = st.session_state
    if state.get(name) not in options:
        given = repr(state.get(name))
        given = given if len(given) <= 40 else given[:37] + "..."
        state.setdefault(_LINK_MESSAGES, []).append(
            f"Unknown {what} {given} in the link; showing {fallback!r}."
        )
        state[name] = fallback


def _sync_url(scenario: Scenario) -> None:
    query = to_query(scenario)
    if query != st.query_params.to_dict():
        st.query_params.from_dict(query)


# ------------------------------------------------------------------------------ sections


def _examples() -> None:
    st.caption("Examples")
    for label, scenario in EXAMPLES.items():
        st.button(
            label,
            key=f"example_{label}",
            on_click=apply,
            args=(scenario,),
            use_container_width=True,
        )


def _most(name: str) -> int:
    """A widget's largest value: the limit of field ``name`` (explorer.limits)."""
    return int(limit(name))


def _on_upload() -> None:
    file = st.session_state.get(_UPLOADER)
    if file is None:
        return
    if file.size > MAX_CONFIG_BYTES:  # refused before its bytes are read
        st.session_state[_UPLOAD_ERROR] = (
            f"{file.name}: config.json is {file.size:,} bytes; this tool reads at most "
            f"{MAX_CONFIG_BYTES:,}."
        )
        return
    try:
        ref = model_ref_from_upload(file.getvalue(), file.name)
    except ConfigError as error:
        st.session_state[_UPLOAD_ERROR] = f"{file.name}: {error}"
        return
    st.session_state.pop(_UPLOAD_ERROR, None)
    st.session_state[key("config")] = ref.config_json
    st.session_state[key("config_name")] = ref.config_name


def _model() -> None:
    presets = dict(cached.model_choices())
    names = {**presets, GENERIC: "Generic dense (choose a size)", UPLOAD: "Upload a config.json"}
    choice = st.selectbox(
        "Model", list(names), key=MODEL_CHOICE, format_func=names.__getitem__, help=HELP["model"]
    )
    if choice in presets:
        st.session_state[key("model")] = choice
    elif choice == GENERIC:
        sizes = sorted({*GENERIC_SIZES_B, float(st.session_state[key("size_b")])})
        st.select_slider(
            "Size (parameters, log scale)",
            options=sizes,
            key=key("size_b"),
            format_func=lambda b: billions(b * 1e9),
            help="A Llama-3-shaped dense model (GQA, SwiGLU, head size 128) of about this size.",
        )
    else:
        st.file_uploader(
            "Hugging Face config.json",
            type=["json"],
            key=_UPLOADER,
            on_change=_on_upload,
            help="Llama, Mistral, Mixtral, Qwen2/3 (dense and MoE), DeepSeek-V3, GPT-2.",
        )
        if st.session_state.get(_UPLOAD_ERROR):
            st.error(st.session_state[_UPLOAD_ERROR])
        if st.session_state.get(key("config")):
            st.caption(f"Using **{escaped(st.session_state[key('config_name')])}**.")


def _training_workload() -> None:
    st.selectbox(
        "Precision",
        PRECISIONS,
        key=key("precision"),
        format_func=PRECISION_LABELS.__getitem__,
        help=PRECISION_HELP,
    )
    seq_options = sorted({*SEQ_LENGTHS, int(st.session_state[key("seq")])})
    st.select_slider(
        "Sequence length (tokens)", options=seq_options, key=key("seq"), format_func=tokens,
        help=HELP["seq"],
    )  # fmt: skip
    left, right = st.columns(2)
    left.number_input(
        "Micro-batch (seqs)", min_value=1, max_value=_most("micro_batch_size"), key=key("mbs"),
        help=HELP["mbs"],
    )  # fmt: skip
    right.number_input("Global batch (seqs)", min_value=1, max_value=_most("global_batch_size"),
                       key=key("gbs"), help=HELP["gbs"])  # fmt: skip


def _serving_workload() -> None:
    left, right = st.columns(2)
    left.number_input(
        "Prompt (tokens)", min_value=1, max_value=_most("prompt_len"), key=key("prompt"),
        help=HELP["prompt"],
    )  # fmt: skip
    right.number_input(
        "Output (tokens)", min_value=1, max_value=_most("output_len"), key=key("output"),
        help=HELP["output"],
    )  # fmt: skip
    st.number_input(
        "Concurrent requests per replica",
        min_value=1,
        max_value=_most("concurrency"),
        key=key("concurrency"),
        help=HELP["concurrency"],
    )
    left, right = st.columns(2)
    left.selectbox("Weights", ("bf16", "fp8", "int8", "int4", "nvfp4", "mxfp4"), key=key("weights"),
                   help=HELP["weights"])  # fmt: skip
    right.selectbox("KV cache", ("bf16", "fp8"), key=key("kv"), help=HELP["kv"])


def _cluster() -> None:
    gpus = dict(cached.gpu_choices())
    st.selectbox("GPU", list(gpus), key=key("gpu"), format_func=gpus.__getitem__, help=HELP["gpu"])
    left, right = st.columns(2)
    left.number_input(
        "GPUs per node", min_value=0, max_value=_most("gpus_per_node"), key=key("gpus_per_node"),
        help=HELP["gpus_per_node"],
    )  # fmt: skip
    right.number_input("Nodes", min_value=0, max_value=_most("num_nodes"), key=key("nodes"),
                       help=HELP["nodes"])  # fmt: skip
    advanced.render()
    from explorer.ui import cluster_editor  # the mixed cluster and straggler (issue 17)

    cluster_editor.render()
    calibration_upload.render()


def _on_workload() -> None:
    """A new workload opens its main page when the page shown does not exist for it."""
    landing = landing_after(st.session_state[key("workload")], st.session_state.get(SHOWN))
    if landing:
        st.session_state[LANDING] = landing


def _fit_dp(dp: int) -> None:
    st.session_state[key("dp")] = dp


def _is_moe(scenario: Scenario) -> bool | None:
    """Whether the scenario's model has experts; None when it cannot be read."""
    try:
        return cached.model(scenario.model).is_moe
    except ValueError:
        return None


def _layout(
    scenario_layout: LayoutInputs, error: str | None, dp: int | None, is_moe: bool | None = None
) -> None:
    names = ("ep", "schedule", "virtual")
    off = {name: inert_reason(name, scenario_layout, is_moe=is_moe) for name in names}
    cells = st.columns(3)
    for cell, name in zip(cells * 2, ("dp", "tp", "pp", "cp", "ep"), strict=False):
        cell.number_input(name.upper(), min_value=1, max_value=_most(name), key=key(name),
                          help=with_reason(HELP[name], off.get(name)),
                          disabled=off.get(name) is not None)  # fmt: skip
    cells[2].selectbox("ZeRO", (0, 1, 2, 3), key=key("zero"), help=ZERO_HELP)
    left, right = st.columns(2)
    left.selectbox("Recompute", RECOMPUTES, key=key("recompute"), help=HELP["recompute"])
    right.selectbox(
        "Schedule", SCHEDULES, key=key("schedule"), format_func=SCHEDULE_LABELS.__getitem__,
        help=with_reason(HELP["schedule"], off["schedule"]), disabled=off["schedule"] is not None,
    )  # fmt: skip
    left, right = st.columns(2)
    left.number_input(
        "Virtual stages", min_value=1, max_value=_most("virtual_stages"), key=key("virtual"),
        help=with_reason(HELP["virtual"], off["virtual"]), disabled=off["virtual"] is not None,
    )  # fmt: skip
    right.checkbox(
        "SP",
        key=key("sp"),
        disabled=scenario_layout.tp == 1,  # nothing to shard along the sequence without TP
        help="Megatron sequence parallelism: with TP > 1, shards the norm and dropout "
        "activations along the sequence."
        + (" Off in effect at TP = 1: raise TP to use it." if scenario_layout.tp == 1 else ""),
    )
    if error:
        st.error(error)
        if dp is not None:
            st.button(f"Set DP to {dp}", on_click=_fit_dp, args=(dp,), key="fit_dp")


def _dismiss() -> None:
    st.session_state.pop(_LINK_MESSAGES, None)


def _link_messages() -> None:
    messages = st.session_state.get(_LINK_MESSAGES)
    if messages:
        st.warning("\n\n".join(messages))
        st.button(
            "Dismiss", key="dismiss_link", on_click=st.session_state.pop, args=(_LINK_MESSAGES,)
        )


def _section(title: str, body: Callable[[], None]) -> None:
    st.markdown(f"**{title}**")
    body()


def render() -> Scenario:
    """Draw the sidebar; return the scenario it holds (also in session state and the URL).

    When the presets cannot be read (the folder is missing) the app says so and stops.
    """
    try:
        return _render()
    except ValueError as error:
        st.error(sentence(error))
        st.stop()


def _render() -> Scenario:
    _seed_or_keep()
    with st.sidebar:
        _link_messages()
        _examples()
        st.radio(
            "Workload",
            ("training", "serving"),
            key=key("workload"),
            horizontal=True,
            format_func=str.capitalize,
            on_change=_on_workload,
            help=HELP["workload"],
        )
        _section("Model", _model)
        training = st.session_state[key("workload")] == "training"
        _section("Workload", _training_workload if training else _serving_workload)
        _section("Cluster", _cluster)
        draft = scenario_from_state(st.session_state.to_dict())
        if training:
            error = world_size_error(draft.layout, draft.cluster)
            dp = fitted_dp(draft.layout, draft.cluster)
            _section("Layout", lambda: _layout(draft.layout, error, dp, _is_moe(draft)))
            recipe_inputs.render(draft.layout)
            import_box.render()
    values = st.session_state.to_dict()
    scenario = scenario_from_state(values)
    st.session_state[SCENARIO] = scenario
    st.session_state[_KEPT] = {name: values[name] for name in STATE_KEYS if name in values}
    _sync_url(scenario)
    return scenario
