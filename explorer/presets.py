"""Presets from ``presets/``: models (Hugging Face config.json), GPUs and clusters (TOML).

Our own TOML files are validated through pydantic (``TypeAdapter`` of the spec dataclasses) and
any key the spec does not know is rejected, so a typo cannot silently fall back to a default.
Hugging Face configs go through ``explorer.hf_config``, which ignores unknown keys. Loaders are
cached and return frozen dataclasses, tuples and read-only mappings: no module state changes.
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final, TypeVar

from pydantic import TypeAdapter, ValidationError

from explorer.hf_config import load_config_file
from explorer.specs import AttentionCurve, ClusterSpec, GemmPoint, GpuSpec, KernelFigures, ModelSpec

PRESETS_DIR: Final = Path(__file__).resolve().parent.parent / "presets"
"""The repository's ``presets/`` folder."""

T = TypeVar("T")

_TEXT_CHOICES: Final = ("GemmDType", "Fp8Recipe")
"""Spec field types (Literal aliases of explorer.specs) whose values are strings."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelEntry:
    """A model preset's entry in ``presets/models/index.toml``."""

    id: str
    """Preset id, also the config file name (``<id>.json``)."""
    display_name: str
    """Name shown to people."""
    family: str
    """Model family (llama, mixtral, qwen3, deepseek, gpt, ...)."""
    source: str
    """URL of the Hugging Face repository or paper the config comes from."""
    official_total_params: int
    """Parameter count as officially published (see params_source)."""
    official_active_params: int | None = None
    """Parameters active per token as published (MoE); None for dense models."""
    params_source: str
    """Where the official counts are published (model card, paper table, hub count)."""
    active_excludes_embedding: bool = False
    """The published active count leaves out the input embedding table (GPT-OSS, GLM-4.5)."""
    note: str = ""
    """Caveats (what is counted, what was reconstructed)."""
    verified: bool = True
    """The JSON was checked key by key against a published copy of the file."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterEntry:
    """A cluster preset's description, apart from its size."""

    id: str
    """Preset id (file name without ``.toml``)."""
    display_name: str
    """Name shown to people."""
    gpu_id: str
    """GPU preset in every slot."""
    source: str
    """Where the node's figures come from."""


def _ids(kind: str, suffix: str) -> tuple[str, ...]:
    return tuple(
        sorted(path.name.removesuffix(suffix) for path in (PRESETS_DIR / kind).glob(f"*{suffix}"))
    )


def _missing(folder: Path) -> ValueError:
    return ValueError(
        f"no presets were found in {folder}: the presets folder is missing or incomplete "
        "(reinstall the tool or restore presets/ from the repository)"
    )


def _unknown(kind: str, ref: str, choices: tuple[str, ...]) -> ValueError:
    if not choices:
        return _missing(PRESETS_DIR / f"{kind.lower()}s")
    return ValueError(f"unknown {kind} {ref!r}; choose one of {', '.join(choices)}")


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as file:
            return tomllib.load(file)
    except FileNotFoundError:
        raise _missing(path.parent) from None
    except OSError as error:
        raise ValueError(f"cannot read preset file {path}: {error.strerror or error}") from None
    except tomllib.TOMLDecodeError as error:
        raise ValueError(f"preset file {path.name} is not valid TOML: {error}") from None


_ADAPTERS: dict[type, TypeAdapter[Any]] = {}


def _adapter(cls: type[T]) -> TypeAdapter[T]:
    """One pydantic adapter per dataclass (building one costs ~1 ms; the model index has one
    entry per model)."""
    if cls not in _ADAPTERS:
        _ADAPTERS[cls] = TypeAdapter(cls)
    return _ADAPTERS[cls]


def _validated(cls: type[T], data: dict[str, Any], where: str) -> T:
    """``data`` as a ``cls`` dataclass, with unknown keys and strings for numbers rejected."""
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise ValueError(f"{where} has unknown key(s) {', '.join(unknown)}")
    for key, value in data.items():
        if isinstance(value, str) and fields[key].type not in ("str", str, *_TEXT_CHOICES):
            raise ValueError(f"{where}: {key} must not be a string, got {value!r}")
    try:
        return _adapter(cls).validate_python(data)
    except ValidationError as error:
        first = error.errors()[0]
        field = ".".join(str(part) for part in first["loc"])
        message = first["msg"].removeprefix("Value error, ")
        raise ValueError(f"{where}: {field + ': ' if field else ''}{message}") from None


# ---------------------------------------------------------------- models


@cache
def _model_index() -> MappingProxyType[str, ModelEntry]:
    table = _read_toml(PRESETS_DIR / "models" / "index.toml")
    entries = {
        model_id: _validated(ModelEntry, {"id": model_id, **row}, f"index.toml [{model_id}]")
        for model_id, row in table.items()
    }
    return MappingProxyType(entries)


