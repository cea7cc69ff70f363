"""PyTorch's context-parallel ring (torch.distributed.tensor.experimental._attention), as
torchtitan runs it: the SDPA calls of each ring step, the ring's own memory passes, the K/V and
K/V-gradient transfers, and which published runs take it. Numbers are hand-worked from the
torch source's branches (quoted in explorer.compute.attention and explorer.comm.context_parallel).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from explorer.comm.context_parallel import kv_width
from explorer.compute.attention import (
    SdpaCall,
    ring_attention_share,
    ring_merge_bytes,
    ring_sdpa_calls,
)
from explorer.estimate import estimate
from explorer.presets import attention_curves, load_model
from explorer.published_runs import load_published_runs, scenario

RUNS = {r.id: r for r in load_published_runs().run}
CP4 = "torchtitan-2412-h100-llama31-8b-fsdp2-cp4-128k"
GiB = 2**30


def test_each_rank_runs_one_causal_call_then_half_blocks_without_a_mask():
    # cp 4 over 65536 tokens: local 16384 (chunks of 8192, r and 7 - r)
    first = ring_sdpa_calls(65536, 4, rank=0)
    assert first == (
        SdpaCall(16384, 16384, True),  # step 0: local q against local k/v, causal
        SdpaCall(8192, 16384, False),  # i > rank: the later q chunk against all of it
        SdpaCall(8192, 16384, False),
        SdpaCall(8192, 16384, False),
    )
    last = ring_sdpa_calls(65536, 4, rank=3)  # i <= rank: all of q, the earlier k/v chunk
    assert last[1:] == (SdpaCall(16384, 8192, False),) * 3
    middle = ring_sdpa_calls(65536, 4, rank=1)
    assert [c.q_len for c in middle[1:]] == [16384, 8192, 8192]
    # every rank computes the same pairs: the causal triangle over cp ranks, 65536^2 / 8
    for rank in range(4):
        pairs = sum(c.score_pairs for c in ring_sdpa_calls(65536, 4, rank))
        assert pairs == 536_870_912
    assert ring_sdpa_calls(8192, 1, 0) == (SdpaCall(8192, 8192, True),)


def test_the_off_diagonal_calls_run_at_the_no_mask_share():
    curve = attention_curves()["fa2-h100"]
    # 131072 over cp 4: the diagonal at 32768 (table held at 16384: causal 0.3386), three
    # off-diagonal calls at 16384 without a mask (0.3740), FLOPs 1/4 and 3/4:
    # 1 / (0.25 / 0.3386 + 0.75 / 0.3740) = 0.364474
    assert ring_attention_share(curve, 131072, 4, backward=False) == pytest.approx(0.364474, 1e-5)
    # backward: causal 0.3254 x 0.3386 / 0.3740 = 0.294599, no mask 0.3254:
    # 1 / (0.25 / 0.294599 + 0.75 / 0.3254) = 0.317111
    assert ring_attention_share(curve, 131072, 4, backward=True) == pytest.approx(0.317111, 1e-5)
    # cp 1 is the causal kernel itself
    assert ring_attention_share(curve, 16384, 1, backward=False) == pytest.approx(0.3386)


def test_the_merges_bytes_by_op():
    # eager, cp 4, 100 output and 200 K/V elements on the last rank:
    # forward 4 x 200 x 4 (contiguous + 3 cats) + 100 x (6 + 3 x 38 + 6) = 3200 + 12600
    # backward 100 x (10 + 10 x 4) + 200 x (24 + 17 x 3 + 8 x 4) = 5000 + 21400
    assert ring_merge_bytes(4, 100, 200, fused=False) == (15800, 26400)
    # fused: 4 x 200 + 10 x 100 x 3; 200 x (16 + 9 x 3) + 10 x 100 x 4
    assert ring_merge_bytes(4, 100, 200, fused=True) == (3800, 12600)
    assert ring_merge_bytes(1, 100, 200, fused=False) == (0.0, 0.0)


def test_torchtitan_repeats_kv_heads_before_the_exchange():
    llama8b, llama405b = load_model("llama-3.1-8b"), load_model("llama-3.1-405b")
    assert kv_width(llama8b, 1) == 2 * 8 * 128
    assert kv_width(llama8b, 1, repeated=True) == 2 * 32 * 128
    # TP 8: one K/V head per GPU, sixteen query heads: sixteen times the bytes
    assert kv_width(llama405b, 8) == 2 * 1 * 128
    assert kv_width(llama405b, 8, repeated=True) == 2 * 16 * 128


def _cp_calls(run_id: str, **comm):
    s = scenario(RUNS[run_id])
    a = replace(s.assumptions, comm=replace(s.assumptions.comm, **comm)) if comm else s.assumptions
    result = estimate(s.model, s.cluster, s.layout, s.workload, a)
    return result, [c for c in result.stages[0].collectives if c.axis == "cp"]


def test_the_ring_transfers_of_the_8b_at_128k():
    s = scenario(RUNS[CP4])
    assert s.assumptions.comm.torch_cp == "compiled" and s.assumptions.comm.cp_kv_repeated
    _, calls = _cp_calls(CP4)
    gather, again, grads = calls
    # local K/V: 32768 tokens x 2 x 32 heads x 128 x 2 bytes = 512 MiB; gathered over 4
    assert gather.kind == "all-gather" and gather.size_bytes == 4 * 512 * 2**20
    assert gather.count == 32 and again.count == 64  # backward + full recomputation's rerun
    # K/V gradients in fp32, one hop per ring step: 1 GiB each, 4 a layer
    assert grads.kind == "point-to-point" and grads.size_bytes == GiB and grads.count == 128
    # compiled: each wait follows its collective, nothing hides
    assert all(c.hidden_s == 0.0 for c in calls)
    # eager: the gathers hide behind the diagonal steps, the gradients behind the next step
    # except the last hop (1 / 4 of their time)
    _, eager = _cp_calls(CP4, torch_cp="eager")
    assert eager[0].exposed_s == 0.0 and eager[1].exposed_s == 0.0
    assert eager[2].exposed_s == pytest.approx(eager[2].time_s / 4)


def test_compiled_ring_exposes_its_transfers_and_fuses_its_merges():
    compiled, calls = _cp_calls(CP4)
    eager, eager_calls = _cp_calls(CP4, torch_cp="eager")
    assert sum(c.exposed_s for c in calls) > sum(c.exposed_s for c in eager_calls)
    # eager merges are op by op: the attention passes are longer than the compiled ones
    assert (
        eager.stages[0].compute.attention_forward_s > compiled.stages[0].compute.attention_forward_s
    )


def test_megatron_rows_keep_their_ring():
    nemo = scenario(RUNS["nemo-24.07-h100-llama3-8b-cp2"])
    assert nemo.assumptions.comm.torch_cp == "none" and not nemo.assumptions.comm.cp_kv_repeated
    _, ring = _cp_calls("nemo-24.07-h100-llama3-8b-cp2")
    # Megatron-Core's p2p ring: K, V of 4096 tokens x 2 x 8 heads x 128 x 2 bytes
    assert {c.size_bytes for c in ring} == {4096 * 2 * 8 * 128 * 2}
