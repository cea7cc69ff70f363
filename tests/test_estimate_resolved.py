"""The estimate resolves its inputs once: the precision policy is looked up by its name once and
the micro-batch count worked out once per layout, into one ``ResolvedWorkload``
(explorer.workload) passed down; below the boundary only the memory model's input checks read
the ``TrainingWorkload`` itself (issue 19, item 3)."""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest
from hand_models import H100_LIKE as GPU
from hand_models import LLAMA_LIKE_8B as MODEL

import explorer.memory.tensors
import explorer.memory.training
import explorer.precision
import explorer.workload
from explorer.compute import ComputeAssumptions
from explorer.estimate import EstimateAssumptions, estimate
from explorer.memory import TrainingAssumptions
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
    resolved = _counted(monkeypatch, "resolve_workload", explorer.workload.resolve_workload)
    shape = _counted(monkeypatch, "activation_shape", explorer.memory.tensors.activation_shape)
    est = estimate(model, CLUSTER, layout, workload)
    assert policy["precision_policy"] == 1
    assert count["microbatch_count"] == 1
    assert resolved["resolve_workload"] == 1
    # one micro-batch's slice per GPU: the memory model's, and under activation offload the
    # host copies' once for all parts (before: once per part, 1 + 4 on the offload case's PP 4)
    assert shape["activation_shape"] == (2 if layout.activation_offload else 1)
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


READS: Counter[tuple[str, str]] = Counter()
"""(module under explorer/, function) -> reads of a watched workload's fields."""


class _Watched(TrainingWorkload):
    """A workload that records which function reads each of its fields; equal only to itself,
    so no cache keyed on it answers for an earlier estimate and every reader shows."""

    __slots__ = ()
    __eq__ = object.__eq__
    __hash__ = object.__hash__

    def __getattribute__(self, name: str) -> Any:
        if not name.startswith("__"):
            code = sys._getframe(1).f_code
            module = code.co_filename.replace("\\", "/").split("/explorer/")[-1]
            READS[(module, code.co_name)] += 1
        return object.__getattribute__(self, name)


# the boundary: the spec's own validation, the resolver and the micro-batch count it calls
BOUNDARY = {
    ("specs.py", "__post_init__"),
    ("specs.py", "_positive"),
    ("specs.py", "_bounded"),
    ("specs.py", "_non_negative"),
    ("workload.py", "resolve_workload"),
    ("workload.py", "microbatch_count"),
}
# the memory model's warnings on the input as given (its sequence and global batch)
INPUT_CHECKS = {
    ("memory/checks.py", "batch_not_divisible"),
    ("memory/checks.py", "longer_than_trained"),
    ("memory/checks.py", "sequence_not_divisible"),
}


def test_below_the_boundary_only_the_input_checks_read_the_workload() -> None:
    """Before the ResolvedWorkload, 12 functions below ``estimate`` reached back up to the
    workload (pass_times, _kinds, _attention_s, _head_s and _framework_s in compute/passes.py,
    HostCopies.activation_s, stage_context, stage_times, memory's _setting, the three input
    checks); now the three input checks. ZeRO-3 under torchtitan's profile runs _framework_s's
    FSDP2 copies (which read M), activation offload HostCopies.activation_s."""
    READS.clear()
    workload = _Watched(seq_len=4096, global_batch_size=256)
    a = EstimateAssumptions(
        memory=TrainingAssumptions(framework="pytorch"),
        compute=ComputeAssumptions(framework="torchtitan"),
    )
    layouts = [
        Layout(tp=4, pp=4, dp=8, zero=1),
        Layout(tp=2, pp=2, dp=32, zero=3, activation_offload=("core_attn",), offload_layers=2),
    ]
    for layout in layouts:
        estimate(MODEL, CLUSTER, layout, workload, a)
    readers = set(READS)
    assert readers - BOUNDARY == INPUT_CHECKS
    assert READS[("workload.py", "resolve_workload")] > 0
