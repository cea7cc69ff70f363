"""Step-time model against published runs, default assumptions, no per-row fitting.

Settings that describe the published runs (not tuned): A100 80GB, 8 per node, one 200 Gb/s HDR
NIC per GPU (25 GB/s); GPT layers (LayerNorm, GELU 4h MLP, biases, learned positions,
V = 51200, s = 2048, micro-batch 1); classic attention with dropout (no FlashAttention in
2021-22: ``GPT_STYLE``); attention FLOPs counted whole, as both papers do.

Narayanan et al. 2021 (arXiv:2104.04473) Table 1: full recompute, no sequence parallelism,
1F1B; the Megatron-LM of the time all-reduced the 16-bit gradients after the last backward
(no overlap; --accumulate-allreduce-grads-in-fp32 off by default). Compared: TFLOP/s per GPU
with the paper's Eq. 3 (our hardware FLOPs with full recompute).
Korthikanti et al. 2022 (arXiv:2205.05198) Table 5: DP = 1, iteration time with full
recompute (no SP) and with SP + selective recompute; MFU of the latter.

TOLERANCE: 15%. Unknown inputs of the published runs (micro-batch size, interleaving,
kernel fusion, NCCL version) against unfitted defaults: the FLOP-convention spread alone is
~7% (REFERENCES). BASELINE_TOLERANCE: 20% for Table 5's full-recompute baseline, which runs
~10% faster per GPU than the same models in Table 1 (530B: 179.7 against 163 TFLOP/s by Eq. 3;
1T: 177.2 against 163) - a gain of the 2022 code that one set of defaults cannot follow for
both papers. Residual errors are listed in the final report of issue #5.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import pytest

from explorer.comm import CommAssumptions
from explorer.compute import ComputeAssumptions
from explorer.estimate import Estimate, EstimateAssumptions, estimate
from explorer.memory import GPT_STYLE
from explorer.presets import load_gpu
from explorer.specs import ClusterSpec, GradDType, Layout, ModelSpec, Recompute, TrainingWorkload

TOLERANCE = 0.15
"""Largest relative error accepted against a published figure (see module docstring)."""
BASELINE_TOLERANCE = 0.20
"""The same for Korthikanti et al. 2022's full-recompute baseline (see module docstring)."""

PAPER_SETTING = EstimateAssumptions(
    memory=GPT_STYLE,
    compute=ComputeAssumptions(causal_attention_flops=False),
)
NARAYANAN_SETTING = replace(PAPER_SETTING, comm=CommAssumptions(dp_overlap=0.0))


def gpt(hidden: int, layers: int, heads: int) -> ModelSpec:
    """A GPT-3-style model of the papers' shape."""
    return ModelSpec(
        name=f"gpt-h{hidden}-l{layers}",
        num_hidden_layers=layers,
        hidden_size=hidden,
        num_attention_heads=heads,
        intermediate_size=4 * hidden,
        ffn_kind="gelu",
        vocab_size=51200,
        norm_kind="layernorm",
        attention_bias=True,
        attention_out_bias=True,
        mlp_bias=True,
        learned_position_embeddings=True,
        max_position_embeddings=2048,
    )


