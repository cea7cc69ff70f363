"""How long a slider change takes in a real browser: ``python -m explorer.ui.bench_browser``.

Starts the app (``streamlit run app.py``, the README's command) and a one-slider Streamlit page
on two free ports in the same run, opens each in headless Chromium (Debian's ``chromium``,
found on the PATH) and moves a slider with the keyboard: the sidebar's sequence length on the
app's pages, the only slider on the bare page. Each move is timed twice: "shown", from the key
going down to the page's headline numbers (its ``st.metric`` values) showing a new value,
watched in the page by a MutationObserver; and "done", from the key press to the first frame
painted with no stale element left after the server's "script finished" message arrived on the
websocket (the whole page redrawn). Both are real conditions; nothing sleeps.

Before timing, each page moves the slider once each way, so both values are computed and
cached: the timed moves measure what a person pays going back and forth, which is the page's
own cost (drawing, not estimating). Each repeat opens a fresh browser tab (a new session).
Reported per page: p50 and p95 of the moves of each repeat, their medians over repeats, and
the ratio of the page's median p95 to the bare page's, with the load average before and after.
The figures are wall-clock times on whatever machine runs this; on a shared machine they vary
with the other work on it, so compare pages within one run, never across runs.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Locator, Page, WebSocket

ROOT = Path(__file__).resolve().parents[2]
SLIDER = "Sequence length (tokens)"
"""The app's slider that is moved (the sidebar's, so every page has it)."""
BARE_SLIDER = "Value"
BARE_PAGE = f"""import streamlit as st

value = st.slider({BARE_SLIDER!r}, 0, 100, 50)
st.metric("Value", value)
"""
"""The floor: a page with one slider and one number, served the same way as the app."""
SIDEBAR_PAGE = """import sys

sys.path.insert(0, {root!r})
import streamlit as st

from explorer.ui import sidebar

st.set_page_config(layout="wide", initial_sidebar_state="expanded")
scenario = sidebar.render()
st.metric("Sequence length", scenario.training.seq_len)
sidebar.run_finished()
"""
"""The app's sidebar with one number: what the sidebar alone costs (reported as "sidebar")."""
MAIN = "[data-testid=stMainBlockContainer]"
RESULT = f"{MAIN} [data-testid=stMetricValue]"
"""The page's result: the text of its headline numbers."""
RUNNING = "[data-testid=stStatusWidget]"
PAGES = ("memory", "meshes", "pipeline")

