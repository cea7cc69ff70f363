"""Where a slider move's time goes in the browser: ``python -m explorer.ui.trace_browser``.

Serves a checkout's app (``streamlit run app.py``, as ``bench_browser`` does), opens one page in
headless Chromium, moves the sidebar's sequence-length slider once each way (both values
cached), then records Chrome's trace (the DevTools timeline and the V8 CPU profiler) over
``--moves`` more moves and prints: the seconds of each move, the renderer main thread's time per
trace event (``RunTask`` is all of it; ``UpdateLayoutTree`` is style recalculation,
``HandlePostMessage`` the page's ``postMessage`` handling) and the JavaScript functions with the
most self time (``En`` in Streamlit's ``utils`` bundle is its rem-to-pixel helper, which reads
``getComputedStyle`` and so forces a style recalculation). The CPU profiler's sampling adds
its own time (``V8.InvokeApiInterruptCallbacks``), so compare two runs of this, never a figure
of it with ``bench_browser``'s.
"""

from __future__ import annotations

import argparse
import collections
import json
import shutil
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from explorer.ui.bench_browser import MOVE_KEYS, ROOT, SLIDER, _move, served, warmed_page

CATEGORIES = (
    "devtools.timeline",
    "disabled-by-default-devtools.timeline",
    "v8.execute",
    "disabled-by-default-v8.cpu_profiler",
)
"""Chrome trace categories: the timeline's events and the CPU profiler's samples."""


def main_thread(events: Iterable[Mapping[str, Any]]) -> tuple[int, int]:
    """(pid, tid) of the thread with the most ``RunTask`` time: the page's renderer main."""
    busy: collections.Counter[tuple[int, int]] = collections.Counter()
    for event in events:
        if event.get("name") == "RunTask" and event.get("ph") == "X":
            busy[(event["pid"], event["tid"])] += event.get("dur", 0)
    return busy.most_common(1)[0][0]


def event_ms(events: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """Milliseconds per complete ("X") event name on the main thread, largest first (nested
    events count inside their parents too: ``RunTask`` holds the rest)."""
    thread = main_thread(events)
    total: collections.Counter[str] = collections.Counter()
    for event in events:
        if (event.get("pid"), event.get("tid")) == thread and event.get("ph") == "X":
            total[event["name"]] += event.get("dur", 0)
    return {name: us / 1e3 for name, us in total.most_common()}


def self_ms(events: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    """Milliseconds of CPU-profiler samples per JavaScript function (name@bundle:column),
    largest first; ``(program)`` is the browser's own work outside JavaScript."""
    nodes: dict[int, Mapping[str, Any]] = {}
    samples: list[int] = []
    deltas: list[int] = []
    for event in events:
        if event.get("name") != "ProfileChunk":
            continue
        data = event["args"]["data"]
        profile = data.get("cpuProfile", {})
        nodes.update({node["id"]: node for node in profile.get("nodes", [])})
        samples += profile.get("samples", [])
        deltas += data.get("timeDeltas", [])
    total: collections.Counter[str] = collections.Counter()
    for sample, delta in zip(samples, deltas, strict=False):
        if (node := nodes.get(sample)) is None:
            continue
        frame = node["callFrame"]
        where = frame.get("url", "").rsplit("/", 1)[-1]
        name = frame.get("functionName") or "(anonymous)"
        total[f"{name}@{where}:{frame.get('columnNumber')}" if where else name] += delta
    return {name: us / 1e3 for name, us in total.most_common()}


def trace(root: Path, page_name: str, moves: int, timeout_s: float) -> dict[str, Any]:
    """Serve ``root``'s app, trace ``moves`` slider moves on ``page_name``; the figures."""
    from playwright.sync_api import sync_playwright

    executable = shutil.which("chromium")
    if executable is None:
        raise SystemExit("chromium is not on the PATH (apt-get install chromium).")
    timeout_ms = timeout_s * 1e3
    events: list[dict[str, Any]] = []
    with served(root / "app.py", root, timeout_s) as url, sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=executable, args=["--no-sandbox", "--disable-gpu", "--disable-quic"]
        )
        page, socket, slider = warmed_page(browser, f"{url}/{page_name}", SLIDER, timeout_ms)
        cdp = page.context.new_cdp_session(page)
        complete: list[bool] = []
        cdp.on("Tracing.dataCollected", lambda message: events.extend(message["value"]))
        cdp.on("Tracing.tracingComplete", lambda message: complete.append(True))
        config = {"includedCategories": list(CATEGORIES)}
        cdp.send("Tracing.start", {"traceConfig": config, "transferMode": "ReportEvents"})
        done = [_move(page, socket, slider, MOVE_KEYS[i % 2], timeout_ms)[1] for i in range(moves)]
        cdp.send("Tracing.end")
        deadline = time.monotonic() + timeout_s
        while not complete and time.monotonic() < deadline:
            page.wait_for_timeout(100)  # the trace's last chunks arriving, not a fixed wait
        browser.close()
    return {"done_s": done, "events_ms": event_ms(events), "self_ms": self_ms(events)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m explorer.ui.trace_browser", description=__doc__
    )
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout to serve")
    parser.add_argument("--page", default="memory")
    parser.add_argument("--moves", type=int, default=8)
    parser.add_argument("--top", type=int, default=20, help="rows of each list")
    parser.add_argument("--timeout-s", type=float, default=180.0)
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args(argv)
    if not (args.root / "app.py").is_file():
        parser.error(f"--root {args.root}: no app.py there.")
    result = trace(args.root, args.page, args.moves, args.timeout_s)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    print("done s per move:", " ".join(f"{s:.3f}" for s in result["done_s"]))
    print("main thread, ms per trace event:")
    for name, ms in list(result["events_ms"].items())[: args.top]:
        print(f"  {ms:10.1f}  {name}")
    print("JavaScript self time, ms:")
    for name, ms in list(result["self_ms"].items())[: args.top]:
        print(f"  {ms:10.1f}  {name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
