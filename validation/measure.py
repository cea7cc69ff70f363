"""Measure the per-GPU memory of one training step without allocating it.

The step is forward, loss, backward and an AdamW step, run on fake tensors
(``torch._subclasses.FakeTensorMode``) under PyTorch's memory trackers
(``torch.distributed._tools.mem_tracker.MemTracker``; ``FSDPMemTracker`` for FSDP2) with a
fake process group (backend ``"fake"``), so world sizes 8 to 1024 run in one CPU process.
What one rank allocates is what every rank allocates. The second step is measured (the first
counts one-off work: optimizer state creation, FSDP lazy initialisation). The trackers count
tensor storages only: no CUDA context, library workspaces or caching-allocator reserve.

The parallel set-up follows torchtitan (pytorch/torchtitan, ``torchtitan/models/llama3/
infra/parallelize.py``): tensor parallel plan, then activation checkpointing per block, then
FSDP2 ``fully_shard`` per block and at the root.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from enum import Enum
from functools import partial
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.distributed._tools.fsdp2_mem_tracker import FSDPMemTracker
from torch.distributed._tools.mem_tracker import MemTracker
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.tensor import _sharding_prop
from torch.distributed.tensor.parallel import loss_parallel
from torch.testing._internal.distributed.fake_pg import FakeStore

from explorer.specs import Layout, ModelSpec, TrainingWorkload
from validation.models import Transformer, build_model, num_parameters
from validation.parallelize import apply_ac, apply_fsdp, apply_selective_ac, apply_tp

DEVICE = "cpu"
"""Fake tensors live on the CPU: with the CPU wheel, device="cuda" aborts at the first backward."""

PARAM_DTYPE = {"fp32": torch.float32, "bf16-pure": torch.bfloat16, "bf16-mixed": torch.float32}
"""Stored parameter dtype per precision (bf16-mixed: fp32 shards, bf16 compute via FSDP2)."""


CHECKPOINTING = {
    "none": "none",
    "selective": "selective, the attention core per block (checkpoint_wrapper, non-reentrant)",
    "full": "full, per block (checkpoint_wrapper, non-reentrant)",
}
"""Activation checkpointing per ``Layout.recompute``, in the words stored with a record."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Config:
    """One measured training configuration: the estimator's inputs plus how PyTorch runs it."""

    id: str
    """Stable name, used as the test id."""
    model: ModelSpec
    layout: Layout
    """dp (FSDP2 ranks), tp, zero (3 with FSDP2, else 0), recompute, micro_batch_size."""
    workload: TrainingWorkload
    """seq_len, precision; global_batch_size = micro_batch_size x dp x micro-batches."""
    fsdp: bool = False
    """Shard with FSDP2 ``fully_shard`` over the dp ranks (ZeRO-3)."""
    loss_parallel: bool = True
    """With tp > 1: keep logits vocabulary-sharded into the loss (torchtitan's default)."""

    def __post_init__(self) -> None:
        if self.layout.dp > 1 and not self.fsdp:
            raise ValueError(f"{self.id}: dp > 1 is measured with FSDP2 only")
        if self.workload.precision == "bf16-mixed" and not self.fsdp:
            raise ValueError(f"{self.id}: bf16-mixed is FSDP2's MixedPrecisionPolicy")
        if self.microbatches * self.layout.micro_batch_size * self.layout.dp != (
            self.workload.global_batch_size
        ):
            raise ValueError(f"{self.id}: global batch is not a multiple of dp x micro-batch")

    @property
    def microbatches(self) -> int:
        """Micro-batches accumulated per step on one data-parallel rank."""
        return self.workload.global_batch_size // (self.layout.micro_batch_size * self.layout.dp)

    def framework(self) -> dict[str, str]:
        """How PyTorch runs this configuration, in words stored next to the numbers."""
        tp = self.layout.tp > 1
        return {
            "optimizer": "torch.optim.AdamW(foreach=True)",
            "attention": "F.scaled_dot_product_attention flash (enable_gqa)",
            "norm": "RMSNorm saving input and fp32 rstd (as CUDA's fused kernel)",
            "loss": "cross_entropy on logits upcast to fp32; logits freed before backward",
            "data_parallel": (
                "fsdp2 fully_shard: embedding, each block, [norm, output], root"
                if self.fsdp
                else "none"
            ),
            "reshard_after_forward": (
                "embedding and blocks yes; [norm, output] no (torchtitan default)"
                if self.fsdp
                else ""
            ),
            "mixed_precision": (
                "fsdp2 MixedPrecisionPolicy(param bf16, reduce fp32)"
                if self.workload.precision == "bf16-mixed"
                else "none"
            ),
            "tensor_parallel": (
                "torchtitan plan"
                + (", sequence parallel" if self.layout.sequence_parallel else "")
                + (", loss parallel" if self.loss_parallel else "")
                if tp
                else "none"
            ),
            "activation_checkpointing": CHECKPOINTING[self.layout.recompute],
            "grad_zeroing": "zero_grad(set_to_none=True) at the start of the step",
        }


