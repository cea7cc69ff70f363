"""Your own run, on the Memory page: a measured step time and peak against the estimate, the
part that explains the error, and a button that carries one named correction into the scenario.

The measured values are scenario inputs (``in_measured_step``, ``in_measured_peak``: in the
link); the correction becomes an ordinary assumption override (``in_assume``), so every page,
the search and the report use it and list it among the assumptions, as ``--assume`` does.
``apply_correction`` holds the logic on plain mappings.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import TYPE_CHECKING, Any, cast

import pandas as pd
import streamlit as st

from explorer.limits import limit
from explorer.ui import cached
from explorer.ui.state import key
from explorer.units import GiB

if TYPE_CHECKING:
    from explorer.estimate.measured import Comparison
    from explorer.scenario import Scenario
    from explorer.ui.inputs import TrainingCase

APPLIED = "_measured_applied"
"""Session-state key of the last correction's sentence."""


def apply_correction(
    state: MutableMapping[str, Any], case: TrainingCase, correction_key: str, measured_s: float
) -> str:
    """Set ``correction_key`` in the scenario's overrides in ``state`` to the value at which
    the estimate meets ``measured_s``; return the sentence that says what was set."""
    from explorer.estimate import estimate
    from explorer.estimate.measured import correct
    from explorer.ui.assumptions import estimate_assumptions
    from explorer.ui.state import scenario_from_state

    overrides = dict(scenario_from_state(state).assumptions)
    assumptions = estimate_assumptions(overrides)
    model, cluster, layout, workload = case.model, case.cluster, case.layout, case.workload
    base = estimate(model, cluster, layout, workload, assumptions)
    fix, _ = correct(
        correction_key, measured_s, base, lambda a: estimate(model, cluster, layout, workload, a)
    )
    state[key("assume")] = tuple(sorted({**overrides, fix.key: fix.value}.items()))
    reach = "meets" if fix.reached else "comes nearest to"
    return (
        f"Set {fix.key} = {fix.value:.4g} (was {fix.before:.4g}), an assumption from your run: "
        f"the estimate now {reach} {measured_s:.4g} s ({fix.step_time_s:.4g} s)."
    )


def _on_apply(case: TrainingCase, correction_key: str, measured_s: float) -> None:
    state = cast(MutableMapping[str, Any], st.session_state)
    state[APPLIED] = apply_correction(state, case, correction_key, measured_s)


def _table(found: Comparison, unit: str, scale: float) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "part": c.component,
                f"estimated ({unit})": c.estimated / scale,
                "factor needed": c.factor,
                "plausible": c.plausible,
                "bound": c.why,
                "correction": c.correction_key or "",
            }
            for c in found.candidates
        ]
    )


def _verdict(found: Comparison, what: str, unit: str, scale: float) -> None:
    head = (
        f"Measured {what} {found.measured / scale:.4g} {unit}, estimated "
        f"{found.estimated / scale:.4g} {unit}: the estimate is off by {found.error:+.1%}"
    )
    named = found.explained_by
    if not found.candidates:
        st.markdown(head + " (they agree).")
    elif named is None:
        st.markdown(head + "; no single part explains it within physical bounds.")
    else:
        st.markdown(head + f"; **{named.component}** × {named.factor:.3g} would explain it.")
    if found.candidates:
        st.dataframe(_table(found, unit, scale), hide_index=True, width="stretch")


def render(case: TrainingCase, scenario: Scenario) -> None:
    """The inputs, the error and its attribution, and the correction button."""
    from explorer.estimate.measured import compare_memory, compare_step

    seconds, peak = scenario.measured_step_s, scenario.measured_peak_gib
    box = st.expander(
        "Your own run: compare a measured step and peak",
        expanded=bool(seconds or peak),  # a link with measured values opens it
        key="measured_open",
        on_change="rerun",
    )
    if not box.open:  # drawn only when open: its inputs would cost every rerun otherwise
        return
    with box:
        left, right = st.columns(2)
        left.number_input(
            "Measured step (s)",
            min_value=0.0,
            max_value=float(limit("pass_s")),
            step=0.1,
            format="%.4f",
            key=key("measured_step"),
            help="Seconds per optimizer step of this layout on your cluster.",
        )
        right.number_input(
            "Measured peak (GiB)",
            min_value=0.0,
            max_value=float(limit("memory_bytes") / GiB),
            step=0.5,
            key=key("measured_peak"),
            help="Peak memory per GPU (torch.cuda.max_memory_reserved plus the CUDA context, or "
            "nvidia-smi); compared without the allocator headroom. GiB = 2^30 bytes.",
        )
        if not seconds and not peak:
            st.caption("Enter a measured value (greater than zero) to compare.")
            return
        est = cached.estimate(
            case.model, case.cluster, case.layout, case.workload, scenario.assumptions
        )
        if seconds:
            found = compare_step(est, seconds)
            _verdict(found, "step", "s", 1.0)
            named = found.explained_by
            if named is not None and named.correction_key:
                st.button(
                    f"Use {named.correction_key} as an assumption",
                    key="measured_apply",
                    on_click=_on_apply,
                    args=(case, named.correction_key, seconds),
                    help="Sets it so the estimate meets your step, on every page, the search "
                    "and the report.",
                )
        if peak:
            _verdict(compare_memory(est, peak * GiB), "peak", "GiB", GiB)
        if st.session_state.get(APPLIED):
            st.success(st.session_state[APPLIED])
