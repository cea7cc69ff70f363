"""Presets: every one loads, the files agree with the index, and bad TOML is refused."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from explorer import presets
from explorer.presets import (
    cluster_entry,
    cluster_ids,
    gpu_ids,
    load_cluster,
    load_gpu,
    load_model,
    model_entry,
    model_ids,
)
from explorer.specs import ClusterSpec, GpuSpec, ModelSpec

REQUIRED_MODELS = (
    "llama-3.1-8b",
    "llama-3.1-70b",
    "llama-3.1-405b",
    "deepseek-v3",
    "mixtral-8x7b",
    "mixtral-8x22b",
    "qwen3-235b-a22b",
    "qwen3-32b",
    "gpt3-175b",
    "mistral-7b",
    "qwen2.5-72b",
    "gpt2",
    "kimi-k2",
)
REQUIRED_GPUS = ("a100-80g", "h100-sxm", "h800", "h200", "b200", "gb200", "mi300x")
REQUIRED_CLUSTERS = (
    "dgx-a100",
    "hgx-h100",
    "h800-deepseek",
    "hgx-h200",
    "dgx-b200",
    "gb200-nvl72",
    "mi300x-node",
)


def _clear_caches() -> None:
    for loader in (
        presets._model_index,
        presets._preset_model,
        presets.load_gpu,
        presets._cluster_file,
        presets.load_cluster,
    ):
        loader.cache_clear()


@pytest.fixture
def scratch_presets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A copy of presets/ that a test may break; the loaders read it instead."""
    root = tmp_path / "presets"
    shutil.copytree(presets.PRESETS_DIR, root)
    monkeypatch.setattr(presets, "PRESETS_DIR", root)
    _clear_caches()
    yield root
    _clear_caches()


# ---------------------------------------------------------------- models


def test_the_index_lists_every_required_model() -> None:
    assert set(REQUIRED_MODELS) <= set(model_ids())


def test_every_index_entry_has_a_config_file_and_every_file_an_entry() -> None:
    files = {p.stem for p in (presets.PRESETS_DIR / "models").glob("*.json")}
    assert files == set(model_ids())


@pytest.mark.parametrize("model_id", model_ids())
def test_every_model_preset_loads_under_its_display_name(model_id: str) -> None:
    spec = load_model(model_id)
    assert isinstance(spec, ModelSpec)
    assert spec.name == model_entry(model_id).display_name


@pytest.mark.parametrize("model_id", model_ids())
def test_every_index_entry_cites_its_source_and_count(model_id: str) -> None:
    entry = model_entry(model_id)
    assert entry.source.startswith("https://") and entry.params_source
    assert entry.official_total_params > 0
    if load_model(model_id).is_moe:
        assert entry.official_active_params is not None
        assert 0 < entry.official_active_params < entry.official_total_params
    else:
        assert entry.official_active_params is None
    assert entry.verified or entry.note, "an unverified preset says why in its note"


@pytest.mark.parametrize("model_id", model_ids())
def test_every_model_preset_is_a_hugging_face_config_json(model_id: str) -> None:
    config = json.loads((presets.PRESETS_DIR / "models" / f"{model_id}.json").read_text())
    assert isinstance(config["architectures"], list) and config["model_type"]


def test_the_gpt3_preset_is_marked_as_written_for_this_tool() -> None:
    entry = model_entry("gpt3-175b")
    assert not entry.verified and "No official config.json" in entry.note


def test_a_path_to_a_config_json_loads_like_a_preset(tmp_path: Path) -> None:
    folder = tmp_path / "copy"
    folder.mkdir()
    shutil.copy(presets.PRESETS_DIR / "models" / "qwen3-32b.json", folder / "config.json")
    spec = load_model(str(folder / "config.json"))
    assert dataclasses.replace(spec, name="x") == dataclasses.replace(
        load_model("qwen3-32b"), name="x"
    )


def test_an_unknown_model_id_lists_the_presets_and_mentions_a_path() -> None:
    with pytest.raises(ValueError) as caught:
        load_model("llama-9")
    message = str(caught.value)
    assert "unknown model 'llama-9'" in message and "llama-3.1-8b" in message
    assert "config.json" in message


def test_a_missing_config_path_says_the_file_does_not_exist(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="does not exist"):
        load_model(str(tmp_path / "config.json"))


def test_model_entries_are_frozen_and_ids_are_a_tuple() -> None:
    entry = model_entry("gpt2")
    with pytest.raises(dataclasses.FrozenInstanceError):
        entry.display_name = "x"  # type: ignore[misc]
    assert isinstance(model_ids(), tuple)


def test_loaders_are_cached() -> None:
    assert load_model("deepseek-v3") is load_model("deepseek-v3")
    assert load_gpu("h100-sxm") is load_gpu("h100-sxm")


# ---------------------------------------------------------------- GPUs


def test_every_required_gpu_has_a_preset() -> None:
    assert set(REQUIRED_GPUS) <= set(gpu_ids())


@pytest.mark.parametrize("gpu_id", gpu_ids())
def test_every_gpu_preset_loads_with_a_source(gpu_id: str) -> None:
    gpu = load_gpu(gpu_id)
    assert isinstance(gpu, GpuSpec) and gpu.source and gpu.name
    if gpu.fp8_flops_per_s is not None:
        assert gpu.fp8_flops_per_s == pytest.approx(2 * gpu.bf16_flops_per_s, rel=0.01)


MiB = 2**20
"""nvidia-smi prints memory.total in MiB: the presets hold what the device reports."""