def dgx_a100(gpus: int) -> ClusterSpec:
    return ClusterSpec(
        gpu=load_gpu("a100-80g"),
        gpus_per_node=8,
        num_nodes=max(1, gpus // 8),
        scale_out_bytes_per_s=25e9,
    )


@dataclass(frozen=True)
class Run:
    hidden: int
    layers: int
    heads: int
    tp: int
    pp: int
    gpus: int
    batch: int


def run_estimate(
    run: Run,
    recompute: Recompute,
    sp: bool,
    setting: EstimateAssumptions,
    grad_dtype: GradDType | None,
) -> Estimate:
    layout = Layout(
        tp=run.tp,
        pp=run.pp,
        dp=run.gpus // (run.tp * run.pp),
        recompute=recompute,
        sequence_parallel=sp,
    )
    workload = TrainingWorkload(seq_len=2048, global_batch_size=run.batch, grad_dtype=grad_dtype)
    return estimate(
        gpt(run.hidden, run.layers, run.heads), dgx_a100(run.gpus), layout, workload, setting
    )


NARAYANAN_TABLE_1 = [
    pytest.param(Run(2304, 24, 24, 1, 1, 32, 512), 137, id="narayanan2021-table1-1.7b"),
    pytest.param(Run(3072, 30, 32, 2, 1, 64, 512), 138, id="narayanan2021-table1-3.6b"),
    pytest.param(Run(4096, 36, 32, 4, 1, 128, 512), 142, id="narayanan2021-table1-7.5b"),
    pytest.param(Run(6144, 40, 48, 8, 1, 256, 1024), 135, id="narayanan2021-table1-18.4b"),
    pytest.param(Run(8192, 48, 64, 8, 2, 512, 1536), 138, id="narayanan2021-table1-39.1b"),
    pytest.param(Run(10240, 60, 80, 8, 4, 1024, 1792), 140, id="narayanan2021-table1-76.1b"),
    pytest.param(Run(12288, 80, 96, 8, 8, 1536, 2304), 148, id="narayanan2021-table1-145.6b"),
    pytest.param(Run(16384, 96, 128, 8, 16, 1920, 2160), 155, id="narayanan2021-table1-310.1b"),
    pytest.param(Run(20480, 105, 128, 8, 35, 2520, 2520), 163, id="narayanan2021-table1-529.6b"),
    pytest.param(Run(25600, 128, 160, 8, 64, 3072, 3072), 163, id="narayanan2021-table1-1008b"),
]


@pytest.mark.parametrize(("run", "published_tflops"), NARAYANAN_TABLE_1)
def test_tflops_per_gpu_match_megatron_lm_weak_scaling(run: Run, published_tflops: float) -> None:
    est = run_estimate(run, "full", False, NARAYANAN_SETTING, grad_dtype="bf16")
    ours = est.hardware_flops_per_s_per_gpu / 1e12
    assert ours == pytest.approx(published_tflops, rel=TOLERANCE)


KORTHIKANTI_TABLE_5 = [
    pytest.param(Run(6144, 48, 64, 8, 1, 8, 4), 1.42, 1.10, 0.415, id="korthikanti2022-table5-22b"),
    pytest.param(
        Run(12288, 96, 96, 8, 8, 64, 64), 18.13, 13.75, 0.514, id="korthikanti2022-table5-175b"
    ),
    pytest.param(
        Run(20480, 105, 128, 8, 35, 280, 280), 49.05, 37.83, 0.560, id="korthikanti2022-table5-530b"
    ),
    pytest.param(
        Run(25600, 128, 160, 8, 64, 512, 512), 94.42, 71.49, 0.563, id="korthikanti2022-table5-1t"
    ),
]


@pytest.mark.parametrize(("run", "full_s", "selective_s", "mfu"), KORTHIKANTI_TABLE_5)
def test_iteration_time_and_mfu_match_sequence_parallel_runs(
    run: Run, full_s: float, selective_s: float, mfu: float
) -> None:
    baseline = run_estimate(run, "full", False, PAPER_SETTING, grad_dtype=None)
    present = run_estimate(run, "selective", True, PAPER_SETTING, grad_dtype=None)
    assert baseline.step_time_s == pytest.approx(full_s, rel=BASELINE_TOLERANCE)
    assert present.step_time_s == pytest.approx(selective_s, rel=TOLERANCE)
    assert present.mfu == pytest.approx(mfu, rel=TOLERANCE)


@pytest.mark.parametrize(("run", "full_s", "selective_s", "mfu"), KORTHIKANTI_TABLE_5)
def test_selective_recompute_with_sp_beats_full_recompute(
    run: Run, full_s: float, selective_s: float, mfu: float
) -> None:
    baseline = run_estimate(run, "full", False, PAPER_SETTING, grad_dtype=None)
    present = run_estimate(run, "selective", True, PAPER_SETTING, grad_dtype=None)
    published_speedup = full_s / selective_s  # 1.29-1.32
    assert baseline.step_time_s / present.step_time_s == pytest.approx(published_speedup, rel=0.1)
    assert present.step_time_s < baseline.step_time_s
