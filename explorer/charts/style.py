"""Shared look of every figure: font, margins, grid, legend placement, no mode bar clutter."""

from __future__ import annotations

import plotly.graph_objects as go

Figure = go.Figure
"""The figure type, for modules that must not import plotly themselves."""
FONT = '"Source Sans", "Source Sans Pro", Arial, sans-serif'
"""Streamlit's own typeface (loaded by the app), then common fallbacks (the HTML report)."""
CONFIG = {"displaylogo": False, "modeBarButtonsToRemove": ["lasso2d", "select2d"]}
"""Passed to st.plotly_chart(config=...)."""


def styled(
    fig: go.Figure, *, title: str, x_title: str, y_title: str, height: int = 420
) -> go.Figure:
    """``fig`` with the common layout: a title, axis titles carrying units, a legend on top."""
    fig.update_layout(
        title={"text": title, "x": 0, "xanchor": "left", "font": {"size": 17}},
        font={"family": FONT, "size": 12},
        height=height,
        margin={"l": 60, "r": 20, "t": 80, "b": 50},
        plot_bgcolor="white",
        paper_bgcolor="white",
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.0, "xanchor": "left", "x": 0},
        hoverlabel={"font": {"family": FONT}},
    )
    fig.update_xaxes(
        title_text=x_title, showgrid=False, linecolor="#999", ticks="outside", automargin=True
    )
    fig.update_yaxes(
        title_text=y_title, gridcolor="#eee", linecolor="#999", zeroline=False, automargin=True
    )
    return fig
