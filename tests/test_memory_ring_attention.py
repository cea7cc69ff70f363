"""PyTorch context-parallel ring attention backward buffers (explorer.memory.ring_attention),
against hand-worked bytes for torchtitan's Llama 3.1 405B rows (Dec 2024 page, Table 6).

Per GPU: TP 8, 32,768 local tokens (one micro-batch of 262,144 / CP 8, or 65,536 / CP 2),
16 query heads of 128 (width 2,048), K and V repeated to them by torchtitan's repeat_kv:
T x 2,048 = 67,108,864 elements per tensor. The backward holds fp32 grad_query, grad_key,
grad_value (3 x 4 B), the all-gathered K and V (CP x 2 x 2 B), the fp32 K/V gradient sent and
received (2 x 2 x 4 B) and the kernel's bf16 gradients (3 x 2 B): (12 + 4 CP + 16 + 6) x
67,108,864 B = 4,429,185,024 B at CP 8, 2,818,572,288 B at CP 2. One block's MLP tensors, freed
by then: norm input 4,096 x 16,384 x 2 = 134,217,728, input 1,073,741,824, gate and up
872,415,232, silu and product 436,207,616 each: 2,952,790,016 B.
"""

from __future__ import annotations

from dataclasses import replace

from explorer.memory import training_memory
from explorer.memory.ring_attention import ring_backward_bytes, ring_backward_parts
from explorer.memory.training import _setting
from explorer.partition import pipeline_plan
from explorer.published_runs.scenario import scenario
from explorer.published_runs.table import load_published_runs

RUNS = {r.id: r for r in load_published_runs().run}
CP8 = "torchtitan-2412-h100-llama31-405b-4d-fsdp1-cp8-256k"
CP2 = "torchtitan-2412-h100-llama31-405b-4d-fsdp4-cp2-64k"
NAME = "context-parallel ring attention backward (beyond the block's freed MLP tensors)"


def _setting_of(run_id: str, **memory: object):
    s = scenario(RUNS[run_id])
    a = replace(s.assumptions.memory, **memory)
    return s, _setting(s.model, s.cluster.gpu, s.layout, s.workload, a)


def test_the_ring_backward_at_cp_8_by_hand():
    _, st = _setting_of(CP8)
    assert st.shape.tokens == 32_768
    assert ring_backward_bytes(st, 2_048, 2_048) == 4_429_185_024


def test_cp_8_holds_what_exceeds_the_freed_mlp_tensors_in_a_blocks_backward():
    s, st = _setting_of(CP8)
    plan = pipeline_plan(s.model, s.layout)[1]
    assert ring_backward_parts(st, plan) == ((NAME, 4_429_185_024 - 2_952_790_016),)
    memory = training_memory(s.model, s.cluster.gpu, s.layout, s.workload, s.assumptions.memory)
    stage = memory.stages[1]
    assert stage.peak_phase == "block_backward"
    assert dict(stage.temporary_parts)[NAME] == 1_476_395_008


def test_cp_2_and_native_gqa_and_megatron_add_nothing():
    s, st = _setting_of(CP2)
    plan = pipeline_plan(s.model, s.layout)[1]
    assert ring_backward_bytes(st, 2_048, 2_048) == 2_818_572_288  # < 2,952,790,016
    assert ring_backward_parts(st, plan) == ()
    s, st = _setting_of(CP8, sdpa_repeats_kv=False)  # K/V at the 1 KV head of 128
    assert ring_backward_parts(st, plan) == ()
    s, st = _setting_of(CP8, framework="megatron")  # Transformer Engine's ring, not torch's
    assert ring_backward_parts(st, plan) == ()


def test_the_k_v_gradients_a_ring_step_holds_are_the_three_pairs_counted():
    # torch/distributed/tensor/experimental/_attention.py _templated_ring_attention_backward
    # (stored copy at pytorch 0123248a): after step 0 grad_key / grad_value are views of the
    # received fp32 pair, _partial_update makes a new pair on the steps i <= rank, and the next
    # torch.cat is the pair sent: 3 x 2 x 32,768 x 2,048 x 4 = 1,610,612,736 B, what the formula
    # counts as the K/V accumulators plus the gradient sent and received.
    _, st = _setting_of(CP8)
    pair = 2 * 67_108_864 * 4
    gathered = 8 * 2 * 67_108_864 * 2  # CP x (K + V), bf16
    kernel = 3 * 67_108_864 * 2  # the kernel's bf16 dq, dk, dv
    grad_query = 67_108_864 * 4
    total = ring_backward_bytes(st, 2_048, 2_048)
    assert total - gathered - kernel - grad_query == 3 * pair == 1_610_612_736
