"""Pipeline schedule diagrams: timelines in, Plotly figures out.

One horizontal bar trace per action kind (F, B, W), with arrays, so a diagram of thousands of
actions stays one light figure; stage 0 is the top row; gaps are idle time. Below it, each
stage's activations held over time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from explorer.charts.schedule_binned import binned_bars
from explorer.memory import StageMemory
from explorer.schedules import KINDS, Kind, Timeline
from explorer.schedules.aggregate import DEFAULT_BINS, bin_timeline, needs_binning
from explorer.units import GiB

KIND_COLOURS: dict[Kind, str] = {"F": "#4C78A8", "B": "#F58518", "W": "#54A24B"}
"""One colour per action kind, the same in every schedule figure."""
KIND_NAMES: dict[Kind, str] = {
    "F": "F forward",
    "B": "B backward",
    "W": "W weight gradient",
}
_HOVER = (
    "stage %{y}<br>%{fullData.name}<br>micro-batch %{customdata[2]}, chunk %{customdata[3]}"
    "<br>start %{customdata[0]:.6g} s<br>end %{customdata[1]:.6g} s<extra></extra>"
)


def _event_arrays(timeline: Timeline) -> dict[str, np.ndarray]:
    """The timeline's events as numpy columns."""
    events = timeline.events
    return {
        "stage": np.asarray(events.stage),
        "kind": np.asarray(events.kind),
        "microbatch": np.asarray(events.microbatch),
        "chunk": np.asarray(events.chunk),
        "start_s": np.asarray(events.start_s, dtype=float),
        "end_s": np.asarray(events.end_s, dtype=float),
    }


def _opacity(chunk: np.ndarray, num_chunks: int) -> np.ndarray:
    """Later chunks a little lighter, so virtual stages read apart; 1 for a single chunk."""
    if num_chunks <= 1:
        return np.ones(len(chunk))
    return 1.0 - 0.45 * chunk / (num_chunks - 1)


def schedule_bars(timeline: Timeline, *, showlegend: bool = True) -> list[go.Bar]:
    """One horizontal bar trace per action kind present: x from start to end (s), y the stage."""
    cols = _event_arrays(timeline)
    traces = []
    for kind in KINDS:
        mine = cols["kind"] == kind
        if not mine.any():
            continue
        start, end = cols["start_s"][mine], cols["end_s"][mine]
        chunk = cols["chunk"][mine]
        traces.append(
            go.Bar(
                orientation="h",
                base=start,
                x=end - start,
                y=cols["stage"][mine],
                name=KIND_NAMES[kind],
                legendgroup=kind,
                showlegend=showlegend,
                marker={
                    "color": KIND_COLOURS[kind],
                    "opacity": _opacity(chunk, timeline.schedule.num_chunks),
                    "line": {"width": 0.5, "color": "white"},
                },
                text=cols["microbatch"][mine].astype(str),
                textposition="inside",
                insidetextanchor="middle",
                customdata=np.column_stack([start, end, cols["microbatch"][mine], chunk]),
                hovertemplate=_HOVER,
            )
        )
    return traces


def inflight_lines(timeline: Timeline) -> list[go.Scatter]:
    """One step line per stage: activation sets held (stage-equivalent micro-batches) vs s."""
    return [
        go.Scatter(
            x=curve.times_s,
            y=curve.count,
            mode="lines",
            line={"shape": "hv", "width": 1.5},
            name=f"stage {stage} activations",
            legendgroup="inflight",
            hovertemplate=f"stage {stage}<br>%{{y:.4g}} micro-batches held from %{{x:.6g}} s"
            "<extra></extra>",
        )
        for stage, curve in enumerate(timeline.inflight)
    ]


@dataclass(frozen=True, slots=True)
class LiveMemory:
    """A stage's GPU memory as a function of activation sets held: ``base_bytes`` (states,
    buffers, runtime, headroom and the non-block activations) plus ``bytes_per_set`` per set."""

    base_bytes: float
    bytes_per_set: float


def live_memory(stages: Sequence[StageMemory]) -> list[LiveMemory]:
    """Each stage's memory as its block activations per set on top of everything else at its
    peak (so ``microbatches_in_flight`` sets give back the stage's peak total)."""
    return [
        LiveMemory(
            base_bytes=s.total_bytes - s.activation_parts.blocks,
            bytes_per_set=(
                s.activation_parts.blocks / s.microbatches_in_flight
                if s.microbatches_in_flight
                else 0.0
            ),
        )
        for s in stages
    ]


def memory_lines(timeline: Timeline, live: Sequence[LiveMemory]) -> list[go.Scatter]:
    """One step line per stage: its GPU memory (GiB = 2^30 bytes) over the step, the sets it
    holds times their bytes on top of everything else it keeps."""
    return [
        go.Scatter(
            x=curve.times_s,
            y=[(m.base_bytes + n * m.bytes_per_set) / GiB for n in curve.count],
            mode="lines",
            line={"shape": "hv", "width": 1.5},
            name=f"stage {stage} memory",
            legendgroup="memory",
            customdata=curve.count,
            hovertemplate=f"stage {stage}<br>%{{y:.2f}} GiB from %{{x:.6g}} s"
            "<br>%{customdata:.4g} activation sets held<extra></extra>",
        )
        for stage, (curve, m) in enumerate(zip(timeline.inflight, live, strict=True))
    ]


