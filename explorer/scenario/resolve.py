"""The model and cluster a scenario names: a preset, a generic dense size, an uploaded config.

Presets and the Hugging Face parser are imported when needed: the scenario's value and its URL
form do not depend on them.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from explorer.limits import MAX_GPUS, MAX_URL_CONFIG_CHARS
from explorer.scenario.inputs import ClusterInputs, MixedInputs, ModelRef, StragglerInputs
from explorer.specs import ClusterSpec, ModelSpec

if TYPE_CHECKING:
    from explorer.straggler import Straggler


def compact_config(text: str | bytes) -> str:
    """The uploaded config.json re-written compactly, after checking it describes a model.

    Raises ``hf_config.ConfigError`` (one sentence) when it does not.
    """
    from explorer.hf_config import ConfigError, model_from_json_text

    model_from_json_text(text)  # bounds its size and nesting before parsing
    compact = json.dumps(json.loads(text), separators=(",", ":"))
    if len(compact) > MAX_URL_CONFIG_CHARS:
        raise ConfigError(
            f"config.json is {len(compact):,} characters even written compactly, more than the "
            f"{MAX_URL_CONFIG_CHARS:,} a link may carry; remove the fields a model does not need."
        )
    return compact


def model_ref_from_upload(data: bytes, filename: str) -> ModelRef:
    """The model reference of an uploaded config.json; ConfigError (one sentence) if invalid."""
    stem = filename.rsplit("/", 1)[-1].removesuffix(".json") or "uploaded model"
    return ModelRef(source="upload", config_json=compact_config(data), config_name=stem[:120])


def resolve_model(ref: ModelRef) -> ModelSpec:
    """The ModelSpec ``ref`` names; ValueError / ConfigError (one sentence) when it cannot."""
    if ref.source == "generic":
        from explorer.model_size import dense_model_for_params

        return dense_model_for_params(ref.generic_params_b * 1e9)
    if ref.source == "upload":
        from explorer.hf_config import model_from_json_text

        if not ref.config_json:
            raise ValueError("No config.json has been uploaded yet; upload one or pick a preset.")
        return model_from_json_text(ref.config_json, ref.config_name)
    from explorer.presets import load_model

    return load_model(ref.preset)


def _preset_node(gpu_id: str) -> ClusterSpec | None:
    """The first cluster preset built of ``gpu_id`` GPUs: its fabric is the default one."""
    from explorer.presets import cluster_entry, cluster_ids, load_cluster

    for cluster_id in cluster_ids():
        if cluster_entry(cluster_id).gpu_id == gpu_id:
            return load_cluster(cluster_id)
    return None


def resolve_cluster(shape: ClusterInputs) -> ClusterSpec:
    """The cluster ``shape`` describes; ValueError (one sentence) when it has no GPUs.

    Links not given take the figures of the cluster preset built of the same GPU (its NIC per
    GPU, its scale-up domain), else the GPU's and ClusterSpec's defaults.
    """
    from explorer.presets import load_gpu

    if shape.num_gpus == 0:
        raise ValueError(
            f"The cluster has no GPUs ({shape.gpus_per_node} per node × {shape.num_nodes} "
            f"nodes); set both to at least 1."
        )
    if shape.num_gpus > MAX_GPUS:
        raise ValueError(
            f"The cluster has {shape.num_gpus:,} GPUs ({shape.gpus_per_node:,} per node × "
            f"{shape.num_nodes:,} nodes), more than this tool's limit of {MAX_GPUS:,}."
        )
    gpu = load_gpu(shape.gpu)
    node = _preset_node(shape.gpu) or ClusterSpec(gpu=gpu)
    domain = node.scale_up_domain_size
    if domain is None and gpu.scale_up_domain_size > shape.gpus_per_node:
        domain = gpu.scale_up_domain_size  # an NVL72 rack spans several trays
    links: dict[str, Any] = {}  # link bandwidths, bytes/s
    if shape.intra_node_GBps is not None:
        links["scale_up_bytes_per_s"] = shape.intra_node_GBps * 1e9
    if shape.inter_node_GBps is not None:
        links["scale_out_bytes_per_s"] = shape.inter_node_GBps * 1e9
    return replace(
        node,
        gpu=gpu,
        gpus_per_node=shape.gpus_per_node,
        num_nodes=shape.num_nodes,
        scale_up_domain_size=domain,
        oversubscription=shape.oversubscription,
        name=f"{shape.num_nodes} × {shape.gpus_per_node} {gpu.name}",
        **links,
    )


def resolve_mixed(mixed: MixedInputs) -> tuple[ClusterSpec, ...]:
    """The mixed cluster's groups, each as ``resolve_cluster`` makes it (the preset node's links
    of its GPU); () without groups; ValueError (one sentence) for an empty or unknown group."""
    from explorer.presets import gpu_ids

    known = gpu_ids()
    for gpu, _, _ in mixed.groups:
        if gpu not in known:
            raise ValueError(
                f"Unknown GPU {gpu!r} in the mixed cluster; use one of {', '.join(known)}."
            )
    return tuple(
        resolve_cluster(ClusterInputs(gpu=gpu, gpus_per_node=per, num_nodes=nodes))
        for gpu, per, nodes in mixed.groups
    )


def resolve_straggler(inputs: StragglerInputs) -> Straggler | None:
    """The straggler the inputs describe; None at 0%."""
    if inputs.slowdown_pct == 0:
        return None
    from explorer.straggler import Straggler

    return Straggler(
        slowdown=inputs.slowdown_pct / 100, where=inputs.where, stage=inputs.stage, axis=inputs.axis
    )
