"""The last pipeline stage's kept outputs (explorer.memory.temporaries.pipeline_kept_outputs).

torch.distributed.pipelining's forward_one_chunk appends each micro-batch's output to
``output_chunks``, emptied only when the next ``step`` begins, until ``step(return_outputs=
False)`` (pytorch/pytorch PR 165822, passed by torchtitan PR 1922 of 2025-10-22). Hand-worked:
Llama 3.1 405B at micro-batch 4 x 8,192 tokens over TP 8 has 128,256 / 8 = 16,032 vocabulary
columns per GPU, so one micro-batch's bf16 logits are 32,768 x 16,032 x 2 = 1,050,673,152 B.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from explorer.estimate import estimate
from explorer.published_runs.scenario import scenario
from explorer.published_runs.table import load_published_runs

RUNS = {r.id: r for r in load_published_runs().run}
KEPT = "pipeline last stage's outputs (every micro-batch's logits)"
ONE_MICROBATCH = 32_768 * 16_032 * 2


def _memory(run_id: str, **memory_changes):
    s = scenario(RUNS[run_id])
    a = s.assumptions
    if memory_changes:
        a = replace(a, memory=replace(a.memory, **memory_changes))
    return estimate(s.model, s.cluster, s.layout, s.workload, a).memory


@pytest.mark.parametrize(
    "run_id",
    [
        "torchtitan-2412-h100-llama31-405b-3d-1f1b",
        "torchtitan-2412-h100-llama31-405b-3d-interleaved",
    ],
)
def test_the_head_stage_keeps_all_eight_micro_batches_logits_in_every_phase(run_id):
    memory = _memory(run_id)
    last = memory.stages[-1]
    for ph in last.phases:
        assert dict(ph.temporary_parts)[KEPT] == 8 * ONE_MICROBATCH  # 8,405,385,216 B
    # stages without the head keep nothing of the kind
    assert all(
        KEPT not in dict(ph.temporary_parts) for st in memory.stages[:-1] for ph in st.phases
    )


def test_switching_it_off_removes_exactly_those_bytes_from_the_head_stage():
    run_id = "torchtitan-2412-h100-llama31-405b-3d-interleaved"
    on = _memory(run_id).stages[-1]
    off = _memory(run_id, pipeline_keeps_outputs=False).stages[-1]
    for a, b in zip(on.phases, off.phases, strict=True):
        assert a.total_bytes - b.total_bytes == pytest.approx(8 * ONE_MICROBATCH, rel=1e-12)


def test_only_torchtitan_runs_before_the_fix_get_it():
    dated = {r.id: scenario(r).assumptions.memory.pipeline_keeps_outputs for r in RUNS.values()}
    assert dated["torchtitan-2412-h100-llama31-405b-3d-1f1b"] is True
    assert dated["torchtitan-2506-h200-llama31-8b-fsdp64-float8"] is True  # 2025-06, before
    assert dated["automodel-2510-h100-kimi-k2-256gpu"] is None  # not torchtitan: the default
    assert dated["mbridge-25.11-h100-llama3-8b-fp8cs"] is None


STAGE_OUTPUTS = "pipeline stage outputs (every micro-batch's, to the step's end)"
ONE_BOUNDARY = 4 * 8192 // 8 * 16_384 * 2  # micro-batch 4 x 8,192 tokens over SP 8, h 16,384


@pytest.mark.parametrize(
    ("run_id", "stage", "chunks"),
    [
        ("torchtitan-2412-h100-llama31-405b-3d-1f1b", 1, 1),
        ("torchtitan-2412-h100-llama31-405b-3d-interleaved", 1, 2),
        # the last rank's second chunk is the model's last: its outputs are the kept logits
        ("torchtitan-2412-h100-llama31-405b-3d-interleaved", 7, 1),
    ],
)
def test_every_stage_but_the_last_keeps_its_eight_outputs_to_the_steps_end(run_id, stage, chunks):
    # torch 1963fc8 (torchtitan's 2024-12 page): output_chunks on every stage (PR 153383)
    held = _memory(run_id).stages[stage]
    expected = 8 * chunks * ONE_BOUNDARY
    assert ONE_BOUNDARY == 134_217_728
    for phase in ("backward_start", "block_backward"):
        assert dict(held.phase(phase).temporary_parts)[STAGE_OUTPUTS] == expected
    assert STAGE_OUTPUTS not in dict(held.phase("optimizer_step").temporary_parts)
    off = _memory(run_id, pipeline_keeps_stage_outputs=False).stages[stage]
    assert held.total_bytes - off.total_bytes == pytest.approx(expected, rel=1e-12)


def test_megatron_frees_each_stage_output_once_sent():
    memory = _memory("llama3-405b-8192gpu-tp8-pp16")  # framework "megatron"
    for stage in memory.stages:
        for phase in ("backward_start", "block_backward"):
            assert STAGE_OUTPUTS not in dict(stage.phase(phase).temporary_parts)
