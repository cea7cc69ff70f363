"""docs/ARCHITECTURE.md cannot drift silently: every path it names exists, every function it
names in its slider-to-chart walk is defined where it says, and the code cites it rather than
files outside the repository."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "ARCHITECTURE.md"
TEXT = DOC.read_text()

NAMED = sorted(set(re.findall(r"(?:explorer|tests|presets)/[\w./<>*-]*[\w/]", TEXT)))
"""Every repository path the guide names (templates such as ``<id>.toml`` checked by folder)."""


def test_the_guide_names_paths_to_check():
    assert len([p for p in NAMED if p.startswith("explorer/")]) > 80
    assert len([p for p in NAMED if p.startswith("tests/")]) > 15


@pytest.mark.parametrize("named", NAMED)
def test_every_path_the_guide_names_exists(named):
    if "<" in named or "*" in named:  # a template: its folder must exist
        named = named.rsplit("/", 1)[0]
    assert (ROOT / named).exists(), f"docs/ARCHITECTURE.md names {named}, which does not exist"


WALK = (
    ("explorer/ui/sidebar.py", "_training_workload"),
    ("explorer/ui/state.py", "scenario_from_state"),
    ("explorer/scenario/codec.py", "to_query"),
    ("explorer/scenario/resolve.py", "resolve_model"),
    ("explorer/ui/inputs.py", "training_case"),
    ("explorer/ui/cached.py", "training_memory"),
    ("explorer/ui/cached.py", "memory_chart"),
    ("explorer/memory/training.py", "_setting"),
    ("explorer/memory/training.py", "stage_parts"),
    ("explorer/memory/tensors.py", "activation_shape"),
    ("explorer/memory/stage_activations.py", "activation_ledger"),
    ("explorer/memory/activations.py", "block_activation_bytes"),
    ("explorer/memory/phases.py", "peak_of"),
    ("explorer/charts/memory.py", "training_memory_figure"),
    ("explorer/estimate/core.py", "estimate"),
    ("explorer/estimate/stages.py", "stage_times"),
    ("explorer/compute/passes.py", "pass_times"),
    ("explorer/compute/kernels.py", "block_gemms"),
    ("explorer/compute/attention.py", "attention_share"),
    ("explorer/comm/context_parallel.py", "cp_collectives"),
    ("explorer/estimate/pipeline.py", "pipeline_time"),
)


@pytest.mark.parametrize(("path", "function"), WALK, ids=[f"{p}:{f}" for p, f in WALK])
def test_each_function_of_the_walk_is_named_and_defined_in_its_file(path, function):
    named = re.search(rf"`[\w.]*\b{function}\b[^`]*`", TEXT)
    assert named, f"the guide no longer names {function}"
    assert re.search(rf"^def {function}\(", (ROOT / path).read_text(), re.M), (
        f"{path} no longer defines {function}"
    )


OUTSIDE = re.compile(r"\b(?:DESIGN|REFERENCES|STYLE)\.md\b|\.\./shared|shared/DESIGN")


@pytest.mark.parametrize("folder", ["explorer", "tests"])
def test_the_code_cites_no_file_outside_the_repository(folder):
    citing = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in sorted((ROOT / folder).rglob("*.py"))
        if path.name != Path(__file__).name
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if OUTSIDE.search(line)
    ]
    assert not citing, f"point these to docs/ARCHITECTURE.md or the source: {citing}"
