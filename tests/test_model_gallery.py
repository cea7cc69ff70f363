"""The preset gallery's cards (no streamlit): every preset once, its published size, active
parameters and context length."""

from __future__ import annotations

import pytest

from explorer.model_gallery import preset_card, preset_cards
from explorer.presets import model_ids


def test_every_preset_has_one_card_smallest_first():
    cards = preset_cards()
    assert sorted(c.preset for c in cards) == sorted(model_ids())
    sizes = [c.total_params for c in cards]
    assert sizes == sorted(sizes)


def test_llama_3_1_8b_card_has_the_hub_count_and_its_128k_context():
    card = preset_card("llama-3.1-8b")
    assert card.total_params == 8_030_261_248  # safetensors count on the Hugging Face hub
    assert card.active_params == card.total_params and not card.is_moe
    assert card.context_tokens == 131_072  # config.json max_position_embeddings
    assert card.attention == "GQA 32/8"


def test_mixtral_8x7b_card_has_two_of_eight_experts_active():
    card = preset_card("mixtral-8x7b")
    # Mistral AI's announcement: 46.7B total, 12.9B active per token.
    assert card.total_params == pytest.approx(46.7e9, rel=1e-3)
    assert card.active_params == pytest.approx(12.9e9, rel=2e-3)
    assert card.experts == "8 experts, top-2" and card.context_tokens == 32_768


def test_an_unknown_preset_is_one_sentence():
    with pytest.raises(ValueError, match="no-such-model"):
        preset_card("no-such-model")


def test_issue_18_presets_have_cards_with_their_published_figures():
    maverick = preset_card("llama-4-maverick")
    # Llama 4 Maverick card: 400B total, 17B active; 128 experts, one routed and one shared
    # expert per token; chunked attention of 8192; config max_position_embeddings 1,048,576.
    assert maverick.total_params == pytest.approx(400e9, rel=5e-3)
    assert maverick.active_params == pytest.approx(17e9, rel=0.015)
    assert maverick.experts == "128 experts, top-1 + 1 shared"
    assert (maverick.context_tokens, maverick.sliding_window) == (1_048_576, 8192)
    # BLOOM's model card gives an exact count, which this tool's count equals
    bloom = preset_card("bloom")
    assert bloom.total_params == bloom.official_total_params == 176_247_271_424
    assert bloom.attention == "MHA, 112 heads"
    assert preset_card("deepseek-v2").attention == "MLA, 128 heads"
