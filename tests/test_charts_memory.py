"""Memory figures: one trace per category in one colour everywhere, GiB axes, the peak marked."""

from __future__ import annotations

import pytest

from explorer.charts.colors import MEMORY_COLORS, memory_color, memory_label
from explorer.charts.memory import (
    breakdown_figure,
    stage_memory_figure,
    training_memory_figure,
)
from explorer.memory import CATEGORIES, training_memory
from explorer.presets import load_gpu, load_model
from explorer.specs import Layout, TrainingWorkload
from explorer.units import GiB

STAGES = ["0", "1", "2"]
BYTES = {
    "parameters": [10 * GiB, 10 * GiB, 10 * GiB],
    "activations": [30 * GiB, 20 * GiB, 10 * GiB],
    "temporary": [0.0, 0.0, 0.0],
}


def figure(**kwargs):
    args = {"capacity_bytes": 80e9, "gpu_name": "H100", "peak_index": 0}
    return stage_memory_figure(STAGES, BYTES, **{**args, **kwargs})


def test_each_nonzero_category_is_one_trace_in_its_own_colour():
    fig = figure()
    assert [t.name for t in fig.data] == ["Parameters", "Activations"]  # temporary is all zero
    assert [t.marker.color for t in fig.data] == [MEMORY_COLORS["parameters"], "#E45756"]
    assert fig.layout.barmode == "stack"


def test_bars_are_in_gib_and_hover_shows_exact_bytes():
    fig = figure()
    assert list(fig.data[1].y) == pytest.approx([30, 20, 10])
    assert list(fig.data[1].customdata) == BYTES["activations"]
    assert "bytes" in fig.data[1].hovertemplate and "GiB" in fig.data[1].hovertemplate


def test_axis_titles_carry_units():
    fig = figure()
    assert "GiB" in fig.layout.yaxis.title.text and "2^30" in fig.layout.yaxis.title.text
    assert fig.layout.xaxis.title.text == "pipeline stage (rank)"


def test_the_capacity_line_says_gb_and_gib():
    fig = figure()
    line = next(s for s in fig.layout.shapes if s.type == "line")
    assert line.y0 == pytest.approx(80e9 / GiB)
    texts = [a.text for a in fig.layout.annotations]
    assert any("80 GB = 74.5 GiB" in t for t in texts)


@pytest.mark.parametrize(("capacity", "fits"), [(80e9, True), (40e9, False)])
def test_the_peak_is_annotated_and_says_when_it_does_not_fit(capacity, fits):
    fig = figure(capacity_bytes=capacity)
    peak = next(a for a in fig.layout.annotations if a.text.startswith("peak"))
    assert peak.x == "0" and peak.y == pytest.approx(40)
    assert ("does not fit" in peak.text) is not fits


def test_a_training_estimate_draws_every_stage():
    model = load_model("llama-3.1-70b")
    layout = Layout(tp=8, pp=4, dp=2, zero=1)
    memory = training_memory(model, load_gpu("h100-sxm"), layout, TrainingWorkload())
    fig = training_memory_figure(memory, "H100")
    assert list(fig.data[0].x) == ["0", "1", "2", "3"]
    assert {t.name for t in fig.data} <= {memory_label(c) for c in CATEGORIES}


def test_the_breakdown_bar_stacks_one_gpu():
    fig = breakdown_figure(
        {"weights": 40 * GiB, "kv_cache": 10 * GiB}, capacity_bytes=80e9, title="x"
    )
    assert [t.marker.color for t in fig.data] == [memory_color("weights"), memory_color("kv_cache")]


def test_training_and_serving_share_the_colour_of_shared_categories():
    assert memory_color("weights") == memory_color("parameters")
    assert memory_color("activations") == MEMORY_COLORS["activations"]
    assert len({MEMORY_COLORS[c] for c in CATEGORIES}) == len(CATEGORIES)
