"""Eight people at once against one server: each browser session opens its own link (another
model, GPU and cluster size) at the same moment, and each sees only its own values.

Streamlit runs every session's script in its own thread over shared module state, so this is
where a cache keyed too loosely or a module-level value would leak one person's scenario into
another's page. The server is the suite's shared one (conftest's ``app_url``): its caches hold
what earlier browser tests computed, as a long-running server's would. One timeout policy
(conftest's TIMEOUT_MS bounds every wait); nothing sleeps a fixed time.
"""

from __future__ import annotations

from urllib.parse import parse_qs

import pytest
from conftest import TIMEOUT_MS
from playwright.sync_api import Browser, Page, expect

from explorer.presets import load_gpu, model_entry
from explorer.scenario import from_query

MAIN = "[data-testid=stMainBlockContainer]"
CASES = (  # model preset, GPU preset, nodes of 8 GPUs (DP = nodes with TP 8: the batch divides)
    ("llama-3.1-8b", "h100-sxm", 1),
    ("llama-3.1-70b", "h200", 2),
    ("qwen3-32b", "a100-80g", 4),
    ("mixtral-8x7b", "b200", 8),
    ("gpt3-175b", "h100-sxm", 16),
    ("llama-3.1-405b", "h200", 32),
    ("mistral-7b", "a100-80g", 64),
    ("qwen2.5-72b", "b200", 128),
)

pytestmark = pytest.mark.browser


def _link(model: str, gpu: str, nodes: int) -> str:
    return f"/memory?model={model}&gpu={gpu}&nodes={nodes}&tp=8&pp=1&dp={nodes}"


def _expected(model: str, gpu: str, nodes: int) -> tuple[str, str]:
    """The model's display name and the cluster as the page header writes them."""
    return model_entry(
        model
    ).display_name, f"{8 * nodes:,} GPUs ({nodes:,} × 8 {load_gpu(gpu).name})"


def test_eight_sessions_at_once_each_see_only_their_own_scenario(browser: Browser, app_url: str):
    # Eight tabs of one browser: each tab is its own Streamlit session (its own websocket and
    # script thread); the tabs share the browser's cache, so the front end's scripts are
    # fetched and compiled once, not eight times.
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    try:
        pages: list[Page] = [context.new_page() for _ in CASES]
        for page, case in zip(pages, CASES, strict=True):  # all eight load at the same time
            page.goto(app_url + _link(*case), wait_until="commit", timeout=TIMEOUT_MS)
        names = [_expected(*case)[0] for case in CASES]
        for page, case in zip(pages, CASES, strict=True):
            name, cluster = _expected(*case)
            caption = page.locator(f"{MAIN} [data-testid=stCaptionContainer]").filter(
                has_text=cluster
            )
            expect(caption.first).to_be_visible(timeout=TIMEOUT_MS)
            text = caption.first.inner_text()
            assert name in text, (case, text)
            assert [n for n in names if n in text] == [name], (case, text)
            shown = parse_qs(page.evaluate("location.search").lstrip("?"))
            assert from_query(shown)[0] == from_query(parse_qs(_link(*case).split("?")[1]))[0]
            assert page.locator("[data-testid=stException]").count() == 0
    finally:
        context.close()
