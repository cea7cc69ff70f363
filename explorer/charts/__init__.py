"""Plotly figure builders: data in, figure out. One module per topic."""
