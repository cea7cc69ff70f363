"""The published-runs table (validation/published_runs.toml), its runner and its summary.

Today's error figures are not asserted: they change as the step-time model improves. What is
asserted: the file is complete and consistent, every run is estimated with finite numbers, the
published figures convert as their formulas say, and the summary is computed from the rows.
"""

from __future__ import annotations

import json
import math
import tomllib
from dataclasses import replace

import pandas as pd
import pytest
from pydantic import ValidationError

from explorer.estimate import estimate
from explorer.presets import gpu_ids, model_ids
from explorer.published_runs import (
    RUNS_PATH,
    PublishedRun,
    PublishedTable,
    load_published_runs,
    published_table,
    published_tokens_per_s_per_gpu,
    scenario,
    summary,
)
from explorer.trust import expected_error, percent_text
from validation import published as runner

RUNS = load_published_runs().run
FLOP_CONVENTION_TOLERANCE = 0.03
"""Megatron-Bridge prints tokens/s and model TFLOP/s side by side; their ratio is its FLOPs per
token, which should match ours (same convention: Megatron-LM num_floating_point_operations)."""


@pytest.fixture(scope="module")
def table() -> pd.DataFrame:
    return published_table()


def _raw_run(run_id: str) -> dict:
    document = tomllib.loads(RUNS_PATH.read_text())
    return next(r for r in document["run"] if r["id"] == run_id)


def _table_with(run: dict) -> dict:
    document = tomllib.loads(RUNS_PATH.read_text())
    return {"sources": document["sources"], "run": [run]}


def test_the_table_holds_at_least_25_runs_across_ampere_hopper_and_blackwell():
    assert len(RUNS) >= 25
    assert {r.generation for r in RUNS} >= {"Ampere", "Hopper", "Blackwell"}


def test_every_run_names_a_source_table_and_row_with_a_document_and_address():
    sources = load_published_runs().sources
    for run in RUNS:
        source = sources[run.source]
        assert source.document and source.url.startswith("http") and source.date
        assert run.table and run.row


def test_every_run_uses_a_preset_model_and_gpu():
    for run in RUNS:
        assert run.model in model_ids()
        assert run.gpu in gpu_ids()


def test_every_layout_occupies_exactly_the_published_gpus_and_divides_the_batch():
    for run in RUNS:
        layout = scenario(run).layout
        assert layout.world_size == run.gpus == run.dp * run.tp * run.pp * run.cp
        assert run.global_batch % (run.dp * run.micro_batch) == 0


@pytest.mark.parametrize(
    ("change", "words"),
    [
        pytest.param({"dp": 3}, "not gpus", id="world-size"),
        pytest.param({"global_batch": 129}, "not a multiple", id="batch"),
        pytest.param({"model": "llama-9b"}, "unknown model", id="model"),
        pytest.param({"cluster": "dgx-b200"}, "does not hold", id="cluster-gpu"),
        pytest.param({"source": "nowhere"}, "is not a [sources] table", id="source"),
        pytest.param({"layers": 3}, "extra", id="unknown-key"),
    ],
)
def test_an_inconsistent_run_is_rejected_with_a_sentence_naming_it(change, words):
    run = {**_raw_run("mbridge-25.11-h100-llama3-70b-fp8cs"), **change}
    with pytest.raises(ValidationError, match="(?i)" + words.replace("[", r"\[")):
        PublishedTable.model_validate(_table_with(run))


def test_a_run_published_in_tflops_needs_its_conversion_formula():
    run = _raw_run("llama3-405b-8192gpu-tp8-pp16")
    run.pop("formula")
    with pytest.raises(ValidationError, match="formula"):
        PublishedTable.model_validate(_table_with(run))


def test_the_runner_estimates_every_run_with_finite_numbers(table):
    assert list(table["id"]) == [r.id for r in RUNS]
    columns = ["published_tokens_per_s_per_gpu", "estimated_tokens_per_s_per_gpu", "error"]
    for column in [*columns, "estimated_peak_gib", "gpu_gib", "estimated_mfu"]:
        assert table[column].map(math.isfinite).all(), column
    recomputed = (table[columns[1]] - table[columns[0]]) / table[columns[0]]
    assert recomputed.tolist() == pytest.approx(table["error"].tolist(), rel=1e-12)


def test_measured_memory_is_compared_where_a_run_published_it(table):
    measured = table[table["measured_memory_gib"].notna()]
    assert len(measured) >= 5
    expected = (measured["comparable_peak_gib"] - measured["measured_memory_gib"]) / measured[
        "measured_memory_gib"
    ]
    assert measured["memory_error"].tolist() == pytest.approx(expected.tolist())


