"""Long work in the open: the search's progress callback (core), its progress bar and Cancel
button (Meshes page), and the report's status boxes (Report page), in Streamlit's AppTest."""

from __future__ import annotations

from pathlib import Path

import pytest
import streamlit as st
from streamlit.runtime.scriptrunner_utils.exceptions import StopException
from streamlit.testing.v1 import AppTest

import explorer.search
from explorer.scenario import Scenario
from explorer.search import SearchProgress, SearchStopped, search
from explorer.ui import inputs
from explorer.ui.assumptions import estimate_assumptions
from explorer.ui.progress import CANCEL_KEY, cancelled_sentence, progress_text

APP = str(Path(__file__).resolve().parents[1] / "app.py")
PAGES = "explorer/ui/pages/"
LLAMA_LAYOUTS = 12_132
"""Layouts in the default scenario's search space (Llama 3.1 70B on 64 H100s): the Meshes
page's "Layouts considered" for it (explorer.search, every rejected subtree counted)."""


def _default_search(progress) -> object:
    scenario = Scenario()
    case = inputs.search_case(scenario)
    return search(
        case.model,
        case.cluster,
        case.workload,
        space=scenario.search_space(),
        assumptions=estimate_assumptions(dict(scenario.assumptions)),
        ranked=scenario.search.ranked,
        progress=progress,
    )


def test_the_progress_callback_counts_the_whole_space_and_only_grows():
    seen: list[SearchProgress] = []
    result = _default_search(seen.append)
    assert seen, "a search of 12,132 layouts reports its progress"
    assert {p.total for p in seen} == {LLAMA_LAYOUTS} == {result.evaluated}
    covered = [p.covered for p in seen]
    assert covered == sorted(covered) and covered[-1] < LLAMA_LAYOUTS  # ends before leftovers
    assert all(p.limit == 20 and 0 <= p.fraction <= 1 for p in seen)


def test_a_callback_returning_true_stops_the_search_with_one_sentence():
    with pytest.raises(SearchStopped, match=r"^the search was stopped after [\d.]+ s, with "):
        _default_search(lambda p: True)


def test_the_bar_and_the_cancelled_search_say_what_was_done():
    p = SearchProgress(covered=4_000, total=12_132, ranked=3, limit=20, elapsed_s=1.5, budget_s=60)
    assert progress_text(p) == (
        "4,000 of 12,132 layouts settled · 3 of 20 ranked · 1.5 s so far, at most 58 s left "
        "(the search's time budget)"
    )
    assert cancelled_sentence(p) == (
        "Search cancelled after 1.5 s, with 4,000 of 12,132 layouts settled and 3 of 20 "
        "ranked; the table needs the whole search."
    )
    assert p.fraction == pytest.approx(4_000 / 12_132)  # settled share beats 3/20 ranked


def _fresh(page: str) -> AppTest:
    """The app on ``page`` with every shared store empty (no search has run)."""
    st.cache_resource.clear()
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    at.switch_page(f"{PAGES}{page}.py").run()
    return at


def test_a_first_search_shows_its_progress_then_a_completed_status():
    at = _fresh("meshes")
    assert not at.exception
    (status,) = at.status
    assert status.state == "complete"
    assert status.label.startswith(f"Searched {LLAMA_LAYOUTS:,} layouts in ")
    (bar,) = at.get("progress")
    assert bar.proto.value == 100
    assert bar.proto.text == f"{LLAMA_LAYOUTS:,} of {LLAMA_LAYOUTS:,} layouts settled"
    assert not [b for b in at.button if b.key == CANCEL_KEY]  # gone once it finished
    at.run()  # the same search again: read back, nothing to show
    assert not at.status and not at.get("progress")


def test_cancel_stops_the_search_with_a_sentence_until_searched_again(monkeypatch):
    real = explorer.search.search

    def interrupted(*args, progress=None, **kwargs):
        """A search that a click interrupts: Streamlit stops the script at the bar's update."""
        progress(SearchProgress(covered=4_000, total=12_132, ranked=3, limit=20,
                                elapsed_s=1.5, budget_s=60.0))  # fmt: skip
        raise StopException()

    monkeypatch.setattr(explorer.search, "search", interrupted)
    at = _fresh("meshes")
    (status,) = at.status
    assert status.state == "running"
    cancel = at.button(key=CANCEL_KEY)
    assert cancel.label == "Cancel the search"
    monkeypatch.setattr(explorer.search, "search", real)
    cancel.click().run()
    assert not at.exception
    (warning,) = at.warning
    assert warning.value == (
        "Search cancelled after 1.5 s, with 4,000 of 12,132 layouts settled and 3 of 20 "
        "ranked; the table needs the whole search."
    )
    assert not at.metric and not at.status  # no search ran behind the sentence
    at.button(key="search_again").click().run()
    assert not at.warning
    assert f"{LLAMA_LAYOUTS:,}" in [m.value for m in at.metric]


def test_the_report_is_built_under_a_status_and_html_on_request():
    at = _fresh("report")
    assert not at.exception
    labels = [s.label for s in at.status]
    assert labels[0].startswith(f"Searched {LLAMA_LAYOUTS:,} layouts in ")
    assert labels[1].startswith("Report built in ")
    assert [b.label for b in at.get("download_button")] == ["Download Markdown", "Download JSON"]
    at.button(key="build_html").click().run()
    (status,) = at.status
    assert status.state == "complete" and status.label.startswith("HTML ready (")
    labels = [b.label for b in at.get("download_button")]
    assert labels == ["Download Markdown", "Download HTML", "Download JSON"]
