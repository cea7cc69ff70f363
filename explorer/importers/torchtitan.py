"""A torchtitan job config (TOML) -> the tool's layout and workload.

Semantics follow torchtitan's ``JobConfig`` (``torchtitan/config/job_config.py``) and
``ParallelDims``: world = replicate x shard x CP x TP x PP, a shard degree of -1 takes the GPUs
left over; FSDP2 shards over shard x CP ranks (HSDP when replicate > 1 too);
``fsdp_reshard_after_forward = "default"`` reshards after forward except under pipeline
parallelism (``Layout.reshard_after_forward``); HSDP is ``Layout.dp_shard``; without PP the
local batch is the micro-batch (gradient accumulation makes the global batch), with PP
``pipeline_parallel_microbatch_size`` is. Settings left out take torchtitan's defaults
(``activation_checkpoint.mode = "selective"``, option "2").
"""

from __future__ import annotations

import tomllib
from typing import Any

from explorer.importers.comments import apply_explorer_comments, comment_lines
from explorer.importers.scenario import Draft, Imported
from explorer.importers.settings import RecipeError, Setting, Settings, check_recipe_text
from explorer.importers.torchtitan_pipeline import read_pipeline
from explorer.importers.torchtitan_precision import read_precision, read_recompute
from explorer.importers.torchtitan_table import FLAVORS, IGNORED_SECTIONS, TABLE, Unsupported
from explorer.specs import ModelSpec


def _settings(text: str) -> Settings:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise RecipeError(f"the torchtitan config is not valid TOML: {error}") from None
    settings: Settings = {}
    _collect(data, [], settings)
    return settings


def _collect(value: Any, path: list[str], settings: Settings) -> None:
    if isinstance(value, dict):
        for key, inner in value.items():
            _collect(inner, [*path, key], settings)
        return
    name = ".".join(path)
    settings[name] = Setting(name, value, name)


def read_torchtitan(
    text: str, num_gpus: int | None = None, model: ModelSpec | None = None
) -> Imported:
    """The scenario of a torchtitan TOML; ``num_gpus`` fills a shard degree of -1."""
    check_recipe_text(text)
    draft = Draft(_settings(text))
    # FSDP2, DTensor TP and eager autograd: the memory behaviour measured on PyTorch
    # (explorer.memory.frameworks.PYTORCH)
    draft.assumptions["memory.framework"] = "pytorch"
    num_layers = _model(draft, model)
    _degrees(draft, num_gpus)
    _batch(draft)
    read_pipeline(draft, num_layers)
    read_recompute(draft)
    read_precision(draft)
    apply_explorer_comments(draft, comment_lines(text), "torchtitan")
    _leftovers(draft)
    return draft.finish("torchtitan")


def _model(draft: Draft, model: ModelSpec | None) -> int | None:
    from explorer.presets import load_model

    name, flavor = draft.text("model.name"), draft.get("model.flavor")
    preset = FLAVORS.get((name or "llama3", str(flavor.value if flavor else "debugmodel")))
    if preset is None:
        draft.say(
            f"model {name} flavor {flavor.value if flavor else 'debugmodel'} is not one of the "
            f"presets; pass --model."
        )
        return model.num_hidden_layers if model else None
    draft.model = preset
    return load_model(preset).num_hidden_layers


def _int(draft: Draft, name: str, default: int) -> int:
    value = draft.int(name)
    if value is None:
        return default
    if value <= 0 and not (value == -1 and name.endswith("shard_degree")):
        raise RecipeError(f"{draft.settings[name].spelled} must be a positive integer, got {value}")
    return value


