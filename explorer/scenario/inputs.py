"""The scenario's value: what a person entered, in groups, with its conversions to specs.

Fields carry pydantic constraints (``Annotated``) so that a link or an uploaded report is
validated where it enters (``explorer.scenario.codec``); the widgets keep the same bounds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Annotated, Literal

from pydantic import Field

from explorer.limits import (
    MAX_ASSUMPTION,
    MAX_BYTES_PER_S,
    MAX_GPUS,
    MAX_LAYERS,
    MAX_SEQUENCES,
    MAX_TOKENS,
    MAX_URL_CONFIG_CHARS,
    limit,
)
from explorer.mesh import SearchSpace
from explorer.specs import (
    RECOMPUTES,
    SCHEDULES,
    KvDType,
    Layout,
    MeshAxis,
    OffloadModule,
    Precision,
    Recompute,
    RecomputeMethod,
    RecomputeModule,
    ScheduleName,
    ServingWorkload,
    TrainingWorkload,
    WeightDType,
    ZeroStage,
)
from explorer.units import GiB

WorkloadKind = Literal["training", "serving"]
ModelSource = Literal["preset", "generic", "upload"]

# Bounds from explorer.limits, the same as the specs' and the command line's.
Degree = Annotated[int, Field(ge=1, le=MAX_GPUS)]
PerNode = Annotated[int, Field(ge=0, le=limit("gpus_per_node"))]
Nodes = Annotated[int, Field(ge=0, le=limit("num_nodes"))]
"""GPUs per node and nodes may be zero in the input: the app then says the cluster is empty."""
Tokens = Annotated[int, Field(ge=1, le=MAX_TOKENS)]
LayerCount = Annotated[int, Field(ge=1, le=MAX_LAYERS)]
Sequences = Annotated[int, Field(ge=1, le=MAX_SEQUENCES)]
Bandwidth = Annotated[float, Field(gt=0, le=MAX_BYTES_PER_S / 1e9, allow_inf_nan=False)] | None
ConfigText = Annotated[str, Field(max_length=MAX_URL_CONFIG_CHARS)]
Finite = Annotated[float, Field(ge=-MAX_ASSUMPTION, le=MAX_ASSUMPTION, allow_inf_nan=False)]
AssumptionValue = bool | Finite | Annotated[str, Field(max_length=64)] | None
Overrides = tuple[tuple[Annotated[str, Field(max_length=64)], AssumptionValue], ...]
MeasuredStep = Annotated[float, Field(gt=0, le=limit("pass_s"), allow_inf_nan=False)] | None
MeasuredPeak = (
    Annotated[float, Field(gt=0, le=limit("memory_bytes") / GiB, allow_inf_nan=False)] | None
)
CalibrationNotes = Annotated[
    tuple[tuple[Annotated[str, Field(max_length=64)], Annotated[str, Field(max_length=400)]], ...],
    Field(max_length=16),
]


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelRef:
    """Which model: a preset id, a generic dense size, or an uploaded config.json."""

    source: ModelSource = "preset"
    """preset: ``preset`` names it; generic: ``generic_params_b``; upload: ``config_json``."""
    preset: str = "llama-3.1-70b"
    """Preset id (presets/models/<id>.json)."""
    generic_params_b: Annotated[float, Field(ge=0.1, le=5000)] = 70.0
    """Target size of the generic Llama-shaped dense model, billions of parameters."""
    config_json: ConfigText = ""
    """The uploaded config.json as compact JSON text ("" when none was uploaded)."""
    config_name: Annotated[str, Field(max_length=120)] = "uploaded model"
    """Display name of the uploaded model (its file name)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TrainingInputs:
    """What one training step processes."""

    precision: Precision = "bf16-mixed"
    seq_len: Tokens = 8192
    """Tokens per sequence."""
    global_batch_size: Sequences = 512
    """Sequences per optimizer step."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterInputs:
    """The cluster's shape and links; None bandwidths mean the presets' figures."""

    gpu: str = "h100-sxm"
    """GPU preset id."""
    gpus_per_node: PerNode = 8
    num_nodes: Nodes = 8
    intra_node_GBps: Bandwidth = None
    """Fast-link bandwidth per GPU, one direction, GB/s (1e9 B/s); None is the GPU's figure."""
    inter_node_GBps: Bandwidth = None
    """Fabric bandwidth per GPU, one direction, GB/s; None is ClusterSpec's default."""
    oversubscription: Annotated[float, Field(ge=1, le=limit("oversubscription"))] = 1.0
    """Fabric oversubscription; 1 is non-blocking."""

    @property
    def num_gpus(self) -> int:
        return self.gpus_per_node * self.num_nodes


