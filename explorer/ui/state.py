"""The scenario as widget values in session state, and back: one widget key per URL key.

Kept free of streamlit so that it is tested with plain dicts. Widget keys are the URL's keys
with an ``in_`` prefix (``seq`` -> ``in_seq``), so a link, the widgets and the scenario name
each input the same way. The model selectbox holds one choice for three sources: a preset id,
``GENERIC`` or ``UPLOAD``; the last preset chosen is remembered apart (``in_model``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, replace
from typing import Any

from explorer.scenario import QUERY_KEYS, LayoutInputs, ModelRef, Scenario

PREFIX = "in_"
GENERIC = "__generic__"
UPLOAD = "__upload__"
MODEL_CHOICE = "in_model_choice"
"""The model selectbox: a preset id, GENERIC or UPLOAD."""
SCENARIO = "scenario"
"""Session-state key of the current Scenario (written by the sidebar, read by the pages)."""


def key(query_key: str) -> str:
    """The widget key of a URL key."""
    return PREFIX + query_key


STATE_KEYS: tuple[str, ...] = (*(key(k) for k in QUERY_KEYS if k != "source"), MODEL_CHOICE)
"""Every session-state key that holds part of the scenario."""


def _choice(ref: ModelRef) -> str:
    return {"preset": ref.preset, "generic": GENERIC, "upload": UPLOAD}[ref.source]


def state_from_scenario(scenario: Scenario) -> dict[str, Any]:
    """Session-state values that make the widgets show ``scenario``."""
    out: dict[str, Any] = {}
    for query_key, (group, name) in QUERY_KEYS.items():
        if query_key == "source":
            continue
        holder = getattr(scenario, group) if group else scenario
        value = getattr(holder, name)
        out[key(query_key)] = (
            list(value) if group == "search" and isinstance(value, tuple) else value
        )
    out[MODEL_CHOICE] = _choice(scenario.model)
    return out


def scenario_from_state(state: Mapping[str, Any]) -> Scenario:
    """The scenario the widgets hold; missing keys keep the defaults."""
    default = Scenario()
    groups: dict[str, dict[str, Any]] = {"": {}}
    for query_key, (group, name) in QUERY_KEYS.items():
        if key(query_key) in state:
            value = state[key(query_key)]
            if isinstance(value, list):  # a multiselect's choices: a tuple, so it hashes
                value = tuple(value)
            groups.setdefault(group, {})[name] = value
    choice = state.get(MODEL_CHOICE, _choice(default.model))
    source = {GENERIC: "generic", UPLOAD: "upload"}.get(choice, "preset")
    model = groups.setdefault("model", {})
    model["source"] = source
    if source == "preset":
        model["preset"] = choice
    parts = {
        group: replace(getattr(default, group), **values)
        for group, values in groups.items()
        if group
    }
    return replace(default, **groups[""], **parts)


def layout_state(layout: LayoutInputs) -> dict[str, Any]:
    """Session-state values of the layout widgets only (a row picked in the meshes table)."""
    names = asdict(layout)
    return {
        key(query_key): names[name]
        for query_key, (group, name) in QUERY_KEYS.items()
        if group == "layout"
    }
