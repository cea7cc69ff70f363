"""In headless Chromium: the reserve turns the verdict amber, and a layout that does not fit
gets a fix that one click applies (the sidebar and the link follow).

Timeout policy: tests/conftest.py (TIMEOUT_MS for every wait, click and expect).
"""

from __future__ import annotations

import pytest
from conftest import TIMEOUT_MS
from playwright.sync_api import Page, expect
from test_browser import MAIN, _settled

TOO_BIG = "tp=8&pp=1&dp=8&zero=0&mbs=2&recompute=none"
"""Llama 3.1 70B on the default 64 H100s without ZeRO (tests/test_fixes.py says why)."""

pytestmark = pytest.mark.browser


def _alert(page: Page, text: str):
    return page.locator(f"{MAIN} [data-testid=stAlert]").filter(has_text=text)


def test_a_reserve_above_the_free_memory_turns_the_verdict_amber(page: Page, app_url: str):
    page.set_viewport_size({"width": 1500, "height": 1000})
    page.goto(f"{app_url}/memory")
    expect(_alert(page, "Fits")).to_be_visible(timeout=TIMEOUT_MS)
    _settled(page)
    reserve = page.get_by_role("spinbutton", name="Reserve (GiB)")
    reserve.fill("70")
    reserve.press("Enter")
    expect(_alert(page, "near the edge")).to_be_visible(timeout=TIMEOUT_MS)
    page.wait_for_function("location.search.includes('reserve=70')", timeout=TIMEOUT_MS)


def test_a_fix_applies_in_one_click_and_the_layout_fits(page: Page, app_url: str):
    page.set_viewport_size({"width": 1500, "height": 1000})
    page.goto(f"{app_url}/memory?{TOO_BIG}")
    expect(_alert(page, "Does not fit")).to_have_count(1, timeout=TIMEOUT_MS)
    expect(page.get_by_text("ZeRO 0 → 3")).to_be_visible(timeout=TIMEOUT_MS)
    _settled(page)
    page.get_by_role("button", name="Apply").first.click()
    expect(_alert(page, "Fits")).to_be_visible(timeout=TIMEOUT_MS)
    page.wait_for_function("location.search.includes('zero=3')", timeout=TIMEOUT_MS)
    expect(page.get_by_role("combobox", name="ZeRO")).to_be_attached()


def test_serving_is_in_the_navigation_of_training_and_one_click_away(page: Page, app_url: str):
    page.set_viewport_size({"width": 1500, "height": 1000})
    page.goto(f"{app_url}/memory")
    _settled(page)
    page.get_by_role("link", name="Serving").click()
    page.get_by_role("button", name="Plan serving for this model").click()
    page.wait_for_function("location.search.includes('workload=serving')", timeout=TIMEOUT_MS)
    expect(page.get_by_text("Concurrent requests per replica")).to_be_visible(timeout=TIMEOUT_MS)
