"""NVFP4 training (nvfp4-mixed) and the FP8 recipes' casts, against their sources.

Sources: Transformer Engine NVFP4BlockScaling / MXFP8BlockScaling / Float8BlockScaling
(transformer_engine/common/recipe/__init__.py; docs/features/low_precision_training/*);
NVIDIA, "Pretraining Large Language Models with NVFP4" (arXiv:2509.25149); Megatron-Bridge
bf16_with_nvfp4_mixed; GPU presets (B200 FP8 4.5 / FP4 9 PFLOP/s dense, MAMF FP8 3432.5).
"""

from __future__ import annotations

import pytest

from explorer.cli import main
from explorer.compute import (
    ComputeAssumptions,
    ComputeContext,
    Gemm,
    cast_bytes,
    gemm_efficiency,
    gemm_times,
    pass_times,
    peak_flops_per_s,
    stage_work,
)
from explorer.compute.gemm import traffic_bytes
from explorer.estimate import estimate
from explorer.memory import training_memory
from explorer.memory.training import StageMemory
from explorer.presets import load_gpu, load_model
from explorer.published_runs import load_published_runs, scenario
from explorer.specs import ClusterSpec, Layout, Precision, TrainingWorkload

LLAMA_70B = load_model("llama-3.1-70b")
B200 = load_gpu("b200")


def _workload(precision: Precision) -> TrainingWorkload:
    return TrainingWorkload(seq_len=8192, global_batch_size=8, precision=precision)


def test_nvfp4_cast_bytes_per_element_by_hand() -> None:
    # per GEMM-input element: the amax kernel reads the BF16 tensor (2 bytes); the fused cast
    # writes a row-wise and a Hadamard-transformed column-wise NVFP4 copy, each 4 bits plus an
    # E4M3 scale per 16 elements: 2 x (0.5 + 1/16) = 1.125; 2 + 1.125 = 3.125
    assert cast_bytes(1.0, "nvfp4") == pytest.approx(3.125)
    assert cast_bytes(16.0, "nvfp4") == pytest.approx(16 * 2 + 2 * (8 + 1))
    # MXFP8: two 1-byte copies and an E8M0 byte per 32 elements each; blockwise an FP32 per 128
    assert cast_bytes(32.0, "mxfp8") == pytest.approx(32 * 2 + 2 * 1)
    assert cast_bytes(128.0, "blockwise") == pytest.approx(128 * 2 + 2 * 4)


def test_nvfp4_gemm_reads_half_a_byte_and_a_scale_per_16_elements() -> None:
    # 8192 x 8192 x 8192: A and B at 0.5625 bytes per element, C in BF16
    n = 8192.0
    assert traffic_bytes(n, n, n, "fp4") == pytest.approx(2 * n * n * 0.5625 + 2 * n * n)


@pytest.mark.parametrize(("m", "n", "k"), [(8192, 8192, 8192), (16384, 28672, 8192)])
def test_nvfp4_large_gemm_on_b200_is_1x_to_2x_faster_than_fp8_and_within_the_fp4_peak(
    m: int, n: int, k: int
) -> None:
    bandwidth = B200.hbm_bytes_per_s * 0.8
    flops = 2.0 * m * n * k
    seconds = {}
    for fmt in ("fp8", "fp4"):
        eff = gemm_efficiency(m, n, k, fmt, B200, bandwidth)
        seconds[fmt] = flops / (eff * peak_flops_per_s(B200, fmt))
    assert 1.0 < seconds["fp8"] / seconds["fp4"] <= 2.0 + 1e-9  # B200: FP4 peak 2x FP8's
    assert seconds["fp4"] >= flops / 9e15  # never faster than the 9 PFLOP/s dense FP4 peak
    # the assumption: the share of the FP8 anchor (MAMF 3432.5 of 4500 TFLOP/s) caps it
    assert gemm_efficiency(m, n, k, "fp4", B200, bandwidth) <= 3432.5 / 4500 + 1e-4


def test_nvfp4_step_on_b200_is_faster_than_fp8_but_less_than_twice() -> None:
    # Llama 3.1 70B at TP 1, 8 K tokens: GEMMs at twice the rate, casts and BF16 attention not
    work = stage_work(LLAMA_70B, (0,), 8192, False, False)
    times = {}
    for precision in ("fp8-mixed", "nvfp4-mixed"):
        ctx = ComputeContext(
            model=LLAMA_70B, gpu=B200, layout=Layout(), workload=_workload(precision)
        )
        t = pass_times(work, ctx)
        times[precision] = t.forward_s + t.backward_input_s + t.weight_s
    assert 1.0 < times["fp8-mixed"] / times["nvfp4-mixed"] < 2.0


