"""Measured training memory (``validation/results.json``) next to the estimator's figures.

Pure: reads the stored JSON and calls ``explorer.memory.training_memory``; no torch. The
measurements come from ``python -m validation.run_all`` (PyTorch's MemTracker and
FSDPMemTracker on fake tensors, one rank, second training step); they count tensor storages
only, so the comparison leaves out what the trackers cannot see: CUDA context and library
workspaces (``runtime``), allocator reserve (``headroom``) and NCCL's own buffers.

Measured tracker categories map onto the estimator's as follows (``CATEGORY_MAP``): FSDP2's
sharded fp32 parameters under bf16-mixed are the master weights (no separate bf16 shard
exists); everything FSDP2 gathers or reduces for one unit (unsharded parameters and
gradients, all-gather and reduce-scatter buffers) is ``temporary``, as the estimator's
"ZeRO-3 gathered parameters"; tensors the AdamW step creates beyond its states are
``temporary``; buffers (RoPE tables) and token ids are ``other``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final

import pandas as pd

from explorer.memory import (
    DEFAULT_TRAINING_ASSUMPTIONS,
    StageMemory,
    TrainingAssumptions,
    training_memory,
)
from explorer.presets import load_gpu
from explorer.specs import Layout, ModelSpec, TrainingWorkload

RESULTS_PATH: Final = Path(__file__).resolve().parent.parent / "validation" / "results.json"
"""The stored measurements (written by ``python -m validation.run_all``)."""
HELDOUT_PATH: Final = RESULTS_PATH.parent / "heldout.json"
"""Measurements chosen after the memory model was frozen, never used to change it (written
by ``python -m validation.run_all --heldout``; validation/README.md, "Held-out set")."""

MODEL_STATES: Final = ("parameters", "gradients", "master_weights", "optimizer_states")
COMPARED: Final = (*MODEL_STATES, "activations", "temporary", "communication", "other")
"""Categories compared; ``other`` holds measured buffers and inputs the estimator leaves out."""

CATEGORY_MAP: Final = MappingProxyType(
    {
        # MemTracker (torch.distributed._tools.mem_tracker._MemRefType)
        "parameter": "parameters",
        "gradient": "gradients",
        "optstate": "optimizer_states",
        "activation": "activations",
        "temp": "temporary",
        "buffer": "other",
        "other": "other",
        # FSDPMemTracker (torch.distributed._tools.fsdp2_mem_tracker._FSDPRefType)
        "sharded_param": "parameters",  # master_weights under bf16-mixed, see _category_of
        "sharded_grad": "gradients",
        "unsharded_param": "temporary",
        "unsharded_grad": "temporary",
        "all_gather": "temporary",
        "reduce_scatter": "temporary",
        "inputs": "other",
    }
)
"""Tracker category (snake case) to the estimator's category."""

PHASES: Final = ("forward", "backward", "optimizer")
"""Phases of the measured step; each has its own peak (forward includes the loss)."""

GPU_ID: Final = "h200"
"""Any GPU works: runtime and headroom are left out, so its memory size only sets ``fits``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Measurement:
    """One stored configuration: the estimator's inputs and what the trackers measured."""

    id: str
    model: ModelSpec
    layout: Layout
    """pp 1 (a plain loop); zero 3 means FSDP2 over the dp ranks."""
    workload: TrainingWorkload
    framework: Mapping[str, str]
    """How PyTorch ran it, in words (optimizer, attention, sharding, checkpointing)."""
    num_params: int
    """Parameters of the whole model."""
    peak_bytes: int
    """Highest tensor bytes on one rank during the measured step."""
    peak_phase: str
    """forward, backward or optimizer."""
    phases: Mapping[str, Mapping[str, int]]
    """Per phase: tracker categories (snake case) at that phase's peak, and ``total``."""
    states: Mapping[str, Mapping[str, int]]
    """Tracker categories between phases: start, after_forward, after_backward, after_step."""
    torch_version: str

    @property
    def fsdp(self) -> bool:
        return self.layout.zero == 3