def action_traces(
    timeline: Timeline, window: tuple[float, float] | None = None, *, showlegend: bool = True
) -> tuple[list[go.Bar], int]:
    """The diagram's bars and the time bins they are drawn in: one bar per action, or (0 bins)
    when a stage row of the window holds more than ``MAX_ACTIONS_PER_ROW`` actions, each
    stage's F, B and W time per bin (``explorer.schedules.aggregate``)."""
    start, end = window or (0.0, timeline.makespan_s)
    if end > start and needs_binning(timeline, start, end):
        binned = bin_timeline(timeline, DEFAULT_BINS, start, end)
        names: dict[Kind, str] = {k: f"{n} (time per bin)" for k, n in KIND_NAMES.items()}
        return binned_bars(binned, KIND_COLOURS, names, showlegend=showlegend), DEFAULT_BINS
    return schedule_bars(timeline, showlegend=showlegend), 0


def _stage_axis(stages: int) -> dict[str, object]:
    """A y axis with stage 0 on top and one labelled tick per stage."""
    return {
        "autorange": "reversed",
        "tickmode": "array",
        "tickvals": list(range(stages)),
        "ticktext": [f"stage {s}" for s in range(stages)],
    }


def describe(timeline: Timeline) -> str:
    """A one-line caption: schedule, P, M, V, bubble (%) and makespan (s)."""
    s = timeline.schedule
    return (
        f"{s.name}: P={s.stages}, M={s.microbatches}, V={s.virtual}; "
        f"bubble {timeline.bubble_fraction:.1%}, makespan {timeline.makespan_s:.4g} s"
    )


def schedule_figure(
    timeline: Timeline,
    title: str | None = None,
    live: Sequence[LiveMemory] | None = None,
    window: tuple[float, float] | None = None,
) -> go.Figure:
    """Schedule diagram (time in s, one row per stage) above each stage's activations held,
    or, given ``live`` (one per stage), each stage's memory in GiB; ``window`` (s) zooms the
    time axis (and re-bins a long schedule over it)."""
    stages = timeline.schedule.stages
    fig = make_subplots(
        rows=2,
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.08,
        row_heights=[0.65, 0.35],
        subplot_titles=(
            "actions per stage",
            "memory per GPU of each stage" if live else "activations held per stage",
        ),
    )
    bars, bins = action_traces(timeline, window)
    for trace in bars:
        fig.add_trace(trace, row=1, col=1)
    lower = memory_lines(timeline, live) if live else inflight_lines(timeline)
    for line in lower:
        fig.add_trace(line, row=2, col=1)
    fig.update_yaxes(_stage_axis(stages), row=1, col=1)
    lower_title = "GiB (2^30 bytes)" if live else "stage-equivalent micro-batches"
    fig.update_yaxes(title_text=lower_title, rangemode="tozero", row=2, col=1)
    fig.update_xaxes(title_text="time (s)", row=2, col=1)
    if window:
        fig.update_xaxes(range=list(window))
    heading = title if title is not None else describe(timeline)
    if bins:
        heading += f" (drawn in {bins} time bins: hover or zoom for detail)"
    fig.update_layout(
        title=heading,
        barmode="overlay",
        bargap=0.15,
        uniformtext={"minsize": 8, "mode": "hide"},
        height=max(420, 160 + 28 * stages + 200),
        hovermode="closest",
    )
    return fig


def schedule_comparison_figure(
    timelines: Sequence[Timeline], title: str | None = None
) -> go.Figure:
    """Schedule diagrams stacked, one per timeline, on a shared time axis (s)."""
    if not timelines:
        raise ValueError("schedule_comparison_figure needs at least one timeline")
    fig = make_subplots(
        rows=len(timelines),
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.3 / len(timelines),
        row_heights=[t.schedule.stages for t in timelines],
        subplot_titles=[describe(t) for t in timelines],
    )
    seen: set[str] = set()
    for row, timeline in enumerate(timelines, start=1):
        for trace in action_traces(timeline)[0]:
            trace.showlegend = trace.legendgroup not in seen
            seen.add(str(trace.legendgroup))
            fig.add_trace(trace, row=row, col=1)
        fig.update_yaxes(_stage_axis(timeline.schedule.stages), row=row, col=1)
    fig.update_xaxes(title_text="time (s)", row=len(timelines), col=1)
    total_stages = sum(t.schedule.stages for t in timelines)
    fig.update_layout(
        title=title if title is not None else "pipeline schedules compared",
        barmode="overlay",
        bargap=0.15,
        uniformtext={"minsize": 8, "mode": "hide"},
        height=max(400, 120 + 26 * total_stages + 60 * len(timelines)),
    )
    return fig
