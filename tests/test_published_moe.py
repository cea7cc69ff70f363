"""Published MoE runs: the overlap and SM reservation their sources state reach the core."""

from __future__ import annotations

import pytest

from explorer.published_runs.scenario import scenario
from explorer.published_runs.table import load_published_runs

RUNS = {r.id: r for r in load_published_runs().run}


def test_megatron_batch_level_a2a_overlap_hides_the_all_to_alls_as_dualpipe_does() -> None:
    # Megatron-Bridge recipe: moe_a2a_overlap (--overlap-moe-expert-parallel-comm)
    overlapped = scenario(RUNS["mbridge-25.11-h100-qwen3-235b-fp8cs"])
    assert overlapped.assumptions.comm.ep_overlap == 1.0
    assert "MoE all-to-all overlap" not in overlapped.unmodelled
    plain = scenario(RUNS["mbridge-25.11-b200-qwen3-235b-mxfp8"])  # no overlap in its recipe
    assert plain.assumptions.comm.ep_overlap == 0.0


def test_dualpipe_with_deepep_holds_twenty_of_the_h800s_132_sms() -> None:
    # DeepSeek-V3 report sec. 3.2.2: 20 SMs for communication
    s = scenario(RUNS["deepseek-v3-report-2048-h800"])
    assert s.assumptions.compute.comm_sm_share == pytest.approx(20 / 132)
    assert scenario(RUNS["mbridge-25.09-h100-deepseek-v3"]).assumptions.compute.comm_sm_share == 0
