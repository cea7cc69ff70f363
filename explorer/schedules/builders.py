"""Action orders of GPipe, 1F1B, interleaved 1F1B and ZB-H1, and ``build_schedule``.

What M (micro-batches) must satisfy, per schedule (P stages, V chunks per stage):
- gpipe, 1f1b, zb-h1: M >= 1 and V = 1 (with M < P they degenerate to GPipe's order).
- interleaved: V >= 1; with V > 1, M >= P. Megatron-LM's original implementation needs M to be
  a multiple of P; Megatron-Core relaxes that with a micro-batch group size N in [P, M] such that
  M % N is 0 or at least P. We take the smallest such N (N = P when P divides M).
- dualpipe: P even, V = 1, M even and M >= 2P (see ``dualpipe.py``).
- zb-v: V = 1 (two chunks per rank by design), M >= 1; dualpipev: V = 1, M >= 2P.
"""

from __future__ import annotations

from functools import lru_cache
from itertools import repeat

from explorer.limits import MAX_SCHEDULE_ACTIONS
from explorer.schedules.actions import Action, Kind, Route, Schedule
from explorer.schedules.dualpipe import (
    dualpipe_actions,
    dualpipev_actions,
    require_dualpipe,
    require_dualpipev,
)
from explorer.schedules.vshape import zbv_order
from explorer.specs import SCHEDULES, V_SHAPED, ScheduleName

_Order = list[tuple[Kind, int, int]]
"""One stage's actions as (kind, micro-batch, chunk) before the stage index is attached."""


def gpipe_order(stages: int, stage: int, microbatches: int) -> _Order:
    """GPipe on one stage: all forwards, then all backwards, micro-batches in order.

    Source: Huang et al. 2019, GPipe (arXiv:1811.06965) fig. 2c; torch.distributed.pipelining
    ScheduleGPipe.
    """
    forwards: _Order = [("F", mb, 0) for mb in range(microbatches)]
    return forwards + [("B", mb, 0) for mb in range(microbatches)]


def one_f_one_b_order(stages: int, stage: int, microbatches: int) -> _Order:
    """1F1B (PipeDream-Flush) on one stage: P-1-i warm-up forwards, 1F1B pairs, cool-down.

    Source: Narayanan et al. 2021 (arXiv:2104.04473) sec. 2.2.1; Megatron-LM
    forward_backward_pipelining_without_interleaving (num_warmup = min(P - rank - 1, M)).
    """
    warmup = min(stages - stage - 1, microbatches)
    order: _Order = [("F", mb, 0) for mb in range(warmup)]
    for k in range(microbatches - warmup):
        order += [("F", warmup + k, 0), ("B", k, 0)]
    return order + [("B", mb, 0) for mb in range(microbatches - warmup, microbatches)]


def zb_h1_order(stages: int, stage: int, microbatches: int) -> _Order:
    """ZB-H1 on one stage: 1F1B's F/B order with stage i deferring i weight passes (FIFO).

    Warm-up P-i-1 forwards; i pairs F B (their W deferred); then F B W until the forwards run
    out; B W; the i deferred W last. In-flight micro-batches stay at most P, as for 1F1B.
    Source: Qi et al. 2024, Zero Bubble Pipeline Parallelism (arXiv:2401.10241) sec. 3.1 fig. 3;
    sail-sg/zero-bubble-pipeline-parallelism ZeroBubbleH1Pipeline (exact semantics).
    """
    warmup = min(stages - stage - 1, microbatches)
    deferred = min(stage, microbatches - warmup)
    order: _Order = [("F", mb, 0) for mb in range(warmup)]
    order += [x for k in range(deferred) for x in (("F", warmup + k, 0), ("B", k, 0))]
    forward, backward, weight = warmup + deferred, deferred, 0
    while backward < microbatches:
        if forward < microbatches:
            order.append(("F", forward, 0))
            forward += 1
        order += [("B", backward, 0), ("W", weight, 0)]
        backward, weight = backward + 1, weight + 1
    return order + [("W", mb, 0) for mb in range(weight, microbatches)]


def group_size(stages: int, microbatches: int) -> int:
    """Interleaved micro-batch group N: smallest in [P, M] with M % N == 0 or M % N >= P.

    Source: Megatron-Core forward_backward_pipelining_with_interleaving
    (microbatch_group_size_per_vp_stage checks); N = P reproduces Megatron-LM's original order.
    """
    for size in range(stages, microbatches + 1):
        remainder = microbatches % size
        if remainder == 0 or remainder >= stages:
            return size
    return microbatches


