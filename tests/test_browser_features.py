"""In headless Chromium: a gallery card loads its preset in one click, the schedule explorer
shows each stage's memory in GiB for the stages typed in, and DualPipe at 16 stages x 32
micro-batches is drawn in time bins.

Timeout policy: every wait is on a DOM condition, bounded by TIMEOUT_MS (a first estimate on a
busy machine takes seconds); nothing sleeps.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect
from test_browser import MAIN, _settled

TIMEOUT_MS = 60_000

pytestmark = pytest.mark.browser


def test_a_gallery_card_loads_its_preset_in_one_click(page: Page, app_url: str):
    page.set_viewport_size({"width": 1500, "height": 1000})
    page.goto(app_url)
    card = page.locator(".st-key-gallery_deepseek-v3 button")
    expect(card).to_be_visible(timeout=TIMEOUT_MS)
    _settled(page)
    card.click()
    page.wait_for_function("location.search.includes('model=deepseek-v3')", timeout=TIMEOUT_MS)
    expect(page.locator(MAIN).get_by_role("heading", name="DeepSeek-V3 (671B)")).to_be_visible(
        timeout=TIMEOUT_MS
    )
    expect(card).to_have_text("Loaded", timeout=TIMEOUT_MS)


def test_the_explorer_shows_the_memory_of_each_stage_typed_in(page: Page, app_url: str):
    page.set_viewport_size({"width": 1500, "height": 1000})
    page.goto(f"{app_url}/pipeline")
    toggle = page.locator(MAIN).get_by_text("Explore any schedule", exact=True)
    expect(toggle).to_be_visible(timeout=TIMEOUT_MS)
    _settled(page)
    toggle.click()
    stages = page.locator(MAIN).get_by_role("spinbutton", name="Stages", exact=True)
    expect(stages).to_be_visible(timeout=TIMEOUT_MS)
    stages.fill("8")
    stages.press("Enter")
    # 1F1B on 8 stages with 8 micro-batches: stage 0 holds all 8 sets at its peak.
    expect(page.get_by_text("Peak: stage 0 holds 8 micro-batches' activations")).to_be_visible(
        timeout=TIMEOUT_MS
    )
    axes = page.locator(".st-key-explorer_chart").get_by_text("GiB (2^30 bytes)")
    expect(axes.first).to_be_visible(timeout=TIMEOUT_MS)  # its memory axes are titled in GiB


def test_dualpipe_at_16_by_32_is_drawn_in_time_bins(page: Page, app_url: str):
    page.set_viewport_size({"width": 1500, "height": 1000})
    page.goto(f"{app_url}/pipeline?pp=16&schedule=dualpipe&gbs=64&nodes=32")
    title = page.locator(".st-key-schedule").get_by_text("drawn in 96 time bins", exact=False)
    expect(title).to_be_visible(timeout=TIMEOUT_MS)
    expect(page.get_by_text("Zoom: time window")).to_be_visible(timeout=TIMEOUT_MS)