def _tuple(value: Any) -> Any:
    """A JSON list as the tuple a frozen spec holds; other values as they are."""
    return tuple(value) if isinstance(value, list) else value


def _tuples(fields: Mapping[str, Any]) -> dict[str, Any]:
    return {name: _tuple(value) for name, value in fields.items()}


def _measurement(record: Mapping[str, Any]) -> Measurement:
    layout = dict(record["layout"], pp=1)
    return Measurement(
        id=record["id"],
        model=ModelSpec(**_tuples(record["model"])),
        layout=Layout(**layout),
        workload=TrainingWorkload(**record["workload"]),
        framework=MappingProxyType(dict(record["framework"])),
        num_params=record["num_params"],
        peak_bytes=record["peak_bytes"],
        peak_phase=record["peak_phase"],
        phases=MappingProxyType(record["phases"]),
        states=MappingProxyType(record["states"]),
        torch_version=record["torch_version"],
    )


@cache
def load_results(path: Path = RESULTS_PATH) -> tuple[Measurement, ...]:
    """Every stored measurement, in file order (cached; the file is data under version control)."""
    document = json.loads(Path(path).read_text())
    return tuple(_measurement(r) for r in document["configs"])


def measurement(config_id: str, path: Path = RESULTS_PATH) -> Measurement:
    """The stored measurement named ``config_id``."""
    for m in load_results(path):
        if m.id == config_id:
            return m
    raise ValueError(f"no stored measurement {config_id!r}")


def _category_of(m: Measurement, tracker_category: str) -> str:
    mixed = m.workload.precision == "bf16-mixed"
    if m.fsdp and mixed and tracker_category == "sharded_param":
        return "master_weights"  # FSDP2 keeps fp32 shards and no bf16 shard
    return CATEGORY_MAP.get(tracker_category, "other")


def mapped(m: Measurement, snapshot: Mapping[str, int]) -> dict[str, float]:
    """A tracker snapshot in the estimator's categories, bytes."""
    out = dict.fromkeys(COMPARED, 0.0)
    for name, value in snapshot.items():
        if name != "total":
            out[_category_of(m, name)] += value
    return out


def measured_model_states(m: Measurement) -> dict[str, float]:
    """Model states when all gradients exist (after backward, before the step), bytes."""
    steady = mapped(m, m.states["after_backward"])
    return {name: steady[name] for name in MODEL_STATES}


def measured_at_peak(m: Measurement) -> dict[str, float]:
    """Categories at the moment of the peak; AdamW's step temporaries moved to ``temporary``."""
    at_peak = mapped(m, m.phases[m.peak_phase])
    states = mapped(m, m.states["after_backward"])["optimizer_states"]
    extra = at_peak["optimizer_states"] - states
    if extra > 0:
        at_peak["optimizer_states"] = states
        at_peak["temporary"] += extra
    return at_peak


def comparison_assumptions(m: Measurement) -> TrainingAssumptions:
    """Estimator assumptions that follow what was measured.

    Plain PyTorch (``framework="pytorch"``: FSDP2, DTensor TP/SP with loss_parallel, eager
    SwiGLU, foreach AdamW, gradients set to None); balanced routing (the measured MoE splits
    tokens evenly: imbalance 1); no DDP gradient bucket (FSDP2 or a single rank); no NCCL
    buffers, CUDA context, workspaces or reserve (invisible to the trackers).
    """
    return replace(
        DEFAULT_TRAINING_ASSUMPTIONS,
        framework="pytorch",
        moe_imbalance=1.0,
        grad_bucket_bytes=0.0,
        nccl_buffer_bytes=0.0,
        cuda_context_bytes=0.0,
        library_workspace_bytes=0.0,
        headroom_fraction=0.0,
    )


def _peak_stage(m: Measurement) -> StageMemory:
    memory = training_memory(
        m.model, load_gpu(GPU_ID), m.layout, m.workload, comparison_assumptions(m)
    )
    return memory.stages[memory.peak_stage]


