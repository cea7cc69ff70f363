"""Every model preset as a gallery card: size, parameters active per token, context length.

Counts are this tool's exact counts (``explorer.counting``, without the multi-token-prediction
modules, as model cards count them) beside the officially published figures of
``presets/models/index.toml``; the context is the config's ``max_position_embeddings``.
"""

from __future__ import annotations

from dataclasses import dataclass

from explorer.counting import active_param_counts, param_counts
from explorer.presets import load_model, model_entry, model_ids


@dataclass(frozen=True, slots=True)
class PresetCard:
    """One model preset as the gallery shows it."""

    preset: str
    """Preset id (``presets/models/<id>.json``)."""
    name: str
    family: str
    total_params: int
    """Parameters counted from the config, without multi-token-prediction modules."""
    active_params: int
    """Parameters active per token (the total for a dense model)."""
    context_tokens: int
    """The config's max_position_embeddings."""
    layers: int
    hidden_size: int
    attention: str
    """MHA, GQA (query / key-value heads) or MLA."""
    experts: str
    """Routed experts and top-k, with shared experts; empty for a dense model."""
    sliding_window: int | None
    official_total_params: int
    official_active_params: int | None
    source: str

    @property
    def is_moe(self) -> bool:
        return bool(self.experts)


def preset_card(preset: str) -> PresetCard:
    """The gallery card of one model preset; ValueError (one sentence) for an unknown id."""
    entry = model_entry(preset)
    model = load_model(preset)
    if model.is_mla:
        attention = f"MLA, {model.num_attention_heads} heads"
    elif model.kv_heads == model.num_attention_heads:
        attention = f"MHA, {model.num_attention_heads} heads"
    else:
        attention = f"GQA {model.num_attention_heads}/{model.kv_heads}"
    experts = ""
    if model.is_moe:
        experts = f"{model.n_routed_experts} experts, top-{model.num_experts_per_tok}"
        if model.n_shared_experts:
            experts += f" + {model.n_shared_experts} shared"
    return PresetCard(
        preset=preset,
        name=entry.display_name,
        family=entry.family,
        total_params=param_counts(model).total_without_mtp,
        active_params=active_param_counts(model).total_without_mtp,
        context_tokens=model.max_position_embeddings,
        layers=model.num_hidden_layers,
        hidden_size=model.hidden_size,
        attention=attention,
        experts=experts,
        sliding_window=model.sliding_window,
        official_total_params=entry.official_total_params,
        official_active_params=entry.official_active_params,
        source=entry.source,
    )


def preset_cards() -> tuple[PresetCard, ...]:
    """Every model preset's card, smallest total first (ties by name)."""
    cards = [preset_card(preset) for preset in model_ids()]
    return tuple(sorted(cards, key=lambda c: (c.total_params, c.name)))
