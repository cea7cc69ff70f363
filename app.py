"""Parallelism Explorer: page config, the shared sidebar, navigation, run the page."""

from pathlib import Path

import streamlit as st

from explorer.ui import heap, sidebar, theme
from explorer.ui.pages import navigation

st.set_page_config(
    page_title="Parallelism Explorer",
    page_icon=":material/hub:",
    layout="wide",
    initial_sidebar_state="expanded",
)
theme.apply()
scenario = sidebar.render()
navigation(scenario, Path(__file__).resolve().parent).run()
sidebar.run_finished()
heap.freeze_long_lived()  # once per process: full collections then skip what lives on