def estimated(m: Measurement) -> dict[str, float]:
    """The estimator's bytes per GPU for the measured configuration, by compared category."""
    breakdown = _peak_stage(m).breakdown.as_dict()
    return {name: float(breakdown.get(name, 0.0)) for name in COMPARED}


def estimated_model_states(m: Measurement) -> float:
    """The estimator's model states after the backward (every gradient), bytes.

    Its optimizer-step phase before the step's temporaries: the peak phase may hold no gradient.
    """
    return _peak_stage(m).phase("optimizer_step").breakdown.model_states_bytes


def relative_error(estimate: float, measured: float) -> float:
    """(estimate - measured) / measured; 0 when both are 0, inf when only the measure is 0."""
    if measured == 0:
        return 0.0 if estimate == 0 else float("inf")
    return (estimate - measured) / measured


@dataclass(frozen=True, slots=True, kw_only=True)
class Comparison:
    """Estimated against measured bytes per GPU for one configuration."""

    id: str
    estimated: Mapping[str, float]
    """The estimator's categories (runtime and headroom left out)."""
    measured: Mapping[str, float]
    """Measured categories at the measured peak."""
    estimated_model_states_bytes: float
    measured_model_states_bytes: float
    """Parameters, gradients, master weights and Adam states after the backward."""
    estimated_peak_bytes: float
    """Sum of the estimator's compared categories."""
    measured_peak_bytes: float
    peak_phase: str

    @property
    def model_states_error(self) -> float:
        return relative_error(self.estimated_model_states_bytes, self.measured_model_states_bytes)

    @property
    def peak_error(self) -> float:
        return relative_error(self.estimated_peak_bytes, self.measured_peak_bytes)

    def category_errors(self) -> dict[str, float]:
        """Relative error per category (see ``relative_error``)."""
        return {c: relative_error(self.estimated[c], self.measured[c]) for c in COMPARED}


def compare(m: Measurement) -> Comparison:
    """The estimator against one measurement, category by category."""
    est, at_peak = estimated(m), measured_at_peak(m)
    return Comparison(
        id=m.id,
        estimated=MappingProxyType(est),
        measured=MappingProxyType(at_peak),
        estimated_model_states_bytes=estimated_model_states(m),
        measured_model_states_bytes=sum(measured_model_states(m).values()),
        estimated_peak_bytes=sum(est.values()),
        measured_peak_bytes=float(m.peak_bytes),
        peak_phase=m.peak_phase,
    )


def _row(m: Measurement) -> dict[str, Any]:
    c = compare(m)
    row: dict[str, Any] = {
        "id": m.id,
        "model": m.model.name,
        "dp": m.layout.dp,
        "tp": m.layout.tp,
        "zero": m.layout.zero,
        "recompute": m.layout.recompute,
        "precision": m.workload.precision,
        "seq_len": m.workload.seq_len,
        "micro_batch_size": m.layout.micro_batch_size,
        "peak_phase": c.peak_phase,
        **{f"measured_{phase}_peak_bytes": float(m.phases[phase]["total"]) for phase in PHASES},
        "measured_peak_bytes": c.measured_peak_bytes,
        "estimated_peak_bytes": c.estimated_peak_bytes,
        "peak_error": c.peak_error,
        "measured_model_states_bytes": c.measured_model_states_bytes,
        "estimated_model_states_bytes": c.estimated_model_states_bytes,
        "model_states_error": c.model_states_error,
    }
    for name in COMPARED:
        row[f"measured_{name}_bytes"] = c.measured[name]
        row[f"estimated_{name}_bytes"] = c.estimated[name]
    return row


def comparison_table(path: Path = RESULTS_PATH) -> pd.DataFrame:
    """One row per stored configuration: settings, peaks, model states, errors, categories."""
    return pd.DataFrame([_row(m) for m in load_results(path)])
