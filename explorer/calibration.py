"""Published training runs the step-time model is compared with, and the comparison table.

Pure data and one estimate per run; no fitting: every run uses the same default assumptions,
set only to describe how the papers ran (below). ``tests/test_calibration.py`` holds the
tolerances; the app's Validation page and ``explorer.trust`` show the errors.

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
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cache
from types import MappingProxyType
from typing import Any, Final

import pandas as pd

from explorer.comm import CommAssumptions
from explorer.compute import ComputeAssumptions
from explorer.estimate import Estimate, EstimateAssumptions, estimate
from explorer.memory import GPT_STYLE
from explorer.presets import load_gpu
from explorer.specs import ClusterSpec, GradDType, Layout, ModelSpec, Recompute, TrainingWorkload
from explorer.units import TERA

SEQ_LEN: Final = 2048
"""Tokens per sequence in both papers."""
GPU_ID: Final = "a100-80g"
"""The papers' GPU: A100 SXM 80GB in DGX A100 nodes."""

PAPER_SETTING: Final = EstimateAssumptions(
    memory=GPT_STYLE,
    compute=ComputeAssumptions(causal_attention_flops=False),
)
"""Korthikanti et al. 2022: classic attention with dropout, attention FLOPs counted whole."""
NARAYANAN_SETTING: Final = replace(PAPER_SETTING, comm=CommAssumptions(dp_overlap=0.0))
"""Narayanan et al. 2021: the same, with the gradient all-reduce after the last backward."""

TFLOPS: Final = "TFLOP/s per GPU"
FULL_S: Final = "iteration time (s), full recompute"
SELECTIVE_S: Final = "iteration time (s), SP + selective"
MFU: Final = "MFU, SP + selective"
METRICS: Final = (TFLOPS, FULL_S, SELECTIVE_S, MFU)
"""Compared figures; "SP + selective" is sequence parallelism with selective recompute; MFU
is a fraction of peak (1 = 100%)."""

SOURCES: Final = MappingProxyType(
    {
        "narayanan2021": "Narayanan et al. 2021 (arXiv:2104.04473), Table 1",
        "korthikanti2022": "Korthikanti et al. 2022 (arXiv:2205.05198), Table 5",
    }
)
"""Source key (the start of a row id) to the paper and table."""


@dataclass(frozen=True, slots=True)
class Run:
    """A published GPT run: model shape, layout and global batch (sequence 2048, micro-batch 1).

    Positional, in the order of the papers' table columns, so the rows below read like them.
    """

    hidden: int
    """Hidden size h."""
    layers: int
    """Transformer layers."""
    heads: int
    """Attention heads."""
    tp: int
    pp: int
    gpus: int
    """GPUs of the run; DP is gpus / (tp x pp)."""
    batch: int
    """Global batch, sequences."""

    @property
    def dp(self) -> int:
        return self.gpus // (self.tp * self.pp)


