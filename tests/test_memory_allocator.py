"""PyTorch's caching-allocator reserve (explorer.memory.allocator) against hand-worked bytes.

Rounding from c10/cuda/CUDACachingAllocator.cpp (512 B blocks; 2 MiB segments up to 1 MiB,
20 MiB up to 10 MiB, above that the request rounded to 2 MiB); FSDP2's side-stream pools and
torchtitan's freed bf16 logits on the published torchtitan runs (Llama 3.1 8B: a block is
218,112,000 parameters, the root unit 2 x 128,256 x 4,096 + 4,096 = 1,050,681,344).
"""

from __future__ import annotations

import pytest

from explorer.estimate import estimate
from explorer.memory.allocator import pool_bytes, segment_bytes
from explorer.published_runs import published_table
from explorer.published_runs.compare import allocator_comparable_bytes
from explorer.published_runs.scenario import scenario
from explorer.published_runs.table import load_published_runs
from explorer.units import GiB, MiB

RUNS = {r.id: r for r in load_published_runs().run}
GATHER = "FSDP2 all-gather stream pool (two units' outputs)"
SCATTER = "FSDP2 reduce-scatter stream pool (sharded gradients)"
FREED = "default stream: freed blocks later requests do not fit"
TWO_MIB = 2 * MiB


