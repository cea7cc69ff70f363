"""All collectives of a stage, and exposed time summed by collective kind and by mesh axis."""

from __future__ import annotations

from collections.abc import Iterable

from explorer.comm.collectives import COLLECTIVE_KINDS
from explorer.comm.context_parallel import cp_collectives
from explorer.comm.data_parallel import dp_collectives
from explorer.comm.model_parallel import (
    ep_collectives,
    etp_collectives,
    pp_collectives,
    tp_collectives,
)
from explorer.comm.step import Collective, StageContext
from explorer.compute import PassTimes, StageWork
from explorer.specs import MESH_ORDER


def stage_collectives(
    work: StageWork, passes: PassTimes, ctx: StageContext
) -> tuple[Collective, ...]:
    """Every collective one GPU of a stage runs in a step (per micro-batch and per step).

    Source: explorer.comm.step (TP, CP, EP, PP) and explorer.comm.data_parallel (DP, ZeRO).
    """
    return (*model_collectives(work, passes, ctx), *dp_collectives(work, passes, ctx))


def model_collectives(
    work: StageWork, passes: PassTimes, ctx: StageContext, pp: bool = True
) -> tuple[Collective, ...]:
    """The TP, CP, EP and (``pp``) PP collectives of ``stage_collectives``, in its order:
    everything but the data-parallel ones, for callers that sum only those axes."""
    return (
        *tp_collectives(work, passes, ctx),
        *cp_collectives(work, passes, ctx),
        *ep_collectives(work, passes, ctx),
        *etp_collectives(work, passes, ctx),
        *(pp_collectives(passes, ctx) if pp else ()),
    )


def exposed_in_phase(collectives: Iterable[Collective], phase: str) -> float:
    """Exposed seconds of the collectives of one phase (forward, backward or step)."""
    return sum(c.exposed_s for c in collectives if c.phase == phase)


def exposed_by_kind(collectives: Iterable[Collective], microbatches: int) -> dict[str, float]:
    """Exposed seconds per step by collective kind (every kind present, zeros included).

    Per-micro-batch collectives count ``microbatches`` times, per-step ones once.
    """
    out: dict[str, float] = dict.fromkeys(COLLECTIVE_KINDS, 0.0)
    for c in collectives:
        out[c.kind] += c.exposed_s * (1 if c.phase == "step" else microbatches)
    return out


def exposed_by_axis(collectives: Iterable[Collective], microbatches: int) -> dict[str, float]:
    """Exposed seconds per step by mesh axis (tp, cp, ep, dp, pp; zeros included)."""
    out: dict[str, float] = dict.fromkeys(MESH_ORDER, 0.0)
    for c in collectives:
        out[c.axis] += c.exposed_s * (1 if c.phase == "step" else microbatches)
    return out
