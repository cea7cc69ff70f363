"""The sidebar's "Recompute and offload recipe" expander: the layout's recipe fields (what
selective recompute reruns, how full recompute checkpoints, what is offloaded to the host),
each disabled with its reason when the chosen Recompute makes it do nothing.

Drawn only while open (a closed expander costs nothing on a rerun); the values live in the
scenario's widget keys (``in_rc_modules``, ...), so a link or an import sets them too.
"""

from __future__ import annotations

import streamlit as st

from explorer.limits import MAX_LAYERS
from explorer.scenario import LayoutInputs
from explorer.specs import OFFLOAD_MODULES, RECOMPUTE_MODULES
from explorer.ui.help_text import inert_reason, with_reason
from explorer.ui.state import key

OPEN = "recipe_open"
DEFAULT_MODULES = ("core_attn",)
"""Megatron-Core's default --recompute-modules (explorer.specs.Layout.recompute_modules)."""

_HELP = {
    "rc_modules": "Selective recompute: the submodules rerun in the backward instead of "
    "saved (Megatron-Core --recompute-modules; core_attn is the attention core of "
    "Korthikanti et al. 2022 sec. 5). At least one.",
    "rc_ops": "Selective recompute as torchtitan's op-level SAC: each block keeps its input "
    "and every second matmul's output and reruns the rest.",
    "rc_method": "Full recompute: uniform checkpoints every block in units of the blocks "
    "below; block checkpoints only the first that many blocks of each model chunk "
    "(Megatron --recompute-method).",
    "rc_layers": "Full recompute: blocks per checkpointed unit (uniform) or checkpointed "
    "blocks per chunk (block); empty means 1 (uniform) or all (block) "
    "(Megatron --recompute-num-layers).",
    "rc_every": "Full recompute of every n-th block of a rank only (torchtitan "
    "selective_ac_option = n); 1 means every block.",
    "offload": "Modules whose input activation waits in host memory between forward and "
    "backward (Megatron-Core fine-grained activation offloading); none by default.",
    "offload_layers": "Blocks per pipeline rank whose saved activations all wait in host "
    "memory (Megatron --cpu-offloading-num-layers); 0 means none.",
    "opt_offload": "Share of the master weights and optimizer states kept and updated in "
    "host memory (Megatron --optimizer-offload-fraction; 1 is ZeRO-Offload).",
}
"""One definition per recipe input, by URL key."""


def _keep_one_module() -> None:
    """An emptied module list falls back to the default (Megatron needs at least one)."""
    if not st.session_state.get(key("rc_modules")):
        st.session_state[key("rc_modules")] = list(DEFAULT_MODULES)


def _tip(name: str, layout: LayoutInputs) -> tuple[str, bool]:
    """(tooltip, disabled) of a recipe input: its definition, and why it is off if it is."""
    reason = inert_reason(name, layout)
    return with_reason(_HELP[name], reason), reason is not None


def render(layout: LayoutInputs) -> None:
    """The expander and, while it is open, one widget per recipe field."""
    box = st.expander("Recompute and offload recipe", key=OPEN, on_change="rerun")
    if not box.open:
        return
    state = st.session_state
    for name in ("rc_modules", "offload"):  # a link or an import leaves tuples
        if isinstance(state.get(key(name)), tuple):
            state[key(name)] = list(state[key(name)])
    names = ("rc_modules", "rc_ops", "rc_method", "rc_layers", "rc_every")
    tip = {name: _tip(name, layout) for name in names}
    with box:
        st.multiselect(
            "Recomputed modules (selective)", RECOMPUTE_MODULES, key=key("rc_modules"),
            on_change=_keep_one_module, help=tip["rc_modules"][0], disabled=tip["rc_modules"][1],
        )  # fmt: skip
        st.checkbox("Op-level SAC (torchtitan)", key=key("rc_ops"),
                    help=tip["rc_ops"][0], disabled=tip["rc_ops"][1])  # fmt: skip
        left, right = st.columns(2)
        left.selectbox("Full method", ("uniform", "block"), key=key("rc_method"),
                       help=tip["rc_method"][0], disabled=tip["rc_method"][1])  # fmt: skip
        right.number_input(
            "Blocks (full)", min_value=1, max_value=MAX_LAYERS, key=key("rc_layers"),
            placeholder="default", help=tip["rc_layers"][0], disabled=tip["rc_layers"][1],
        )  # fmt: skip
        st.number_input("Every n-th block (full)", min_value=1, max_value=MAX_LAYERS,
                        key=key("rc_every"), help=tip["rc_every"][0],
                        disabled=tip["rc_every"][1])  # fmt: skip
        st.multiselect(
            "Offloaded module inputs", OFFLOAD_MODULES, key=key("offload"), help=_HELP["offload"]
        )
        left, right = st.columns(2)
        left.number_input("Offloaded blocks", min_value=0, max_value=MAX_LAYERS,
                          key=key("offload_layers"), help=_HELP["offload_layers"])  # fmt: skip
        right.number_input("Optimizer offload share", min_value=0.0, max_value=1.0, step=0.1,
                           key=key("opt_offload"), help=_HELP["opt_offload"])  # fmt: skip
