"""Suite-wide settings. Hypothesis: no wall-clock health checks or deadlines (CI machines and
parallel sessions are slow and noisy; speed is measured by explorer.bench, not by tests)."""

from __future__ import annotations

import functools
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "explorer",
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    max_examples=60,
)
settings.load_profile("explorer")


TORCH_UNITS = dict.fromkeys(("tests/test_validation.py", "tests/test_probe.py"), "torch")
"""The two files that run PyTorch share a unit, so one worker imports torch (4-9 s here)."""


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist appends each group to the test's id
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """How pytest-xdist shares the tests out (``--dist loadgroup --no-loadscope-reorder``):
    each test file is one unit, so its module fixtures (a search, a report) are built once,
    except that every browser test is in one unit, so one served app and its warm caches serve
    them all (a second server costs its start and its first, cold pages again), and the files
    that run PyTorch are one unit (``TORCH_UNITS``). Units are handed out in this order: the
    browser unit first (the longest, a few minutes on a busy machine, so it must not start
    last), then units with more tests before units with fewer (xdist's own reordering, which
    would put the browser unit near the end)."""
    units: dict[str, list[pytest.Item]] = {}
    for item in items:
        unit = item.nodeid.split("::")[0]
        unit = "browser" if item.get_closest_marker("browser") else TORCH_UNITS.get(unit, unit)
        item.add_marker(pytest.mark.xdist_group(unit))
        units.setdefault(unit, []).append(item)
    ordered = sorted(units.items(), key=lambda u: (u[0] != "browser", -len(u[1])))
    items[:] = [item for _, unit_items in ordered for item in unit_items]


@pytest.fixture(scope="session", autouse=True)
def _component_scan_once() -> Iterator[None]:
    """Streamlit scans every installed distribution's metadata for component manifests each
    time a runtime starts, and every ``AppTest`` run starts one. The installed packages do not
    change during a session, so the scan runs once (tests/test_app_features.py alone, -n0:
    36.4 s -> 31.9 s, one run each) and every later runtime gets a copy of its result."""
    try:
        from streamlit.components.v2 import manifest_scanner
    except ImportError:  # an older streamlit without v2 components: nothing to share
        yield
        return
    scan = manifest_scanner.scan_component_manifests
    once = functools.cache(scan)
    manifest_scanner.scan_component_manifests = lambda max_workers=None: list(once(max_workers))
    yield
    manifest_scanner.scan_component_manifests = scan


# Browser fixtures (Playwright with Debian's chromium) go below this line.

TIMEOUT_MS = 60_000
"""The browser tests' one timeout: every wait, click, navigation and ``expect`` is bounded by
it (a first estimate on a busy machine takes seconds; Playwright's own default is 30 s). Every
wait is on a DOM condition; nothing sleeps."""
SEARCH_TIMEOUT_MS = 180_000
"""For the waits that cover a mesh search or a scaling sweep (seconds to tens of seconds on a
loaded machine); passed explicitly where a test waits for one."""

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--disable-background-networking",
]


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    """pytest-playwright's launch arguments, pointed at Debian's chromium (Playwright cannot
    download its own browser here). Missing chromium skips the browser tests on a developer's
    machine and fails them in CI (CI set), where .ci/run installs it."""
    executable = shutil.which("chromium")
    if executable is None:
        message = "chromium is not installed (apt-get install chromium)"
        if os.environ.get("CI"):
            pytest.fail(f"{message}; CI must run the browser tests")
        pytest.skip(message)
    return {**browser_type_launch_args, "executable_path": executable, "args": CHROMIUM_ARGS}


@pytest.fixture(scope="session")
def shared_context(browser, browser_context_args):
    """One browser context for every browser test of this worker. Each test still opens its own
    page, so its own Streamlit session (its own websocket and session state; the scenario lives
    in the page's URL), but the HTTP and code caches are shared: the app's static files (a few
    hundred JavaScript chunks) are fetched and compiled once, not once per test."""
    context = browser.new_context(**browser_context_args)
    context.set_default_timeout(TIMEOUT_MS)
    context.set_default_navigation_timeout(TIMEOUT_MS)
    yield context
    context.close()


@pytest.fixture
def page(shared_context):
    """A new page of the shared context with ``TIMEOUT_MS`` as the default of every action and
    navigation, and of ``expect``; closed after the test (its Streamlit session ends)."""
    from playwright.sync_api import expect

    page = shared_context.new_page()
    expect.set_options(timeout=TIMEOUT_MS)
    yield page
    page.close()


ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "test-artifacts"
"""Screenshots, timings and the server's log of the browser tests."""


@pytest.fixture(scope="session")
def app_url() -> Iterator[str]:
    """The app served by the README's command on a free port, one server for every browser
    test of this pytest-xdist worker that does not need a fresh one (a server's start and its
    first, cold pages cost seconds each on a busy machine); stopped at the end."""
    from explorer.ui.bench_browser import served

    ARTIFACTS.mkdir(exist_ok=True)
    log = ARTIFACTS / f"streamlit-{os.environ.get('PYTEST_XDIST_WORKER', 'main')}.log"
    with served(ROOT / "app.py", ROOT, TIMEOUT_MS / 1000, log=log) as url:
        yield url
