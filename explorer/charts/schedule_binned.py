"""A long schedule drawn at a coarser granularity: per stage and time bin, its F, B and W time.

Each bin of each stage row shows the seconds the stage spent in F, then B, then W inside the
bin, side by side from the bin's start; the rest of the bin is idle (white). Hover gives the
bin's shares and the micro-batches it touched. The bins come from
``explorer.schedules.aggregate.bin_timeline`` (exact sums of the simulated actions).
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from explorer.schedules import KINDS, Kind
from explorer.schedules.aggregate import BinnedTimeline

_HOVER = (
    "stage %{y}, %{customdata[0]:.4g} to %{customdata[1]:.4g} s<br>"
    "F %{customdata[2]:.0%}, B %{customdata[3]:.0%}, W %{customdata[4]:.0%}, "
    "idle %{customdata[5]:.0%}<br>micro-batches %{customdata[6]} to %{customdata[7]}"
    "<extra>%{fullData.name}</extra>"
)


def binned_bars(
    binned: BinnedTimeline,
    colours: dict[Kind, str],
    names: dict[Kind, str],
    *,
    showlegend: bool = True,
) -> list[go.Bar]:
    """One horizontal bar trace per kind: in each (stage, bin), the kind's busy seconds drawn
    after those of the kinds before it (F, B, W), from the bin's start."""
    busy = binned.busy_s  # (stages, kinds, bins)
    stages, _, bins = busy.shape
    width = binned.width_s
    share = busy / width  # (stages, kinds, bins)
    idle = 1.0 - share.sum(axis=1)
    start = np.broadcast_to(binned.edges_s[:-1], (stages, bins))
    offset = np.cumsum(busy, axis=1) - busy  # seconds of the earlier kinds in the bin
    row = np.broadcast_to(np.arange(stages)[:, None], (stages, bins))
    traces = []
    for k, kind in enumerate(KINDS):
        mine = busy[:, k, :] > 0
        if not mine.any():
            continue
        custom = np.column_stack(
            [
                start[mine],
                (start + width)[mine],
                share[:, 0, :][mine],
                share[:, 1, :][mine],
                share[:, 2, :][mine],
                np.clip(idle[mine], 0.0, 1.0),
                binned.first_microbatch[mine],
                binned.last_microbatch[mine],
            ]
        )
        traces.append(
            go.Bar(
                orientation="h",
                base=(start + offset[:, k, :])[mine],
                x=busy[:, k, :][mine],
                y=row[mine],
                name=names[kind],
                legendgroup=kind,
                showlegend=showlegend,
                marker={"color": colours[kind], "line": {"width": 0}},
                customdata=custom,
                hovertemplate=_HOVER,
            )
        )
    return traces
