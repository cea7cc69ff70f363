"""Long work in the open: the mesh search with a progress bar and a Cancel button.

A search that has run already (``cached.search_done``) is read back with nothing drawn. One
that has not runs inside an ``st.status`` box with a progress bar fed by the search core's
``progress`` callback (layouts settled, rows ranked, seconds spent and the budget left) and a
Cancel button. Streamlit handles a click (on Cancel, or on any other input) at the next
element the script sends, so the bar's updates are where the search can be interrupted: the
search stops there, nothing is stored, and the run starts again. Cancel's callback keeps the
last progress as a sentence, shown instead of the search until the person searches again.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import streamlit as st

from explorer.scenario import Overrides
from explorer.specs import ClusterSpec, ModelSpec, TrainingWorkload
from explorer.ui import cached
from explorer.ui.format import seconds

if TYPE_CHECKING:
    from explorer.mesh import SearchSpace
    from explorer.search import SearchProgress, SearchResult

CANCELLED = "_search_cancelled"
"""Session-state key: (search key, sentence) of the search the person cancelled."""
LAST = "_search_progress"
"""Session-state key: the running search's last SearchProgress (read by Cancel's callback)."""
CANCEL_KEY = "search_cancel"
UPDATE_S = 0.25
"""Seconds between two updates of the bar (each update is a message to the browser, and the
moment a click can interrupt the search)."""


def progress_text(p: SearchProgress) -> str:
    """The bar's caption: what is settled, what is ranked, time spent and the budget left."""
    ranked = f"{p.ranked} of {p.limit}" if p.limit is not None else f"{p.ranked}"
    left = max(0.0, p.budget_s - p.elapsed_s)
    return (
        f"{p.covered:,} of {p.total:,} layouts settled · {ranked} ranked · "
        f"{p.elapsed_s:.1f} s so far, at most {left:.0f} s left (the search's time budget)"
    )


def cancelled_sentence(p: SearchProgress | None) -> str:
    """What a cancelled search had done, in one sentence."""
    if p is None:
        return "Search cancelled before its first layouts were settled."
    ranked = f"{p.ranked} of {p.limit}" if p.limit is not None else f"{p.ranked}"
    return (
        f"Search cancelled after {p.elapsed_s:.1f} s, with {p.covered:,} of {p.total:,} "
        f"layouts settled and {ranked} ranked; the table needs the whole search."
    )


def _cancel(key: bytes) -> None:
    st.session_state[CANCELLED] = (key, cancelled_sentence(st.session_state.get(LAST)))


def _search_again() -> None:
    st.session_state.pop(CANCELLED, None)


def search(
    model: ModelSpec,
    cluster: ClusterSpec,
    workload: TrainingWorkload,
    overrides: Overrides,
    space: SearchSpace,
    ranked: int,
) -> SearchResult | None:
    """The search of these inputs: read back, or run with its progress shown; None (with the
    sentence and a button to search again) when the person cancelled this very search."""
    inputs = (model, cluster, workload, overrides, space, ranked)
    key = cached.search_key(*inputs)
    if cached.search_done(*inputs):
        return cached.search(*inputs)
    cancelled = st.session_state.get(CANCELLED)
    if cancelled is not None and cancelled[0] == key:
        st.warning(cancelled[1], icon=":material/cancel:")
        st.button("Search again", key="search_again", on_click=_search_again, type="primary")
        return None
    st.session_state.pop(CANCELLED, None)
    st.session_state.pop(LAST, None)
    status = st.status("Searching layouts…", expanded=True)
    bar = status.progress(0.0, text="Counting the layouts of the search space…")
    cancel = status.empty()
    cancel.button("Cancel the search", key=CANCEL_KEY, on_click=_cancel, args=(key,))
    shown = [time.monotonic()]

    def report(p: SearchProgress) -> None:
        st.session_state[LAST] = p
        now = time.monotonic()
        if now - shown[0] >= UPDATE_S:
            shown[0] = now
            bar.progress(p.fraction, text=progress_text(p))

    try:
        result = cached.search(*inputs, progress=report)
    except ValueError:  # past the budget: run_page shows the sentence
        cancel.empty()
        status.update(label="The search stopped", state="error", expanded=False)
        raise
    cancel.empty()
    bar.progress(1.0, text=f"{result.evaluated:,} of {result.evaluated:,} layouts settled")
    status.update(
        label=f"Searched {result.evaluated:,} layouts in {seconds(result.elapsed_s)}",
        state="complete",
        expanded=False,
    )
    return result
