"""Published end-to-end training runs (``validation/published_runs.toml``) against the estimate.

Pure: reads the stored table, builds each run's scenario from the existing core (presets, specs,
``explorer.estimate.estimate``) and returns pandas DataFrames; no streamlit. Nothing is fitted:
every run uses the default assumptions, changed only where the run's source says how it ran
(framework, forced-balanced routing, its dispatcher, its GPU's memory). What the core cannot
express is named per run, one sentence each, and the nearest expressible scenario is estimated.

Error convention: (estimate - published) / published of tokens/s per GPU, so positive means the
estimate is too optimistic. A run published in TFLOP/s per GPU is converted with the core's model
FLOPs per token (``Estimate.model_flops_per_token``); the run's ``formula`` says so.
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any, Final, Literal

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, model_validator

from explorer.estimate import DEFAULT_ESTIMATE_ASSUMPTIONS, Estimate, EstimateAssumptions, estimate
from explorer.presets import cluster_entry, cluster_ids, gpu_ids, load_cluster, load_model, model_ids
from explorer.specs import ClusterSpec, Layout, ModelSpec, Precision, Recompute, TrainingWorkload
from explorer.units import GiB, TERA

RUNS_PATH: Final = Path(__file__).resolve().parent.parent / "validation" / "published_runs.toml"
"""The stored table of published runs."""

GENERATIONS: Final = {
    "a100-80g": "Ampere",
    "h100-sxm": "Hopper",
    "h200": "Hopper",
    "h800": "Hopper",
    "b200": "Blackwell",
    "gb200": "Blackwell",
    "mi300x": "CDNA 3",
}
"""GPU preset to its architecture generation (the summary's groups)."""

PublishedPrecision = Literal[
    "bf16", "fp8", "fp8-cs", "fp8-delayed", "fp8-tensorwise", "fp8-blockwise", "mxfp8", "nvfp4"
]
PER_TENSOR_FP8: Final = ("fp8-cs", "fp8-delayed", "fp8-tensorwise")
"""FP8 recipes with one scale per tensor: what the core's fp8-mixed policy times."""
Metric = Literal["tokens_per_s_per_gpu", "tflops_per_s_per_gpu", "gpu_hours_per_token_average"]


class Source(BaseModel):
    """A document the runs come from."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    document: str = Field(min_length=1)
    url: str = Field(min_length=1)
    version: str = Field(min_length=1)
    date: str = Field(min_length=1)
    notes: str = ""


class PublishedRun(BaseModel):
    """One published run: where it is printed, the model, GPUs, exact layout and the figure."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    id: str = Field(min_length=1)
    set: Literal["check", "used"]
    """check: no figure of the core was set from it; used: one was (named in the README)."""
    framework: str = Field(min_length=1)
    source: str
    """Key of a [sources.KEY] table."""
    table: str = Field(min_length=1)
    row: str = Field(min_length=1)
    model: str
    model_note: str = ""
    model_overrides: dict[str, int] = Field(default_factory=dict)
    gpu: str
    cluster: str
    gpu_memory_gb: float | None = None
    """The run's GPU memory (decimal GB) where it differs from the preset."""
    gpu_hbm_tb_per_s: float | None = None
    """The run's HBM bandwidth (TB/s) where it differs from the preset."""
    gpus: int = Field(gt=0)
    tp: int = Field(default=1, gt=0)
    pp: int = Field(default=1, gt=0)
    cp: int = Field(default=1, gt=0)
    ep: int = Field(default=1, gt=0)
    etp: int = Field(default=1, gt=0)
    dp: int = Field(gt=0)
    virtual_stages: int = Field(default=1, gt=0)
    schedule: Literal["1f1b", "interleaved", "dualpipe"] | None = None
    """None: interleaved when virtual_stages > 1, else 1F1B."""
    sequence_parallel: bool = True
    sharding: Literal["ddp", "distributed-optimizer", "fsdp"]
    precision: PublishedPrecision
    seq_len: int = Field(gt=0)
    micro_batch: int = Field(gt=0)
    global_batch: int = Field(gt=0)
    recompute: Recompute = "none"
    recompute_modules: tuple[str, ...] = ()
    recompute_num_layers: int = Field(default=0, ge=0)
    activation_recipe: Literal["standard", "deepseek-v3"] = "standard"
    selective_ac: Literal["op", "layer"] | None = None
    offload_layers: int = Field(default=0, ge=0)
    cuda_graphs: str = ""
    torch_compile: bool = False
    async_tp: bool = False
    ep_dispatcher: Literal["alltoall", "deepep", "hybridep"] = "alltoall"
    moe_a2a_overlap: bool = False
    fp8_dispatch: bool = False
    balanced_routing: bool = False
    memory_source: str = ""
    metric: Metric
    published: float = Field(gt=0)
    published_tflops_per_s_per_gpu: float | None = None
    formula: str = ""
    measured_memory_gib: float | None = None
    missing: tuple[str, ...] = ()
    notes: str = ""

    @model_validator(mode="after")
    def _consistent(self) -> PublishedRun:
        _known(self.model, model_ids(), "model")
        _known(self.gpu, gpu_ids(), "gpu")
        _known(self.cluster, cluster_ids(), "cluster")
        if cluster_entry(self.cluster).gpu_id != self.gpu:
            raise ValueError(f"{self.id}: cluster {self.cluster} does not hold {self.gpu} GPUs")
        world = self.dp * self.tp * self.pp * self.cp
        if world != self.gpus:
            raise ValueError(f"{self.id}: dp x tp x pp x cp = {world}, not gpus = {self.gpus}")
        if self.global_batch % (self.dp * self.micro_batch):
            raise ValueError(
                f"{self.id}: global batch {self.global_batch} is not a multiple of "
                f"dp x micro batch = {self.dp * self.micro_batch}"
            )
        if (self.dp * self.cp * self.tp) % (self.ep * self.etp):
            raise ValueError(f"{self.id}: ep x etp must divide dp x cp x tp (Megatron-Core folding)")
        if self.metric != "tokens_per_s_per_gpu" and not self.formula:
            raise ValueError(f"{self.id}: a {self.metric} figure needs its conversion formula")
        return self

    @property
    def generation(self) -> str:
        return GENERATIONS[self.gpu]


def _known(value: str, choices: tuple[str, ...], what: str) -> None:
    if value not in choices:
        raise ValueError(f"unknown {what} preset {value!r}; choose one of {', '.join(choices)}")


class PublishedTable(BaseModel):
    """The whole file: its sources and its runs."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    sources: dict[str, Source]
    run: tuple[PublishedRun, ...]

    @model_validator(mode="after")
    def _linked(self) -> PublishedTable:
        ids = [r.id for r in self.run]
        if len(set(ids)) != len(ids):
            raise ValueError("published run ids must be unique")
        for r in self.run:
            if r.source not in self.sources:
                raise ValueError(f"{r.id}: source {r.source!r} is not a [sources] table")
        return self


@cache
def load_published_runs(path: Path = RUNS_PATH) -> PublishedTable:
    """The stored table, validated (cached: the file is data under version control)."""
    return PublishedTable.model_validate(tomllib.loads(Path(path).read_text()))


@dataclass(frozen=True, slots=True, kw_only=True)
class Scenario:
    """The core's inputs for one run and what they leave out of it."""

    model: ModelSpec
    cluster: ClusterSpec
    layout: Layout
    workload: TrainingWorkload
    assumptions: EstimateAssumptions
    inexact: tuple[str, ...]
    """Settings of the run the scenario changes (the nearest expressible one is estimated)."""
    unmodelled: tuple[str, ...]
    """Speed features the run used that the core has no term for."""


def _precision(run: PublishedRun) -> tuple[Precision, list[str]]:
    if run.precision == "bf16":
        return "bf16-mixed", []
    if run.precision in PER_TENSOR_FP8:
        return "fp8-mixed", []
    reason = {
        "fp8": "FP8 recipe not stated: timed as per-tensor FP8",
        "nvfp4": "NVFP4 not modelled: timed as FP8",
    }.get(run.precision, f"{run.precision} scaling not modelled: timed as per-tensor FP8")
    return "fp8-mixed", [reason]


def _recompute(run: PublishedRun, model: ModelSpec) -> tuple[Recompute, list[str]]:
    if run.recompute_num_layers:
        per_stage = model.num_hidden_layers / (run.pp * run.virtual_stages)
        nearest: Recompute = "full" if run.recompute_num_layers >= per_stage / 2 else "none"
        return nearest, [
            f"full recompute of {run.recompute_num_layers} layers per chunk not modelled: "
            f"estimated with {nearest}"
        ]
    if run.activation_recipe != "standard" or run.recompute != "selective":
        return run.recompute, []
    if run.selective_ac:
        return "selective", [f"torchtitan {run.selective_ac}-level SAC taken as selective"]
    if run.recompute_modules not in ((), ("core_attn",)):
        modules = ", ".join(run.recompute_modules)
        return "selective", [f"recompute_modules {modules} not modelled: attention core taken"]
    return "selective", []


def _unmodelled(run: PublishedRun) -> tuple[str, ...]:
    flags = (
        (run.offload_layers, f"activation offload of {run.offload_layers} layers"),
        (run.cuda_graphs, f"CUDA graphs ({run.cuda_graphs})"),
        (run.torch_compile, "torch.compile"),
        (run.async_tp, "async TP"),
        (run.moe_a2a_overlap, "MoE all-to-all overlap"),
    )
    return tuple(f"{words} not modelled" for on, words in flags if on)


def _cluster(run: PublishedRun) -> ClusterSpec:
    base = load_cluster(run.cluster)
    per_node = base.gpus_per_node
    cluster = replace(base, num_nodes=max(1, math.ceil(run.gpus / per_node)))
    gpu = cluster.gpu
    if run.gpu_memory_gb is not None:
        gpu = replace(gpu, memory_bytes=int(run.gpu_memory_gb * 1e9))
    if run.gpu_hbm_tb_per_s is not None:
        gpu = replace(gpu, hbm_bytes_per_s=run.gpu_hbm_tb_per_s * 1e12)
    return replace(cluster, gpu=gpu)


def _assumptions(run: PublishedRun) -> EstimateAssumptions:
    base = DEFAULT_ESTIMATE_ASSUMPTIONS
    memory = replace(
        base.memory,
        framework="pytorch" if run.framework == "torchtitan" else "megatron",
        moe_imbalance=1.0 if run.balanced_routing else base.memory.moe_imbalance,
        activation_recipe=run.activation_recipe,
    )
    comm = replace(
        base.comm, ep_domain_dedup=run.ep_dispatcher != "alltoall", fp8_dispatch=run.fp8_dispatch
    )
    return replace(base, memory=memory, comm=comm)


def scenario(run: PublishedRun) -> Scenario:
    """The core's inputs for a run, with what they change and leave out."""
    model = replace(load_model(run.model), **run.model_overrides)
    precision, inexact = _precision(run)
    recompute, more = _recompute(run, model)
    schedule = run.schedule or ("interleaved" if run.virtual_stages > 1 else "1f1b")
    layout = Layout(
        dp=run.dp, tp=run.tp, pp=run.pp, cp=run.cp, ep=run.ep, etp=run.etp,
        zero={"ddp": 0, "distributed-optimizer": 1, "fsdp": 3}[run.sharding],
        sequence_parallel=run.sequence_parallel, micro_batch_size=run.micro_batch,
        recompute=recompute, schedule=schedule, virtual_stages=run.virtual_stages,
    )  # fmt: skip
    workload = TrainingWorkload(
        seq_len=run.seq_len, global_batch_size=run.global_batch, precision=precision
    )
    return Scenario(
        model=model,
        cluster=_cluster(run),
        layout=layout,
        workload=workload,
        assumptions=_assumptions(run),
        inexact=tuple(inexact + more),
        unmodelled=_unmodelled(run),
    )


def published_tokens_per_s_per_gpu(run: PublishedRun, result: Estimate) -> float:
    """The published figure as tokens/s per GPU (the run's ``formula`` for other metrics)."""
    if run.metric == "tflops_per_s_per_gpu":
        return run.published * TERA / result.model_flops_per_token
    return run.published  # tokens/s per GPU, or the report's GPU-hour average already in it


def layout_text(run: PublishedRun) -> str:
    """The layout in words: "TP4 PP8 VP5 DP2 dist-opt"."""
    parts = [f"{k}{v}" for k, v in (("TP", run.tp), ("PP", run.pp), ("VP", run.virtual_stages),
             ("CP", run.cp), ("EP", run.ep), ("ETP", run.etp)) if v > 1]  # fmt: skip
    return " ".join([*parts, f"DP{run.dp}", run.sharding, f"mbs{run.micro_batch}"])


def compare(run: PublishedRun) -> dict[str, Any]:
    """One run: published against estimated tokens/s per GPU, memory, and what differs."""
    s = scenario(run)
    result = estimate(s.model, s.cluster, s.layout, s.workload, s.assumptions)
    published = published_tokens_per_s_per_gpu(run, result)
    ours = result.tokens_per_s_per_gpu
    peak_gib = result.memory.peak_bytes / GiB
    measured = run.measured_memory_gib
    ratio = math.nan
    if run.published_tflops_per_s_per_gpu and run.metric == "tokens_per_s_per_gpu":
        ratio = run.published_tflops_per_s_per_gpu * TERA / run.published
        ratio /= result.model_flops_per_token
    return {
        "id": run.id,
        "set": run.set,
        "generation": run.generation,
        "gpu": run.gpu,
        "gpus": run.gpus,
        "framework": run.framework,
        "model": run.model,
        "precision": run.precision,
        "layout": layout_text(run),
        "published_tokens_per_s_per_gpu": published,
        "estimated_tokens_per_s_per_gpu": ours,
        "error": (ours - published) / published,
        "estimated_mfu": result.mfu,
        "estimated_peak_gib": peak_gib,
        "gpu_gib": s.cluster.gpu.memory_bytes / GiB,
        "fits": result.fits,
        "measured_memory_gib": measured if measured is not None else math.nan,
        "memory_error": (peak_gib - measured) / measured if measured else math.nan,
        "published_flops_per_token_ratio": ratio,
        "exact": not s.inexact,
        "inexact": "; ".join(s.inexact),
        "unmodelled": "; ".join(s.unmodelled),
        "missing": "; ".join(run.missing),
    }


def published_table(path: Path = RUNS_PATH) -> pd.DataFrame:
    """One row per published run (``compare``), in file order."""
    return pd.DataFrame([compare(r) for r in load_published_runs(path).run])


def _summary_row(group: str, rows: pd.DataFrame) -> dict[str, Any]:
    magnitude = rows["error"].abs()
    worst = magnitude.idxmax()
    return {
        "group": group,
        "runs": len(rows),
        "exact_layouts": int(rows["exact"].sum()),
        "mean_abs_error": float(magnitude.mean()),
        "median_abs_error": float(magnitude.median()),
        "worst_error": float(rows.loc[worst, "error"]),
        "worst_id": rows.loc[worst, "id"],
        "too_high": int((rows["error"] > 0).sum()),
        "not_fitting": int((~rows["fits"].astype(bool)).sum()),
    }


def summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per GPU generation (in the table's order) and overall: mean and median |error|, the
    worst run, how many estimates are too high and how many layouts do not fit."""
    groups = [_summary_row(g, rows) for g, rows in table.groupby("generation", sort=False)]
    return pd.DataFrame([*groups, _summary_row("all", table)])