def _category(key: object) -> str:
    """Tracker category name in snake case ("Sharded Param" -> "sharded_param")."""
    name = key.value if isinstance(key, Enum) else str(key)
    return name.lower().replace(" ", "_")


def snapshot(tracker: MemTracker, kind: str) -> dict[str, int]:
    """The tracker's current or peak bytes by category, summed over devices."""
    out: dict[str, int] = {}
    for per_device in tracker.get_tracker_snapshot(kind).values():
        for key, value in per_device.items():
            out[_category(key)] = out.get(_category(key), 0) + int(value)
    return dict(sorted(out.items()))


def _reset_peak(tracker: MemTracker) -> None:
    # The trackers keep one running peak; restarting it at the current level gives per-phase
    # peaks. (Private attributes of MemTracker, torch 2.13.)
    current = tracker.get_tracker_snapshot("current")
    tracker._peak_mem_snap = current
    tracker._peak_mem = {dev: snap["Total"] for dev, snap in current.items()}


class PhaseRecorder:
    """Peak bytes (with categories at that moment) per phase, and the state between phases.

    With several micro-batches a phase's peak is the highest over them, and a state is the
    last micro-batch's (``between_microbatches`` marks the later forwards' starts).
    """

    def __init__(self, tracker: MemTracker, record: bool = True) -> None:
        self.tracker = tracker
        self.record = record
        self.phase: str | None = None
        self.peaks: dict[str, dict[str, int]] = {}
        self.states: dict[str, dict[str, int]] = {}

    def next_microbatch(self) -> None:
        """The trackers refuse a second root forward unless their module stats are reset."""
        self.tracker.reset_mod_stats()

    def enter(self, phase: str | None, state: str) -> None:
        """Close the running phase, record the state named ``state``, start ``phase``."""
        if not self.record:
            return
        if self.phase is not None:
            peak = snapshot(self.tracker, "peak")
            if peak["total"] > self.peaks.get(self.phase, {}).get("total", -1):
                self.peaks[self.phase] = peak  # the highest over micro-batches
        self.states[state] = snapshot(self.tracker, "current")
        _reset_peak(self.tracker)
        self.phase = phase


def train_step(
    model: Transformer,
    optimizer: torch.optim.Optimizer,
    tokens: torch.Tensor,
    phases: PhaseRecorder,
    microbatches: int,
    vocab_parallel: bool,
) -> None:
    """One step as torchtitan's ``train_step``: zero grads, forward, loss and backward per
    micro-batch (gradients accumulate), then the optimizer step."""
    optimizer.zero_grad(set_to_none=True)
    for index in range(microbatches):
        if index:
            phases.next_microbatch()
        phases.enter("forward", "start" if index == 0 else "between_microbatches")
        with loss_parallel() if vocab_parallel else contextlib.nullcontext():
            logits = model(tokens)
            loss = F.cross_entropy(logits.flatten(0, 1).float(), tokens.flatten(0, 1))
            loss = loss / microbatches
            del logits  # torchtitan frees the logits before backward
            phases.enter("backward", "after_forward")
            loss.backward()
    phases.enter("optimizer", "after_backward")
    optimizer.step()
    phases.enter(None, "after_step")


@contextlib.contextmanager
def fake_process_group(world_size: int) -> Iterator[None]:
    """A fake process group of ``world_size`` ranks; this process is rank 0."""
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=world_size)
    try:
        yield
    finally:
        dist.destroy_process_group()


