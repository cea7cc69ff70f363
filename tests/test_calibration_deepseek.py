"""The published DeepSeek-V3 run as a bound on the step-time model.

DeepSeek-V3 report (arXiv:2412.19437) Table 1: pre-training took 2,664K H800 GPU-hours for
14.8T tokens, i.e. 14.8e12 / (2.664e6 x 3600) = 1,543 tokens/s per GPU averaged over the whole
run (sec. 3.2: 2,048 H800s, PP16 DualPipe, EP64 over 8 nodes, ZeRO-1, no TP; sec. 4.2:
sequence 4096, batch 15,360 sequences at the end). The report gives no MFU, and the average
includes whatever the run lost to restarts, so it is a floor for an estimate of a steady step,
not a point to fit to.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from explorer.estimate import DEFAULT_ESTIMATE_ASSUMPTIONS, estimate
from explorer.presets import load_gpu, load_model
from explorer.specs import ClusterSpec, Layout, TrainingWorkload

PUBLISHED_TOKENS_PER_S_PER_GPU = 14.8e12 / (2.664e6 * 3600)  # 1,543
CEILING = 2.0  # a steady-step estimate above twice the run's average would be implausible

MODEL = load_model("deepseek-v3")
CLUSTER = ClusterSpec(gpu=load_gpu("h800"), gpus_per_node=8, num_nodes=256)
LAYOUT = Layout(dp=128, tp=1, pp=16, ep=64, zero=1, schedule="dualpipe")
WORKLOAD = TrainingWorkload(seq_len=4096, global_batch_size=15360, precision="fp8-mixed")


def deepseek_comm(dedup: bool, fp8: bool, sms: float = 0.0):
    comm = replace(DEFAULT_ESTIMATE_ASSUMPTIONS.comm, ep_domain_dedup=dedup, fp8_dispatch=fp8)
    compute = replace(DEFAULT_ESTIMATE_ASSUMPTIONS.compute, comm_sm_share=sms)
    return replace(DEFAULT_ESTIMATE_ASSUMPTIONS, comm=comm, compute=compute)


@pytest.mark.parametrize(
    ("dedup", "fp8", "sms"),
    [
        pytest.param(True, True, 0.0, id="deepseek-v3-report-sec3.2.2-deepep-and-fp8-dispatch"),
        pytest.param(True, True, 20 / 132, id="deepseek-v3-report-sec3.2.2-with-20-comm-sms"),
        pytest.param(False, True, 0.0, id="deepseek-v3-report-fp8-dispatch-plain-all-to-all"),
    ],
)
def test_estimate_of_the_published_layout_is_between_the_run_average_and_twice_it(dedup, fp8, sms):
    result = estimate(MODEL, CLUSTER, LAYOUT, WORKLOAD, deepseek_comm(dedup, fp8, sms))
    ratio = result.tokens_per_s_per_gpu / PUBLISHED_TOKENS_PER_S_PER_GPU
    assert 0.9 <= ratio <= CEILING, f"estimate / published = {ratio:.2f}"


def test_deepep_dispatch_hides_the_all_to_all_behind_dualpipe():
    plain = estimate(MODEL, CLUSTER, LAYOUT, WORKLOAD, deepseek_comm(False, False))
    deepep = estimate(MODEL, CLUSTER, LAYOUT, WORKLOAD, deepseek_comm(True, True))
    assert deepep.exposed_comm_s["all-to-all"] < 0.1 * plain.exposed_comm_s["all-to-all"]
    assert deepep.step_time_s < plain.step_time_s


def test_sms_held_by_the_all_to_alls_slow_the_published_layout_by_at_most_132_over_112():
    free = estimate(MODEL, CLUSTER, LAYOUT, WORKLOAD, deepseek_comm(True, True))
    held = estimate(MODEL, CLUSTER, LAYOUT, WORKLOAD, deepseek_comm(True, True, 20 / 132))
    assert free.step_time_s < held.step_time_s <= free.step_time_s * 132 / 112
