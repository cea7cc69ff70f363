"""Strong and weak scaling sweeps: batches, baselines, the stated denominator, invariants."""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest
from hand_models import LLAMA_LIKE_8B as MODEL

from explorer.scaling import (
    LayoutFamily,
    best_estimate,
    cluster_of,
    family_layouts,
    strong_scaling,
    weak_scaling,
)
from explorer.specs import ClusterSpec, GpuSpec, Layout, TrainingWorkload

GPU = GpuSpec(
    name="h100-like",
    memory_bytes=80 * 10**9,
    bf16_flops_per_s=989e12,
    hbm_bytes_per_s=3.35e12,
    scale_up_bytes_per_s=450e9,
)
CLUSTER = ClusterSpec(gpu=GPU, gpus_per_node=8)
WORKLOAD = TrainingWorkload(seq_len=4096, global_batch_size=256)
FAMILY = LayoutFamily(recomputes=("selective",))
COUNTS = (8, 16, 32, 64)


@pytest.fixture(scope="module")
def strong():
    return strong_scaling(MODEL, CLUSTER, COUNTS, WORKLOAD, FAMILY)


@pytest.fixture(scope="module")
def weak():
    return weak_scaling(MODEL, CLUSTER, COUNTS, replace(WORKLOAD, global_batch_size=32), FAMILY)


def test_strong_scaling_keeps_the_global_batch(strong) -> None:
    assert [p.global_batch_size for p in strong.points] == [256] * 4
    assert [p.estimate.num_gpus for p in strong.points] == list(COUNTS)


def test_weak_scaling_grows_the_batch_with_the_gpus(weak) -> None:
    assert [p.global_batch_size for p in weak.points] == [32, 64, 128, 256]


def test_efficiency_is_stated_against_the_smallest_count(strong) -> None:
    assert strong.baseline_gpus == 8
    assert strong.denominator == "tokens/s per GPU relative to 8 GPUs"
    assert strong.points[0].efficiency == pytest.approx(1.0)


def test_efficiency_is_tokens_per_gpu_over_the_baseline(strong) -> None:
    base = strong.points[0].estimate.tokens_per_s_per_gpu
    for point in strong.points:
        assert point.efficiency == pytest.approx(point.estimate.tokens_per_s_per_gpu / base)


def test_strong_scaling_never_raises_work_per_gpu(strong) -> None:
    per_gpu = [
        p.estimate.hardware_flops_per_token * p.estimate.tokens_per_step / p.num_gpus
        for p in strong.points
    ]
    assert all(b <= a * (1 + 1e-9) for a, b in itertools.pairwise(per_gpu))


def test_strong_scaling_shortens_the_step(strong) -> None:
    steps = [p.estimate.step_time_s for p in strong.points]
    assert steps == sorted(steps, reverse=True)


def test_rows_carry_the_layout_and_throughput(strong) -> None:
    row = strong.rows()[0]
    assert {"num_gpus", "tp", "pp", "dp", "tokens_per_s_per_gpu", "mfu", "efficiency"} <= set(row)


def test_nothing_fits_gives_no_baseline() -> None:
    tiny = replace(GPU, memory_bytes=10**9)
    sweep = strong_scaling(MODEL, replace(CLUSTER, gpu=tiny), (8,), WORKLOAD, FAMILY)
    assert sweep.baseline_gpus is None
    assert sweep.points[0].estimate is None and sweep.points[0].efficiency is None
    assert "fits" in sweep.denominator


def test_family_layouts_use_every_gpu_and_divide_the_batch() -> None:
    layouts = list(family_layouts(MODEL, cluster_of(CLUSTER, 32), 32, WORKLOAD, FAMILY))
    assert layouts
    for layout in layouts:
        assert layout.world_size == 32
        assert WORKLOAD.global_batch_size % layout.dp == 0
        assert layout.tp <= 8


def test_moe_models_also_try_expert_parallel_degrees() -> None:
    moe = replace(MODEL, n_routed_experts=8, num_experts_per_tok=2, moe_intermediate_size=2048)
    degrees = {layout.ep for layout in family_layouts(moe, CLUSTER, 16, WORKLOAD, FAMILY)}
    assert degrees == {1, 2, 4, 8}


def test_custom_candidates_replace_the_family() -> None:
    def only_tp8(model, cluster, n, workload):
        return [Layout(tp=8, dp=n // 8, recompute="full")]

    sweep = strong_scaling(MODEL, CLUSTER, (8, 16), WORKLOAD, candidates=only_tp8)
    assert {p.layout.tp for p in sweep.points if p.layout} == {8}


def test_best_estimate_skips_layouts_that_cannot_run() -> None:
    broken = Layout(tp=1, pp=2, dp=4, schedule="dualpipe")  # 4 micro-batches < 2 x stages
    good = Layout(tp=8, dp=1)
    best = best_estimate(MODEL, CLUSTER, [broken, good], replace(WORKLOAD, global_batch_size=4))
    assert best is not None and best.layout == good


SCALING_ARGS = [
    "scaling",
    "--model",
    "llama-3.1-8b",
    "--gpu",
    "h100-sxm",
    "--gpu-counts",
    "8,16",
    "--seq",
    "4096",
    "--gbs",
    "32",
    "--recompute",
    "selective",
]


def test_scaling_command_states_the_denominator(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from explorer.cli import main

    assert main([*SCALING_ARGS, "--kind", "weak", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["denominator"] == "tokens/s per GPU relative to 8 GPUs"
    assert [p["global_batch_size"] for p in result["points"]] == [32, 64]


def test_scaling_command_rejects_bad_counts_in_one_sentence(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from explorer.cli import main

    with pytest.raises(SystemExit) as stop:
        main([*SCALING_ARGS[:6], "8,x", *SCALING_ARGS[7:]])
    assert stop.value.code == 2
    assert "--gpu-counts" in capsys.readouterr().err


def test_scaling_command_renders_text(capsys: pytest.CaptureFixture[str]) -> None:
    from explorer.cli import main

    assert main(SCALING_ARGS) == 0
    assert "efficiency = tokens/s per GPU relative to 8 GPUs" in capsys.readouterr().out


def test_scaling_command_takes_named_assumptions(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from explorer.cli import main

    def first_throughput(*extra: str) -> float:
        assert main([*SCALING_ARGS, "--json", *extra]) == 0
        return json.loads(capsys.readouterr().out)["points"][0]["tokens_per_s"]

    assert first_throughput("--assume", "compute.max_efficiency=0.375") < 0.7 * first_throughput()
