"""The cluster editor: groups of GPU type x nodes and a straggler, and what they do.

``render()`` draws the editor in the sidebar's Cluster section (an expander): one row per group
(GPU, GPUs per node, nodes), the batch split, the straggler's slowdown and where it is. The
groups live in session state as the tuple ``Scenario.mixed.groups`` holds (``in_mixed``, no
widget of its own), rebuilt from the row widgets on every run, and the rows are seeded again
whenever that tuple changes from elsewhere (a link, an example, a loaded report).
``results(scenario)`` shows on the Meshes page the layouts ranked on the mixed cluster
(``explorer.hetero_search``), the current layout's mixed step and the straggler's cost with
the mitigation sentence (``explorer.straggler``). Its caches are its own, small ones.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd
import streamlit as st

from explorer.limits import MAX_LAYERS, limit
from explorer.scenario import Scenario, resolve_mixed, resolve_straggler
from explorer.ui import cached
from explorer.ui.assumptions import estimate_assumptions
from explorer.ui.state import key

if TYPE_CHECKING:
    from explorer.hetero import HeteroStep
    from explorer.hetero_search import MixedSearch
    from explorer.straggler import StragglerCost

GROUPS = key("mixed")
SEEN = "cluster_editor_seen"
"""The groups tuple the row widgets were last seeded from."""
ROWS = "cluster_editor_rows"
OPEN = "cluster_editor_open"
"""The expander's key: whether the editor is open."""
MAX_GROUPS = 8
WHERE = {"dp": "one data-parallel replica", "pp-stage": "one pipeline rank",
         "link": "one pipeline rank's links"}  # fmt: skip


def _row_key(field: str, i: int) -> str:
    return f"cluster_editor_{field}_{i}"


def _seed(groups: tuple[tuple[str, int, int], ...]) -> None:
    state = st.session_state
    state[ROWS] = len(groups)
    for i, (gpu, per, nodes) in enumerate(groups):
        state[_row_key("gpu", i)], state[_row_key("per", i)] = gpu, per
        state[_row_key("nodes", i)] = nodes
    state[SEEN] = groups


def _add() -> None:
    state = st.session_state
    i = state.get(ROWS, 0)
    if i < MAX_GROUPS:
        state[_row_key("gpu", i)] = state.get(key("gpu"), "h100-sxm")
        state[_row_key("per", i)], state[_row_key("nodes", i)] = 8, 1
        state[ROWS] = i + 1


def _remove() -> None:
    st.session_state[ROWS] = max(0, st.session_state.get(ROWS, 0) - 1)


def render() -> None:
    """The editor; writes the groups tuple to session state for the sidebar's scenario.

    Its widgets are drawn only while the expander is open (closed, they would cost every
    rerun); it opens by itself when groups arrive from elsewhere (a link, a loaded report).
    Closed, the groups and the straggler stay as they are in the scenario."""
    state = st.session_state
    groups = tuple(tuple(g) for g in state.get(GROUPS, ()))
    changed = state.get(SEEN) != groups
    if changed and groups:
        state[OPEN] = True
    box = st.expander("Mixed cluster and stragglers", key=OPEN, on_change="rerun")
    if not box.open:
        if changed:
            state[SEEN] = groups
        return
    rows_lost = any(_row_key("gpu", i) not in state for i in range(len(groups)))
    if changed or ROWS not in state or rows_lost:  # a closed editor's row widgets are dropped
        _seed(groups)
    gpus = dict(cached.gpu_choices())
    with box:
        st.caption("Groups of one GPU type each; the Meshes page ranks layouts on them. "
                   "No group: the cluster above alone.")  # fmt: skip
        rows = []
        for i in range(state[ROWS]):
            a, b, c = st.columns([2, 1, 1])
            if state.get(_row_key("gpu", i)) not in gpus:
                given, state[_row_key("gpu", i)] = state.get(_row_key("gpu", i)), next(iter(gpus))
                st.warning(f"Unknown GPU {given!r} in group {i + 1}; showing {next(iter(gpus))}.")
            gpu = a.selectbox(f"GPU {i + 1}", list(gpus), key=_row_key("gpu", i),
                              format_func=gpus.__getitem__)  # fmt: skip
            per = b.number_input("per node", min_value=0, max_value=limit("gpus_per_node"),
                                 key=_row_key("per", i))  # fmt: skip
            nodes = c.number_input("nodes", min_value=0, max_value=limit("num_nodes"),
                                   key=_row_key("nodes", i))  # fmt: skip
            rows.append((str(gpu), int(per), int(nodes)))
        left, right = st.columns(2)
        left.button("Add group", on_click=_add, disabled=state[ROWS] >= MAX_GROUPS)
        right.button("Remove last", on_click=_remove, disabled=state[ROWS] == 0)
        st.radio("Across the types", ("dp", "pp"), key=key("mixed_mode"), horizontal=True,
                 format_func={"dp": "data parallel", "pp": "pipeline"}.__getitem__,
                 help="Data parallel: each replica inside one group. Pipeline: pipeline ranks "
                 "on the groups in order, layers balanced by speed.")  # fmt: skip
        st.radio("Batch split", ("even", "speed"), key=key("mixed_split"), horizontal=True,
                 help="Data parallel across the types: the same micro-batches on every "
                 "replica, or in proportion to each type's speed, held to counts the schedule "
                 "runs (DualPipe: even, at least twice the stages).")  # fmt: skip
        st.number_input("Straggler slowdown (%)", min_value=0.0, max_value=1000.0, step=5.0,
                        key=key("slow"), help="Extra time of the slow part; 0: none.")  # fmt: skip
        w, s = st.columns(2)
        w.selectbox("Where", list(WHERE), key=key("slow_where"), format_func=WHERE.__getitem__,
                    help="What runs slow: one data-parallel replica, one pipeline rank, or the "
                    "links of one rank's group.")  # fmt: skip
        s.number_input("Pipeline rank", min_value=0, max_value=MAX_LAYERS, key=key("slow_stage"),
                       help="The slow pipeline rank (0 is the first), where it is a rank or its "
                       "links.")  # fmt: skip
    built = tuple(rows)
    state[GROUPS], state[SEEN] = built, built


