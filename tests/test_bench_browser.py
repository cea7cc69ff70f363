"""The browser benchmark's arithmetic (the browser run itself is measured, never tested)."""

from __future__ import annotations

import pytest

from explorer.ui.bench_browser import PageTiming, p95, summary


def test_p95_interpolates_between_the_two_largest_of_twenty():
    # Inclusive method: position 0.95 x (20 - 1) = 18.05 -> 19 + 0.05 x (20 - 19).
    assert p95([float(v) for v in range(1, 21)]) == pytest.approx(19.05)
    assert p95([0.3]) == 0.3


def test_the_summary_takes_medians_over_repeats_and_divides_by_the_bare_page():
    def timing(page: str, repeat: int, values: list[float]) -> PageTiming:
        return PageTiming(page=page, repeat=repeat, shown_s=tuple(values), done_s=tuple(values))

    timings = [
        timing("bare", 0, [0.2, 0.2]),
        timing("bare", 1, [0.4, 0.4]),
        timing("bare", 2, [0.3, 0.3]),
        timing("memory", 0, [0.6, 1.0]),  # p50 0.8, p95 0.98
        timing("memory", 1, [0.9, 0.9]),
        timing("memory", 2, [5.0, 5.0]),  # one slow repeat moves no median
    ]
    out = summary(timings)
    assert out["bare"]["done_p95_s"] == pytest.approx(0.3)
    assert out["memory"]["done_p50_s"] == pytest.approx(0.9)
    assert out["memory"]["done_p95_s"] == pytest.approx(0.98)
    assert out["memory"]["done_p95_vs_bare"] == pytest.approx(0.98 / 0.3)
    assert out["bare"]["shown_p95_vs_bare"] == 1.0


def test_a_move_ends_at_a_run_that_drew_not_at_one_that_stopped_for_another():
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    from explorer.ui.bench_browser import _finished

    def finished(status: int) -> bytes:
        message = ForwardMsg()
        message.script_finished = status
        return message.SerializeToString()

    status = ForwardMsg.ScriptFinishedStatus
    assert _finished(finished(status.FINISHED_SUCCESSFULLY))
    assert _finished(finished(status.FINISHED_FRAGMENT_RUN_SUCCESSFULLY))
    assert not _finished(finished(status.FINISHED_EARLY_FOR_RERUN))
    assert not _finished("a text frame")


def test_the_trace_sums_the_renderer_main_thread_and_the_profiler_samples_per_function():
    from explorer.ui.trace_browser import event_ms, self_ms

    def task(tid: int, name: str, dur: int) -> dict[str, object]:
        return {"pid": 1, "tid": tid, "ph": "X", "name": name, "dur": dur}

    events = [
        task(7, "RunTask", 9_000),  # the main thread: the most RunTask time
        task(7, "UpdateLayoutTree", 2_500),
        task(7, "UpdateLayoutTree", 1_500),
        task(9, "RunTask", 4_000),  # a worker: left out
        task(9, "UpdateLayoutTree", 3_000),
        {"pid": 1, "tid": 7, "ph": "B", "name": "Paint"},  # not a complete event
        {
            "name": "ProfileChunk",
            "args": {
                "data": {
                    "cpuProfile": {
                        "nodes": [
                            {"id": 1, "callFrame": {"functionName": "(program)"}},
                            {
                                "id": 2,
                                "callFrame": {
                                    "functionName": "En",
                                    "url": "http://x/static/js/utils.js",
                                    "columnNumber": 43976,
                                },
                            },
                        ],
                        "samples": [1, 2, 2, 9],  # node 9 unknown: dropped
                    },
                    "timeDeltas": [500, 250, 1_000, 7_000],
                }
            },
        },
    ]
    assert event_ms(events) == {"RunTask": 9.0, "UpdateLayoutTree": 4.0}
    assert self_ms(events) == {"En@utils.js:43976": 1.25, "(program)": 0.5}