@dataclass(frozen=True, slots=True, kw_only=True)
class LayoutInputs:
    """The current layout as entered; field names are those of ``specs.Layout``."""

    dp: Degree = 2
    tp: Degree = 8
    pp: Degree = 4
    cp: Degree = 1
    ep: Degree = 1
    zero: ZeroStage = 1
    recompute: Recompute = "selective"
    schedule: ScheduleName = "1f1b"
    virtual_stages: Annotated[int, Field(ge=1, le=limit("virtual_stages"))] = 1
    sequence_parallel: bool = True
    micro_batch_size: Sequences = 1
    # Memory recipes (specs.Layout documents each; defaults change nothing).
    recompute_modules: Annotated[tuple[RecomputeModule, ...], Field(min_length=1)] = ("core_attn",)
    recompute_ops: bool = False
    recompute_method: RecomputeMethod = "uniform"
    recompute_num_layers: LayerCount | None = None
    recompute_every: Annotated[int, Field(ge=1, le=MAX_LAYERS)] = 1
    first_stage_layers: Annotated[int, Field(ge=0, le=MAX_LAYERS)] | None = None
    last_stage_layers: Annotated[int, Field(ge=0, le=MAX_LAYERS)] | None = None
    pipeline_layout: Annotated[str, Field(min_length=1, max_length=4000)] | None = None
    activation_offload: tuple[OffloadModule, ...] = ()
    offload_layers: Annotated[int, Field(ge=0, le=MAX_LAYERS)] = 0
    optimizer_offload_fraction: Annotated[float, Field(ge=0, le=1)] = 0.0
    reshard_after_forward: bool = True
    dp_shard: Degree | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchInputs:
    """What the mesh search may choose; field names are those of ``mesh.SearchSpace``."""

    schedules: Annotated[tuple[ScheduleName, ...], Field(min_length=1)] = SCHEDULES
    """Pipeline schedules it tries when PP > 1 (leave out what your framework lacks)."""
    zero_stages: Annotated[tuple[ZeroStage, ...], Field(min_length=1)] = (0, 1, 2, 3)
    recomputes: Annotated[tuple[Recompute, ...], Field(min_length=1)] = RECOMPUTES
    micro_batch_sizes: Annotated[
        tuple[Annotated[int, Field(ge=1, le=1024)], ...], Field(min_length=1, max_length=8)
    ] = (1, 2, 4)
    max_virtual: Annotated[int, Field(ge=1, le=limit("max_virtual"))] = 4
    """Most virtual stages per rank for interleaved 1F1B."""
    tp_across_domain: bool = False
    """Let TP groups leave the scale-up domain."""
    ranked: Annotated[int, Field(ge=1, le=limit("ranked"))] = 20
    """Layouts the Meshes page ranks (the search stops once they are certain)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ServingInputs:
    """A serving load; field names are those of ``specs.ServingWorkload``."""

    prompt_len: Tokens = 2048
    output_len: Tokens = 512
    concurrency: Sequences = 32
    weights_dtype: WeightDType = "bf16"
    kv_dtype: KvDType = "bf16"


MixedGroup = tuple[Annotated[str, Field(min_length=1, max_length=64)], PerNode, Nodes]
"""One group of a mixed cluster: GPU preset id, GPUs per node, nodes."""


@dataclass(frozen=True, slots=True, kw_only=True)
class MixedInputs:
    """A cluster mixing GPU types (explorer.hetero); no groups means the cluster above alone."""

    groups: Annotated[tuple[MixedGroup, ...], Field(max_length=8)] = ()
    """(GPU preset id, GPUs per node, nodes) per group, in order."""
    split: Literal["even", "speed"] = "even"
    """Data-parallel batch split over the types: even, or in proportion to speed."""
    mode: Literal["dp", "pp"] = "dp"
    """dp: data parallel across the types; pp: pipeline ranks on the types in the groups'
    order, layers balanced by speed."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StragglerInputs:
    """One slow replica, pipeline rank or link (explorer.straggler); 0% means none."""

    slowdown_pct: Annotated[float, Field(ge=0, le=1000, allow_inf_nan=False)] = 0.0
    """Extra time of the slow part, percent (10 = 10% slower)."""
    where: Literal["dp", "pp-stage", "link"] = "dp"
    stage: Annotated[int, Field(ge=0, le=MAX_LAYERS)] = 0
    """Pipeline rank of the slow GPUs or link, 0-based."""
    axis: MeshAxis = "dp"
    """Mesh axis whose collectives cross the slow link."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Scenario:
    """Everything the app's inputs hold. Hashable, so it keys caches."""

    workload: WorkloadKind = "training"
    model: ModelRef = field(default_factory=ModelRef)
    training: TrainingInputs = field(default_factory=TrainingInputs)
    cluster: ClusterInputs = field(default_factory=ClusterInputs)
    layout: LayoutInputs = field(default_factory=LayoutInputs)
    serving: ServingInputs = field(default_factory=ServingInputs)
    search: SearchInputs = field(default_factory=SearchInputs)
    assumptions: Overrides = ()
    """Overrides of the core's named assumptions, (name, value) sorted by name."""
    calibration: CalibrationNotes = ()
    """Overrides set from a probe file (explorer.probe.derive): (name, the measurement it came
    from), sorted by name; their values are in ``assumptions``."""
    reserve_gib: Annotated[float, Field(ge=0, le=1024)] = 4.0
    """Free memory per GPU (GiB = 2^30 bytes) a person wants left at the peak; less is shown
    amber. A display threshold: the estimate itself keeps the allocator headroom apart."""
    measured_step_s: MeasuredStep = None
    """Seconds per step a person measured for the current layout (None: not entered); compared
    with the estimate (explorer.estimate.measured), which it never changes by itself."""
    measured_peak_gib: MeasuredPeak = None
    """Peak memory per GPU a person measured, GiB = 2^30 bytes (None: not entered)."""
    mixed: MixedInputs = field(default_factory=MixedInputs)
    """A mixed cluster (the cluster editor); empty: none."""
    straggler: StragglerInputs = field(default_factory=StragglerInputs)
    """A straggler; 0%: none."""

    def __post_init__(self) -> None:
        # One order for equal overrides, so equal scenarios compare, hash and cache as equal.
        object.__setattr__(self, "assumptions", tuple(sorted(dict(self.assumptions).items())))
        object.__setattr__(self, "calibration", tuple(sorted(dict(self.calibration).items())))

    def layout_spec(self) -> Layout:
        """The layout as a spec; ValueError (one sentence) when its fields contradict."""
        return Layout(**asdict(self.layout))

    def training_spec(self) -> TrainingWorkload:
        return TrainingWorkload(
            seq_len=self.training.seq_len,
            global_batch_size=self.training.global_batch_size,
            precision=self.training.precision,
        )

    def serving_spec(self) -> ServingWorkload:
        return ServingWorkload(**asdict(self.serving))

    def search_space(self) -> SearchSpace:
        """The search space; ValueError (one sentence) when a choice is left empty."""
        choices = asdict(self.search)
        del choices["ranked"]
        return SearchSpace(**choices)

    def assumption_overrides(self) -> dict[str, AssumptionValue]:
        return dict(self.assumptions)


