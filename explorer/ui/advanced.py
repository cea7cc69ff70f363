"""The sidebar's "Advanced" expander: link bandwidths, oversubscription and every named
assumption of the core, one widget each (help texts are the core's field docstrings).

Assumption widgets do not hold the value: the scenario's overrides do (``in_assume``); each
widget is set from them before it is drawn and writes back through its callback, so hiding the
expander or switching the workload loses nothing.
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from explorer.limits import MAX_BYTES_PER_S, limit
from explorer.ui import cached
from explorer.ui.assumptions import GROUP_TITLES, Knob, knobs, overrides_from
from explorer.ui.help_text import HELP, inert_reason, with_reason
from explorer.ui.state import key, scenario_from_state

_UNSET = object()
MAX_GBPS = MAX_BYTES_PER_S / 1e9
"""The largest link bandwidth a widget takes, GB/s (explorer.limits)."""


def render() -> None:
    box = st.expander("Advanced: links and assumptions", key="advanced", on_change="rerun")
    if not box.open:  # drawn only when open: forty widgets would cost every rerun otherwise
        return
    with box:
        st.number_input(
            "Intra-node GB/s per GPU (one way)",
            min_value=1.0,
            max_value=MAX_GBPS,
            key=key("intra_GBps"),
            placeholder="GPU preset",
            help="NVLink / Infinity Fabric bandwidth per GPU, one direction, 10^9 B/s. "
            "Empty: the GPU preset's figure.",
        )
        st.number_input(
            "Inter-node GB/s per GPU (one way)",
            min_value=1.0,
            max_value=MAX_GBPS,
            key=key("inter_GBps"),
            placeholder="cluster preset",
            help="Scale-out NIC bandwidth per GPU, one direction, 10^9 B/s (400 Gb/s = 50 GB/s). "
            "Empty: the cluster preset for this GPU.",
        )
        st.number_input(
            "Fabric oversubscription",
            min_value=1.0,
            max_value=limit("oversubscription"),
            step=0.5,
            key=key("oversub"),
            help=HELP["oversub"],
        )
        _assumption_widgets()


def _knob_key(knob: Knob) -> str:
    return f"as_{knob.key}"


def _on_knob(knob: Knob) -> None:
    values = dict(st.session_state.get(key("assume"), ()))
    values[knob.key] = knob.stored(st.session_state[_knob_key(knob)])
    st.session_state[key("assume")] = overrides_from(values)


def _knob(knob: Knob, value: Any, off: str | None = None) -> None:
    widget = _knob_key(knob)
    shown = knob.shown(value)
    if st.session_state.get(widget, _UNSET) != shown:  # an assignment redraws the widget
        st.session_state[widget] = shown
    help_text = with_reason(knob.help, off)
    common: dict[str, Any] = {"key": widget, "help": help_text, "on_change": _on_knob}
    common["disabled"] = off is not None
    common["args"] = (knob,)
    if knob.kind == "choice":
        st.selectbox(knob.label, knob.options, **common)
    elif knob.kind == "flag" and knob.optional:
        st.selectbox(knob.label, (None, True, False), format_func=_tristate, **common)
    elif knob.kind == "flag":
        st.checkbox(knob.label, **common)
    elif knob.kind == "int":
        st.number_input(knob.label, min_value=0, step=1, placeholder="default", **common)
    else:
        st.number_input(knob.label, min_value=0.0, placeholder="default", **common)


def _tristate(value: bool | None) -> str:
    return {None: "model default", True: "yes", False: "no"}[value]


def _assumption_widgets() -> None:
    """One widget per named assumption of the core; the scenario keeps those changed."""
    st.caption("Assumptions: each help text gives the default's source.")
    current = dict(st.session_state.get(key("assume"), ()))
    shown = knobs(st.session_state[key("workload")])
    if not shown:
        st.caption("The core's assumptions are not available yet.")
        return
    groups = list(dict.fromkeys(knob.group for knob in shown))
    tabs = st.tabs([GROUP_TITLES.get(g, g) for g in groups])
    off = _inert(shown)
    for knob in shown:
        with tabs[groups.index(knob.group)]:
            _knob(knob, current.get(knob.key, knob.default), off.get(knob.key))


def _inert(shown: tuple[Knob, ...]) -> dict[str, str]:
    """Why each assumption that does nothing for this layout and model is off."""
    draft = scenario_from_state(st.session_state.to_dict())
    if draft.workload != "training":
        return {}
    try:
        is_moe: bool | None = cached.model(draft.model).is_moe
    except ValueError:
        is_moe = None
    precision = draft.training.precision
    reasons = {k.key: inert_reason(k.key, draft.layout, is_moe=is_moe, precision=precision)
               for k in shown}  # fmt: skip
    return {name: reason for name, reason in reasons.items() if reason}
