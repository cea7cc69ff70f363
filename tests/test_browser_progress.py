"""In headless Chromium: a search not run before shows its progress bar and a Cancel button,
and Cancel stops it with a sentence until the person searches again.

Its own server (a new process: no search has run in it). The search is DeepSeek-V3 on 2,048
H800s ranking 200 layouts (196,344 layouts; seconds even on a fast machine), so the click
lands while it runs. Timeout policy (as in test_browser.py): every wait is on a DOM condition,
bounded by TIMEOUT_MS or SEARCH_TIMEOUT_MS; nothing sleeps.
"""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import urlencode

import pytest
from conftest import ARTIFACTS, ROOT, SEARCH_TIMEOUT_MS, TIMEOUT_MS
from playwright.sync_api import Page, expect
from test_browser import MAIN, _settled

from explorer.scenario import DEEPSEEK_V3, to_query
from explorer.ui.bench_browser import served

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def fresh_url() -> Iterator[str]:
    ARTIFACTS.mkdir(exist_ok=True)
    log = ARTIFACTS / "streamlit-progress.log"
    with served(ROOT / "app.py", ROOT, TIMEOUT_MS / 1000, log=log) as url:
        yield url


def test_cancel_stops_a_running_search_and_search_again_finishes_it(page: Page, fresh_url: str):
    page.set_viewport_size({"width": 1500, "height": 1000})
    query = urlencode({**to_query(DEEPSEEK_V3), "ranked": "200"})
    page.goto(f"{fresh_url}/meshes?{query}")
    cancel = page.get_by_role("button", name="Cancel the search")
    expect(cancel).to_be_visible(timeout=TIMEOUT_MS)
    bar = page.locator(f"{MAIN} [data-testid=stProgress]")
    expect(bar).to_contain_text("layouts settled")  # the first progress report, then Cancel
    cancel.click()
    said = page.locator(f"{MAIN} [data-testid=stAlert]").filter(has_text="Search cancelled")
    expect(said).to_be_visible(timeout=TIMEOUT_MS)
    assert "layouts settled" in said.inner_text()
    _settled(page)
    assert page.get_by_text("Layouts considered").count() == 0  # nothing ranked behind it
    page.get_by_role("button", name="Search again").click()
    expect(page.get_by_text("Layouts considered")).to_be_visible(timeout=SEARCH_TIMEOUT_MS)
    expect(page.get_by_text("Searched 196,344 layouts in")).to_be_visible()