def _degrees(draft: Draft, num_gpus: int | None) -> None:
    lay = draft.layout
    p = "parallelism."
    replicate = _int(draft, p + "data_parallel_replicate_degree", 1)
    shard = _int(draft, p + "data_parallel_shard_degree", -1)
    for key, name in (("tp", "tensor"), ("pp", "pipeline"), ("cp", "context")):
        lay[key] = _int(draft, f"{p}{name}_parallel_degree", 1)
    lay["ep"] = _int(draft, p + "expert_parallel_degree", 1)
    lay["etp"] = _int(draft, p + "expert_tensor_parallel_degree", 1)
    lay["sequence_parallel"] = True  # torchtitan's TP plan shards norms along the sequence
    others = replicate * lay["tp"] * lay["pp"] * lay["cp"]
    if shard == -1:
        if num_gpus is None:
            draft.notes.append(
                "data_parallel_shard_degree -1 takes the GPUs left over; pass --gpus N to set "
                "it (DP is the replicate degree here)."
            )
            shard = 0  # unknown until the GPU count is given
        elif num_gpus % others:
            raise RecipeError(
                f"replicate x TP x PP x CP = {others} does not divide the {num_gpus} GPUs"
            )
        else:
            shard = num_gpus // others
    elif num_gpus is not None and shard * others != num_gpus:
        raise RecipeError(
            f"the parallelism degrees multiply to {shard * others} GPUs, not the {num_gpus} "
            f"asked for"
        )
    if shard == 0:  # DP stays open (Draft.finish notes it)
        _sharding(draft, replicate, 2)  # FSDP over the GPUs left over
        return
    lay["dp"] = replicate * shard
    draft.num_gpus = lay["dp"] * lay["tp"] * lay["pp"] * lay["cp"]
    _sharding(draft, replicate, shard)


def _sharding(draft: Draft, replicate: int, shard: int) -> None:
    """FSDP2 over shard x CP ranks as ZeRO-3 (HSDP: ``dp_shard`` ranks per copy, replicated
    ``replicate`` times), and whether the gathered weights are freed after the forward."""
    reshard = draft.text("parallelism.fsdp_reshard_after_forward") or "default"
    if reshard not in ("default", "always", "never"):
        raise RecipeError(
            f"parallelism.fsdp_reshard_after_forward must be default, always or never, got "
            f"{reshard!r}"
        )
    fsdp = shard > 1 or draft.layout["cp"] > 1  # torchtitan applies FSDP over shard x CP
    if not fsdp:
        draft.layout["zero"] = 0
        return
    draft.layout["zero"] = 3
    # torchtitan apply_fsdp: "default" reshards after the forward except under PP
    kept = reshard == "never" or (reshard == "default" and draft.layout["pp"] > 1)
    draft.layout["reshard_after_forward"] = not kept
    if replicate > 1:
        draft.replicas = (replicate, "parallelism.data_parallel_replicate_degree")


def _batch(draft: Draft) -> None:
    local = _int(draft, "training.local_batch_size", 0) or _int(draft, "training.batch_size", 8)
    seq = _int(draft, "training.seq_len", 2048)
    draft.workload["seq_len"] = seq
    glob = draft.int("training.global_batch_size")
    if "dp" not in draft.layout and (glob is None or glob <= 0):
        # the global batch defaults to local x DP, and DP is not known without the GPU count
        _micro_batch(draft, local)
        return
    dp = draft.layout.get("dp", 1)
    gbs = glob if glob is not None and glob > 0 else local * dp
    if gbs % (local * dp):
        raise RecipeError(
            f"training.global_batch_size {gbs} is not a multiple of local_batch_size {local} x "
            f"DP {dp}"
        )
    draft.workload["global_batch_size"] = gbs
    _micro_batch(draft, local)


def _micro_batch(draft: Draft, local: int) -> None:
    if draft.layout["pp"] == 1:
        draft.layout["micro_batch_size"] = local
        return
    mbs = _int(draft, "parallelism.pipeline_parallel_microbatch_size", 1)
    if local % mbs:
        raise RecipeError(
            f"training.local_batch_size {local} is not a multiple of "
            f"parallelism.pipeline_parallel_microbatch_size {mbs}"
        )
    draft.layout["micro_batch_size"] = mbs


def _leftovers(draft: Draft) -> None:
    unknown = []
    for name, setting in draft.settings.items():
        if name in draft.used:
            continue
        entry = TABLE.get(name)
        if isinstance(entry, Unsupported):
            if setting.value not in entry.neutral:
                draft.say(f"{name} = {setting.value!r}: {entry.reason}.")
        elif entry is None and name.split(".")[0] not in IGNORED_SECTIONS:
            unknown.append(name)
    if unknown:
        draft.say(f"Not known to the tool, so not read: {', '.join(unknown)}.")
