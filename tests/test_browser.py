"""End to end in headless Chromium: the README's streamlit command, a real browser, real clicks.

One journey: open the Memory page, load the DeepSeek-V3 example, move the sequence-length
slider with the keyboard and watch the memory chart change (timed from key press to the new
chart), then visit every page and save screenshots to test-artifacts/.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest
from conftest import ARTIFACTS, SEARCH_TIMEOUT_MS, TIMEOUT_MS
from playwright.sync_api import Page, expect

DEEPSEEK = "DeepSeek-V3 671B MoE · 2048 H800"
PEAK_TEXT = ".st-key-memory_chart .annotation-text"
MAIN = "[data-testid=stMainBlockContainer]"

pytestmark = pytest.mark.browser


def _settled(page: Page, timeout_ms: int = TIMEOUT_MS) -> None:
    """Wait until Streamlit has finished the run in progress and drawn every element."""
    page.wait_for_function(
        "!document.querySelector('[data-testid=stStatusWidget]')"
        " && !document.querySelector('[data-testid=stSkeleton]')",
        timeout=timeout_ms,
    )


def _shot(page: Page, name: str) -> None:
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


PEAK_JS = (
    f"[...document.querySelectorAll({PEAK_TEXT!r})].map(e => e.textContent)"
    ".find(t => t.startsWith('peak')) ?? null"
)
"""The memory chart's peak annotation as drawn now, or null while the chart is (re)drawn."""


def _peak_label(page: Page, other: str | None = None) -> str:
    """The memory chart's peak annotation ("peak 48.7 GiB") once it is drawn, and differs from
    ``other`` when given: the chart is redrawn after the run that made it has finished, so
    this waits for it (``TIMEOUT_MS``) rather than reading whatever is there."""
    drawn = page.wait_for_function(
        f"(other) => {{ const t = {PEAK_JS}; return t !== null && t !== other ? t : null; }}",
        arg=other,
        timeout=TIMEOUT_MS,
    )
    return str(drawn.json_value())


TIMER = """() => {
  window.__keyAt = null; window.__chartAt = null;
  const peak = () => PEAK;
  const before = peak();
  document.addEventListener('keydown', () => { window.__keyAt = performance.now(); },
                            {capture: true, once: true});
  const observer = new MutationObserver(() => {
    const now = peak();
    if (window.__keyAt !== null && now !== null && now !== before) {
      window.__chartAt = performance.now(); observer.disconnect();
    }
  });
  observer.observe(document.body, {subtree: true, childList: true, characterData: true});
}""".replace("PEAK", PEAK_JS)
"""Records when a key goes down and when the memory chart next shows a new peak annotation."""


def _timed_key(page: Page, key: str) -> float:
    """Seconds from pressing ``key`` on the focused slider to the memory chart's new peak."""
    page.evaluate(TIMER)
    page.keyboard.press(key)
    page.wait_for_function("window.__chartAt !== null", timeout=TIMEOUT_MS)
    return page.evaluate("(window.__chartAt - window.__keyAt) / 1000")


def test_a_deepseek_journey_through_every_page(page: Page, app_url: str):
    page.set_viewport_size({"width": 1500, "height": 1000})
    page.goto(f"{app_url}/memory")
    expect(page.get_by_text("Memory per GPU", exact=True)).to_be_visible(timeout=TIMEOUT_MS)
    page.get_by_role("button", name=DEEPSEEK).click()
    expect(page.get_by_text("DeepSeek-V3 (671B)").first).to_be_visible(timeout=TIMEOUT_MS)
    expect(page.locator(PEAK_TEXT).first).to_be_attached(timeout=TIMEOUT_MS)
    _settled(page)
    assert "model=deepseek-v3" in page.evaluate("location.search")
    _shot(page, "memory-deepseek-v3")

    before = _peak_label(page)
    slider = page.get_by_role("slider", name="Sequence length (tokens)")
    slider.focus()
    first = _timed_key(page, "ArrowRight")  # 4K -> 8K: computed for the first time
    _settled(page)
    after = _peak_label(page, before)  # times out, failing, if the peak never changes
    assert after != before and after.startswith("peak")
    assert slider.get_attribute("aria-valuetext") == "8K"
    assert "seq=" not in page.evaluate("location.search")  # 8K is the default: left out
    _shot(page, "memory-deepseek-v3-seq-8k")

    repeats = []  # back and forth between cached values: the page's own cost (measured with
    for key in ("ArrowLeft", "ArrowRight"):  # medians by explorer.ui.bench_browser, not here)
        slider.focus()
        repeats.append(_timed_key(page, key))
        _settled(page)
    timing = {"first_s": first, "median_s": statistics.median(repeats), "all_s": repeats}
    # Recorded, not asserted: speed is measured, never a pass/fail threshold (DEVELOPERS.md).
    (ARTIFACTS / "slider-timing.json").write_text(json.dumps(timing, indent=2))

    query = page.evaluate("location.search")
    for path in ("", "pipeline", "communication", "scaling", "validation"):  # "": the Model page
        page.goto(f"{app_url}/{path}{query}")
        _page_drawn(page)
        assert page.get_by_text("Page not found").count() == 0
        _shot(page, f"{path or 'model'}-deepseek-v3")


