"""The model a Megatron recipe trains: its shape flags matched against the presets.

Only the shape is compared (layers, width, heads, query groups, FFN widths, experts, MLA ranks);
the vocabulary is left out (recipes pad it to a multiple of TP x 128). Other model flags (rotary
base, norms, dropout) are the preset's config.json business and are not read.
"""

from __future__ import annotations

from explorer.importers.megatron_table import MODEL_FLAGS
from explorer.importers.scenario import Draft
from explorer.specs import ModelSpec


def _given_shape(draft: Draft) -> dict[str, int]:
    shape = {}
    for flag, field in MODEL_FLAGS.items():
        value = draft.int(flag)
        if value is not None and value > 0:
            shape[field] = value
    return shape


def num_layers_of(draft: Draft) -> int | None:
    return draft.int("num_layers")


def match_model(draft: Draft) -> tuple[str | None, int | None]:
    """The preset whose shape the flags give (and its layer count), or None with a sentence."""
    from explorer.presets import load_model, model_ids

    shape = _given_shape(draft)
    if not {"num_hidden_layers", "hidden_size"} <= shape.keys():
        if shape:
            draft.say(
                "The model flags give no layer count and width, so no preset is named; pass "
                "--model."
            )
        return None, None
    words = ", ".join(f"{k} {v}" for k, v in shape.items())
    shape.setdefault("n_routed_experts", 0)  # no --num-experts: a dense model
    specs = {preset: load_model(preset) for preset in model_ids()}
    matches = [p for p, s in specs.items() if all(_field(s, f) == v for f, v in shape.items())]
    vocab = draft.int("vocab_size")
    if len(matches) > 1 and vocab is not None:  # tie-break on the vocabulary when it is given
        matches = [p for p in matches if specs[p].vocab_size == vocab] or matches
    if len(matches) != 1:
        what = "no preset" if not matches else f"several presets ({', '.join(matches)})"
        draft.say(
            f"The model flags ({words}) match {what}{_nearest(specs, shape)}; pass --model to "
            f"name the model."
        )
        return None, shape["num_hidden_layers"]
    draft.notes.append(f"The model flags ({words}) match the preset {matches[0]}.")
    return matches[0], shape["num_hidden_layers"]


def _nearest(specs: dict[str, ModelSpec], shape: dict[str, int]) -> str:
    """ ", nearest: <preset> (<field> <preset value>, ...)" for the preset with the same layers and
    width that differs in the fewest fields, or ""."""
    best: tuple[int, str, list[str]] | None = None
    for preset, spec in specs.items():
        if (spec.num_hidden_layers, spec.hidden_size) != (
            shape["num_hidden_layers"],
            shape["hidden_size"],
        ):
            continue
        diff = [f"{f} {_field(spec, f)}" for f, v in shape.items() if _field(spec, f) != v]
        if diff and (best is None or len(diff) < best[0]):
            best = (len(diff), preset, diff)
    return "" if best is None else f"; nearest: {best[1]}, which has {', '.join(best[2])}"


def _field(spec: object, field: str) -> object:
    value = getattr(spec, field)
    if field == "num_key_value_heads" and value is None:
        return spec.num_attention_heads  # type: ignore[attr-defined]
    return value
