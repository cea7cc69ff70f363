"""Megatron's pipeline settings: virtual stages, uneven first/last stages, the layout string.

``--pipeline-model-parallel-layout`` (Megatron-Core ``PipelineParallelLayerLayout``, grammar in
``explorer.pipeline_layout``) is kept as ``Layout.pipeline_layout``, its PP x V chunks setting
the virtual stages; ``--decoder-first/last-pipeline-num-layers`` are ``first_stage_layers`` /
``last_stage_layers``.
"""

from __future__ import annotations

import re

from explorer.importers.scenario import Draft
from explorer.importers.settings import RecipeError, Setting
from explorer.partition import end_stage_layers
from explorer.pipeline_layout import check_against_model, parse_pipeline_layout


def read_pipeline(draft: Draft, num_layers: int | None) -> None:
    """Virtual stages, the layout string and the first/last stage layer counts into the
    draft's layout (``Layout.pipeline_layout``, ``first_stage_layers``, ``last_stage_layers``)."""
    pp = draft.layout.get("pp", 1)
    virtual = _virtual(draft, pp, num_layers)
    layout = draft.get("pipeline_model_parallel_layout")
    if layout is not None:
        text, from_layout = _layout_string(draft, layout, pp, num_layers)
        if virtual is not None and virtual != from_layout:
            raise RecipeError(
                f"{layout.spelled} has {from_layout} stages per rank, but the virtual-stage "
                f"setting says {virtual}"
            )
        virtual = from_layout
        if pp > 1:
            draft.layout["pipeline_layout"] = text
    else:
        _first_last(draft, pp, num_layers)
    if virtual is not None and pp > 1:
        draft.layout["virtual_stages"] = virtual
        draft.layout["schedule"] = "interleaved" if virtual > 1 else "1f1b"


def _layout_string(
    draft: Draft, setting: Setting, pp: int, num_layers: int | None
) -> tuple[str, int]:
    """The layout string as the tool keeps it (no spaces) and its stages per rank; RecipeError
    naming the setting when it does not parse or does not hold the model's blocks."""
    text = re.sub(r"\s", "", str(setting.value)).strip("\"'")
    try:
        chunks = parse_pipeline_layout(text, pp)
        if num_layers is not None:
            mtp = sum(c.mtp for c in chunks)  # without a preset the string's own count
            if draft.model is not None:
                from explorer.presets import load_model

                mtp = load_model(draft.model).num_nextn_predict_layers
            check_against_model(chunks, num_layers, mtp)
    except ValueError as error:
        raise RecipeError(f"{setting.spelled} {setting.value!r}: {error}") from None
    return text, len(chunks) // pp


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


def _first_last(draft: Draft, pp: int, num_layers: int | None) -> None:
    """``--decoder-first/last-pipeline-num-layers``: blocks on the first and last pipeline
    rank (the middle ranks share the rest evenly, as Megatron-Core splits them)."""
    first = _count(draft, "decoder_first_pipeline_num_layers")
    last = _count(draft, "decoder_last_pipeline_num_layers")
    if first is None and last is None:
        return
    if pp < 2:
        raise RecipeError("first/last pipeline stage layer counts need a pipeline of 2 or more")
    if num_layers is not None:
        try:
            end_stage_layers(num_layers, pp, first, last)
        except ValueError as error:
            raise RecipeError(str(error)) from None
    for key, value in (("first_stage_layers", first), ("last_stage_layers", last)):
        if value is not None:
            draft.layout[key] = value


def _count(draft: Draft, name: str) -> int | None:
    value = draft.int(name)
    if value is not None and value < 0:
        raise RecipeError(f"{draft.settings[name].spelled} must be zero or more, got {value}")
    return value