# ------------------------------------------------------------------------------ results


@st.cache_data(max_entries=8, show_spinner="Ranking layouts on the mixed cluster…")
def _mixed_search(scenario: Scenario) -> MixedSearch:
    from explorer.hetero_search import mixed_search, pipeline_search

    model, groups = cached.model(scenario.model), resolve_mixed(scenario.mixed)
    assumptions = estimate_assumptions(scenario.assumption_overrides())
    ranked, space = min(scenario.search.ranked, 10), scenario.search_space()
    if scenario.mixed.mode == "pp":
        return pipeline_search(model, groups, scenario.training_spec(), space=space,
                               assumptions=assumptions, ranked=ranked)  # fmt: skip
    return mixed_search(model, groups, scenario.training_spec(), split=scenario.mixed.split,
                        space=space, assumptions=assumptions, ranked=ranked)  # fmt: skip


@st.cache_data(max_entries=16, show_spinner=False)
def _current(scenario: Scenario) -> HeteroStep:
    from explorer.hetero_search import mixed_step

    return mixed_step(
        cached.model(scenario.model), resolve_mixed(scenario.mixed), scenario.layout_spec(),
        scenario.training_spec(), scenario.mixed.mode, scenario.mixed.split,
        estimate_assumptions(scenario.assumption_overrides()),
    )  # fmt: skip


@st.cache_data(max_entries=16, show_spinner=False)
def _straggler(scenario: Scenario) -> StragglerCost:
    from explorer.straggler import straggler_cost

    straggler = resolve_straggler(scenario.straggler)
    assert straggler is not None
    return straggler_cost(
        cached.model(scenario.model), cached.cluster(scenario.cluster), scenario.layout_spec(),
        scenario.training_spec(), straggler,
        estimate_assumptions(scenario.assumption_overrides()),
    )  # fmt: skip


def _sentence(error: Exception) -> str:
    text = str(error).strip()
    return text if text.endswith(".") else text + "."


def results(scenario: Scenario) -> None:
    """The mixed cluster's ranking and the straggler's cost, when the scenario has them."""
    if scenario.workload != "training":
        return
    if scenario.mixed.groups:
        _mixed_results(scenario)
    if resolve_straggler(scenario.straggler) is not None:
        _straggler_results(scenario)


def _mixed_results(scenario: Scenario) -> None:
    from explorer.units import GiB

    st.subheader("On the mixed cluster", anchor=False)
    try:
        found = _mixed_search(scenario)
    except ValueError as error:
        st.error(_sentence(error))
        return
    kinds = " + ".join(f"{g.num_nodes} × {g.gpus_per_node} {g.gpu.name}" for g in found.groups)
    sure = ("exactly the fastest" if found.certain
            else "the fastest among those each type's search ranked (not certain)")  # fmt: skip
    how = "pipeline across the types" if found.mode == "pp" else f"batch split {found.split}"
    st.caption(f"{kinds}, {how}: {len(found.rows)} layouts, {sure}.")
    if found.rows:
        frame = pd.DataFrame([{
            "tp": r.layout.tp, "pp": r.layout.pp, "dp": r.layout.dp, "cp": r.layout.cp,
            "zero": r.layout.zero, "mbs": r.layout.micro_batch_size,
            "recompute": r.layout.recompute, "schedule": r.layout.schedule,
            "step (s)": r.step_s,
            "layers per rank": (",".join(map(str, r.hetero.stage_layers or ())) or "as set")
            + (" (held to memory)" if r.hetero.memory_held else ""),
            "per type": ", ".join(f"{t.gpu}: {t.replicas} × {t.microbatches} mb, "
                                  f"{t.peak_bytes / GiB:.1f} GiB" for t in r.hetero.types),
        } for r in found.rows])  # fmt: skip
        st.dataframe(frame, hide_index=True, key="mixed_table")
    else:
        st.warning("No layout fits every GPU type with its replicas inside one group.")
    try:
        step = _current(scenario)
    except ValueError as error:
        st.info(f"The current layout on the mixed cluster: {_sentence(error)}")
        return
    st.caption(
        f"The current layout on the mixed cluster: step {step.step_s:.3f} s; "
        + ("every GPU type holds its share." if step.fits else "some GPU type runs out of memory.")
    )


def _straggler_results(scenario: Scenario) -> None:
    from explorer.straggler import straggler_sentence

    st.subheader("With the straggler", anchor=False)
    try:
        cost = _straggler(scenario)
    except ValueError as error:
        st.error(_sentence(error))
        return
    st.markdown(straggler_sentence(cost))
    for m in cost.mitigations[1:]:
        st.caption(f"Also: {m.name}, {m.detail} (step {m.step_s:.3f} s).")
