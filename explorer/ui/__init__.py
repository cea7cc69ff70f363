"""The only place that imports streamlit (and, under charts/, plotly)."""