def interleaved_table(microbatches: int, virtual: int, size: int) -> list[tuple[int, int]]:
    """Forward order of (micro-batch, chunk): groups of ``size`` micro-batches, chunk by chunk.

    Source: Megatron-Core get_schedule_table (the last group takes the remaining micro-batches).
    """
    table = []
    for first in range(0, microbatches, size):
        last = microbatches if first + size >= microbatches else first + size
        table += [(mb, c) for c in range(virtual) for mb in range(first, last)]
        if last == microbatches:
            break
    return table


def interleaved_order(stages: int, stage: int, microbatches: int, virtual: int) -> _Order:
    """Interleaved 1F1B on one stage: 2(P-i-1) + (V-1)N warm-up forwards, 1F1B, cool-down.

    Backwards take the forward table with chunks reversed (V-1-c).
    Source: Narayanan et al. 2021 (arXiv:2104.04473) sec. 2.2.2; Megatron-Core
    get_pp_rank_microbatches and get_schedule_table.
    """
    size = group_size(stages, microbatches)
    forwards, backwards = _interleaved_passes(microbatches, virtual, size)
    total = len(forwards)
    warmup = min(2 * (stages - stage - 1) + (virtual - 1) * size, total)
    steady: _Order = list(forwards[warmup:]) * 2  # 2(total - warmup) slots: F, B alternating
    steady[0::2] = forwards[warmup:]
    steady[1::2] = backwards[: total - warmup]
    return [*forwards[:warmup], *steady, *backwards[total - warmup :]]


@lru_cache(maxsize=64)
def _interleaved_passes(
    microbatches: int, virtual: int, size: int
) -> tuple[tuple[tuple[Kind, int, int], ...], tuple[tuple[Kind, int, int], ...]]:
    """The forward passes in table order and the backward passes (chunks reversed), the same
    on every stage (``interleaved_order``), built once per (M, V, N)."""
    table = interleaved_table(microbatches, virtual, size)
    forward: Kind = "F"
    backward: Kind = "B"
    forwards = tuple((forward, mb, c) for mb, c in table)
    return forwards, tuple((backward, mb, virtual - 1 - c) for mb, c in table)


def require_stages(stages: int, microbatches: int, virtual: int) -> None:
    """Raise ValueError unless P, M and V are all at least 1."""
    for name, value in (("stages", stages), ("microbatches", microbatches)):
        if value < 1:
            raise ValueError(f"{name} must be at least 1, got {value}")
    if virtual < 1:
        raise ValueError(f"virtual must be at least 1, got {virtual}")


def require_valid(name: str, stages: int, microbatches: int, virtual: int) -> None:
    """Raise ValueError with one sentence saying what P, M and V must satisfy for ``name``."""
    if name not in SCHEDULES:
        raise ValueError(f"schedule must be one of {', '.join(SCHEDULES)}, got {name!r}")
    require_stages(stages, microbatches, virtual)
    if name == "dualpipe":
        require_dualpipe(stages, microbatches, virtual)
    elif name == "dualpipev":
        require_dualpipev(stages, microbatches, virtual)
    elif name == "zb-v" and virtual != 1:
        raise ValueError(
            f"zb-v holds two chunks per stage by design; virtual must be 1, got {virtual}"
        )
    elif name != "interleaved" and virtual != 1:
        raise ValueError(f"virtual = {virtual} needs the interleaved schedule, not {name}")
    elif name == "interleaved" and virtual > 1 and microbatches < stages:
        raise ValueError(
            f"interleaved 1F1B with virtual = {virtual} needs microbatches >= stages "
            f"({stages}), got {microbatches}"
        )


def microbatch_grid(name: str, stages: int, virtual: int = 1) -> tuple[int, int]:
    """(least, step): the micro-batch counts ``require_valid`` lets schedule ``name`` run on
    P stages with V are least, least + step, least + 2 step, ... DualPipe an even count of at
    least 2P, DualPipeV at least 2P, interleaved 1F1B with V > 1 at least P, the others (and
    any schedule on one stage, which runs no pipeline) any count from 1."""
    if stages == 1:
        return 1, 1
    if name == "dualpipe":
        return 2 * stages, 2
    if name == "dualpipev":
        return 2 * stages, 1
    if name == "interleaved" and virtual > 1:
        return stages, 1
    return 1, 1