@dataclass(frozen=True, slots=True, kw_only=True)
class NarayananRow:
    """One row of Narayanan et al. 2021 Table 1."""

    id: str
    """Test id: source, table and the paper's model label."""
    model: str
    """The paper's parameter count label."""
    run: Run
    tflops_per_gpu: float
    """Achieved TFLOP/s per GPU (the paper's Eq. 3, full recompute)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class KorthikantiRow:
    """One row of Korthikanti et al. 2022 Table 5."""

    id: str
    model: str
    run: Run
    full_recompute_s: float
    """Iteration time with full recompute and no sequence parallelism, s."""
    selective_s: float
    """Iteration time with sequence parallelism and selective recompute, s."""
    mfu: float
    """Model FLOPs utilisation of the latter (fraction of peak)."""


def _n(label: str, run: Run, tflops: float) -> NarayananRow:
    return NarayananRow(
        id=f"narayanan2021-table1-{label.lower()}", model=label, run=run, tflops_per_gpu=tflops
    )


NARAYANAN_TABLE_1: Final = (
    _n("1.7B", Run(2304, 24, 24, 1, 1, 32, 512), 137),
    _n("3.6B", Run(3072, 30, 32, 2, 1, 64, 512), 138),
    _n("7.5B", Run(4096, 36, 32, 4, 1, 128, 512), 142),
    _n("18.4B", Run(6144, 40, 48, 8, 1, 256, 1024), 135),
    _n("39.1B", Run(8192, 48, 64, 8, 2, 512, 1536), 138),
    _n("76.1B", Run(10240, 60, 80, 8, 4, 1024, 1792), 140),
    _n("145.6B", Run(12288, 80, 96, 8, 8, 1536, 2304), 148),
    _n("310.1B", Run(16384, 96, 128, 8, 16, 1920, 2160), 155),
    _n("529.6B", Run(20480, 105, 128, 8, 35, 2520, 2520), 163),
    _n("1008B", Run(25600, 128, 160, 8, 64, 3072, 3072), 163),
)


def _k(label: str, run: Run, full_s: float, selective_s: float, mfu: float) -> KorthikantiRow:
    return KorthikantiRow(
        id=f"korthikanti2022-table5-{label.lower()}",
        model=label,
        run=run,
        full_recompute_s=full_s,
        selective_s=selective_s,
        mfu=mfu,
    )


KORTHIKANTI_TABLE_5: Final = (
    _k("22B", Run(6144, 48, 64, 8, 1, 8, 4), 1.42, 1.10, 0.415),
    _k("175B", Run(12288, 96, 96, 8, 8, 64, 64), 18.13, 13.75, 0.514),
    _k("530B", Run(20480, 105, 128, 8, 35, 280, 280), 49.05, 37.83, 0.560),
    _k("1T", Run(25600, 128, 160, 8, 64, 512, 512), 94.42, 71.49, 0.563),
)


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
        max_position_embeddings=SEQ_LEN,
    )


def dgx_a100(gpus: int) -> ClusterSpec:
    """DGX A100 nodes (8 × A100 80GB) with one 200 Gb/s HDR NIC per GPU (25 GB/s)."""
    return ClusterSpec(
        gpu=load_gpu(GPU_ID),
        gpus_per_node=8,
        num_nodes=max(1, gpus // 8),
        scale_out_bytes_per_s=25e9,
    )


def run_estimate(
    run: Run,
    recompute: Recompute,
    sp: bool,
    setting: EstimateAssumptions,
    grad_dtype: GradDType | None,
) -> Estimate:
    """The estimate of a published run with the given recompute, SP and assumptions."""
    layout = Layout(tp=run.tp, pp=run.pp, dp=run.dp, recompute=recompute, sequence_parallel=sp)
    workload = TrainingWorkload(seq_len=SEQ_LEN, global_batch_size=run.batch, grad_dtype=grad_dtype)
    model = gpt(run.hidden, run.layers, run.heads)
    return estimate(model, dgx_a100(run.gpus), layout, workload, setting)


def _row(
    row: NarayananRow | KorthikantiRow, metric: str, published: float, ours: float
) -> dict[str, Any]:
    run = row.run
    return {
        "id": row.id,
        "source": SOURCES[row.id.split("-")[0]],
        "model": f"GPT {row.model}",
        "layout": f"TP {run.tp} · PP {run.pp} · DP {run.dp}",
        "gpu": load_gpu(GPU_ID).name,
        "gpus": run.gpus,
        "metric": metric,
        "published": published,
        "ours": ours,
        "relative_error": (ours - published) / published,
    }


def _narayanan_rows() -> list[dict[str, Any]]:
    rows = []
    for row in NARAYANAN_TABLE_1:
        est = run_estimate(row.run, "full", False, NARAYANAN_SETTING, grad_dtype="bf16")
        ours = est.hardware_flops_per_s_per_gpu / TERA
        rows.append(_row(row, TFLOPS, row.tflops_per_gpu, ours))
    return rows


def _korthikanti_rows() -> list[dict[str, Any]]:
    rows = []
    for row in KORTHIKANTI_TABLE_5:
        baseline = run_estimate(row.run, "full", False, PAPER_SETTING, grad_dtype=None)
        present = run_estimate(row.run, "selective", True, PAPER_SETTING, grad_dtype=None)
        for metric, published, ours in (
            (FULL_S, row.full_recompute_s, baseline.step_time_s),
            (SELECTIVE_S, row.selective_s, present.step_time_s),
            (MFU, row.mfu, present.mfu),
        ):
            rows.append(_row(row, metric, published, ours))
    return rows


@cache
def calibration_table() -> pd.DataFrame:
    """One row per published figure: id (the test id), source, model, layout, gpu, gpus,
    metric, published, ours and relative_error ((ours - published) / published).

    Cached: it runs 18 estimates. The frame is shared; copy it before changing it.
    """
    return pd.DataFrame([*_narayanan_rows(), *_korthikanti_rows()])
