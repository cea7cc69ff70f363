"""A little CSS: less empty space above the page, tighter sidebar sections."""

from __future__ import annotations

import streamlit as st

CSS = """
<style>
.block-container {padding-top: 3.5rem; padding-bottom: 2rem;}
section[data-testid="stSidebar"] div[data-testid="stSidebarUserContent"] {padding-top: 1rem;}
section[data-testid="stSidebar"] h3 {margin-top: .4rem;}
</style>
"""


def apply() -> None:
    st.html(CSS)