def model_ids() -> tuple[str, ...]:
    """Model preset ids in the order of ``index.toml``."""
    return tuple(_model_index())


def model_entry(model_id: str) -> ModelEntry:
    """The index entry of a model preset."""
    try:
        return _model_index()[model_id]
    except KeyError:
        raise _unknown("model", model_id, model_ids()) from None


@cache
def _preset_model(model_id: str) -> ModelSpec:
    spec = load_config_file(PRESETS_DIR / "models" / f"{model_id}.json")
    return dataclasses.replace(spec, name=model_entry(model_id).display_name)


def load_model(ref: str) -> ModelSpec:
    """A model preset by id, or the model in a config.json at a path."""
    if ref in _model_index():
        return _preset_model(ref)
    path = Path(ref)
    if os.path.lexists(path):  # a directory, a device or a pipe gets its own sentence
        return load_config_file(path)
    if path.suffix == ".json" or "/" in ref:
        raise ValueError(f"config file '{ref}' does not exist")
    raise ValueError(
        f"unknown model {ref!r}; choose a preset id ({', '.join(model_ids())}) "
        "or a path to a config.json"
    )


# ---------------------------------------------------------------- GPUs


def gpu_ids() -> tuple[str, ...]:
    """GPU preset ids, sorted."""
    return _ids("gpus", ".toml")


@cache
def load_gpu(gpu_id: str) -> GpuSpec:
    """A GPU preset by id, with its kernel figures (``[kernels]``, attention by table name)."""
    if gpu_id not in gpu_ids():
        raise _unknown("GPU", gpu_id, gpu_ids())
    where = f"gpus/{gpu_id}.toml"
    data = _read_toml(PRESETS_DIR / "gpus" / f"{gpu_id}.toml")
    if "kernels" in data:
        data["kernels"] = _kernel_figures(data["kernels"], f"{where} [kernels]")
    return _validated(GpuSpec, data, where)


# ---------------------------------------------------------------- kernels


@cache
def attention_curves() -> MappingProxyType[str, AttentionCurve]:
    """Attention kernel tables of ``presets/kernels/attention.toml`` by id."""
    table = _read_toml(PRESETS_DIR / "kernels" / "attention.toml")
    curves = {}
    for curve_id, row in table.items():
        where = f"kernels/attention.toml [{curve_id}]"
        row = {k: tuple(v) if isinstance(v, list) else v for k, v in row.items()}
        curves[curve_id] = _validated(AttentionCurve, row, where)
    return MappingProxyType(curves)


def _kernel_figures(data: dict[str, Any], where: str) -> KernelFigures:
    """A GPU preset's ``[kernels]`` table: measured GEMMs validated one by one (unknown keys
    rejected), the attention table looked up by name."""
    data = dict(data)
    gemms = data.pop("gemms", [])
    data["gemms"] = tuple(
        _validated(GemmPoint, row, f"{where} gemms[{i}]") for i, row in enumerate(gemms)
    )
    curves = attention_curves()
    for field in ("attention", "te_attention"):
        name = data.pop(field, None)
        if name is not None:
            if name not in curves:
                raise _unknown("attention kernel", name, tuple(curves))
            data[field] = curves[name]
    return _validated(KernelFigures, data, where)


# ---------------------------------------------------------------- clusters


def cluster_ids() -> tuple[str, ...]:
    """Cluster preset ids, sorted."""
    return _ids("clusters", ".toml")


@cache
def _cluster_file(cluster_id: str) -> tuple[ClusterEntry, MappingProxyType[str, Any]]:
    """A cluster file split into its description and the ClusterSpec fields it sets."""
    if cluster_id not in cluster_ids():
        raise _unknown("cluster", cluster_id, cluster_ids())
    where = f"clusters/{cluster_id}.toml"
    data = _read_toml(PRESETS_DIR / "clusters" / f"{cluster_id}.toml")
    for key in ("gpu", "source", "name"):
        if not isinstance(data.get(key), str):
            raise ValueError(f"{where} needs a string '{key}'")
    if "num_nodes" in data:
        raise ValueError(f"{where} has unknown key(s) num_nodes (it is chosen when loading)")
    entry = ClusterEntry(
        id=cluster_id, display_name=data["name"], gpu_id=data["gpu"], source=data.pop("source")
    )
    del data["gpu"]
    return entry, MappingProxyType(data)


def cluster_entry(cluster_id: str) -> ClusterEntry:
    """A cluster preset's display name, GPU id and source."""
    return _cluster_file(cluster_id)[0]


@cache
def load_cluster(cluster_id: str, num_nodes: int = 1) -> ClusterSpec:
    """A cluster preset with ``num_nodes`` nodes."""
    entry, fields = _cluster_file(cluster_id)
    where = f"clusters/{cluster_id}.toml"
    data = {**fields, "num_nodes": num_nodes, "gpu": load_gpu(entry.gpu_id)}
    return _validated(ClusterSpec, data, where)
