"""Time of the host copies that activation and optimizer offload add to a pipeline part.

Activation offload (Megatron-Core fine-grained activation offloading) copies each offloaded
tensor to host memory in the forward and back before the backward, on a side stream: the part
of a copy longer than ``TrainingAssumptions.offload_overlap`` x the pass's compute is exposed.
Optimizer offload (Megatron-Core --optimizer-cpu-offload, ZeRO-Offload) copies the offloaded
share's gradients to the host and its updated 16-bit weights back each step; the GPU updates
the rest. The CPU's own Adam step is left out (it runs beside those copies).
Source: Megatron-Core docs, Fine-Grained Activation Offloading; Ren et al. 2021, ZeRO-Offload
(arXiv:2101.06840) sec. 4.1 (gradients to the CPU, fp16 parameters back).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from explorer.compute import PassTimes, StageWork
from explorer.memory import TrainingAssumptions
from explorer.memory.recompute import recompute_policy
from explorer.memory.stage_activations import offloaded_bytes
from explorer.memory.tensors import ActivationShape, activation_shape
from explorer.partition import StagePlan
from explorer.specs import ClusterSpec, Layout, ModelSpec, PrecisionPolicy
from explorer.workload import ResolvedWorkload


@dataclass(frozen=True)  # no slots: ``shape`` is cached on the instance
class HostCopies:
    """Host-copy times of one layout's parts."""

    model: ModelSpec
    cluster: ClusterSpec
    layout: Layout
    resolved: ResolvedWorkload
    """The workload resolved for ``layout`` (explorer.workload.resolve_workload)."""
    assumptions: TrainingAssumptions

    @cached_property
    def shape(self) -> ActivationShape:
        """The slice of one micro-batch a GPU works on, as the memory model's (built once for
        every part's activation copies, and only under activation offload)."""
        act = self.resolved.policy.activation_bytes
        return activation_shape(self.layout, self.resolved.seq_len, act)

    @property
    def policy(self) -> PrecisionPolicy:
        """The workload's precision policy (bytes per element)."""
        return self.resolved.policy

    def activation_s(self, layers: tuple[int, ...], passes: PassTimes) -> float:
        """Exposed seconds of one micro-batch's activation copies in one pass (each way)."""
        p = recompute_policy(self.layout)
        if not (p.offload or p.offload_layers) or not layers:
            return 0.0
        plan = StagePlan(
            stage=0,
            layers=layers,
            num_moe_layers=sum(self.model.is_moe_layer(i) for i in layers),
            has_embedding=False,
            has_head=False,
            chunk_blocks=_even_chunks(len(layers), self.layout.virtual_stages),
        )
        moved = offloaded_bytes(self.model, plan, self.shape, self.assumptions, p)
        copy_s = moved / self.cluster.gpu.host_bytes_per_s
        return max(copy_s - self.assumptions.offload_overlap * passes.forward_s, 0.0)

    def optimizer_s(self, work: StageWork, gpu_step_s: float) -> float:
        """The optimizer step with ``optimizer_offload_fraction`` of it on the host, s: the GPU
        part of the update plus the copies of gradients out and 16-bit weights back."""
        share, lay = self.layout.optimizer_offload_fraction, self.layout
        if not share:
            return gpu_step_s
        dense = work.dense_params / lay.tp
        experts = work.expert_params / (lay.ep * lay.etp)
        if lay.zero >= 1:  # the distributed optimizer updates its shard only
            dense /= lay.dp * lay.cp
            experts /= lay.tp * lay.cp * lay.dp / (lay.ep * lay.etp)
        policy = self.policy
        moved = share * (dense + experts) * (policy.grad_bytes + policy.param_bytes)
        return (1 - share) * gpu_step_s + moved / self.cluster.gpu.host_bytes_per_s


def _even_chunks(blocks: int, chunks: int) -> tuple[int, ...]:
    """``blocks`` over ``chunks`` model chunks, sizes differing by at most one."""
    return tuple(blocks // chunks + (i < blocks % chunks) for i in range(chunks))
