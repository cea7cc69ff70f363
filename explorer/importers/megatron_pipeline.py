"""Megatron's pipeline settings: virtual stages, uneven first/last stages, the layout string.

``--pipeline-model-parallel-layout`` (Megatron-Core ``PipelineParallelLayerLayout``): stages
separated by ``|``, ``E`` the embedding, ``t`` a transformer layer, ``m`` an MTP layer, ``L`` the
loss, ``X*n`` and ``(...)*n`` repeat; PP x V stages in order, stage i on pipeline rank i mod PP.
"""

from __future__ import annotations

import re

from explorer.importers.scenario import Draft
from explorer.importers.settings import RecipeError, Setting


def read_pipeline(draft: Draft, num_layers: int | None) -> None:
    """Virtual stages and per-stage layer counts into the draft's layout."""
    pp = draft.layout.get("pp", 1)
    virtual = _virtual(draft, pp, num_layers)
    layout = draft.get("pipeline_model_parallel_layout")
    stage_layers: tuple[int, ...] | None = None
    if layout is not None:
        stages, from_layout = parse_layout(layout, pp)
        stage_layers = _per_rank(draft, layout, stages, pp)
        if virtual is not None and virtual != from_layout:
            raise RecipeError(
                f"{layout.spelled} has {from_layout} stages per rank, but the virtual-stage "
                f"setting says {virtual}"
            )
        virtual = from_layout
    else:
        stage_layers = _first_last(draft, pp, virtual or 1, num_layers)
    if virtual is not None and pp > 1:
        draft.layout["virtual_stages"] = virtual
        draft.layout["schedule"] = "interleaved" if virtual > 1 else "1f1b"
    if stage_layers is not None and len(set(stage_layers)) > 1:
        draft.layout["stage_layers"] = stage_layers


def _virtual(draft: Draft, pp: int, num_layers: int | None) -> int | None:
    virtual = draft.int("num_virtual_stages_per_pipeline_rank")
    per_chunk = draft.int("num_layers_per_virtual_pipeline_stage")
    if per_chunk is None:
        return virtual
    setting = draft.settings["num_layers_per_virtual_pipeline_stage"]
    if num_layers is None:
        raise RecipeError(f"{setting.spelled} needs the model's layer count; pass --model")
    if per_chunk <= 0 or num_layers % (pp * per_chunk):
        raise RecipeError(
            f"{setting.spelled} {per_chunk} does not split {num_layers} layers over {pp} stages"
        )
    return num_layers // (pp * per_chunk)


def _first_last(
    draft: Draft, pp: int, virtual: int, num_layers: int | None
) -> tuple[int, ...] | None:
    """Layers per pipeline rank from ``--decoder-first/last-pipeline-num-layers`` (the middle
    ranks share the rest evenly, as Megatron-Core splits them)."""
    first = draft.int("decoder_first_pipeline_num_layers")
    last = draft.int("decoder_last_pipeline_num_layers")
    if first is None and last is None:
        return None
    if num_layers is None:
        raise RecipeError("uneven first or last pipeline stages need the layer count; pass --model")
    if pp < 2:
        raise RecipeError("first/last pipeline stage layer counts need a pipeline of 2 or more")
    ends = [n for n in (first, last) if n is not None]
    middle_ranks = pp - len(ends)
    rest = num_layers - sum(ends)
    if rest < 0 or (middle_ranks and rest % middle_ranks) or (not middle_ranks and rest):
        raise RecipeError(
            f"first/last stage layers {ends} leave {rest} of {num_layers} layers, which do not "
            f"split evenly over the other {middle_ranks} stages"
        )
    middle = rest // middle_ranks if middle_ranks else 0
    counts = [middle] * pp
    if first is not None:
        counts[0] = first
    if last is not None:
        counts[-1] = last
    return tuple(counts)


def _expand(text: str) -> str:
    """``(tt|)*3`` and ``t*3`` written out."""
    group = re.compile(r"\(([^()]*)\)\*(\d+)")
    while group.search(text):
        text = group.sub(lambda m: m.group(1) * int(m.group(2)), text)
    return re.sub(r"([EtmL])\*(\d+)", lambda m: m.group(1) * int(m.group(2)), text)


def parse_layout(setting: Setting, pp: int) -> tuple[tuple[int, ...], int]:
    """Transformer layers of each stage, in order, and stages per rank of a layout string."""
    text = re.sub(r"[\s,]", "", str(setting.value))
    stages = _expand(text).split("|")
    if set("".join(stages)) - set("EtmL") or not stages:
        raise RecipeError(f"{setting.spelled} {setting.value!r} is not a pipeline layout string")
    if len(stages) % pp:
        raise RecipeError(f"{setting.spelled} has {len(stages)} stages, not a multiple of PP {pp}")
    return tuple(stage.count("t") for stage in stages), len(stages) // pp


def _per_rank(draft: Draft, setting: Setting, stages: tuple[int, ...], pp: int) -> tuple[int, ...]:
    """Layers per pipeline rank; a sentence when one rank's chunks differ in size."""
    chunks = [stages[rank::pp] for rank in range(pp)]
    if any(len(set(c)) > 1 for c in chunks):
        draft.say(
            f"{setting.spelled} gives one rank's virtual stages different layer counts "
            f"({', '.join('/'.join(map(str, c)) for c in chunks)}); the tool splits each "
            f"rank's layers evenly over its virtual stages."
        )
    return tuple(sum(c) for c in chunks)