def _meshes(layout: Layout) -> tuple[DeviceMesh | None, DeviceMesh | None]:
    """The (dp, tp) sub-meshes; None where the axis is off."""
    mesh = init_device_mesh(DEVICE, (layout.dp, layout.tp), mesh_dim_names=("dp", "tp"))
    return mesh["dp"], (mesh["tp"] if layout.tp > 1 else None)


def _parallelize(model: Transformer, config: Config) -> None:
    layout = config.layout
    dp_mesh, tp_mesh = _meshes(layout)
    if tp_mesh is not None:
        apply_tp(model, tp_mesh, layout.sequence_parallel, config.loss_parallel)
    if layout.recompute == "full":
        apply_ac(model)
    elif layout.recompute == "selective":
        apply_selective_ac(model)
    if config.fsdp and dp_mesh is not None:
        apply_fsdp(model, dp_mesh, mixed=config.workload.precision == "bf16-mixed")


def _tracker(config: Config, model: Transformer, optimizer: Any, tokens: Any) -> MemTracker:
    if config.fsdp:
        fsdp_tracker = FSDPMemTracker(model, optimizer)
        fsdp_tracker.track_inputs((tokens,))
        return fsdp_tracker
    tracker = MemTracker()
    tracker.track_external(model, optimizer, tokens)
    return tracker


@contextlib.contextmanager
def _own_propagation_mode() -> Iterator[None]:
    """Make DTensor's sharding propagation run under its own FakeTensorMode, as in eager runs.

    Under an outer FakeTensorMode, ``ShardingPropagator`` reuses that mode
    (``detect_fake_mode()``), so the trackers count its global-shape outputs as memory; in an
    eager GPU run it makes a fresh mode, which the trackers skip (see the comment in
    ``MemTracker.__torch_dispatch__``). Patches ``torch.distributed.tensor._sharding_prop``.
    """
    original = _sharding_prop.detect_fake_mode
    _sharding_prop.detect_fake_mode = lambda *args: None
    try:
        yield
    finally:
        _sharding_prop.detect_fake_mode = original


def _run(config: Config) -> tuple[PhaseRecorder, int]:
    """Build, parallelise, materialise on fake tensors, run two steps; phases of the second."""
    dtype = PARAM_DTYPE[config.workload.precision]
    model = build_model(config.model, config.workload.seq_len, dtype)
    _parallelize(model, config)
    with FakeTensorMode(allow_non_fake_inputs=True):
        model.to_empty(device=DEVICE)
        model.reset_rope()
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)
        shape = (config.layout.micro_batch_size, config.workload.seq_len)
        tokens = torch.randint(0, config.model.vocab_size, shape, device=DEVICE)
        tracker = _tracker(config, model, optimizer, tokens)
        step = partial(train_step, model, optimizer, tokens, microbatches=config.microbatches)
        vocab_parallel = config.layout.tp > 1 and config.loss_parallel
        phases = PhaseRecorder(tracker)
        with _own_propagation_mode(), tracker:
            step(PhaseRecorder(tracker, record=False), vocab_parallel=vocab_parallel)
            tracker.reset_mod_stats()
            step(phases, vocab_parallel=vocab_parallel)
    return phases, num_parameters(model)


def measure(config: Config) -> dict[str, Any]:
    """Measure one configuration; a JSON-ready record (see ``validation/results.json``)."""
    with fake_process_group(config.layout.dp * config.layout.tp):
        phases, params = _run(config)
    peak_phase = max(phases.peaks, key=lambda name: phases.peaks[name]["total"])
    return {
        "id": config.id,
        "model": json.loads(json.dumps(asdict(config.model))),  # tuples as the JSON's lists
        "layout": _layout_record(config.layout),
        "workload": asdict(config.workload),
        "framework": config.framework(),
        "num_params": params,
        "peak_bytes": phases.peaks[peak_phase]["total"],
        "peak_phase": peak_phase,
        "phases": phases.peaks,
        "states": phases.states,
        "torch_version": torch.__version__,
    }


def _layout_record(layout: Layout) -> dict[str, Any]:
    fields = ("dp", "tp", "zero", "sequence_parallel", "micro_batch_size", "recompute")
    return {name: getattr(layout, name) for name in fields}