def test_the_recipes_bf16_layers_run_in_bf16_and_cast_nothing() -> None:
    # the router (and the LM head, always) stay in BF16 under NVFP4 as under FP8
    bandwidth = B200.hbm_bytes_per_s * 0.8
    router = (Gemm(8192, 256, 7168, bf16=True),)
    in_fp4, _ = gemm_times(router, "fp4", B200, bandwidth)
    in_bf16, _ = gemm_times(router, "bf16", B200, bandwidth)
    assert in_fp4.forward_s == in_bf16.forward_s and in_fp4.wgrad_s == in_bf16.wgrad_s
    assert in_fp4.cast_forward == 0.0 and in_fp4.cast_backward == 0.0
    linear = (Gemm(8192, 256, 7168),)  # the same shape as a linear layer: FP4, cast once
    fp4_linear, _ = gemm_times(linear, "fp4", B200, bandwidth)
    assert fp4_linear.forward_s < in_bf16.forward_s
    assert fp4_linear.cast_forward == 8192 * 7168


def test_the_lm_head_keeps_its_bf16_time_under_nvfp4() -> None:
    # a stage holding only the head: the same forward under bf16-mixed and nvfp4-mixed
    work = stage_work(LLAMA_70B, (), 8192, False, True)
    forward = {}
    for precision in ("bf16-mixed", "nvfp4-mixed"):
        ctx = ComputeContext(
            model=LLAMA_70B, gpu=B200, layout=Layout(), workload=_workload(precision)
        )
        forward[precision] = pass_times(work, ctx).forward_s
    assert forward["nvfp4-mixed"] == pytest.approx(forward["bf16-mixed"])


def test_nvfp4_on_h100_is_rejected_in_one_sentence() -> None:
    with pytest.raises(ValueError, match="no FP4 tensor cores") as error:
        peak_flops_per_s(load_gpu("h100-sxm"), "fp4")
    assert str(error.value).count(". ") == 0
    cluster = ClusterSpec(gpu=load_gpu("h100-sxm"), gpus_per_node=8, num_nodes=1)
    with pytest.raises(ValueError, match="Blackwell"):
        estimate(LLAMA_70B, cluster, Layout(tp=8), _workload("nvfp4-mixed"))


def test_cli_nvfp4_on_h100_exits_2_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["estimate", "--model", "llama-3.1-70b", "--gpu", "h100-sxm", "--tp", "8",
            "--pp", "1", "--dp", "1", "--seq", "4096", "--gbs", "8",
            "--precision", "nvfp4-mixed"]  # fmt: skip
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "no FP4 tensor cores" in err and err.count("\n") == 0


def test_nvfp4_stores_its_saved_gemm_inputs_and_weight_copies_in_nvfp4() -> None:
    # Transformer Engine keeps the column-wise copy (0.5625 bytes per element) for Wgrad and
    # caches both weight copies (1.125 bytes per GEMM weight) across micro-batches
    def stage(precision: Precision) -> StageMemory:
        return training_memory(LLAMA_70B, B200, Layout(tp=8), _workload(precision)).stages[0]

    nvfp4, bf16 = stage("nvfp4-mixed"), stage("bf16-mixed")
    # Llama 3.1 70B block per TP-8 rank: (q, o 8192^2 each, k, v 8192 x 1024 each, three
    # 8192 x 28672 MLP weights) / 8, and two 8192 norms: 106,971,136 weights; 80 blocks
    block = (8192 * 18432 + 3 * 8192 * 28672) / 8 + 2 * 8192
    copies = dict(nvfp4.temporary_parts)["FP8 weight copies (Transformer Engine)"]
    assert copies == pytest.approx(1.125 * 80 * block)
    assert nvfp4.breakdown.activations < bf16.breakdown.activations


