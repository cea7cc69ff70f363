"""EP all-to-alls inside an NVLink 5 domain held to the published Hybrid-EP bandwidth
(explorer.comm.ep_kernels: deepseek-ai/DeepEP docs/README_Hybrid-EP.md at 41cad94)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from explorer.comm.ep_kernels import published_dispatch_floor_s, published_row
from explorer.comm.fabrics import load_fabric
from explorer.comm.topology import GroupPlacement
from explorer.estimate import estimate
from explorer.published_runs.scenario import scenario
from explorer.published_runs.table import load_published_runs

RUNS = {r.id: r for r in load_published_runs().run}
GB200_QWEN3 = "mbridge-25.09-gb200-qwen3-235b-tokendrop-fp8cs"


def _group(size: int, fabric: str = "nvlink5", domains: int = 1) -> GroupPlacement:
    return GroupPlacement(
        group="ep", size=size, ranks_per_domain=size // domains, num_domains=domains,
        fast_bytes_per_s=900e9, fabric_bytes_per_s=50e9, fast_latency_s=1e-6,
        fabric_latency_s=5e-6, scale_up_fabric=load_fabric(fabric),
    )  # fmt: skip


def test_the_published_row_is_the_nearest_rank_count_inside_one_nvlink5_domain():
    assert published_row(_group(64)) == (215.36, 469.96, 418.27)  # above 36: the EP36 row
    assert published_row(_group(32)) == (236.33, 485.50, 423.19)
    # 20 ranks: |log(24/20)| = 0.182 < |log(16/20)| = 0.223, the EP24 row
    assert published_row(_group(20)) == (281.73, 441.89, 444.40)
    assert published_row(_group(8)) == (409.71, 535.94, 530.86)  # the 8-B200 row
    assert published_row(_group(8, "nvlink4")) is None  # H100: no floor
    assert published_row(_group(32, domains=4)) is None  # across domains: no table


def test_deepseek_v3_dispatch_and_combine_at_ep64_take_the_ep36_figures():
    # 4096 tokens x top-8 x 7168 x 2 bytes = 469,762,048 B each way in BF16:
    # 469762048 / 469.96e9 = 0.999579 ms, / 418.27e9 = 1.123107 ms, mean 1.061343 ms
    size = 4096 * 8 * 7168 * 2
    assert size == 469_762_048
    one = published_dispatch_floor_s(_group(64), size, size, fp8_dispatch=False)
    assert one == pytest.approx(1.061343e-3, rel=1e-6)
    # an FP8 dispatch (1 byte + an fp32 scale per 128) against the FP8 column, bf16 combine:
    # 242,221,056 B / 215.36e9 = 1.124726 ms and 1.123107 ms, mean 1.123917 ms
    fp8 = 4096 * 8 * 7168 * (1 + 4 / 128)
    both = published_dispatch_floor_s(_group(64), fp8, size, fp8_dispatch=True)
    assert both == pytest.approx(1.123917e-3, rel=1e-6)
    # a cluster measured 2x faster on its fast links halves it
    assert published_dispatch_floor_s(_group(64), size, size, False, 2.0) == pytest.approx(one / 2)


def _ep_calls(run_id: str, floor: bool = True):
    s = scenario(RUNS[run_id])
    comm = replace(s.assumptions.comm, ep_published_floor=floor)
    result = estimate(s.model, s.cluster, s.layout, s.workload, replace(s.assumptions, comm=comm))
    return [c for st in result.stages[:1] for c in st.collectives if c.axis == "ep"]


def test_a_gb200_ep64_all_to_all_dispatcher_runs_at_the_published_hybrid_ep_rate():
    # Qwen3-235B TP2 EP64 on GB200 (token drop, capacity 1.0): 2048 tokens x 8 x 4096 x 2 B
    # = 134,217,728 B per call; (134217728 / 469.96e9 + 134217728 / 418.27e9) / 2
    # = 0.303241 ms, 188 calls (2 x 94 layers) each pass: 57.009 ms
    calls = _ep_calls(GB200_QWEN3)
    forward = next(c for c in calls if c.phase == "forward")
    assert forward.size_bytes == 134_217_728
    assert forward.count == 188
    assert forward.time_s == pytest.approx(57.00928e-3, rel=1e-5)
    # the fast links' NCCL model alone is faster: the floor binds
    plain = next(c for c in _ep_calls(GB200_QWEN3, floor=False) if c.phase == "forward")
    assert plain.time_s < 0.8 * forward.time_s


def test_hopper_ep_all_to_alls_keep_the_fabric_model():
    # H100 (NVLink 4): no published table applies, the floor changes nothing
    run = "mbridge-25.09-h100-qwen3-30b-tokendrop-fp8cs"
    on = [c.time_s for c in _ep_calls(run)]
    off = [c.time_s for c in _ep_calls(run, floor=False)]
    assert on == off
