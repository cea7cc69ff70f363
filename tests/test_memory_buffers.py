"""Recipe buffers against hand-worked figures: DeepEP's NVLink and NVSHMEM buffers, per-layer
CUDA graphs' static edge tensors, and MoE token drop at a capacity factor."""

from __future__ import annotations

import dataclasses

import pytest
from hand_models import H100_LIKE
from hand_models import LLAMA_LIKE_8B as LLAMA
from test_activations import SMALL_MOE

from explorer.memory import training_memory
from explorer.memory.activations import ActivationShape, moe_tensors
from explorer.memory.assumptions import DEFAULT_TRAINING_ASSUMPTIONS as MEGATRON
from explorer.memory.buffers import cuda_graph_bytes, deepep_nvl_bytes, deepep_rdma_bytes
from explorer.specs import Layout, TrainingWorkload

EXACT = 1e-12
MiB = 2**20
# One received token's slot in DeepEP: hidden x 2 bytes, 8 bytes of source metadata and 128
# top-k slots of an int64 index, an fp32 weight and an fp32 scale (csrc/legacy/config.hpp)
SLOT_7168 = 7168 * 2 + 8 + 128 * (8 + 4 + 4)


def test_deepep_nvlink_buffer_within_one_node() -> None:
    # EP 8, 20 SMs: 10 channels x 8 peers x ((2 x 1 + 3) ints + 256 tokens x slot)
    expected = 10 * 8 * (5 * 4 + 256 * SLOT_7168)
    assert deepep_nvl_bytes(7168, 8, 20) == pytest.approx(-(-expected // 128) * 128)
    assert deepep_rdma_bytes(7168, 8, 20) == 0.0


def test_deepep_buffers_for_deepseek_v3_over_eight_nodes() -> None:
    # EP 64: NVLink 10 x 8 x ((2 x 8 + 3) ints + 288 tokens x slot) = 360.2 MiB; RDMA
    # 10 channels x 8 nodes x (36 ints x 4 + 128 tokens x 2 halves x (slot + 16)) = 320.5 MiB,
    # which NVSHMEM's 512 MiB granularity takes whole
    nvl = 10 * 8 * (19 * 4 + 288 * SLOT_7168)
    assert deepep_nvl_bytes(7168, 64, 20) == pytest.approx(-(-nvl // 128) * 128)
    assert 10 * 8 * (144 + 128 * 2 * (SLOT_7168 + 16)) / MiB == pytest.approx(320.48, abs=0.01)
    assert deepep_rdma_bytes(7168, 64, 20) == 512 * MiB


def test_deepep_buffers_replace_the_nccl_all_to_all_buffers() -> None:
    layout = Layout(dp=16, ep=16)
    workload = TrainingWorkload(seq_len=4096, global_batch_size=16)
    deepep = dataclasses.replace(MEGATRON, moe_dispatcher="deepep")
    nccl, ours = (
        dict(
            training_memory(SMALL_MOE, H100_LIKE, layout, workload, a).stages[0].communication_parts
        )
        for a in (MEGATRON, deepep)
    )
    assert nccl["EP all-to-all"] == 15 * 2 * 4 * MiB  # 15 peers x 2 channels x 4 MiB
    assert "EP all-to-all" not in ours
    assert ours["DeepEP NVLink buffer"] == deepep_nvl_bytes(1024, 16, 20)
    assert ours["DeepEP RDMA buffer (NVSHMEM)"] == 512 * MiB


def test_cuda_graph_edges_per_captured_module_layer_and_microbatch() -> None:
    # attention and router graphs on 3 MoE layers and 1 dense one, 2 micro-batches alive:
    # dense 4 edges (attn), MoE 4 + 2 (attn, router), each a boundary tensor
    size = cuda_graph_bytes(("attn", "moe_router"), 1, 3, 1000.0, 2)
    assert size == (1 * 4 + 3 * 6) * 1000.0 * 2


def test_cuda_graphs_keep_edges_for_each_microbatch_in_flight() -> None:
    # PP 4 under 1F1B: the first stage holds 4 micro-batches; 8 blocks of 4096 x 4096 bf16
    layout = Layout(pp=4, dp=2)
    workload = TrainingWorkload(seq_len=4096, global_batch_size=16)
    a = dataclasses.replace(MEGATRON, cuda_graph_modules=("attn", "mlp"))
    stage = training_memory(LLAMA, H100_LIKE, layout, workload, a).stages[0]
    parts = dict(stage.phase("backward_start").temporary_parts)
    assert stage.microbatches_in_flight == 4
    expected = 8 * (4 + 4) * 4096 * 4096 * 2 * 4
    assert parts["CUDA graph static buffers"] == pytest.approx(expected, rel=EXACT)


def test_unknown_cuda_graph_scope_names_the_field() -> None:
    with pytest.raises(ValueError, match="cuda_graph_modules"):
        dataclasses.replace(MEGATRON, cuda_graph_modules=("attention",))


def test_token_drop_at_capacity_sizes_the_dispatched_tokens_by_the_factor() -> None:
    # 4096 tokens, top-2 of 8 experts: the busiest GPU's experts take capacity x 8192 copies
    # of a 1024-wide token (bf16) against the dropless 1.25 margin
    shape = ActivationShape(seq_len=4096, micro_batch_size=1)
    for capacity, load in ((1.0, 1.0), (1.5, 1.5), (None, 1.25)):
        a = dataclasses.replace(MEGATRON, moe_capacity_factor=capacity)
        tensors = {t.name: t.bytes for t in moe_tensors(SMALL_MOE, shape, a)}
        assert tensors["dispatched tokens"] == pytest.approx(load * 8192 * 1024 * 2, rel=EXACT)
