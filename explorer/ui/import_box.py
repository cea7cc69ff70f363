"""The sidebar's paste box: a user's Megatron or torchtitan launch settings become the layout.

The text is read by ``explorer.importers`` on the cluster's GPU count; the layout, the workload
and (when the settings name one) the model preset go into the widgets, and every sentence the
import could not express is shown under the box.
"""

from __future__ import annotations

import streamlit as st

from explorer.importers import Imported, read_megatron, read_torchtitan
from explorer.limits import MAX_RECIPE_BYTES
from explorer.scenario import LayoutInputs
from explorer.ui.state import MODEL_CHOICE, key, layout_state, scenario_from_state

TEXT = "import_text"
FORMAT = "import_format"
OPEN = "import_open"
"""The expander's key: whether the box is open."""
MESSAGES = "_import_messages"
ERROR = "_import_error"
FORMATS = {"megatron": "Megatron-LM / Bridge / NeMo", "torchtitan": "torchtitan TOML"}


RECIPE_FIELDS = (
    "recompute_modules", "recompute_ops", "recompute_method", "recompute_num_layers",
    "recompute_every", "first_stage_layers", "last_stage_layers", "pipeline_layout",
    "activation_offload", "offload_layers", "optimizer_offload_fraction",
    "reshard_after_forward", "dp_shard",
)  # fmt: skip
"""Layout recipe fields the import carries into the scenario (no widgets of their own yet)."""


def _widget_values(imported: Imported) -> dict[str, object]:
    lay, work = imported.layout, imported.workload
    layout = LayoutInputs(
        dp=lay.dp, tp=lay.tp, pp=lay.pp, cp=lay.cp, ep=lay.ep, zero=lay.zero,
        recompute=lay.recompute, schedule=lay.schedule, virtual_stages=lay.virtual_stages,
        sequence_parallel=lay.sequence_parallel, micro_batch_size=lay.micro_batch_size,
        **{name: getattr(lay, name) for name in RECIPE_FIELDS},
    )  # fmt: skip
    values: dict[str, object] = dict(layout_state(layout))
    given = imported.given
    if "seq_len" in given:
        values[key("seq")] = work.seq_len
    if "global_batch_size" in given:
        values[key("gbs")] = work.global_batch_size
    if "precision" in given:
        values[key("precision")] = work.precision
    values[key("mbs")] = lay.micro_batch_size
    if imported.model is not None:
        values[MODEL_CHOICE] = imported.model
        values[key("model")] = imported.model
    return values


def _apply() -> None:
    state = st.session_state
    text = state.get(TEXT) or ""
    cluster = scenario_from_state(state.to_dict()).cluster
    reader = read_megatron if state.get(FORMAT) == "megatron" else read_torchtitan
    try:
        imported = reader(text)
        if imported.num_gpus is None and cluster.num_gpus:
            imported = reader(text, cluster.num_gpus)  # the settings leave the GPU count open
    except ValueError as error:  # RecipeError: one sentence naming the field
        state[ERROR] = str(error)
        state.pop(MESSAGES, None)
        return
    state.pop(ERROR, None)
    state.update(_widget_values(imported))
    assumed = {**dict(state.get(key("assume"), ())), **dict(imported.assumptions)}
    state[key("assume")] = tuple(sorted(assumed.items()))
    per_node = cluster.gpus_per_node
    if imported.num_gpus and per_node and imported.num_gpus % per_node == 0:
        state[key("nodes")] = imported.num_gpus // per_node  # the cluster the settings ran on
    lay = imported.layout
    extra = []
    if lay.etp != 1 or lay.stage_layers:
        extra.append(
            "Expert TP and uneven stages are not app inputs yet; the app uses ETP 1 and a "
            "balanced split."
        )
    state[MESSAGES] = [*imported.notes, *imported.unsupported, *extra]


def render() -> None:
    """The expander with the text area, the format choice and the apply button, drawn only
    while it is open (closed, they would cost every rerun)."""
    box = st.expander("Import launch settings", key=OPEN, on_change="rerun")
    if not box.open:
        return
    with box:
        st.radio(
            "Format", list(FORMATS), key=FORMAT, format_func=FORMATS.__getitem__, horizontal=True,
            help="Which launcher's settings the text below holds.",
        )  # fmt: skip
        st.text_area(
            "Paste the arguments, recipe YAML or TOML",
            key=TEXT,
            height=150,
            max_chars=MAX_RECIPE_BYTES,
            help="--tensor-model-parallel-size 8 ... (Megatron-LM), a Megatron-Bridge or NeMo "
            "recipe YAML or model.x=y overrides, or a torchtitan job config.",
        )
        st.button("Apply to the layout", key="import_apply", on_click=_apply)
        if st.session_state.get(ERROR):
            st.error(st.session_state[ERROR])
        for message in st.session_state.get(MESSAGES, []):
            st.caption(message)
