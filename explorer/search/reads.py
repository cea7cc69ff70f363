"""What each estimate function the bounds call reads of a layout: one declared view each.

The bounds (``explorer.search.bounds``, ``explorer.search.floor``, ``explorer.search.context``)
call the estimate's own functions and keep their results for every layout that agrees on what
the function reads. That is sound only while the function reads nothing else, so it is stated
once here, as a ``View``, and ``tests/test_search.py`` checks it: changing any searched field
outside a view (degrees, ZeRO, micro-batch, recompute, schedule, virtual stages) leaves the
function's result unchanged. A change in ``explorer/compute`` or ``explorer/comm`` that starts
reading another field fails that test instead of silently making a bound wrong; widen the view
(and the cache that uses it follows).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from functools import lru_cache
from operator import attrgetter
from typing import Any, NamedTuple, cast

from explorer.comm.topology import GroupPlacement
from explorer.compute.passes import all_to_alls_overlap
from explorer.mesh import Candidate, to_layout
from explorer.specs import Layout, Recompute, ScheduleName, ZeroStage

SEARCHED = (
    "dp", "tp", "pp", "cp", "ep", "etp", "zero", "micro_batch_size", "recompute", "schedule",
    "virtual_stages",
)  # fmt: skip
"""The ``Layout`` fields a search varies (``explorer.mesh.to_layout``); the rest stay at their
defaults in every layout it builds."""


def _full_recompute(layout: Layout | Shape) -> bool:
    return layout.recompute == "full"


def _dualpipe_overlap(layout: Layout | Shape) -> bool:
    return layout.schedule in ("dualpipe", "dualpipev")


def _op_sac_regathers(layout: Layout | Shape) -> bool:
    """``explorer.comm.model_parallel.sac_regathers`` (op-level SAC repeats the SP
    all-gathers): a search's layouts never set ``recompute_ops``, so always False there."""
    ops = getattr(layout, "recompute_ops", False)
    return bool(ops) and layout.recompute == "selective" and layout.tp > 1


class Shape(NamedTuple):
    """The searched fields of a layout, named as ``Layout`` names them: cheap to build per
    lookup (a ``Layout`` validates itself), and the one source of the ``Layout`` a cache
    passes to the function on a miss, so the key and the argument cannot disagree."""

    dp: int
    tp: int
    pp: int
    cp: int
    ep: int
    etp: int
    zero: ZeroStage
    micro_batch_size: int
    recompute: Recompute
    schedule: ScheduleName
    virtual_stages: int
    sequence_parallel: bool = True
    """On, as the search runs TP (``explorer.mesh.to_layout``)."""

    def layout(self) -> Layout:
        """The ``Layout`` of these fields (the rest at their defaults; cached: a ``Layout``
        checks every field against explorer.limits as it is made)."""
        return _layout_of(self)


@lru_cache(maxsize=1 << 16)
def _layout_of(shape: Shape) -> Layout:
    return Layout(**shape._asdict())


@lru_cache(maxsize=1 << 16)
def layout_of(**fields: Any) -> Layout:
    """``Layout(**fields)``, made once per distinct ``fields`` (a ``Layout`` checks every field
    against explorer.limits as it is made; it is frozen, so one object serves every caller)."""
    return Layout(**fields)


_MBS, _RECOMPUTE = Candidate._fields.index("mbs"), Candidate._fields.index("recompute")
assert _RECOMPUTE == _MBS + 1  # ``with_micro`` sets both in one run
_new_tuple = tuple.__new__


def with_recompute(c: Candidate, recompute: Recompute) -> Candidate:
    """``c._replace(recompute=recompute)`` without ``_replace``'s keyword machinery (a bound's
    hot path: a NamedTuple's ``_replace`` costs about three times a tuple of the same fields)."""
    fields = (*c[:_RECOMPUTE], recompute, *c[_RECOMPUTE + 1 :])
    return cast(Candidate, _new_tuple(Candidate, fields))


def with_micro(c: Candidate, mbs: int, recompute: Recompute) -> Candidate:
    """``c._replace(mbs=mbs, recompute=recompute)``, as ``with_recompute``."""
    fields = (*c[:_MBS], mbs, recompute, *c[_RECOMPUTE + 1 :])  # adjacent fields
    return cast(Candidate, _new_tuple(Candidate, fields))


