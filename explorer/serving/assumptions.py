"""What the serving model assumes (efficiencies, overlap, engine memory) and what it leaves out."""

from __future__ import annotations

from dataclasses import dataclass, field

from explorer.comm.collectives import LinkEfficiency
from explorer.memory.serving import MemoryAssumptions

LEAVES_OUT = (
    "scheduler overheads (the queueing of an engine under load is in explorer.serving."
    "scheduler), speculative decoding (and the MTP module), prefix caching, overlap of "
    "communication with compute (two-batch overlap), MLA's absorbed decode kernels, GEMM "
    "efficiency by tokens per step, kernel launch gaps, CPU sampling and detokenisation"
)
"""What the serving model leaves out, shown with every result."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ServingAssumptions:
    """Adjustable efficiency assumptions of the serving model, with their sources."""

    memory: MemoryAssumptions = field(default_factory=MemoryAssumptions)
    """Engine memory assumptions (headroom, paged blocks, prefill chunk, runtime, buffers)."""
    prefill_compute_efficiency: float = 0.6
    """Fraction of dense peak FLOP/s prefill reaches. Source: large bf16 GEMMs on H100 reach
    about 70% of the dense peak (cuBLAS); attention and non-GEMM kernels take some of it."""
    decode_compute_efficiency: float = 0.4
    """Fraction of peak FLOP/s small-batch decode GEMMs reach (skinny matrices, split-K)."""
    hbm_efficiency: float = 0.8
    """Fraction of HBM bandwidth decode kernels sustain. Source: memory-bound GEMV and paged
    attention kernels on H100 measure 75-85% of the data-sheet bandwidth."""
    links: LinkEfficiency = field(default_factory=LinkEfficiency)
    """Achievable share of NVLink and fabric bandwidth for collectives (explorer.comm)."""
    comm_overlap: float = 0.0
    """Fraction of collective time hidden under compute; 0 because TP all-reduces and EP
    all-to-alls sit between dependent GEMMs (overlap needs two-micro-batch tricks)."""
    expert_load_cv: float = 1.68
    """Coefficient of variation of routed tokens between experts when they stay where they
    were loaded. Source: TensorRT-LLM examples/ep_load_balancer/README.md, DeepSeek-R1 on EP32
    (8 experts a rank, 1024 token copies a rank): the hottest rank gets 1.564 x more than
    the mean; 1.564 = sqrt(2 ln 32) sqrt(cv^2 / 8 + 1 / 1024) gives cv = 1.68."""
    balanced_load_cv: float = 0.084
    """The same spread left after EPLB places redundant experts by load. Source: the same
    README, EP36 with 288 slots (8 a rank): the hottest rank 0.115 x over the mean, so
    0.115 = sqrt(2 ln 36) sqrt(cv^2 / 8 + 1 / 1024) gives cv = 0.084."""
    redundant_experts: int = 0
    """Redundant expert copies per MoE block that EPLB may place (0: only as many as an EP
    degree needs to divide the experts evenly). Source: DeepSeek-V3 report sec. 3.4 and
    SGLang's blog use 32 (256 + 32 = 288 slots: EP 32, 72, 144)."""
    allow_tp_across_nodes: bool = False
    """Accept TP groups larger than the scale-up domain (with a warning) instead of rejecting."""

    def __post_init__(self) -> None:
        for name in (
            "prefill_compute_efficiency",
            "decode_compute_efficiency",
            "hbm_efficiency",
        ):
            if not 0 < getattr(self, name) <= 1:
                raise ValueError(f"{name} must be in (0, 1], got {getattr(self, name)}")
        for name in ("expert_load_cv", "balanced_load_cv"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be at least 0, got {getattr(self, name)}")
        if self.redundant_experts < 0:
            raise ValueError(f"redundant_experts must be at least 0, got {self.redundant_experts}")
        if not 0 <= self.comm_overlap <= 1:
            raise ValueError(f"comm_overlap must be in [0, 1], got {self.comm_overlap}")


def gemm_efficiency(a: ServingAssumptions, tokens_per_step: float, prefill: bool) -> float:
    """Fraction of peak FLOP/s a serving step's GEMMs reach with ``tokens_per_step`` rows per
    attention group: the prefill or decode assumption today. The one place a kernel model
    (GEMM efficiency by shape, explorer.compute) replaces, so every step formula reads it."""
    del tokens_per_step  # the named assumptions do not depend on it yet
    return a.prefill_compute_efficiency if prefill else a.decode_compute_efficiency