def test_a_reserved_peak_is_compared_without_nccl_buffers_and_the_cuda_context(table):
    # torchtitan reports reserved_bytes.all.peak: the 8-GPU FSDP run's one DP ring of 16
    # channels x 2 neighbours x 4 MiB (128 MiB) and the 512 MiB CUDA context are outside it
    row = table[table["id"] == "torchtitan-2412-h100-llama31-8b-fsdp8"].iloc[0]
    outside_gib = (16 * 2 * 4 + 512) / 1024
    assert row["estimated_peak_gib"] - row["comparable_peak_gib"] == pytest.approx(outside_gib)


def test_a_tflops_figure_converts_with_the_cores_model_flops_per_token():
    run = next(r for r in RUNS if r.metric == "tflops_per_s_per_gpu")
    s = scenario(run)
    result = estimate(s.model, s.cluster, s.layout, s.workload, s.assumptions)
    tokens = published_tokens_per_s_per_gpu(run, result)
    assert tokens * result.model_flops_per_token == pytest.approx(run.published * 1e12)


def test_megatron_bridge_flops_per_token_match_the_cores_convention(table):
    rows = table[table["id"].str.startswith("mbridge")]
    assert len(rows) >= 10
    for r in rows.itertuples():
        assert r.published_flops_per_token_ratio == pytest.approx(
            1.0, abs=FLOP_CONVENTION_TOLERANCE
        ), r.id


def _with(run_id: str, **change) -> PublishedRun:
    return PublishedRun.model_validate({**_raw_run(run_id), **change})


def test_a_layout_the_core_expresses_carries_no_reason_and_an_unstated_recipe_one():
    assert scenario(_with("mbridge-25.11-h100-llama3-70b-fp8cs")).inexact == ()
    nvfp4 = scenario(_with("mbridge-26.04.01-gb200-llama3-70b-nvfp4"))
    assert nvfp4.inexact == () and nvfp4.workload.precision == "nvfp4-mixed"
    # the 25.09 row is FP8-CS (the recipes' perf matrix): an exact recipe; the same row with a
    # bare "fp8" leaves the recipe unstated
    assert scenario(_with("mbridge-25.09-h100-deepseek-v3")).workload.precision == "fp8-mixed"
    assert scenario(_with("mbridge-25.09-h100-deepseek-v3")).inexact == ()
    reasons = scenario(_with("mbridge-25.09-h100-deepseek-v3", precision="fp8")).inexact
    assert any("recipe not stated" in r for r in reasons)


def test_recompute_of_some_layers_is_megatron_full_recompute_with_the_block_method():
    # Megatron-Bridge overrides.py: recompute_num_layers sets granularity full, method block
    few = scenario(_with("mbridge-25.11-h100-llama3-8b-fp8cs", recompute_num_layers=5))
    assert (few.layout.recompute, few.layout.recompute_method) == ("full", "block")
    assert few.layout.recompute_num_layers == 5
    assert not any("layers" in r for r in few.inexact)


def test_memory_recipes_of_the_runs_reach_the_layout():
    op = scenario(_with("torchtitan-2412-h100-llama31-8b-fsdp8"))
    assert op.layout.recompute_ops and op.layout.recompute == "selective"
    modules = scenario(_with("mbridge-26.04.01-b200-deepseek-v3-mxfp8"))
    assert modules.layout.recompute_modules == ("mla_up_proj", "mlp")
    assert modules.layout.pipeline_layout == "Et*4|(t*4|)*14tmL"
    offload = scenario(_with("mbridge-25.11-gb200-llama3-70b-fp8cs-fsdp"))
    assert offload.layout.offload_layers == 40


def test_torchtitan_runs_use_pytorch_memory_and_their_published_gpu():
    s = scenario(_with("torchtitan-2412-h100-llama31-8b-fsdp8"))
    assert s.assumptions.memory.framework == "pytorch"
    assert s.cluster.gpu.memory_bytes == 96e9
    assert s.layout.zero == 3


def test_the_500_w_hbm2e_h100_peaks_between_the_sxm_and_nvl_datasheet_figures():
    # torchtitan's page: peak between H100 SXM and NVL; datasheet BF16 with sparsity 1,979
    # (SXM) and 1,671 (NVL) TFLOPS, halved for dense; the midpoint is the named assumption
    gpu = scenario(_with("torchtitan-2412-h100-llama31-8b-fsdp8")).cluster.gpu
    assert gpu.bf16_flops_per_s == pytest.approx((1979 + 1671) / 4 * 1e12, rel=1e-3)
    sxm = scenario(_with("mbridge-25.11-h100-llama3-8b-fp8cs")).cluster.gpu
    assert gpu.fp8_flops_per_s / sxm.fp8_flops_per_s == pytest.approx(912.45 / 989.4, rel=1e-9)