TIMER = """() => {
  window.__keyAt = null; window.__shownAt = null;
  const result = () => [...document.querySelectorAll(RESULT)].map(e => e.textContent).join('|');
  const before = result();
  document.addEventListener('keydown', () => { window.__keyAt = performance.now(); },
                            {capture: true, once: true});
  const observer = new MutationObserver(() => {
    if (window.__keyAt !== null && result() !== before) {
      window.__shownAt = performance.now(); observer.disconnect();
    }
  });
  observer.observe(document.body, {subtree: true, childList: true, characterData: true});
}""".replace("RESULT", repr(RESULT))
"""Installs the stopwatch in the page: key down, then the result's text changes."""
DRAWN = """() => new Promise(resolve => {
  const check = () => document.querySelector('[data-stale=true]')
    ? requestAnimationFrame(check) : requestAnimationFrame(() => resolve(true));
  check();
})"""
"""Resolves on the first frame painted with no stale element left (the old run's leftovers)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PageTiming:
    """Seconds per timed move of one page in one repeat."""

    page: str
    repeat: int
    shown_s: tuple[float, ...]
    done_s: tuple[float, ...]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
            return bool(response.read() == b"ok")
    except OSError:
        return False


@contextmanager
def served(script: Path, cwd: Path, timeout_s: float, log: Path | None = None) -> Iterator[str]:
    """``streamlit run script`` on a free local port (the README's flags); yields its URL and
    stops the server after. RuntimeError when it does not answer its health check within
    ``timeout_s``. The browser tests serve the app through this too; ``log`` keeps its output."""
    port = _free_port()
    command = [
        sys.executable, "-m", "streamlit", "run", str(script),
        "--server.headless", "true", "--server.address", "127.0.0.1",
        "--server.port", str(port), "--browser.gatherUsageStats", "false",
        "--server.fileWatcherType", "none",
    ]  # fmt: skip
    sink = log.open("w") if log is not None else subprocess.DEVNULL
    server = subprocess.Popen(command, cwd=cwd, stdin=subprocess.DEVNULL, stdout=sink, stderr=sink)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout_s
        while not _healthy(url):
            if server.poll() is not None or time.monotonic() > deadline:
                where = f" (see {log})" if log is not None else ""
                raise RuntimeError(f"streamlit did not start for {script}{where}")
            time.sleep(0.1)  # the polling interval, not a wait for something to happen
        yield url
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
        if log is not None and not isinstance(sink, int):
            sink.close()


def _settled(page: Page, timeout_ms: float) -> None:
    """Wait until the page shows its result and no run is in progress."""
    page.wait_for_function(
        f"document.querySelector({RESULT!r}) && !document.querySelector({RUNNING!r})"
        " && !document.querySelector('[data-testid=stSkeleton]')",
        timeout=timeout_ms,
    )


def _finished(payload: str | bytes) -> bool:
    """Whether a websocket frame from the server is Streamlit's "script finished" message of
    a run that drew something: not the one of a run that stopped early for another (a
    callback that reruns the page's fragment alone ends its run that way, then the fragment
    runs)."""
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    if not isinstance(payload, bytes):
        return False
    message = ForwardMsg.FromString(payload)
    return (
        message.WhichOneof("type") == "script_finished"
        and message.script_finished != ForwardMsg.ScriptFinishedStatus.FINISHED_EARLY_FOR_RERUN
    )


def _move(
    page: Page, socket: WebSocket, slider: Locator, key: str, timeout_ms: float
) -> tuple[float, float]:
    """Seconds from ``key`` on the slider to the new result shown (timed in the page), and
    to the first frame painted after the server's run finished (timed here)."""
    slider.focus()
    page.evaluate(TIMER)
    with socket.expect_event("framereceived", predicate=_finished, timeout=timeout_ms):
        start = time.perf_counter()
        page.keyboard.press(key)
    page.evaluate(DRAWN)
    done = time.perf_counter() - start
    page.wait_for_function("window.__shownAt !== null", timeout=timeout_ms)
    shown = page.evaluate("(window.__shownAt - window.__keyAt) / 1000")
    return float(shown), done


MOVE_KEYS = ("ArrowRight", "ArrowLeft")
"""The keys of the timed moves, in turn: the slider goes back and forth between two values."""


def warmed_page(
    browser: Browser, url: str, slider_name: str, timeout_ms: float
) -> tuple[Page, WebSocket, Locator]:
    """``url`` in a new tab with both slider values computed once (so timed moves hit the
    caches): the page, its websocket and the slider."""
    page = browser.new_page(viewport={"width": 1500, "height": 1000})
    with page.expect_websocket(timeout=timeout_ms) as opened:
        page.goto(url, timeout=timeout_ms)
    socket = opened.value
    _settled(page, timeout_ms)
    slider = page.get_by_role("slider", name=slider_name).first
    for key in MOVE_KEYS:
        _move(page, socket, slider, key, timeout_ms)
    return page, socket, slider


def time_page(
    browser: Browser, url: str, slider_name: str, moves: int, timeout_ms: float
) -> tuple[list[float], list[float]]:
    """Open ``url`` in a new tab, warm both slider values, then time ``moves`` moves."""
    page, socket, slider = warmed_page(browser, url, slider_name, timeout_ms)
    try:
        shown, done = [], []
        for index in range(moves):
            s, d = _move(page, socket, slider, MOVE_KEYS[index % 2], timeout_ms)
            shown.append(s)
            done.append(d)
        return shown, done
    finally:
        page.close()


def p95(values: list[float] | tuple[float, ...]) -> float:
    """The 95th percentile, interpolated between the sorted values (inclusive method)."""
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=20, method="inclusive")[18]


def summary(timings: list[PageTiming]) -> dict[str, dict[str, float]]:
    """Per page: medians over repeats of each repeat's p50 and p95, and p95 against bare."""
    out: dict[str, dict[str, float]] = {}
    for name in dict.fromkeys(t.page for t in timings):
        runs = [t for t in timings if t.page == name]
        out[name] = {
            f"{what}_{q}_s": statistics.median(
                (statistics.median if q == "p50" else p95)(getattr(t, f"{what}_s")) for t in runs
            )
            for what in ("shown", "done")
            for q in ("p50", "p95")
        }
    bare = out["bare"]
    for row in out.values():
        row["shown_p95_vs_bare"] = row["shown_p95_s"] / bare["shown_p95_s"]
        row["done_p95_vs_bare"] = row["done_p95_s"] / bare["done_p95_s"]
    return out


def _sidebar_page(folder: Path, root: Path) -> Path:
    """The sidebar-alone page of checkout ``root`` in ``folder``, with that checkout's
    ``.streamlit/config.toml`` beside it: served with the app's own server settings."""
    folder.mkdir(parents=True)
    page = folder / "sidebar.py"
    page.write_text(SIDEBAR_PAGE.format(root=str(root)))
    config = root / ".streamlit" / "config.toml"
    if config.is_file():
        (folder / ".streamlit").mkdir()
        shutil.copy(config, folder / ".streamlit" / "config.toml")
    return page


