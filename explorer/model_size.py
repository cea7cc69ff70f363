"""A Llama-shaped dense architecture for a target parameter count (the app's size slider)."""

from __future__ import annotations

import math
from functools import lru_cache

from explorer.counting import param_counts
from explorer.specs import ModelSpec

HEAD_DIM = 128
"""Per-head width of every Llama 3 model (Dubey et al. 2024, arXiv:2407.21783, Table 3)."""
VOCAB_SIZE = 128_256
"""Llama 3's tokenizer (the published config; the paper's text rounds it to 128,000)."""
WIDTH_PER_LAYER = 110
"""Target hidden / layers: Llama 3 8B 128, 70B 102, 405B 130 (Table 3); Kaplan et al. 2020
(arXiv:2001.08361) fig. 5 finds the loss flat over a wide range of this aspect ratio."""
FFN_MULTIPLE = 256


def _shape(hidden: int, layers: int, ffn: int) -> ModelSpec:
    heads = hidden // HEAD_DIM
    return ModelSpec(
        name=f"dense-{hidden}x{layers}",
        num_hidden_layers=layers,
        hidden_size=hidden,
        num_attention_heads=heads,
        num_key_value_heads=min(8, heads),
        intermediate_size=ffn,
        vocab_size=VOCAB_SIZE,
        tie_word_embeddings=hidden < 3072,  # Llama 3.2 1B/3B tie, larger models do not
        max_position_embeddings=131_072,
    )


def _candidates(target: float) -> list[ModelSpec]:
    out = []
    approx_hidden = (target * WIDTH_PER_LAYER / 12.75) ** (1 / 3)  # N ~ 12.75 L h^2, L = h/110
    for step in range(-3, 4):
        hidden = max(1024, round(approx_hidden / 1024 + step) * 1024)  # 8k heads of 128
        ffn = int(hidden * 3.5) // FFN_MULTIPLE * FFN_MULTIPLE  # Llama 3: 3.5 h (8B, 70B)
        one = param_counts(_shape(hidden, 1, ffn)).total
        per_layer = param_counts(_shape(hidden, 2, ffn)).total - one
        layers = max(1, round((target - (one - per_layer)) / per_layer))
        out.append(_shape(hidden, layers, ffn))
    return out


@lru_cache(maxsize=256)
def dense_model_for_params(target_params: float) -> ModelSpec:
    """A Llama-3-shaped dense model (GQA with 8 KV heads, SwiGLU 3.5 h, head dim 128) whose
    parameter count is close to ``target_params`` and whose hidden/layers ratio is near 110."""
    if not 1e8 <= target_params <= 5e12:
        raise ValueError(
            f"target size must be between 0.1B and 5000B parameters, got {target_params:.3g}"
        )

    def score(model: ModelSpec) -> float:
        error = abs(param_counts(model).total / target_params - 1)
        aspect = model.hidden_size / model.num_hidden_layers / WIDTH_PER_LAYER
        return max(error - 0.02, 0.0) * 1000 + abs(math.log(aspect))  # within 2%, then shape

    best = min(_candidates(target_params), key=score)
    size = param_counts(best).total / 1e9
    return _shape_named(best, f"Dense {size:.1f}B (Llama-shaped)")


def _shape_named(model: ModelSpec, name: str) -> ModelSpec:
    from dataclasses import replace

    return replace(model, name=name)