def test_published_nvfp4_and_mxfp8_rows_are_expressed_exactly() -> None:
    runs = {r.id: r for r in load_published_runs().run}
    nvfp4 = scenario(runs["mbridge-26.04.01-gb200-llama3-70b-nvfp4"])
    assert nvfp4.inexact == () and nvfp4.workload.precision == "nvfp4-mixed"
    assert nvfp4.assumptions.memory.fp8_linear_input_bytes == pytest.approx(0.5625)
    mxfp8 = scenario(runs["mbridge-26.04.01-gb200-llama3-70b-mxfp8"])
    assert mxfp8.inexact == () and mxfp8.assumptions.compute.fp8_recipe == "mxfp8"
    # per-tensor current scaling on Blackwell is timed as current scaling, not the MXFP8 default
    cs = scenario(runs["mbridge-25.11-b200-llama3-8b-fp8cs"])
    assert cs.assumptions.compute.fp8_recipe == "current"
    block = scenario(runs["deepseek-v3-report-2048-h800"])
    assert block.assumptions.compute.fp8_recipe == "blockwise"


def test_nvfp4_row_runs_faster_than_its_mxfp8_twin_by_less_than_the_peak_ratio() -> None:
    # same layout (TP2 PP4 VP5 DP8, GB200): published 4864 vs 3712 tokens/s per GPU (1.31x)
    runs = {r.id: r for r in load_published_runs().run}
    rates = {}
    for key in ("nvfp4", "mxfp8"):
        s = scenario(runs[f"mbridge-26.04.01-gb200-llama3-70b-{key}"])
        e = estimate(s.model, s.cluster, s.layout, s.workload, s.assumptions)
        rates[key] = e.tokens_per_s
    assert 1.0 < rates["nvfp4"] / rates["mxfp8"] < 2.0


def test_block_scaled_fp8_gemms_run_at_te_s_published_share_of_per_tensor_ones() -> None:
    # Transformer Engine's B300 benchmark, pre-quantized: MXFP8 7.161 ms against FP8 current
    # scaling 6.812 ms per layer; the B200 anchors are per-tensor (MAMF torch._scaled_mm)
    work = stage_work(LLAMA_70B, (0,), 8192, False, False)
    share = {}
    for recipe in ("delayed", "mxfp8"):
        ctx = ComputeContext(
            model=LLAMA_70B, gpu=B200, layout=Layout(), workload=_workload("fp8-mixed"),
            assumptions=ComputeAssumptions(fp8_recipe=recipe),
        )  # fmt: skip
        share[recipe] = pass_times(work, ctx).dense_efficiency
    assert share["mxfp8"] / share["delayed"] == pytest.approx(6.812 / 7.161)


def test_blocks_kept_in_bf16_are_timed_as_bf16_blocks_and_the_rest_in_nvfp4() -> None:
    # ten blocks, the first two in BF16 (Megatron-Core num_layers_at_start_in_bf16 = 2): their
    # time is two blocks under bf16-mixed plus eight under nvfp4-mixed (the time is linear in
    # the blocks; the casts go with the NVFP4 ones only)
    layout = Layout(tp=2)

    def passes(layers: range, precision: Precision, start: int = 0) -> float:
        workload = TrainingWorkload(
            seq_len=8192, global_batch_size=8, precision=precision, bf16_layers_at_start=start
        )
        work = stage_work(LLAMA_70B, tuple(layers), 8192, False, False, True, (start, 0))
        t = pass_times(work, ComputeContext(model=LLAMA_70B, gpu=B200, layout=layout,
                                            workload=workload))  # fmt: skip
        return t.forward_s + t.backward_input_s + t.weight_s

    mixed = passes(range(10), "nvfp4-mixed", start=2)
    assert mixed == pytest.approx(
        passes(range(2), "bf16-mixed") + passes(range(2, 10), "nvfp4-mixed")
    )
    assert passes(range(10), "nvfp4-mixed") < mixed < passes(range(10), "bf16-mixed")


def test_estimate_counts_only_the_model_s_end_blocks_as_bf16() -> None:
    cluster = ClusterSpec(gpu=B200, gpus_per_node=8, num_nodes=1)
    plain = _workload("nvfp4-mixed")
    ends = TrainingWorkload(
        seq_len=8192, global_batch_size=8, precision="nvfp4-mixed", bf16_layers_at_end=12
    )
    fast = estimate(LLAMA_70B, cluster, Layout(tp=8), plain).step_time_s
    slow = estimate(LLAMA_70B, cluster, Layout(tp=8), ends).step_time_s
    assert fast < slow