def run(
    pages: tuple[str, ...],
    query: str,
    moves: int,
    repeats: int,
    timeout_s: float,
    baseline: Path | None = None,
    sidebar: bool = False,
) -> dict[str, Any]:
    from playwright.sync_api import sync_playwright

    executable = shutil.which("chromium")
    if executable is None:
        raise SystemExit("chromium is not on the PATH (apt-get install chromium).")
    load_before = os.getloadavg()
    timings: list[PageTiming] = []
    timeout_ms = timeout_s * 1e3
    with tempfile.TemporaryDirectory() as folder, ExitStack() as stack:
        bare = Path(folder) / "bare.py"
        bare.write_text(BARE_PAGE)
        app_url = stack.enter_context(served(ROOT / "app.py", ROOT, timeout_s))
        bare_url = stack.enter_context(served(bare, Path(folder), timeout_s))
        targets = [("bare", bare_url, BARE_SLIDER)]
        if sidebar:
            alone = _sidebar_page(Path(folder) / "sidebar", ROOT)
            alone_url = stack.enter_context(served(alone, alone.parent, timeout_s))
            targets.append(("sidebar", f"{alone_url}/?{query}", SLIDER))
        base_url = None
        if baseline is not None:  # the same pages of another checkout, each after ours
            base_url = stack.enter_context(served(baseline / "app.py", baseline, timeout_s))
            if sidebar:  # and its sidebar alone, after ours
                other = _sidebar_page(Path(folder) / "sidebar_base", baseline.resolve())
                other_url = stack.enter_context(served(other, other.parent, timeout_s))
                targets.append(("sidebar@base", f"{other_url}/?{query}", SLIDER))
        for name in pages:
            targets.append((name, f"{app_url}/{name}?{query}", SLIDER))
            if base_url is not None:
                targets.append((f"{name}@base", f"{base_url}/{name}?{query}", SLIDER))
        with sync_playwright() as p:
            browser = p.chromium.launch(
                executable_path=executable, args=["--no-sandbox", "--disable-gpu", "--disable-quic"]
            )
            for repeat in range(repeats):
                for name, url, slider in targets:  # interleaved: load drifts hit every page
                    shown, done = time_page(browser, url, slider, moves, timeout_ms)
                    timings.append(PageTiming(page=name, repeat=repeat, shown_s=tuple(shown),
                                              done_s=tuple(done)))  # fmt: skip
                    print(f"repeat {repeat + 1}/{repeats} {name}: done p50 "
                          f"{statistics.median(done):.3f} s", file=sys.stderr)  # fmt: skip
            browser.close()
    return {
        "cpus": os.cpu_count(),
        "load_average_before": load_before,
        "load_average_after": os.getloadavg(),
        "moves": moves,
        "repeats": repeats,
        "query": query,
        "baseline": None if baseline is None else str(baseline),
        "summary": summary(timings),
        "timings": [asdict(t) for t in timings],
        "note": "Wall-clock times on a shared machine: other work on it moves them; "
        "compare pages within one run (the ratio to the bare page), not across runs.",
    }


def _table(result: dict[str, Any]) -> str:
    lines = [
        f"{result['moves']} moves x {result['repeats']} repeats; {result['cpus']} CPUs; load "
        f"average before {result['load_average_before']}, after {result['load_average_after']}",
        f"{'page':<14} {'shown p50':>10} {'shown p95':>10} {'done p50':>10} {'done p95':>10}"
        f" {'p95 / bare':>11}",
    ]
    for name, row in result["summary"].items():
        lines.append(
            f"{name:<14} {row['shown_p50_s']:>10.4f} {row['shown_p95_s']:>10.4f}"
            f" {row['done_p50_s']:>10.4f} {row['done_p95_s']:>10.4f}"
            f" {row['done_p95_vs_bare']:>11.3f}"
        )
    lines.append(result["note"])
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m explorer.ui.bench_browser", description=__doc__
    )
    parser.add_argument("--pages", default=",".join(PAGES), help="comma-separated page names")
    parser.add_argument("--query", default="", help="URL query of the scenario (model=...)")
    parser.add_argument("--moves", type=int, default=12, help="timed moves per page and repeat")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--timeout-s", type=float, default=180.0, help="per page load or move")
    parser.add_argument("--json", type=Path, help="also write every timing to this file")
    parser.add_argument(
        "--baseline",
        type=Path,
        help="another checkout of the app (a folder with app.py): its pages (and with "
        "--sidebar its sidebar) are timed in the same run, interleaved, and reported as "
        "PAGE@base",
    )
    parser.add_argument(
        "--sidebar", action="store_true", help="also time the app's sidebar alone ('sidebar')"
    )
    args = parser.parse_args(argv)
    if args.baseline is not None and not (args.baseline / "app.py").is_file():
        parser.error(f"--baseline {args.baseline}: no app.py there.")
    if args.moves < 1 or args.repeats < 1:
        parser.error("--moves and --repeats must be at least 1.")
    pages = tuple(p for p in args.pages.split(",") if p)
    try:
        result = run(
            pages, args.query, args.moves, args.repeats, args.timeout_s, args.baseline,
            args.sidebar,
        )  # fmt: skip
    except RuntimeError as error:  # a server that did not start: one sentence
        raise SystemExit(str(error)) from None
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    print(_table(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
