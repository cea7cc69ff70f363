"""The stored table of published training runs, validated with pydantic.

``validation/published_runs.toml``: [sources.KEY] tables (document, address, version, date) and
one [[run]] per published figure (model, GPUs, exact layout, precision, batches, memory
settings, the figure and what the source leaves out). Validation checks that every run names a
source, a preset model, GPU and cluster, occupies exactly its GPUs (dp x tp x pp x cp) and divides
its batch; unknown keys are rejected.
"""

from __future__ import annotations

import tomllib
from functools import cache
from pathlib import Path
from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from explorer.comm.userbuffers import UbConfigName
from explorer.presets import cluster_entry, cluster_ids, gpu_ids, model_ids
from explorer.specs import GradDType, Recompute, ZeroStage

RUNS_PATH: Final = Path(__file__).resolve().parents[2] / "validation" / "published_runs.toml"
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
ZERO_OF_SHARDING: Final[dict[str, ZeroStage]] = {
    "ddp": 0,
    "distributed-optimizer": 1,
    "fsdp-shard-grad-op": 2,
    "fsdp": 3,
}
"""Sharding as published to the core's ZeRO stage: Megatron's distributed optimizer shards the
optimizer states and fp32 master weights over DP (ZeRO-1 as the core counts it); FSDP that
shards optimizer states and gradients but keeps the weights gathered from the forward to the
backward (PyTorch FSDP ShardingStrategy.SHARD_GRAD_OP) is ZeRO-2 at the peak; Megatron FSDP
and PyTorch FSDP2 shard parameters, gradients and states (ZeRO-3)."""
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
    gpu_bf16_tflops: float | None = Field(default=None, gt=0)
    """The run's dense BF16 peak (TFLOP/s) where its GPU variant or power limit differs from
    the preset; the FP8, TF32 and FP4 peaks scale with it (explorer.published_runs.scenario)."""
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
    sharding: Literal["ddp", "distributed-optimizer", "fsdp-shard-grad-op", "fsdp"]
    precision: PublishedPrecision
    seq_len: int = Field(gt=0)
    micro_batch: int = Field(gt=0)
    global_batch: int = Field(gt=0)
    local_batch: int | None = Field(default=None, gt=0)
    """Sequences one pipeline schedule run takes per DP rank where gradient accumulation
    repeats it (NeMo AutoModel's LBS column; GA = global / (DP x local batch))."""
    grad_dtype: GradDType | None = None
    """Gradient buffer dtype where the recipe sets it (Megatron grad_reduce_in_fp32 False: bf16)."""
    recompute: Recompute = "none"
    recompute_modules: tuple[str, ...] = ()
    recompute_num_layers: int = Field(default=0, ge=0)
    activation_recipe: Literal["standard", "deepseek-v3"] = "standard"
    selective_ac: Literal["op", "layer"] | None = None
    pipeline_layout: str = ""
    """Megatron's explicit --pipeline-model-parallel-layout, where the recipe sets one."""
    offload_layers: int = Field(default=0, ge=0)
    first_stage_layers: int | None = Field(default=None, gt=0)
    last_stage_layers: int | None = Field(default=None, gt=0)
    """Blocks on the first / last pipeline stage where the recipe makes them uneven."""
    bf16_parameters: bool = False
    """True where the run stores its parameters in bf16 with no fp32 master copy (its Adam
    states then in bf16 too): the core's bf16-pure policy."""
    loss_fp32: bool = True
    """False where the cross-entropy runs on the bf16 logits (no fp32 upcast)."""
    loss_fused: bool = False
    """True where the cross-entropy is one fused CUDA kernel over the bf16 logits (LLM Foundry's
    default loss_fn fused_crossentropy: the xentropy extension of flash-attn 1.0.9)."""
    loss_compiled: bool = False
    """True where torch.compile compiles the cross-entropy (torchtitan with training.compile
    from components/loss.py build_cross_entropy_loss; 9dec370 of 2024-12 left it eager)."""
    cuda_graphs: str = ""
    torch_compile: bool = False
    norm_type: str = ""
    """torchtitan's [model] norm_type where the run's train config sets one ("fused_rmsnorm":
    a Triton kernel; empty: the framework's default)."""
    async_tp: bool = False
    tp_comm_overlap: UbConfigName = ""
    """Transformer Engine comm-GEMM overlap (ub_tp_comm_overlap / CommOverlapConfig.
    tp_comm_overlap) with this userbuffers config (explorer.comm.userbuffers.UB_CONFIGS); ""
    where the run did not set it or its source does not say."""
    cp_comm: Literal["p2p", "all-gather", "all-to-all"] = "p2p"
    """The context-parallel exchange as published: p2p ring (Megatron-Core), all-gather of K
    and V (Llama 3, arXiv:2407.21783, sec. 3.3.2) or all-to-all (DeepSpeed-Ulysses)."""
    ep_dispatcher: Literal["alltoall", "deepep", "hybridep"] = "alltoall"
    moe_capacity_factor: float | None = Field(default=None, gt=0)
    """Megatron-Core --moe-expert-capacity-factor where the run drops tokens (Megatron-Bridge's
    "tokendrop" rows: apply_moe_token_drop, 1.0); None: token-dropless."""
    moe_pad_to_capacity: bool = False
    """--moe-pad-expert-input-to-capacity: every expert runs at its capacity, so the grouped
    GEMMs and the all-to-all have fixed sizes and the dispatcher copies nothing to the host."""
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
            raise ValueError(f"{self.id}: ep x etp must divide dp x cp x tp (Megatron-Core)")
        if self.moe_pad_to_capacity and self.moe_capacity_factor is None:
            raise ValueError(f"{self.id}: padding to capacity needs a capacity factor")
        if self.moe_capacity_factor is not None and self.ep_dispatcher != "alltoall":
            raise ValueError(  # Megatron-Bridge apply_moe_token_drop asserts the alltoall one
                f"{self.id}: token drop runs with the alltoall dispatcher only"
            )
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
