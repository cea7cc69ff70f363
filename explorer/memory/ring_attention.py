"""Buffers of PyTorch's context-parallel ring attention backward (torch.distributed.tensor.
experimental context_parallel), held during one attention sub-layer's backward.

torch/distributed/tensor/experimental/_attention.py _templated_ring_attention_backward, with
the defaults torchtitan runs (_ContextParallelOptions: convert_to_f32 True, rotate_method
ALL_GATHER; torchtitan --experimental.context_parallel_rotate_method allgather):
- grad_query, grad_key, grad_value accumulators, zeros_like(..., dtype=float32), for the
  whole loop;
- the K/V of every CP rank, all-gathered once by _AllGatherRotater (``_aggregated_buffer``)
  and read chunk by chunk: CP x (K + V) in the activation dtype;
- the K/V gradients travelling the ring (``dkv_rotater``, ALL_TO_ALL, fp32): the
  torch.cat sent and the buffer received;
- the flash backward op's own gradient outputs for the current K/V chunk (activation dtype).
K and V are at the width SDPA sees (``sdpa_repeats_kv``: the query heads). Only the attention
sub-layer's backward holds them, after the MLP's backward has freed the block's MLP tensors, so
what exceeds those tensors (one block's, one micro-batch) is counted. FlashAttention's fp32 dq
accumulator is not counted (nor without CP).
"""

from __future__ import annotations

from explorer.memory.activations import block_tensors
from explorer.memory.recompute import _attention_side
from explorer.memory.setting import TrainingSetting
from explorer.memory.tensors import FP32_BYTES
from explorer.partition import StagePlan

Parts = tuple[tuple[str, float], ...]


def ring_backward_bytes(s: TrainingSetting, q_width: float, kv_width: float) -> float:
    """Bytes the ring attention backward holds at once on one GPU, one micro-batch (module
    docstring), for query and K/V widths in elements per token on the GPU."""
    t, act, cp = s.shape.tokens, s.shape.dtype_bytes, s.layout.cp
    accumulators = FP32_BYTES * t * (q_width + 2 * kv_width)
    gathered = cp * 2 * t * kv_width * act
    ring = 2 * (2 * t * kv_width * FP32_BYTES)  # the gradient sent and the one received
    kernel = act * t * (q_width + 2 * kv_width)
    return accumulators + gathered + ring + kernel


def ring_backward_parts(s: TrainingSetting, plan: StagePlan) -> Parts:
    """The ring attention backward's buffers beyond the freed MLP tensors of one block, bytes
    (PyTorch with CP > 1 only; Megatron-Core's Transformer Engine ring is not this one)."""
    if s.layout.cp <= 1 or s.assumptions.framework != "pytorch" or not plan.layers:
        return ()
    m, tp = s.model, s.layout.tp
    if m.is_mla or plan.num_dense_layers == 0:  # MLA / MoE blocks: not modelled
        return ()
    q_width = m.num_attention_heads / tp * m.head_size
    kv_heads = m.num_attention_heads if s.assumptions.sdpa_repeats_kv else m.kv_heads
    kv_width = max(kv_heads / tp, 1.0) * m.head_size
    tensors = block_tensors(m, "dense", s.shape, s.assumptions)
    mlp = sum(t.bytes for t in tensors if not _attention_side(t))
    extra = ring_backward_bytes(s, q_width, kv_width) - mlp
    name = "context-parallel ring attention backward (beyond the block's freed MLP tensors)"
    return ((name, extra),) if extra > 0 else ()
