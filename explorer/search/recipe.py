"""A user's memory recipe carried into the layouts the search ranks.

The search builds plain layouts (degrees, ZeRO, micro-batch, recompute granularity, schedule);
a recipe imported from the user's launch settings (``--from-megatron`` / ``--from-torchtitan``)
or given as flags adds what the framework runs on top: recompute modules or op-level SAC on the
selective layouts, the method, layer count or every-n on the full ones, activation and optimizer
offload, FSDP2's reshard_after_forward on ZeRO-3, HSDP shard groups where they divide DP, and
uneven stages on the pipeline split they describe. A field is left out of a layout it does not
apply to, never made to fit.

A recipe that refines recompute (modules, op SAC, block method, layer counts, every-n) fixes
the recompute: the search then tries no other granularity, and builds each candidate with no
recompute (whose step-time bounds stay below any recompute's) before the recipe's is put on it.
The search's memory floors (``explorer.search.floor``) know the plain granularities only; a
recipe that refines recompute, offloads or moves blocks between stages can bring a layout
below them, so with such a recipe the floors prune nothing (``UnprunedFloor``) and every
layout the rules allow is estimated.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from explorer.mesh import Candidate, Problem, SearchSpace
from explorer.search.floor import MemoryFloor
from explorer.specs import Layout, Recompute, ZeroStage

SELECTIVE_FIELDS = ("recompute_modules", "recompute_ops")
"""Recipe fields of selective recompute (Megatron --recompute-modules, torchtitan op SAC)."""
FULL_FIELDS = ("recompute_method", "recompute_num_layers", "recompute_every")
"""Recipe fields of full recompute (Megatron --recompute-method / -num-layers, torchtitan n)."""
PIPELINE_FIELDS = ("first_stage_layers", "last_stage_layers", "pipeline_layout")
"""Recipe fields describing one pipeline split."""
OTHER_FIELDS = (
    "activation_offload", "offload_layers", "optimizer_offload_fraction",
    "reshard_after_forward", "dp_shard",
)  # fmt: skip
RECIPE_FIELDS = (*SELECTIVE_FIELDS, *FULL_FIELDS, *PIPELINE_FIELDS, *OTHER_FIELDS)
"""Every memory-recipe field of ``explorer.specs.Layout``."""

_BELOW_FLOORS = (
    *SELECTIVE_FIELDS, *FULL_FIELDS, "first_stage_layers", "last_stage_layers",
    "pipeline_layout", "activation_offload", "offload_layers", "optimizer_offload_fraction",
)  # fmt: skip
"""Fields that can bring a layout's memory below the floors of the candidate it is put on."""


@dataclass(frozen=True, slots=True)
class LayoutRecipe:
    """The recipe fields a user set, and the pipeline split its uneven stages describe."""

    fields: tuple[tuple[str, Any], ...]
    """(Layout field, value) for every field away from its default."""
    pp: int | None = None
    """Pipeline degree the stage fields describe; None: any with pp > 1."""
    virtual_stages: int | None = None
    """Model chunks per rank the stage fields describe; None: any."""

    def __post_init__(self) -> None:
        unknown = [name for name, _ in self.fields if name not in RECIPE_FIELDS]
        if unknown:
            raise ValueError(f"{unknown[0]} is not a memory-recipe field of Layout")
        names = {name for name, _ in self.fields}
        if names & set(SELECTIVE_FIELDS) and names & set(FULL_FIELDS):
            raise ValueError("a recipe refines selective or full recompute, not both")

    @property
    def recompute(self) -> Recompute | None:
        """The recompute the recipe refines (it fixes the search's), None when it refines none."""
        names = {name for name, _ in self.fields}
        if names & set(SELECTIVE_FIELDS):
            return "selective"
        return "full" if names & set(FULL_FIELDS) else None

    @classmethod
    def of(cls, layout: Layout, split: bool = True) -> LayoutRecipe:
        """The recipe fields of ``layout`` away from their defaults; ``split`` pins the
        pipeline fields to its pp and virtual stages."""
        default = Layout()
        fields = tuple(
            (name, getattr(layout, name))
            for name in RECIPE_FIELDS
            if getattr(layout, name) != getattr(default, name)
        )
        if not split:
            return cls(fields)
        return cls(fields, pp=layout.pp, virtual_stages=layout.virtual_stages)

    @property
    def empty(self) -> bool:
        return not self.fields

    @property
    def moves_blocks(self) -> bool:
        """Whether the recipe places blocks unevenly: the search's step bounds assume an even
        split, so a ranked layout may beat one ranked before it (the rows are then re-sorted,
        and one pruned as slower may be missed)."""
        return any(name in PIPELINE_FIELDS for name, _ in self.fields)

    @property
    def below_floors(self) -> bool:
        """Whether a field can bring a layout below the search's memory floors."""
        return any(name in _BELOW_FLOORS for name, _ in self.fields)

    def _split_matches(self, layout: Layout) -> bool:
        if layout.pp == 1:
            return False
        pp_ok = self.pp is None or layout.pp == self.pp
        return pp_ok and self.virtual_stages in (None, layout.virtual_stages)

    def changes(self, layout: Layout) -> dict[str, Any]:
        """The fields that apply to ``layout``: the recipe's recompute on a layout built
        without one, each other group only where its ZeRO stage, DP degree or pipeline split
        is the one it is written for."""
        refines = self.recompute is not None and layout.recompute == "none"
        applies = {
            **dict.fromkeys((*SELECTIVE_FIELDS, *FULL_FIELDS), refines),
            **dict.fromkeys(PIPELINE_FIELDS, self._split_matches(layout)),
            "reshard_after_forward": layout.zero == 3,
        }
        out = {name: value for name, value in self.fields if applies.get(name, True)}
        if refines:
            out["recompute"] = self.recompute
        shard = out.get("dp_shard")
        if shard is not None and layout.dp % shard:
            del out["dp_shard"]
        return out

    def space(self, space: SearchSpace) -> SearchSpace:
        """``space`` with the recompute the recipe fixes: candidates without one, which
        ``apply_recipe`` gives the recipe's."""
        if self.recompute is None:
            return space
        return replace(space, recomputes=("none",))


def apply_recipe(layout: Layout, recipe: LayoutRecipe | None) -> Layout:
    """``layout`` with the recipe's fields that apply to it; without the stage fields when
    they do not place its blocks (a layout string of another chunk count), without the recipe
    when the core rejects the combination."""
    if recipe is None or recipe.empty:
        return layout
    changes = recipe.changes(layout)
    without_split = {k: v for k, v in changes.items() if k not in PIPELINE_FIELDS}
    for attempt in (changes, without_split):
        try:
            return replace(layout, **attempt)
        except ValueError:
            continue
    return layout


class UnprunedFloor(MemoryFloor):
    """Memory floors that prune nothing: every ZeRO stage may fit, no layout is rejected
    before its estimate (for a recipe that can bring layouts below the floors)."""

    def least_zero(self, c: Candidate, variant: tuple[str, int], rc: str) -> int:
        return 0

    def states_fit(self, c: Candidate, dualpipe: bool) -> tuple[ZeroStage, ...]:
        return (0, 1, 2, 3)

    def states_rule(self, p: Problem, c: Candidate) -> str | None:
        return None

    def layout_rule(self, p: Problem, c: Candidate) -> str | None:
        return None
