"""The model presets as a gallery on the Model page: one card each with its size, parameters
active per token and context length, and one button that loads it into the sidebar."""

from __future__ import annotations

import streamlit as st

from explorer.model_gallery import PresetCard, preset_cards
from explorer.report.markdown import escaped
from explorer.ui.format import billions, tokens
from explorer.ui.state import MODEL_CHOICE, key

OPEN = "model_gallery"
"""Session-state key of the gallery's expander (open until the person closes it)."""
PER_ROW = 4


@st.cache_data(show_spinner=False)
def cards() -> tuple[PresetCard, ...]:
    """explorer.model_gallery.preset_cards (read once per process)."""
    return preset_cards()


def load(preset: str) -> None:
    """Make ``preset`` the model (a callback: it runs before the sidebar is drawn)."""
    st.session_state[MODEL_CHOICE] = preset
    st.session_state[key("model")] = preset


def _card_text(card: PresetCard) -> tuple[str, str]:
    active = f"{billions(card.active_params)} active" if card.is_moe else "dense"
    head = (
        f"**{escaped(card.name)}**  \n{billions(card.total_params)} parameters · {active} · "
        f"{tokens(card.context_tokens)} context"
    )
    detail = f"{card.layers} layers, hidden {card.hidden_size:,}, {card.attention}"
    if card.experts:
        detail += f", {card.experts}"
    if card.sliding_window:
        detail += f", {card.sliding_window:,}-token sliding window"
    return head, detail


def render(current: str | None) -> None:
    """Every preset as a card, smallest first; ``current`` (a preset id or None) is marked."""
    all_cards = cards()
    st.session_state.setdefault(OPEN, True)
    box = st.expander(f"Preset gallery: all {len(all_cards)} models", key=OPEN, on_change="rerun")
    if not box.open:
        return
    with box:
        st.caption(
            "Sizes are this tool's exact counts from each published config.json (without "
            "multi-token-prediction modules); active is what one token runs through (MoE: its "
            "top-k experts); context is the config's max_position_embeddings. "
            "Load sets the sidebar's model and keeps the rest."
        )
        for first in range(0, len(all_cards), PER_ROW):
            row = all_cards[first : first + PER_ROW]
            for col, card in zip(st.columns(PER_ROW), row, strict=False):
                head, detail = _card_text(card)
                preset = card.preset
                with col.container(border=True):
                    st.markdown(head)
                    st.caption(detail)
                    st.button(
                        "Loaded" if preset == current else "Load",
                        key=f"gallery_{preset}",
                        on_click=load,
                        args=(preset,),
                        disabled=preset == current,
                        width="stretch",
                    )
