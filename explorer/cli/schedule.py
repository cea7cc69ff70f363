"""``python -m explorer schedule``: simulate one pipeline schedule and print its timeline."""

from __future__ import annotations

import argparse
from typing import cast

from explorer.cli.args import number, whole
from explorer.limits import limit
from explorer.schedules import Schedule, StageTimes, Timeline, build_schedule, simulate
from explorer.specs import SCHEDULES

NAME = "schedule"
HELP = "simulate a pipeline schedule: makespan, bubble, activations in flight, every action"

SPLIT_BACKWARD = ("zb-h1", "dualpipe", "zb-v", "dualpipev")
"""Schedules that run the weight gradient W apart from the input gradient B."""
TEXT_WIDTH = 120
"""Characters per stage line in the text picture."""
SECONDS = number(limit("pass_s"))
"""A pass time, s: finite, zero or more, at most explorer.limits' bound."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The schedule, P, M, V, and the per-micro-batch pass times (seconds, the same per stage)."""
    parser.add_argument("--schedule", choices=SCHEDULES, required=True)
    parser.add_argument("--stages", type=whole("stages"), required=True, help="pipeline stages P")
    parser.add_argument(
        "--microbatches", type=whole("microbatches"), required=True, help="micro-batches M"
    )
    parser.add_argument(
        "--virtual", type=whole("virtual_stages"), default=1, help="model chunks per stage V"
    )
    parser.add_argument("--forward", type=SECONDS, default=1.0, help="forward pass F, s")
    parser.add_argument(
        "--backward",
        type=SECONDS,
        default=None,
        help="backward B, s: 2 by default; 1 (the input gradient) for the split schedules",
    )
    parser.add_argument(
        "--weight",
        type=SECONDS,
        default=None,
        help="weight gradient W, s: 1 for zb-h1, dualpipe, zb-v and dualpipev, else 0 (added to B)",
    )
    parser.add_argument("--p2p", type=SECONDS, default=0.0, help="stage-to-stage transfer, s")


def times_from(args: argparse.Namespace) -> StageTimes:
    """Uniform stage times from the flags, with the defaults of the schedule's kind."""
    for flag in ("forward", "backward", "weight", "p2p"):
        value = getattr(args, flag)
        if value is not None and not 0 <= value < float("inf"):
            raise ValueError(f"--{flag} must be a finite time of zero or more seconds, got {value}")
    split = args.schedule in SPLIT_BACKWARD
    backward = args.backward if args.backward is not None else (1.0 if split else 2.0)
    weight = args.weight if args.weight is not None else (1.0 if split else 0.0)
    return StageTimes.uniform(
        args.stages, forward_s=args.forward, backward_s=backward, weight_s=weight, p2p_s=args.p2p
    )


def timeline_json(timeline: Timeline) -> dict[str, object]:
    """The JSON object of the contract: makespan, bubble, peaks per stage, every event."""
    s: Schedule = timeline.schedule
    ev = timeline.events
    return {
        "schedule": s.name,
        "stages": s.stages,
        "microbatches": s.microbatches,
        "virtual": s.virtual,
        "makespan": timeline.makespan_s,
        "bubble_fraction": timeline.bubble_fraction,
        "peak_inflight": list(timeline.peak_inflight),
        "parameter_copies": list(timeline.parameter_copies),
        "idle": list(timeline.idle_s),
        "events": [
            {"stage": st, "kind": k, "microbatch": mb, "chunk": c, "start": t0, "end": t1}
            for st, k, mb, c, t0, t1 in zip(
                ev.stage, ev.kind, ev.microbatch, ev.chunk, ev.start_s, ev.end_s, strict=True
            )
        ],
        "actions": [[a.label for a in stage] for stage in s.actions],
    }


def run(args: argparse.Namespace) -> dict[str, object]:
    """Build and simulate the schedule the flags describe; ValueError on bad P, M or V."""
    schedule = build_schedule(args.schedule, args.stages, args.microbatches, args.virtual)
    return timeline_json(simulate(schedule, times_from(args)))


def _cut(line: str, width: int) -> str:
    return line if len(line) <= width else line[: width - 1] + "…"


def render(result: dict[str, object]) -> str:
    """A compact text picture: one line of actions per stage, then the figures."""
    actions = cast(list[list[str]], result["actions"])
    peaks = cast(list[float], result["peak_inflight"])
    copies = cast(list[int], result["parameter_copies"])
    lines = [
        f"{result['schedule']}: P={result['stages']}, M={result['microbatches']}, "
        f"V={result['virtual']}",
        *(_cut(f"stage {i:>2}: " + " ".join(row), TEXT_WIDTH) for i, row in enumerate(actions)),
        f"makespan        {result['makespan']:.6g} s",
        f"bubble          {result['bubble_fraction']:.2%} of stage time",
        "peak in flight  " + ", ".join(f"{p:g}" for p in peaks) + " stage-equivalent micro-batches",
        "parameters      " + ", ".join(f"{c}x" for c in copies),
    ]
    return "\n".join(lines)
