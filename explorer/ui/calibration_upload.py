"""The sidebar's calibration upload: a probe file (``python -m explorer probe``) sets the
assumptions it measured, for the GPU and precision chosen when it is uploaded.

The figures become ordinary overrides in the scenario (``in_assume``, so the URL, every page and
the report use them) and the measurement behind each goes to ``in_calib`` (the report's
"Measured on your cluster" section). ``apply_calibration`` holds the logic on plain mappings.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from typing import Any, cast

import streamlit as st

from explorer.ui.state import key

UPLOADER = "calibration_file"
FORCE = "calibration_force"
ERROR = "_calibration_error"
NOTE_CHARS = 400
"""Longest measurement note the scenario keeps."""


def apply_calibration(
    state: MutableMapping[str, Any], data: bytes, name: str, force: bool = False
) -> None:
    """Set the overrides a probe file measured for the scenario in ``state`` (its GPU, its
    precision or serving); ValueError (one sentence) for a malformed or foreign file."""
    from explorer.precision import precision_policy
    from explorer.probe.derive import check_device, serving_figures, training_figures
    from explorer.probe.schema import parse_calibration
    from explorer.scenario import resolve_cluster
    from explorer.ui.state import scenario_from_state

    scenario = scenario_from_state(state)
    calibration = parse_calibration(data, name)
    cluster = resolve_cluster(scenario.cluster)
    check_device(calibration, scenario.cluster.gpu, cluster.gpu.name, force)
    if scenario.workload == "serving":
        figures = serving_figures(calibration, cluster)
    else:
        compute = precision_policy(scenario.training.precision).compute
        figures = training_figures(calibration, cluster, compute)
    remove_calibration(state)
    state[key("assume")] = tuple(
        sorted({**dict(scenario.assumptions), **figures.overrides()}.items())
    )
    state[key("calib")] = tuple((k, note[:NOTE_CHARS]) for k, note in figures.provenance())


def remove_calibration(state: MutableMapping[str, Any]) -> None:
    """Drop the overrides a calibration file set (others stay) and its notes."""
    notes: Mapping[str, str] = dict(state.get(key("calib"), ()))
    values = {k: v for k, v in state.get(key("assume"), ()) if k not in notes}
    state[key("assume")] = tuple(sorted(values.items()))
    state[key("calib")] = ()


def _on_upload() -> None:
    file = st.session_state.get(UPLOADER)
    if file is None:
        return
    try:
        apply_calibration(
            cast(MutableMapping[str, Any], st.session_state),
            file.getvalue(),
            file.name,
            st.session_state.get(FORCE, False),
        )
    except ValueError as error:
        st.session_state[ERROR] = str(error)
        return
    st.session_state.pop(ERROR, None)


def render() -> None:
    """The upload, the figures it set (each with its measurement) and a way to remove them."""
    box = st.expander(
        "Calibration: your cluster's measurements", key="calibration_open", on_change="rerun"
    )
    if not box.open:  # drawn only when open: the uploader would cost every rerun otherwise
        return
    with box:
        st.checkbox(
            "Use a file measured on another GPU",
            key=FORCE,
            help="A probe file is refused when its device is not the GPU chosen above.",
        )
        st.file_uploader(
            "Probe file (TOML)",
            type=["toml"],
            key=UPLOADER,
            on_change=_on_upload,
            help="Written by python -m explorer probe --out FILE.toml on your GPUs (under "
            "torchrun for the collectives). Its measured GEMM, attention, HBM and bus "
            "bandwidths set the assumptions they measure, for the GPU and precision chosen now.",
        )
        if st.session_state.get(ERROR):
            st.error(st.session_state[ERROR])
        notes = st.session_state.get(key("calib"), ())
        if notes:
            values = dict(st.session_state.get(key("assume"), ()))
            lines = [f"- `{k}` = {values.get(k, 0):.4g}: {note}" for k, note in notes]
            st.markdown("**Set from the calibration file:**\n" + "\n".join(lines))
            st.button(
                "Remove the calibration",
                key="calibration_remove",
                on_click=remove_calibration,
                args=(st.session_state,),
            )