def _up(nbytes: int) -> int:
    """A large request's segment: rounded up to 2 MiB."""
    return -(-nbytes // TWO_MIB) * TWO_MIB


def _memory(run_id: str):
    s = scenario(RUNS[run_id])
    return estimate(s.model, s.cluster, s.layout, s.workload, s.assumptions).memory


@pytest.mark.parametrize(
    ("request_bytes", "segment"),
    [
        (1, 2 * MiB),  # small pool
        (1 * MiB, 2 * MiB),  # kSmallSize still small
        (1 * MiB + 1, 20 * MiB),  # kLargeBuffer
        (10 * MiB - 512, 20 * MiB),
        (10 * MiB, 10 * MiB),  # kMinLargeAlloc: its own size
        (10 * MiB + 1, 12 * MiB),  # 512-rounded, then to 2 MiB
    ],
)
def test_a_request_opens_the_segment_the_caching_allocator_sizes(request_bytes, segment):
    assert segment_bytes(request_bytes) == segment


def test_equal_mid_and_small_requests_share_segments():
    # 6.5 MiB blocks: three to a 20 MiB segment, so five need two; 0.5 MiB: four to 2 MiB
    assert pool_bytes([6.5 * MiB] * 5) == 40 * MiB
    assert pool_bytes([0.5 * MiB] * 5) == 4 * MiB
    assert pool_bytes([100 * MiB + 1] * 3) == 3 * 102 * MiB


def test_torchtitan_8b_fsdp8_reserves_the_side_stream_pools_and_the_freed_logits():
    memory = _memory("torchtitan-2412-h100-llama31-8b-fsdp8")
    stage = memory.stages[0]
    parts = dict(stage.allocator_parts)
    # all-gather outputs in bf16: the root unit with one block
    assert parts[GATHER] == _up(1_050_681_344 * 2) + _up(218_112_000 * 2)
    # fp32 sharded gradients over 8 ranks: 32 blocks and the root, one segment each
    assert parts[SCATTER] == 32 * _up(218_112_000 * 4 // 8) + _up(1_050_681_344 * 4 // 8)
    # the bf16 logits of 2 x 8,192 tokens over 128,256 words: exactly 2,004 x 2 MiB
    assert parts[FREED] == 2 * 8192 * 128_256 * 2
    assert stage.breakdown.headroom == pytest.approx(sum(parts.values()), rel=1e-12)


def test_a_compiled_loss_frees_no_logits_and_fsdp64_shards_gradients_further():
    memory = _memory("torchtitan-2506-h200-llama31-8b-fsdp64-float8")
    parts = dict(memory.stages[0].allocator_parts)
    assert FREED not in parts
    assert parts[SCATTER] == 32 * _up(218_112_000 * 4 // 64) + _up(1_050_681_344 * 4 // 64)
    # the reserve (3.0 GiB) is below the 5% of 140.4 GiB assumed: the headroom stays
    assert memory.stages[0].breakdown.headroom == pytest.approx(0.05 * memory.gpu_bytes)


def test_a_pipeline_stage_of_blocks_reserves_two_blocks_and_their_gradients():
    # Llama 3.1 405B over TP 8: a block is 398,491,648 parameters per GPU; stage 1 holds 16
    stage = _memory("torchtitan-2412-h100-llama31-405b-3d-1f1b").stages[1]
    parts = dict(stage.allocator_parts)
    assert parts == {
        GATHER: 2 * _up(398_491_648 * 2),
        SCATTER: 16 * _up(398_491_648 * 4 // 8),
    }


@pytest.mark.parametrize(
    "run_id",
    ["mbridge-25.11-h100-llama3-8b-fp8cs", "llmfoundry-h100-mpt-13b-2048-8gpu"],  # FSDP1
)
def test_megatron_and_fsdp1_runs_get_no_allocator_term(run_id):
    memory = _memory(run_id)
    assert all(st.allocator_parts == () for st in memory.stages)
    assert memory.stages[0].breakdown.headroom == pytest.approx(0.05 * memory.gpu_bytes)


EXPLAINED = (
    "torchtitan-2412-h100-llama31-8b-fsdp8",
    "torchtitan-2412-h100-llama31-8b-fsdp8-compile-float8",
    "torchtitan-2412-h100-llama31-8b-fsdp128",
    "torchtitan-2412-h100-llama31-8b-fsdp8-32k-full-ac",
    "torchtitan-2412-h100-llama31-405b-3d-interleaved",
    "torchtitan-2506-h200-llama31-8b-fsdp32-float8",
    "torchtitan-2506-h200-llama31-8b-fsdp64-float8",
)


def test_published_reserved_peaks_within_ten_percent_where_the_mechanisms_explain_them():
    table = published_table().set_index("id")
    errors = table.loc[list(EXPLAINED), "memory_error"]
    assert (errors.abs() <= 0.10).all(), errors.to_dict()
    # the two the notes name as unexplained stay short of their measurement
    for run_id in (
        "torchtitan-2412-h100-llama31-70b-fsdp32-tp8",
        "torchtitan-2412-h100-llama31-405b-3d-1f1b",
    ):
        assert table.loc[run_id, "memory_error"] < -0.10


def test_the_405b_1f1b_mesh_at_micro_batch_1_of_32k_tokens_is_within_ten_percent_of_table_6():
    # torchtitan benchmarks/llama3_h100_202412_torchtitan.md Table 6, row "FSDP 8, CP 1": the
    # Table 5 mesh and 1F1B, local batch 8 of 32,768-token sequences (8 micro-batches of 1),
    # 75.3 GiB. Its micro-batches hold as many tokens as Table 5's (4 x 8,192), so every sized
    # tensor is the same and so is the estimate; Table 5's 1F1B row measured 82.5 GiB.
    table5 = RUNS["torchtitan-2412-h100-llama31-405b-3d-1f1b"]
    table6 = table5.model_copy(update={"seq_len": 32_768, "micro_batch": 1, "global_batch": 64})
    estimated = []
    for run in (table5, table6):
        s = scenario(run)
        result = estimate(s.model, s.cluster, s.layout, s.workload, s.assumptions)
        estimated.append(allocator_comparable_bytes(run, result))
    assert estimated[1] == pytest.approx(estimated[0], rel=1e-12)
    assert abs(estimated[1] / GiB - 75.3) / 75.3 < 0.10
    assert (estimated[0] / GiB - 82.5) / 82.5 < -0.10


def test_the_70b_2d_layout_is_within_ten_percent_of_the_pages_async_tp_row():
    # torchtitan benchmarks/llama3_h100_202412_torchtitan.md Table 4: "2D + AsyncTP", the same
    # layout, 67.6 GiB; vanilla TP's 71.9 GiB stays unexplained (see the row's notes)
    vanilla = RUNS["torchtitan-2412-h100-llama31-70b-fsdp32-tp8"]
    s = scenario(vanilla)
    result = estimate(s.model, s.cluster, s.layout, s.workload, s.assumptions)
    estimated = allocator_comparable_bytes(vanilla, result) / GiB
    assert abs(estimated - 67.6) / 67.6 < 0.10
    assert (estimated - 71.9) / 71.9 < -0.10