def world_size_error(layout: LayoutInputs, cluster: ClusterInputs) -> str | None:
    """A sentence when DP × TP × PP × CP is not the cluster's GPU count, else None."""
    world = layout.dp * layout.tp * layout.pp * layout.cp
    gpus = cluster.num_gpus
    if world == gpus or gpus == 0:
        return None
    model_parallel = layout.tp * layout.pp * layout.cp
    hint = (
        f"set DP to {gpus // model_parallel}"
        if gpus % model_parallel == 0
        else f"TP × PP × CP = {model_parallel} does not divide {gpus}; change TP, PP or CP"
    )
    return (
        f"DP × TP × PP × CP = {layout.dp} × {layout.tp} × {layout.pp} × {layout.cp} = {world} "
        f"GPUs, but the cluster has {gpus} ({cluster.gpus_per_node} per node × "
        f"{cluster.num_nodes} nodes): {hint}."
    )


def fitted_dp(layout: LayoutInputs, cluster: ClusterInputs) -> int | None:
    """The DP that fills the cluster with this TP × PP × CP, or None when none does."""
    model_parallel = layout.tp * layout.pp * layout.cp
    gpus = cluster.num_gpus
    if gpus == 0 or gpus % model_parallel:
        return None
    return gpus // model_parallel


# ---------------------------------------------------------------------------------------------
# Examples one click away.

