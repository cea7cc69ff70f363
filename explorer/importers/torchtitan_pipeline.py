"""torchtitan's pipeline settings: schedule, stages per rank and the layers on each stage.

As torchtitan's ``pipeline_llm`` and ``generate_llm_fqn_per_model_part``
(``torchtitan/distributed/pipeline_parallel.py``): with ``pipeline_parallel_layers_per_stage``
the stages are ceil((L + first_less + last_less) / layers_per_stage), otherwise one per rank for
single-stage schedules and two for looped ones; the embedding and the output count as
``first_stage_less_layers`` / ``last_stage_less_layers`` layers (default 1 each) when the layers
are dealt out; stage s sits on rank s mod PP (looped) or, for V schedules, rank r holds stages r
and 2 PP - 1 - r. ``module_fqns_per_model_part`` lists the modules of each stage explicitly.
"""

from __future__ import annotations

import math
import re

from explorer.importers.scenario import Draft
from explorer.importers.settings import RecipeError
from explorer.importers.torchtitan_table import SCHEDULES

_P = "parallelism."


def read_pipeline(draft: Draft, num_layers: int | None) -> None:
    """Schedule, virtual stages and layers per rank into the draft's layout."""
    pp = draft.layout["pp"]
    name = draft.text(_P + "pipeline_parallel_schedule") or "1f1b"
    key = name.removeprefix("schedule")
    if key not in SCHEDULES:
        raise RecipeError(
            f"parallelism.pipeline_parallel_schedule {name!r} is not a torch pipelining schedule "
            f"the tool knows ({', '.join(SCHEDULES)})"
        )
    per_stage = draft.int(_P + "pipeline_parallel_layers_per_stage")
    first = draft.int(_P + "pipeline_parallel_first_stage_less_layers")
    last = draft.int(_P + "pipeline_parallel_last_stage_less_layers")
    parts = draft.get(_P + "module_fqns_per_model_part")
    if pp == 1:
        return
    schedule, fixed = SCHEDULES[key]
    stages = _stages_per_rank(pp, fixed, per_stage, first, last, num_layers)
    draft.layout["schedule"] = schedule if stages > 1 or schedule != "interleaved" else "1f1b"
    if schedule == "interleaved":
        draft.layout["virtual_stages"] = stages
    elif schedule == "zb-h1":
        draft.say(
            f"{name} runs {stages} stages per rank; the tool simulates zero-bubble ZB-H1 with "
            f"one stage per rank."
        )
    if schedule == "dualpipe":
        draft.say(
            f"{name} holds one copy of each stage's weights; the tool's DualPipe (DeepSeek-V3 "
            f"sec. 3.2.1) keeps two, so it over-counts parameters and their states."
        )
        return
    style = "v" if fixed == 2 else "loop"
    layers = _layers(parts, pp * stages, num_layers, first, last)
    if layers is not None:
        _set_stage_layers(draft, layers, pp, style, stages if schedule == "interleaved" else 1)


def _stages_per_rank(
    pp: int,
    fixed: int | None,
    per_stage: int | None,
    first: int | None,
    last: int | None,
    num_layers: int | None,
) -> int:
    """Stages per rank: the schedule's own count, else from the layers per stage, else 2."""
    if per_stage is None:
        return fixed or 2
    if num_layers is None:
        raise RecipeError(
            "parallelism.pipeline_parallel_layers_per_stage needs the model's layer count; pass "
            "--model"
        )
    in_w = 1 if first is None else first  # torchtitan's defaults: the embedding and the
    out_w = 1 if last is None else last  # output each weigh one layer
    total = math.ceil((num_layers + in_w + out_w) / per_stage)
    if per_stage <= 0 or total % pp:
        raise RecipeError(
            f"parallelism.pipeline_parallel_layers_per_stage {per_stage} makes {total} stages "
            f"for {num_layers} layers, not a multiple of pipeline_parallel_degree {pp}"
        )
    if fixed is not None and total // pp != fixed:
        raise RecipeError(
            f"parallelism.pipeline_parallel_layers_per_stage {per_stage} makes {total // pp} "
            f"stages per rank; the schedule needs {fixed}"
        )
    return total // pp


def _layers(
    parts: object, num_stages: int, num_layers: int | None, first: int | None, last: int | None
) -> list[int] | None:
    """Transformer layers of each stage, in stage order (None without the layer count)."""
    if parts is not None:
        value = parts.value  # type: ignore[attr-defined]
        if not isinstance(value, list) or len(value) != num_stages:
            raise RecipeError(
                f"parallelism.module_fqns_per_model_part must list {num_stages} stages of "
                f"module names"
            )
        return [sum(bool(re.fullmatch(r"layers\.\d+", str(m))) for m in part) for part in value]
    if num_layers is None:
        return None
    return dealt_layers(num_stages, num_layers, 1 if first is None else first,
                        1 if last is None else last)  # fmt: skip


def dealt_layers(
    num_stages: int, num_layers: int, input_weight: int, output_weight: int
) -> list[int]:
    """torchtitan's ``generate_llm_fqn_per_model_part`` as layer counts per stage: the effective
    layers (embedding and output weighted as layers) dealt evenly, the first stages taking the
    remainder; the first stage gives ``input_weight`` to the embedding, the last takes the rest."""
    if num_stages == 1:
        return [num_layers]
    effective = num_layers + input_weight + output_weight
    per, extra = divmod(effective, num_stages)
    counts, left = [], num_layers
    for stage in range(num_stages - 1):
        share = per + (stage < extra) - (input_weight if stage == 0 else 0)
        share = max(0, min(share, left))
        counts.append(share)
        left -= share
    return [*counts, left]


def _set_stage_layers(draft: Draft, layers: list[int], pp: int, style: str, chunks: int) -> None:
    if style == "v":
        owned = [[layers[r], layers[2 * pp - 1 - r]] for r in range(pp)]
    else:
        owned = [layers[r::pp] for r in range(pp)]
    per_rank = tuple(sum(o) for o in owned)
    if chunks > 1 and any(len(set(o)) > 1 for o in owned):
        draft.say(
            f"torchtitan gives one rank's stages different layer counts "
            f"({', '.join('/'.join(map(str, o)) for o in owned)}); the tool splits each rank's "
            f"layers evenly over its virtual stages."
        )
    if len(set(per_rank)) > 1:
        draft.layout["stage_layers"] = per_rank
