"""The two bubble figures of the Pipeline page in one sentence: the share of the pipelined part
(the Bubble metric, the diagram's title) and the share of the whole step.

Bubble = 1 - busy / (P x makespan) (``explorer.schedules.simulate.Timeline.bubble_fraction``)
over the micro-batches drawn; the step adds the optimizer and the exposed data-parallel
communication to the pipelined part, so the bubble's share of the step is
bubble x makespan / step time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from explorer.ui.format import percent
from explorer.ui.schedule_zoom import drawn_timeline

if TYPE_CHECKING:
    from explorer.estimate import Estimate
    from explorer.schedules import Timeline


def step_share(est: Estimate) -> float:
    """The bubble as a share of the whole step: bubble x pipelined part / step time."""
    if est.step_time_s <= 0:
        return 0.0
    return est.bubble_fraction * est.pipeline.makespan_s / est.step_time_s


def drawn_bubble(timeline: Timeline, drawn: int) -> float:
    """The bubble of the diagram's title: the same schedule and stage times with ``drawn``
    micro-batches (the whole timeline's when it cannot run with that many)."""
    return drawn_timeline(timeline, drawn).bubble_fraction


def sentence(est: Estimate, title_bubble: float, drawn: int) -> str:
    """One sentence relating the title's bubble, the Bubble metric and the step's share."""
    whole = est.microbatches
    of_step = percent(step_share(est))
    if drawn < whole:
        return (
            f"The diagram draws {drawn} of the step's {whole:,} micro-batches, so its title's "
            f"bubble ({percent(title_bubble)}) is larger than the step's "
            f"{percent(est.bubble_fraction)}: warm-up and cool-down weigh more in a short run, "
            f"and over the whole step, whose optimizer and exposed data-parallel communication "
            f"run with no pipeline, the bubble is {of_step} of the time."
        )
    return (
        f"The title's bubble ({percent(title_bubble)}) is the Bubble figure above: the idle "
        f"share of the pipelined part; over the whole step, whose optimizer and exposed "
        f"data-parallel communication run with no pipeline, the bubble is {of_step} of the time."
    )