DEEPSEEK_V3 = Scenario(
    model=ModelRef(preset="deepseek-v3"),
    # DeepSeek-V3 report (arXiv:2412.19437) sec. 3.1-3.2 and 4.2: 2048 H800 in nodes of 8,
    # PP 16 with DualPipe, EP 64 across 8 nodes, ZeRO-1 DP, no TP, FP8 mixed precision,
    # sequences of 4K tokens, a batch of 15360 sequences at the end of the ramp-up.
    training=TrainingInputs(precision="fp8-mixed", seq_len=4096, global_batch_size=15360),
    cluster=ClusterInputs(gpu="h800", gpus_per_node=8, num_nodes=256),
    # The report's own memory recipe instead of full recompute: RMSNorm and MLA up-projection
    # recomputed (sec. 3.2.3), FP8 activation cache and MoE SwiGLU recompute (sec. 3.3.3),
    # DeepEP-style deduplicated FP8 dispatch on 20 of the 132 SMs (sec. 3.2.2, 3.3.4), and
    # experts at even load as its auxiliary-loss-free balancing aims for (sec. 2.1.2; the
    # default reserve is 1.25); its grouped GEMMs one launch for all local experts (DeepGEMM)
    # and DeepEP's tokens grouped by expert on arrival (no dispatcher sort).
    layout=LayoutInputs(dp=128, tp=1, pp=16, ep=64, zero=1, recompute="none", schedule="dualpipe"),
    assumptions=(
        ("comm.ep_domain_dedup", True),
        ("comm.fp8_dispatch", True),
        ("compute.comm_sm_share", 20 / 132),
        ("compute.ep_chunk_sort", False),
        ("compute.grouped_gemm_call_s", 0.0),
        ("memory.fp8_activation_cache", True),
        ("memory.moe_imbalance", 1.0),
        ("memory.moe_swiglu_recompute", True),
        ("memory.recompute_norms_and_mla_up_projection", True),
    ),
)
EXAMPLES: Mapping[str, Scenario] = {
    "Llama 3.1 70B · 64 H100": Scenario(),
    "DeepSeek-V3 671B MoE · 2048 H800": DEEPSEEK_V3,
}
"""One-click scenarios shown in the sidebar, by label."""