def test_a_lower_peak_slows_a_gemm_bound_step_by_nearly_its_ratio():
    run = _with("torchtitan-2412-h100-llama31-70b-fsdp32-tp8")
    s = scenario(run)
    slow = estimate(s.model, s.cluster, s.layout, s.workload, s.assumptions)
    full = replace(s.cluster, gpu=replace(s.cluster.gpu, bf16_flops_per_s=989.4e12,
                                          fp8_flops_per_s=1978.9e12))  # fmt: skip
    fast = estimate(s.model, full, s.layout, s.workload, s.assumptions)
    ratio = slow.step_time_s / fast.step_time_s
    # memory-bound work and collectives do not scale: between 1 and the peaks' ratio
    assert 1.0 < ratio < 989.4 / 912.45


def test_llama3_context_parallel_row_runs_the_papers_all_gather_exchange():
    s = scenario(_with("llama3-405b-16384gpu-cp16-128k"))
    assert s.assumptions.comm.cp_comm == "all-gather"
    assert s.layout.schedule == "interleaved" and s.layout.virtual_stages == 8
    assert s.assumptions.comm.zero2_grad_sync_per_step  # sec. 3.3.2: synchronizes each step
    megatron = scenario(_with("mbridge-25.11-h100-llama31-405b-fp8cs"))
    assert megatron.assumptions.comm.cp_comm == "p2p"
    assert not megatron.assumptions.comm.zero2_grad_sync_per_step


def test_pipelined_fsdp2_runs_gather_and_reduce_once_a_step_as_their_memory_keeps_them():
    s = scenario(_with("torchtitan-2412-h100-llama31-405b-3d-1f1b"))
    result = estimate(s.model, s.cluster, s.layout, s.workload, s.assumptions)
    calls = [c for stage in result.stages for c in stage.collectives if c.axis == "dp"]
    assert {(c.kind, c.phase) for c in calls} == {
        ("all-gather", "step"),
        ("reduce-scatter", "step"),
    }


def test_llm_foundry_runs_prefetch_fsdp_gathers_after_the_gradients_as_composer_does():
    composer = scenario(_with("llmfoundry-h100-mpt-30b-8192-8gpu"))
    assert composer.assumptions.comm.fsdp_backward_prefetch == "post"
    titan = scenario(_with("torchtitan-2412-h100-llama31-8b-fsdp8"))
    assert titan.assumptions.comm.fsdp_backward_prefetch == "pre"


def test_forced_balance_and_deepep_describe_the_run_not_a_fit():
    s = scenario(_with("mbridge-25.09-h100-deepseek-v3"))
    assert s.assumptions.memory.moe_imbalance == 1.0
    assert s.assumptions.comm.ep_domain_dedup
    unbalanced = scenario(_with("mbridge-25.09-h100-deepseek-v3", balanced_routing=False))
    assert unbalanced.assumptions.memory.moe_imbalance > 1.0


HAND_MADE = pd.DataFrame(
    {
        "id": ["c", "a", "b"],
        "generation": ["Blackwell", "Hopper", "Hopper"],
        "error": [0.3, 0.1, -0.2],
        "fits": [True, True, False],
        "exact": [False, True, True],
    }
)


def test_summary_statistics_come_from_the_rows():
    s = summary(HAND_MADE).set_index("group")
    assert list(s.index) == ["Hopper", "Blackwell", "all"]  # generations oldest first
    assert s.loc["Hopper", "mean_abs_error"] == pytest.approx(0.15)
    assert (s.loc["Hopper", "worst_error"], s.loc["Hopper", "worst_id"]) == (-0.2, "b")
    assert s.loc["all", "mean_abs_error"] == pytest.approx(0.2)
    assert s.loc["all", "median_abs_error"] == pytest.approx(0.2)
    assert s.loc["all", "worst_id"] == "c"
    assert s.loc["all", ["too_high", "not_fitting", "runs", "exact_layouts"]].tolist() == [
        2,
        1,
        3,
        2,
    ]


