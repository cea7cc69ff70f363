"""What every stage of one training-memory estimate shares: inputs, policy, shape, shards, and
the buffers that are the same on every GPU (NCCL, CUDA context and workspaces, reserve)."""

from __future__ import annotations

from dataclasses import dataclass

from explorer.memory.assumptions import TrainingAssumptions
from explorer.memory.breakdown import MemoryBreakdown
from explorer.memory.buffers import DEEPEP_NVL_PEERS, deepep_nvl_bytes, deepep_rdma_bytes
from explorer.memory.frameworks import FrameworkBehaviour
from explorer.memory.recompute import RecomputePolicy, recompute_policy
from explorer.memory.tensors import ActivationShape
from explorer.specs import GpuSpec, Layout, ModelSpec, PrecisionPolicy


@dataclass(frozen=True, slots=True)
class TrainingSetting:
    """Quantities shared by every stage of one estimate."""

    model: ModelSpec
    layout: Layout
    policy: PrecisionPolicy
    assumptions: TrainingAssumptions
    behaviour: FrameworkBehaviour
    """The framework's behaviours with the assumptions' overrides applied."""
    shape: ActivationShape
    dense_shards: int
    """Ranks sharding the dense weights under ZeRO: DP x CP."""
    moe_shards: int
    """Ranks sharding the routed experts: the expert-data-parallel group."""
    microbatches: int
    loss_inflight: float
    fixed: MemoryBreakdown
    """Communication, runtime and headroom, the same on every GPU."""
    communication: tuple[tuple[str, float], ...] = ()
    """NCCL buffers per communicator, the same on every GPU."""

    @property
    def recompute(self) -> RecomputePolicy:
        """The layout's recompute and activation-offload recipe."""
        return recompute_policy(self.layout)

    @property
    def grads_held(self) -> bool:
        """Gradients exist at the first backward: a persistent buffer or accumulation (CR-3)."""
        return self.behaviour.persistent_grad_buffer or self.microbatches > 1


def nccl_parts(
    model: ModelSpec, layout: Layout, a: TrainingAssumptions, moe_shards: int
) -> tuple[tuple[str, float], ...]:
    """NCCL buffers of each communicator a GPU uses, bytes.

    Source: NCCL environment variables: NCCL_BUFFSIZE per channel and peer; a ring collective
    has 2 peers per channel, point-to-point NCCL_NCHANNELS_PER_NET_PEER channels per peer.
    """
    lay, moe = layout, model.is_moe
    ring = a.nccl_buffer_bytes * a.nccl_channels * 2  # buffer x channels x 2 ring neighbours
    p2p = a.nccl_buffer_bytes * a.nccl_p2p_channels_per_peer  # per peer
    deepep = moe and lay.ep > 1 and a.moe_dispatcher == "deepep"
    h, sms = model.hidden_size, a.deepep_num_sms
    nvl = deepep_nvl_bytes(h, lay.ep, sms) if deepep else 0.0
    rdma = deepep_rdma_bytes(h, lay.ep, sms) if deepep else 0.0
    groups = (  # (communicator, used by this layout, bytes)
        ("TP", lay.tp > 1, ring),
        ("CP (ring attention send/recv)", lay.cp > 1, 2 * p2p),
        ("DP x CP", lay.dp * lay.cp > 1, ring),
        ("PP send/recv", lay.pp > 1, min(lay.pp - 1, 2) * p2p),
        ("EP all-to-all", moe and lay.ep > 1 and not deepep, (lay.ep - 1) * p2p),
        ("DeepEP NVLink buffer", deepep, nvl),
        ("DeepEP RDMA buffer (NVSHMEM)", deepep and lay.ep > DEEPEP_NVL_PEERS, rdma),
        ("expert TP", moe and lay.etp > 1, ring),
        ("expert DP", moe and moe_shards > 1, ring),
    )
    return tuple((name, size) for name, used, size in groups if used)


def fixed_overheads(gpu: GpuSpec, a: TrainingAssumptions) -> MemoryBreakdown:
    """Runtime (CUDA context + library workspaces) and headroom (share of the GPU), bytes."""
    return MemoryBreakdown(
        runtime=a.cuda_context_bytes + a.library_workspace_bytes,
        headroom=a.headroom_fraction * gpu.memory_bytes,
    )