def _stage_order(name: str, stages: int, stage: int, microbatches: int, virtual: int) -> _Order:
    if name == "gpipe":
        return gpipe_order(stages, stage, microbatches)
    if name == "zb-h1":
        return zb_h1_order(stages, stage, microbatches)
    if name == "zb-v":
        return zbv_order(stages, stage, microbatches)
    if name == "interleaved" and virtual > 1:
        return interleaved_order(stages, stage, microbatches, virtual)
    return one_f_one_b_order(stages, stage, microbatches)  # 1f1b; interleaved with V = 1


Orders = tuple[tuple[_Order, ...], tuple[tuple[int, ...], ...]]
"""Per stage, (kind, micro-batch, chunk) in run order; per stage, the F&B pairs (DualPipe)."""


def require_budget(name: str, stages: int, microbatches: int, virtual: int) -> None:
    """Raise ValueError (one sentence) when the schedule has more actions than one request may
    build (explorer.limits.MAX_SCHEDULE_ACTIONS): each builds lists of every action."""
    kinds = 3 if name in ("zb-h1", "dualpipe") else 2  # F, B (and W when split)
    chunks = 2 if name == "dualpipe" else virtual  # DualPipe runs both directions' chunks
    actions = stages * microbatches * chunks * kinds
    if actions > MAX_SCHEDULE_ACTIONS:
        raise ValueError(
            f"the {name} schedule of {stages:,} stages x {microbatches:,} micro-batches x "
            f"{chunks} chunks has about {actions:,} actions, more than the "
            f"{MAX_SCHEDULE_ACTIONS:,} one request may simulate; use fewer stages or micro-batches"
        )


def stage_orders(name: ScheduleName, stages: int, microbatches: int, virtual: int = 1) -> Orders:
    """Every stage's order and F&B pairs, without ``Action`` objects (the simulator's fast path).

    Raises ValueError (one sentence) when P, M or V do not suit the schedule or exceed the
    budget of actions.
    """
    require_valid(name, stages, microbatches, virtual)
    require_budget(name, stages, microbatches, virtual)
    if name in ("dualpipe", "dualpipev"):
        actions = dualpipe_actions if name == "dualpipe" else dualpipev_actions
        built = [actions(stages, s, microbatches) for s in range(stages)]
        return tuple(o for o, _ in built), tuple(p for _, p in built)
    orders = tuple(_stage_order(name, stages, s, microbatches, virtual) for s in range(stages))
    return orders, ()


def route_for(name: ScheduleName, stages: int, virtual: int = 1) -> Route:
    """The route geometry of schedule ``name``: V chunks in a row, DualPipe's two directions,
    or the V placement (two half-rank chunks, ``virtual`` 2)."""
    if name in V_SHAPED:
        return Route(stages, 2, vshape=True)
    return Route(stages, virtual, bidirectional=name == "dualpipe")


@lru_cache(maxsize=256)
def build_schedule(
    name: ScheduleName, stages: int, microbatches: int, virtual: int = 1
) -> Schedule:
    """The actions of schedule ``name`` for P stages, M micro-batches and V chunks per stage.

    Raises ValueError (one sentence) when P, M or V do not suit the schedule.
    Source: see each order function (GPipe arXiv:1811.06965, 1F1B arXiv:2104.04473, ZB-H1
    arXiv:2401.10241, DualPipe: DeepSeek-V3 report arXiv:2412.19437).
    """
    orders, pairs = stage_orders(name, stages, microbatches, virtual)
    actions = tuple(
        tuple(map(Action, repeat(stage), *zip(*order, strict=True)))
        for stage, order in enumerate(orders)
    )
    copies = 2 if name == "dualpipe" else 1  # DualPipe keeps both directions' chunks
    route = route_for(name, stages, virtual)  # V placement: one copy (DualPipe README, V)
    return Schedule(
        name=name,
        stages=stages,
        microbatches=microbatches,
        virtual=route.virtual,
        actions=actions,
        parameter_copies=(copies,) * stages,
        bidirectional=route.bidirectional,
        pairs=pairs,
        vshape=route.vshape,
    )
