"""Communication and capture buffers a recipe adds: DeepEP's NVLink and RDMA (NVSHMEM)
buffers for the MoE dispatch, and CUDA graphs' static input and output buffers.

DeepEP (normal kernels, training) allocates one NVLink buffer (cudaMalloc, shared over IPC)
and, for EP groups beyond one node, one RDMA buffer in NVSHMEM's symmetric heap, sized by its
recommended configs; both live on the GPU outside PyTorch's allocator and replace the NCCL
all-to-all's buffers. CUDA graphs own static tensors at every graph's edges.
"""

from __future__ import annotations

import math
from types import MappingProxyType

from explorer.units import MiB

DEEPEP_NVL_PEERS = 8
"""GPUs one DeepEP NVLink domain holds (csrc/kernels/legacy/compiled.cuh NUM_MAX_NVL_PEERS)."""

DEEPEP_TOPK_SLOTS = 128
"""Top-k index, weight and scale slots kept per token (config.hpp kNumMaxTopK, kNumMaxScales)."""

DEEPEP_META_BYTES = 8
"""Per-token source metadata (internode.cu SourceMeta: two ints)."""

NVSHMEM_GRANULARITY_BYTES = 512 * MiB
"""DeepEP sets NVSHMEM_CUMEM_GRANULARITY to 2^29 (deep_ep/buffers/legacy.py), so the symmetric
heap grows in 512 MiB pieces."""

# (NVLink receive tokens, RDMA send tokens, RDMA receive tokens) per chunk, by EP size: the
# dispatch and combine configs of deep_ep/buffers/legacy.py get_dispatch_config /
# get_combine_config (the larger of each pair sizes the buffer)
_DEEPEP_CONFIGS = MappingProxyType(
    {
        2: ((256, 6, 128), (256, 6, 128)),
        4: ((256, 6, 128), (256, 6, 128)),
        8: ((256, 6, 128), (256, 6, 128)),
        16: ((288, 20, 128), (288, 12, 128)),
        24: ((288, 8, 128), (288, 8, 128)),
        32: ((288, 8, 128), (288, 8, 128)),
        48: ((288, 8, 128), (288, 8, 128)),
        64: ((288, 8, 128), (288, 8, 128)),
        96: ((480, 12, 128), (480, 8, 128)),
        128: ((560, 12, 128), (560, 8, 128)),
        144: ((720, 12, 128), (720, 8, 128)),
        160: ((720, 12, 128), (720, 8, 128)),
    }
)


def _configs(ep: int) -> tuple[tuple[int, int, int], ...]:
    """DeepEP's configs for ``ep`` ranks; an EP size it has none for takes the next larger
    (an assumption: DeepEP asserts on it), beyond 160 the 160-rank ones."""
    sizes = sorted(_DEEPEP_CONFIGS)
    key = next((n for n in sizes if n >= ep), sizes[-1])
    return _DEEPEP_CONFIGS[key]


def _token_slot_bytes(hidden_bytes: float) -> float:
    """One received token's slot: hidden, metadata, top-k indices (int64), weights and scales."""
    topk = DEEPEP_TOPK_SLOTS * (8 + 4 + 4)
    return hidden_bytes + DEEPEP_META_BYTES + topk


def _round_up(value: float, multiple: float) -> float:
    return math.ceil(value / multiple) * multiple


def deepep_nvl_bytes(hidden_size: int, ep: int, num_sms: int) -> float:
    """DeepEP's NVLink buffer on one GPU, bytes (normal kernels).

    Source: DeepEP csrc/legacy/config.hpp Config::get_nvl_buffer_size_hint; the hidden bytes
    are h x max(element size, 2) (docs/legacy.md get_hidden_bytes); channels = SMs / 2.
    """
    channels, nvl = num_sms // 2, min(ep, DEEPEP_NVL_PEERS)
    rdma = max(ep // DEEPEP_NVL_PEERS, 1)
    slot = _token_slot_bytes(2 * hidden_size)
    recv = max(c[0] for c in _configs(ep))
    size = channels * nvl * ((2 * rdma + 3) * 4 + recv * slot)
    return _round_up(size, 128)


def deepep_rdma_bytes(hidden_size: int, ep: int, num_sms: int) -> float:
    """DeepEP's RDMA buffer on one GPU (NVSHMEM symmetric heap), bytes: none within a node.

    Source: DeepEP csrc/legacy/config.hpp Config::get_rdma_buffer_size_hint (receive tokens
    rounded up to the send chunk; send and receive halves, one int4 more per token), rounded
    up to NVSHMEM's 512 MiB granularity (``NVSHMEM_GRANULARITY_BYTES``).
    """
    if ep <= DEEPEP_NVL_PEERS:
        return 0.0
    channels, rdma = num_sms // 2, ep // DEEPEP_NVL_PEERS
    recv = max(_round_up(c[2], c[1]) for c in _configs(ep))
    slot = _token_slot_bytes(2 * hidden_size) + 16
    size = channels * rdma * ((DEEPEP_NVL_PEERS * 2 + 2) * 2 * 4 + recv * 2 * slot)
    return _round_up(_round_up(size, 128), NVSHMEM_GRANULARITY_BYTES)


CUDA_GRAPH_MODULES = ("attn", "mlp", "moe", "moe_router", "moe_preprocess")
"""Per-layer capture scopes (Megatron-Core --cuda-graph-modules, Megatron-Bridge
cuda_graph_scope with the transformer_engine implementation)."""

GRAPH_EDGE_TENSORS = MappingProxyType(
    {"attn": 4, "mlp": 4, "moe": 4, "moe_router": 2, "moe_preprocess": 0}
)
"""Hidden-sized static tensors one captured module keeps per layer and micro-batch: the forward
graph's input and output and the backward graph's output gradient and input gradient (4); the
router's input and its gradient (its outputs, tokens x experts, are left out); the
preprocessing's edges are routing metadata (none hidden-sized). Source:
torch.cuda.make_graphed_callables (static inputs and outputs per graph, forward and backward);
Transformer Engine PR 1234 ("each cudagraph has its own input and output data buffer",
reuse_graph_inputs / reuse_graph_outputs off by default)."""


def cuda_graph_bytes(
    modules: tuple[str, ...],
    dense_layers: int,
    moe_layers: int,
    boundary_bytes: float,
    captured_microbatches: float,
) -> float:
    """Static buffers of per-layer CUDA graphs on one GPU, bytes: hidden-sized edge tensors
    (``GRAPH_EDGE_TENSORS``) per captured module, layer and micro-batch.

    ``captured_microbatches``: the sets alive at once (one graph serves every micro-batch
    without pipelining; Megatron-Core CudaGraphManager makes one runner per outstanding
    micro-batch under it).
    """
    per_layer_dense = sum(GRAPH_EDGE_TENSORS[m] for m in modules if m in ("attn", "mlp"))
    per_layer_moe = sum(GRAPH_EDGE_TENSORS[m] for m in modules if m != "mlp")
    edges = dense_layers * per_layer_dense + moe_layers * per_layer_moe
    return edges * boundary_bytes * captured_microbatches
