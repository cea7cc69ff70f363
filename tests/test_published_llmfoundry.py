"""LLM Foundry's MPT benchmark rows (validation/published_runs.toml): the shapes are right.

Each row describes its MPT model as the gpt2 preset with the sizes of llm-foundry's
scripts/train/yamls/pretrain/mpt-*.yaml; the benchmark table prints every model's parameter
count (NumParams, which grows with the learned position embeddings of each sequence length), so
the core's count of the row's shape must equal it exactly.
"""

from __future__ import annotations

import pytest

from explorer.counting import param_counts
from explorer.published_runs.scenario import scenario
from explorer.published_runs.table import load_published_runs

RUNS = {r.id: r for r in load_published_runs().run}
NUM_PARAMS = {  # llm-foundry scripts/train/benchmarking/README.md, NumParams column
    "llmfoundry-h100-mpt-70b-2048-64gpu": 64_862_437_376,
    "llmfoundry-h100-mpt-30b-8192-8gpu": 30_019_254_272,
    "llmfoundry-h100-mpt-30b-2048-8gpu": 29_975_214_080,
    "llmfoundry-h100-mpt-13b-32768-8gpu": 13_011_240_960,
    "llmfoundry-h100-mpt-7b-65536-8gpu": 6_918_905_856,
    "llmfoundry-h100-mpt-7b-2048-8gpu": 6_658_859_008,
    "llmfoundry-h100-mpt-3b-2048-64gpu": 2_651_837_440,
    "llmfoundry-h100-mpt-1b-32768-8gpu": 1_378_865_152,
    "llmfoundry-a100-mpt-1b-2048-8gpu": 1_315_950_592,
}


@pytest.mark.parametrize(("run_id", "published"), sorted(NUM_PARAMS.items()))
def test_the_rows_shape_has_the_published_parameter_count(run_id, published):
    assert param_counts(scenario(RUNS[run_id]).model).total == published


def test_every_llm_foundry_row_is_pytorch_fsdp_with_its_batch():
    rows = [r for r in RUNS.values() if r.source == "llm-foundry"]
    assert len(rows) >= 30
    for r in rows:
        s = scenario(r)
        assert s.assumptions.memory.framework == "pytorch"
        assert s.layout.zero == 3 and s.layout.dp == r.gpus
        assert r.global_batch % (r.gpus * r.micro_batch) == 0
