"""The estimate resolves its inputs once: the precision policy is looked up by its name once and
the micro-batch count worked out once per layout, and passed down (issue 19, item 3)."""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest
from hand_models import H100_LIKE as GPU
from hand_models import LLAMA_LIKE_8B as MODEL

import explorer.memory.training
import explorer.precision
from explorer.estimate import estimate
from explorer.specs import ClusterSpec, Layout, TrainingWorkload

CLUSTER = ClusterSpec(gpu=GPU, gpus_per_node=8, num_nodes=16)
MOE = replace(MODEL, n_routed_experts=32, num_experts_per_tok=4, moe_intermediate_size=1408)
CASES = [
    (
        MODEL,
        Layout(tp=4, pp=4, dp=8, zero=1),
        TrainingWorkload(seq_len=4096, global_batch_size=256),
    ),
    # activation and optimizer offload: the host-copy times read the policy too
    (
        MODEL,
        Layout(
            tp=2,
            pp=4,
            dp=16,
            zero=1,
            offload_layers=2,
            optimizer_offload_fraction=0.5,
            activation_offload=("core_attn",),
        ),
        TrainingWorkload(
            seq_len=4096, global_batch_size=256, precision="fp8-mixed", grad_dtype="bf16"
        ),
    ),
    (
        MOE,
        Layout(tp=2, pp=2, dp=32, ep=8, zero=1),
        TrainingWorkload(seq_len=4096, global_batch_size=512),
    ),
]


def _counted(
    monkeypatch: pytest.MonkeyPatch, name: str, original: Callable[..., Any]
) -> Counter[str]:
    """Replace ``original`` under ``name`` in every loaded explorer module that imported it."""
    calls: Counter[str] = Counter()

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls[name] += 1
        return original(*args, **kwargs)

    for module in list(sys.modules.values()):
        if (module.__name__ or "").startswith("explorer") and getattr(
            module, name, None
        ) is original:
            monkeypatch.setattr(module, name, counting)
    return calls


@pytest.mark.parametrize(("model", "layout", "workload"), CASES)
def test_one_estimate_looks_the_policy_up_once(monkeypatch, model, layout, workload) -> None:
    policy = _counted(monkeypatch, "precision_policy", explorer.precision.precision_policy)
    count = _counted(monkeypatch, "microbatch_count", explorer.memory.training.microbatch_count)
    est = estimate(model, CLUSTER, layout, workload)
    assert policy["precision_policy"] == 1
    assert count["microbatch_count"] == 1
    # 256 sequences over dp x micro-batch (the first case: 8 x 1) is 32 micro-batches
    if layout.dp == 8:
        assert est.microbatches == 32


def test_offload_case_pays_host_copies() -> None:
    """The offload case above exercises the host copies it is there for (a nonzero activation
    copy or an optimizer step above the on-GPU one would be absent without offload)."""
    model, layout, workload = CASES[1]
    with_offload = estimate(model, CLUSTER, layout, workload)
    without = estimate(model, CLUSTER, replace(layout, optimizer_offload_fraction=0.0), workload)
    assert with_offload.stages[0].optimizer_s > without.stages[0].optimizer_s
