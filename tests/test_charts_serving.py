"""Serving figures: memory stacked by category under the capacity line, frontier on top."""

from __future__ import annotations

import pytest

from explorer.charts.serving import frontier_figure, memory_figure
from explorer.presets import load_gpu, load_model
from explorer.serving import plan_serving
from explorer.specs import ClusterSpec, ServingWorkload

LLAMA_70B = load_model("llama-3.1-70b")
H100_NODE = ClusterSpec(gpu=load_gpu("h100-sxm"))


def test_memory_figure_stacks_the_six_categories_under_the_capacity_line():
    plan = plan_serving(LLAMA_70B, H100_NODE, 8, ServingWorkload())
    fig = memory_figure(plan.layouts[:3], H100_NODE.gpu.memory_bytes)
    assert [t.name for t in fig.data] == [
        "Weights", "KV cache", "Activations", "Communication buffers",
        "CUDA context & workspaces", "Allocator headroom",
    ]  # fmt: skip
    assert fig.layout.shapes[0].y0 == pytest.approx(81559 / 1024)  # 81559 MiB in GiB
    assert "GiB" in fig.layout.yaxis.title.text


def test_frontier_figure_has_a_trace_per_layout_and_the_frontier_on_top():
    plan = plan_serving(LLAMA_70B, H100_NODE, 8, ServingWorkload())
    fig = frontier_figure(plan.pareto)
    layouts = {p.label for p in plan.pareto}
    assert len(fig.data) == len(layouts) + 1
    assert fig.data[-1].name == "Pareto frontier"
    assert len(fig.data[-1].x) == sum(p.pareto for p in plan.pareto)
