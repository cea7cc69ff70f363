"""What the serving model assumes (efficiencies, overlap, engine memory) and what it leaves out."""

from __future__ import annotations

from dataclasses import dataclass, field

from explorer.comm.collectives import LinkEfficiency
from explorer.memory.serving import MemoryAssumptions

LEAVES_OUT = (
    "queueing and scheduler overheads, speculative decoding (and the MTP module), prefix "
    "caching, overlap of prefill with decode inside a step, expert load imbalance, MLA's "
    "absorbed decode kernels, kernel launch gaps, CPU sampling and detokenisation"
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
        if not 0 <= self.comm_overlap <= 1:
            raise ValueError(f"comm_overlap must be in [0, 1], got {self.comm_overlap}")
