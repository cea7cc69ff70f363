"""The report's input sections: the model with its parameter counts, the cluster, assumptions.

Shared by the training and the serving report. Units are named in every label (GiB = 2^30
bytes, GB = 10^9 bytes, GB/s = 10^9 bytes per second).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pandas as pd

from explorer.counting import ParamCounts, active_param_counts, param_counts
from explorer.report.assumptions import assumption_rows
from explorer.report.tables import Section, Table
from explorer.scenario import ModelRef
from explorer.specs import ClusterSpec, ModelSpec
from explorer.units import GB, GiB


def key_values(title: str, rows: Iterable[tuple[str, object]], note: str = "") -> Table:
    """A two-column table of (quantity, value) rows; values are shown as given."""
    items = list(rows)
    frame = pd.DataFrame(
        {"quantity": [k for k, _ in items], "value": [_text(v) for _, v in items]}, dtype=object
    )
    return Table(title, frame, note=note)


def _text(value: object) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.4g}"
    return str(value)


def billions(count: float) -> str:
    """A parameter count with its exact value: ``70.554 B (70,553,706,496)``."""
    return f"{count / 1e9:,.3f} B ({int(count):,})"


def model_source(ref: ModelRef) -> str:
    """Where the model came from, in words."""
    if ref.source == "preset":
        return f"preset {ref.preset}"
    if ref.source == "upload":
        return f"uploaded config.json ({ref.config_name})"
    return f"generic Llama-shaped dense model of {ref.generic_params_b:g} B parameters"


def model_rows(model: ModelSpec, ref: ModelRef) -> list[tuple[str, object]]:
    """Shape and parameter counts of the model, one row each."""
    total, active = param_counts(model), active_param_counts(model)
    rows: list[tuple[str, object]] = [
        ("model", model.name),
        ("source", model_source(ref)),
        ("parameters (total, MTP modules excluded)", billions(total.total_without_mtp)),
        ("parameters active per token", billions(active.total_without_mtp)),
        ("layers", model.num_hidden_layers),
        ("hidden size", model.hidden_size),
        ("attention heads / KV heads", f"{model.num_attention_heads} / {model.kv_heads}"),
        ("FFN width (dense MLP)", model.intermediate_size),
        ("vocabulary", model.vocab_size),
    ]
    if model.is_moe:
        rows.append(
            (
                "routed experts (top-k, width)",
                f"{model.n_routed_experts} (top-{model.num_experts_per_tok}, "
                f"{model.moe_intermediate_size})",
            )
        )
    if model.num_nextn_predict_layers:
        rows.append(("multi-token-prediction parameters", billions(total.mtp)))
    return rows


def component_table(model: ModelSpec) -> Table:
    """Parameters per component, all and active per token."""
    total, active = param_counts(model), active_param_counts(model)
    names = [name for name, count in total.as_dict().items() if count]
    frame = pd.DataFrame(
        {
            "component": names,
            "parameters": [_count(total, n) for n in names],
            "active per token": [_count(active, n) for n in names],
        }
    )
    return Table("Parameters by component", frame, note="Counts of parameters, not bytes.")


def _count(counts: ParamCounts, name: str) -> int:
    return int(counts.as_dict()[name])


def cluster_rows(cluster: ClusterSpec, num_gpus: int) -> list[tuple[str, object]]:
    """The GPU and its links, one row each."""
    gpu = cluster.gpu
    return [
        ("GPU", gpu.name),
        ("GPUs", f"{num_gpus:,} ({cluster.num_nodes} nodes × {cluster.gpus_per_node} per node)"),
        ("memory per GPU", f"{gpu.memory_bytes / GB:,.0f} GB = {gpu.memory_bytes / GiB:,.1f} GiB"),
        ("dense BF16 peak per GPU", f"{gpu.bf16_flops_per_s / 1e12:,.0f} TFLOP/s"),
        ("scale-up domain", f"{cluster.domain_size} GPUs"),
        ("scale-up bandwidth per GPU", f"{cluster.fast_bytes_per_s / GB:,.0f} GB/s, one way"),
        ("scale-out bandwidth per GPU", f"{cluster.scale_out_bytes_per_s / GB:,.0f} GB/s, one way"),
        ("fabric oversubscription", f"{cluster.oversubscription:g}"),
        ("figures from", gpu.source or "the GPU preset"),
    ]


def model_results(model: ModelSpec) -> dict[str, Any]:
    """The model's counts as JSON (the ``params`` command's keys)."""
    total, active = param_counts(model), active_param_counts(model)
    return {
        "name": model.name,
        "total_params": total.total_without_mtp,
        "active_params": active.total_without_mtp,
        "total_params_with_mtp": total.total,
        "components": total.as_dict(),
        "active_components": active.as_dict(),
    }


def cluster_results(cluster: ClusterSpec, num_gpus: int) -> dict[str, Any]:
    """The cluster as JSON (bytes and bytes per second)."""
    return {
        "gpu": cluster.gpu.name,
        "gpu_bytes": cluster.gpu.memory_bytes,
        "num_gpus": num_gpus,
        "gpus_per_node": cluster.gpus_per_node,
        "num_nodes": cluster.num_nodes,
        "scale_up_domain_size": cluster.domain_size,
        "scale_up_bytes_per_s": cluster.fast_bytes_per_s,
        "scale_out_bytes_per_s": cluster.scale_out_bytes_per_s,
        "oversubscription": cluster.oversubscription,
    }


def assumptions_section(
    values: object, overrides: Mapping[str, object], prefix: str = "", notes: Sequence[str] = ()
) -> tuple[Section, list[dict[str, Any]]]:
    """Every assumption with its value, whether the user changed it, and its source."""
    rows = assumption_rows(values, prefix)
    frame = pd.DataFrame(
        {
            "assumption": [r.name for r in rows],
            "value": [_text(r.value) for r in rows],
            "set by": ["you" if r.name in overrides else "default" for r in rows],
            "meaning": [r.meaning for r in rows],
            "source": [r.source for r in rows],
        },
        dtype=object,
    )
    table = Table("Assumptions", frame, note="Sizes in bytes unless the name says otherwise.")
    section = Section("assumptions", "Assumptions", bullets=tuple(notes), tables=(table,))
    data = [
        {"name": r.name, "value": r.value, "source": r.source, "overridden": r.name in overrides}
        for r in rows
    ]
    return section, data


def warnings_section(warnings: Sequence[str]) -> Section:
    """The warnings, or a sentence saying there are none."""
    if not warnings:
        return Section("warnings", "Warnings", paragraphs=("No warnings for this layout.",))
    return Section("warnings", "Warnings", bullets=tuple(_capital(w) for w in warnings))


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]