def _page_drawn(page: Page) -> None:
    """The page's title is there, the run has finished, and no exception reached it."""
    expect(page.locator(f"{MAIN} h3").first).to_be_visible(timeout=TIMEOUT_MS)
    _settled(page, SEARCH_TIMEOUT_MS)  # scaling sweeps and searches take seconds
    assert page.locator("[data-testid=stException]").count() == 0


def test_picking_a_ranked_mesh_makes_it_the_current_layout(page: Page, app_url: str):
    page.set_viewport_size({"width": 1500, "height": 1000})
    page.goto(f"{app_url}/meshes")  # the Llama 3.1 70B default: a search of a few seconds
    table = page.locator(".st-key-meshes_table")
    expect(table).to_be_visible(timeout=SEARCH_TIMEOUT_MS)
    _settled(page)
    # The grid draws on a canvas; its accessible table names every cell glide-cell-COL-ROW,
    # COL its header's aria-colindex (rank is 1). Focus row 1's rank cell and select its row
    # with the grid's own key binding (Shift+Space): no pixel offsets.
    header = table.get_by_role("columnheader", name="TP", exact=True, include_hidden=True)
    column = int(header.get_attribute("aria-colindex") or 0)
    assert table.locator("#glide-cell-1-0").text_content() == "1"  # rank 1
    tp_row = table.locator(f"#glide-cell-{column}-0").text_content()
    table.locator("#glide-cell-1-0").focus()
    page.keyboard.press("Shift+Space")
    page.wait_for_function(f"document.querySelector('{MAIN}') && location.search.includes('tp=')")
    _settled(page)
    assert page.get_by_role("spinbutton", name="TP", exact=True).input_value() == tp_row
    assert f"tp={tp_row}" in page.url
    _shot(page, "meshes-row-picked")
    page.goto(f"{app_url}/memory?{page.url.split('?', 1)[1]}")
    _page_drawn(page)
    expect(page.get_by_text("Memory per GPU", exact=True)).to_be_visible()


def test_the_html_report_downloads_with_its_numbers(page: Page, app_url: str):
    page.set_viewport_size({"width": 1500, "height": 1000})
    page.goto(f"{app_url}/report")
    _page_drawn(page)
    _shot(page, "report")
    page.get_by_role("button", name="Build HTML").click()  # built under a status box
    expect(page.get_by_text("HTML ready")).to_be_visible(timeout=SEARCH_TIMEOUT_MS)
    with page.expect_download(timeout=SEARCH_TIMEOUT_MS) as download:
        page.get_by_role("button", name="Download HTML").click()
    path = ARTIFACTS / download.value.suggested_filename
    download.value.save_as(path)
    html = path.read_text()
    assert html.startswith("<!DOCTYPE html>")
    assert "Llama 3.1 70B" in html and "GiB" in html
    assert "plotly" in html.lower()  # the charts travel inside the file


def test_uploading_a_json_report_restores_its_scenario(page: Page, app_url: str, tmp_path: Path):
    from explorer.report import build_report, report_json
    from explorer.scenario import DEEPSEEK_V3

    saved = tmp_path / "deepseek.json"
    saved.write_text(report_json(build_report(DEEPSEEK_V3)))
    page.set_viewport_size({"width": 1500, "height": 1000})
    page.goto(f"{app_url}/report")
    _page_drawn(page)
    page.locator(f"{MAIN} input[type=file]").set_input_files(str(saved))
    expect(page.get_by_text("Restored the scenario of deepseek.json")).to_be_visible(
        timeout=TIMEOUT_MS
    )
    page.wait_for_function("location.search.includes('model=deepseek-v3')", timeout=TIMEOUT_MS)
    _settled(page)
    _shot(page, "report-restored")