@lru_cache(maxsize=1 << 16)
def candidate_layout(c: Candidate) -> Layout:
    """``explorer.mesh.to_layout`` of a complete candidate, made once per candidate."""
    return to_layout(c)


class View:
    """The fields of a ``Layout`` one function reads, and values it derives from others."""

    __slots__ = ("_get", "derived", "fields")

    def __init__(
        self, fields: tuple[str, ...], derived: tuple[Callable[[Any], object], ...] = ()
    ) -> None:
        self.fields = fields
        """``Layout`` fields read as they are (two or more)."""
        self.derived = derived
        """Functions of the layout whose value is all the function reads of their fields."""
        self._get = attrgetter(*fields)

    def key(self, layout: Layout | Shape) -> tuple[object, ...]:
        """What the function sees of ``layout``: equal keys, equal results."""
        got: tuple[object, ...] = self._get(layout)
        return got + tuple([d(layout) for d in self.derived]) if self.derived else got


PASS_TIMES = View(
    ("tp", "sequence_parallel", "cp", "ep", "etp", "micro_batch_size", "recompute"),
    (all_to_alls_overlap,),
)
"""``explorer.compute.pass_times`` (and ``ComputeContext``): the splits of the work, the
micro-batch, the recompute policy, and whether EP all-to-alls hold SMs beside the compute."""

OPTIMIZER_STEP = View(("dp", "tp", "cp", "ep", "etp", "zero"))
"""``explorer.compute.optimizer_step_s``: the parameters a GPU updates."""

STAGE_PARAMS = View(("tp", "ep", "etp"))
"""``explorer.memory.states.stage_params``, given the plan's ``StagePlan.contents``: how the
blocks' weights split (pp, the schedule and virtual stages reach it only through the plan)."""

NCCL_BUFFERS = View(("dp", "tp", "pp", "cp", "ep", "etp"))
"""``explorer.memory.setting.nccl_parts``: the communicators a GPU belongs to."""

DP_COLLECTIVES = View(("dp", "tp", "pp", "cp", "ep", "etp", "zero"))
"""``explorer.comm.data_parallel.dp_collectives`` (with the placements of the degrees): what
a data-parallel group reduces and gathers, given the pass times it hides behind."""

MODEL_GROUPS = ("tp", "cp", "ep", "etp")
"""The process groups whose placements the TP, CP and EP calls read."""

MODEL_COLLECTIVES = View(
    ("tp", "cp", "ep", "etp", "sequence_parallel", "micro_batch_size"),
    (_full_recompute, _dualpipe_overlap, _op_sac_regathers),
)
"""``explorer.comm.inventory.model_collectives`` without the pipeline sends: TP, CP and EP
calls per micro-batch (full recompute and op-level SAC add backward calls; DualPipe and
DualPipeV hide the all-to-alls), given the pass times they hide behind and the placements of
``MODEL_GROUPS`` (``placement_key``): dp and pp reach them only through where those groups
sit."""

_PLACEMENT = attrgetter(*(f.name for f in dataclasses.fields(GroupPlacement)))


def placement_key(placement: GroupPlacement) -> tuple[object, ...]:
    """A placement's whole content (every field: a collective's time reads nothing else of
    it); equal for the same group placed alike under other degrees."""
    found: tuple[object, ...] = _PLACEMENT(placement)
    return found


GROUPS_READ: dict[str, tuple[str, ...]] = {"model_collectives": MODEL_GROUPS}
"""Per function whose view leaves out degrees: the groups whose placements complete its key."""


def union(*views: View) -> View:
    """One view that reads what every one of ``views`` reads (a key for a cache holding the
    results of several functions)."""
    fields = tuple(dict.fromkeys(f for v in views for f in v.fields))
    return View(fields, tuple(dict.fromkeys(d for v in views for d in v.derived)))


DATA_PARALLEL = union(DP_COLLECTIVES, OPTIMIZER_STEP)
"""The data-parallel calls and the optimizer step, cached together."""

VIEWS: dict[str, View] = {
    "pass_times": PASS_TIMES,
    "optimizer_step_s": OPTIMIZER_STEP,
    "nccl_parts": NCCL_BUFFERS,
    "stage_params": STAGE_PARAMS,
    "dp_collectives": DP_COLLECTIVES,
    "model_collectives": MODEL_COLLECTIVES,
}
"""Every view, by the function it describes (the test walks them all)."""