@pytest.mark.parametrize(
    ("gpu_id", "bf16_tflops", "memory_bytes", "nvlink_one_way_gbps"),
    [
        pytest.param("a100-80g", 312, 81920 * MiB, 300, id="a100-datasheet-dense"),
        pytest.param("h100-sxm", 989.4, 81559 * MiB, 450, id="h100-datasheet-halved-sparse"),
        pytest.param("h800", 989.4, 81559 * MiB, 200, id="h800-nvlink-400-both-ways"),
        pytest.param("h200", 989.4, 143771 * MiB, 450, id="h200-datasheet"),
        pytest.param("b200", 2250, 183359 * MiB, 900, id="dgx-b200-datasheet"),
        pytest.param("gb200", 2500, 189471 * MiB, 900, id="gb200-nvl72-datasheet"),
        pytest.param("mi300x", 1307.4, 192 * 10**9, 448, id="mi300x-datasheet"),
    ],
)
def test_gpu_presets_hold_dense_peaks_and_one_way_link_bandwidth(
    gpu_id: str, bf16_tflops: float, memory_bytes: int, nvlink_one_way_gbps: int
) -> None:
    gpu = load_gpu(gpu_id)
    assert gpu.bf16_flops_per_s == pytest.approx(bf16_tflops * 1e12)
    assert gpu.memory_bytes == memory_bytes
    assert gpu.scale_up_bytes_per_s == pytest.approx(nvlink_one_way_gbps * 1e9)


def test_an_unknown_gpu_lists_the_presets() -> None:
    with pytest.raises(ValueError, match=r"unknown GPU 'v100'.*h100-sxm"):
        load_gpu("v100")


# ---------------------------------------------------------------- clusters


def test_every_required_cluster_has_a_preset() -> None:
    assert set(REQUIRED_CLUSTERS) <= set(cluster_ids())


@pytest.mark.parametrize("cluster_id", cluster_ids())
def test_every_cluster_preset_loads_with_its_gpu_and_size(cluster_id: str) -> None:
    entry = cluster_entry(cluster_id)
    cluster = load_cluster(cluster_id, num_nodes=3)
    assert isinstance(cluster, ClusterSpec) and entry.source
    assert cluster.gpu == load_gpu(entry.gpu_id)
    assert cluster.num_nodes == 3 and cluster.name == entry.display_name


def test_gb200_nvl72_has_a_72_gpu_domain_of_4_gpu_trays() -> None:
    cluster = load_cluster("gb200-nvl72", num_nodes=18)
    assert (cluster.gpus_per_node, cluster.domain_size, cluster.world_size) == (4, 72, 72)


@pytest.mark.parametrize(
    ("cluster_id", "scale_out_gbps"),
    [
        pytest.param("dgx-a100", 25, id="dgx-a100-8x200Gb-hdr"),
        pytest.param("hgx-h100", 50, id="hgx-h100-400Gb-per-gpu"),
        pytest.param("h800-deepseek", 50, id="deepseek-v3-report-sec3.1"),
    ],
)
def test_cluster_scale_out_is_per_gpu_one_direction(cluster_id: str, scale_out_gbps: int) -> None:
    assert load_cluster(cluster_id).scale_out_bytes_per_s == scale_out_gbps * 1e9


def test_a_cluster_of_zero_nodes_is_refused() -> None:
    with pytest.raises(ValueError, match="num_nodes"):
        load_cluster("hgx-h100", num_nodes=0)


# ---------------------------------------------------------------- bad TOML


def test_an_unknown_key_in_a_gpu_file_is_rejected(scratch_presets: Path) -> None:
    path = scratch_presets / "gpus" / "h100-sxm.toml"
    path.write_text(path.read_text() + "\nbf16_tflops = 989\n")
    with pytest.raises(ValueError, match=r"unknown key.*bf16_tflops"):
        load_gpu("h100-sxm")


def test_an_unknown_key_in_a_cluster_file_is_rejected(scratch_presets: Path) -> None:
    path = scratch_presets / "clusters" / "hgx-h100.toml"
    path.write_text(path.read_text() + "\nnic_gbps = 400\n")
    with pytest.raises(ValueError, match=r"unknown key.*nic_gbps"):
        load_cluster("hgx-h100")


def test_an_unknown_key_in_the_model_index_is_rejected(scratch_presets: Path) -> None:
    path = scratch_presets / "models" / "index.toml"
    path.write_text(path.read_text() + 'parameters = "8B"\n')
    with pytest.raises(ValueError, match=r"unknown key.*parameters"):
        model_ids()


def test_a_string_for_a_number_in_a_gpu_file_is_rejected(scratch_presets: Path) -> None:
    path = scratch_presets / "gpus" / "h200.toml"
    text = re.sub(r"^memory_bytes = .*$", 'memory_bytes = "141"', path.read_text(), flags=re.M)
    path.write_text(text)
    with pytest.raises(ValueError, match="memory_bytes"):
        load_gpu("h200")


def test_a_zero_bandwidth_in_a_gpu_file_is_rejected(scratch_presets: Path) -> None:
    path = scratch_presets / "gpus" / "h200.toml"
    path.write_text(path.read_text().replace("hbm_bytes_per_s = 4.8e12", "hbm_bytes_per_s = 0"))
    with pytest.raises(ValueError, match="hbm_bytes_per_s must be positive"):
        load_gpu("h200")


def test_a_cluster_file_naming_an_unknown_gpu_is_rejected(scratch_presets: Path) -> None:
    path = scratch_presets / "clusters" / "hgx-h100.toml"
    path.write_text(path.read_text().replace('gpu = "h100-sxm"', 'gpu = "h100-pcie"'))
    with pytest.raises(ValueError, match="unknown GPU 'h100-pcie'"):
        load_cluster("hgx-h100")
