"""Communication figures: exposed seconds per collective and axis; groups drawn on nodes."""

from __future__ import annotations

import pytest

from explorer.charts.colors import axis_color
from explorer.charts.comm import MAX_SLOTS_DRAWN, GroupRow, exposed_figure, placement_figure


def test_exposed_time_is_in_seconds_per_step_with_the_share_in_the_hover():
    fig = exposed_figure({"all-gather": 2.0, "all-to-all": 0.0}, {"tp": 1.5, "dp": 0.5}, 10.0)
    by_kind, by_axis = fig.data
    assert list(by_kind.x) == [2.0, 0.0]
    assert list(by_axis.y) == ["TP", "DP"]
    assert list(by_axis.customdata) == pytest.approx([15.0, 5.0])
    assert list(by_axis.marker.color) == [axis_color("tp"), axis_color("dp")]
    assert fig.layout.xaxis.title.text == "exposed time (s per step)"
    assert "step time 10 s" in fig.layout.title.text


def test_a_group_inside_one_node_colours_its_gpus_there():
    fig = placement_figure([GroupRow("TP", "tp", 8, 8, 1, "fast links")], domain_size=8)
    colours = list(fig.data[0].marker.color)
    assert colours == [axis_color("tp")] * 8
    assert [s.type for s in fig.layout.shapes] == ["rect"]


def test_a_group_across_nodes_colours_its_share_of_each_node():
    fig = placement_figure([GroupRow("DP", "dp", 4, 1, 4, "fabric")], domain_size=8)
    colours = list(fig.data[0].marker.color)
    assert colours.count(axis_color("dp")) == 4  # one GPU in each of 4 nodes
    assert len(fig.layout.shapes) == 4


def test_a_group_over_many_nodes_draws_a_few_and_counts_the_rest():
    fig = placement_figure([GroupRow("PP", "pp", 64, 1, 64, "fabric")], domain_size=8)
    drawn = MAX_SLOTS_DRAWN // 8
    assert len(fig.layout.shapes) == drawn
    assert any(f"{64 - drawn} more nodes not drawn" in a.text for a in fig.layout.annotations)