def test_the_command_line_filters_by_generation_and_prints_json(capsys):
    assert runner.main(["--gpu", "Ampere", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["runs"] and {r["generation"] for r in result["runs"]} == {"Ampere"}
    assert [s["group"] for s in result["summary"]] == ["Ampere", "all"]
    assert result["summary"][-1]["runs"] == len(result["runs"])


def test_the_printed_report_has_one_line_per_run_and_the_summary(capsys):
    assert runner.main(["--gpu", "gb200", "--brief"]) == 0
    out = capsys.readouterr().out
    ids = [r.id for r in RUNS if r.gpu == "gb200"]
    assert all(sum(line.startswith(i + " ") for line in out.splitlines()) == 1 for i in ids)
    assert "Summary" in out and "Blackwell" in out


def test_an_unknown_gpu_filter_is_one_sentence_and_exit_2(capsys):
    assert runner.main(["--gpu", "tpu-v5"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("--gpu must be one of") and "\n" not in err


def test_the_step_time_sentence_states_the_mean_error_per_generation(table):
    statement = expected_error("step_time")
    assert f"against {len(table)} published runs" in statement
    for generation, rows in table.groupby("generation"):
        mean = percent_text(rows["error"].abs().mean())
        assert f"{mean} ({len(rows)}) on {generation}" in statement, statement
    assert f"{int((table['error'] > 0).sum())} too high" in statement


def test_megatron_bridge_blackwell_rows_run_their_releases_cudnn() -> None:
    # Megatron-Bridge v0.2.0 (25.11) builds on NGC PyTorch 25.09 (cuDNN 9.13, the image of
    # cudnn-frontend's B200 figures); v0.4.0 (26.04) on PyTorch 26.02 (after cuDNN 9.17)
    from explorer.published_runs.scenario import scenario

    runs = {r.id: r for r in load_published_runs().run}
    kernel = {
        rid: scenario(runs[rid]).assumptions.compute.attention_kernel
        for rid in (
            "mbridge-25.11-b200-llama3-8b-fp8cs",
            "mbridge-25.11-gb200-llama3-8b-fp8cs",
            "mbridge-26.04.01-b200-qwen3-235b-mxfp8",
            "mbridge-26.04.01-gb200-llama3-70b-mxfp8",
            "mbridge-25.11-h100-llama3-8b-fp8cs",
        )
    }
    assert list(kernel.values()) == [
        "cudnn-b200", "cudnn913-gb200", "cudnn917-b200", "cudnn-gb200", None,
    ]  # fmt: skip


def test_nemo_2407_llama3_8b_keeps_its_gradient_buffer_in_bf16():
    # NeMo-Framework-Launcher 24.07 examples/training/llama/h100/llama3_8b_fp8.sh sets
    # optim.grad_sync_dtype=bf16; Apex DistributedFusedAdam allocates its gradient buffer in that
    # dtype (init_grad_buffer). Llama 3.1 8B: 8,030,261,248 parameters, unsharded under DP4 CP2.
    run = next(r for r in RUNS if r.id == "nemo-24.07-h100-llama3-8b-cp2")
    assert run.grad_dtype == "bf16"
    peaks = {}
    for dtype in ("bf16", "fp32"):
        s = scenario(_with(run.id, grad_dtype=dtype))
        result = estimate(s.model, s.cluster, s.layout, s.workload, s.assumptions)
        peaks[dtype] = result.memory.peak_bytes
        if dtype == "bf16":
            assert result.memory.stages[0].breakdown.gradients == 2 * 8_030_261_248
    assert peaks["fp32"] - peaks["bf16"] == pytest.approx(2 * 8_030_261_248)


def test_nemo_2407_gpt3_5b_row_has_the_launchers_shape():
    # GPT-3 5B (NeMo-Framework-Launcher gpt3/5b.yaml): L 24, h 4096, FFN 4h, s 2048, vocab 50257.
    # Megatron-LM's count with causal attention: 72 L h^2 (1 + s / 12h + V / 12hL) per token
    # = 72 x 24 x 4096^2 x (1 + 2048 / 49152 + 50257 / 1179648) = 31,434,104,832 FLOPs.
    run = next(r for r in RUNS if r.id == "nemo-24.07-h100-gpt3-5b")
    s = scenario(run)
    result = estimate(s.model, s.cluster, s.layout, s.workload, s.assumptions)
    assert result.model_flops_per_token == pytest.approx(31_434_104_832, rel=1e-9)
    # the row's TFLOP and token columns (736e12 / 22521 = 32.68 GFLOP per token) agree with
    # Megatron-LM's count without the causal halving, vocabulary padded to 50304 (32.64 GFLOP)
    published = run.published_tflops_per_s_per_gpu * 1e12 / run.published
    assert published == pytest.approx(32_643_219_456, rel=0.002)
