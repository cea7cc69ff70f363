"""Megatron-LM and Megatron-Bridge / NeMo launch settings -> the tool's layout and workload.

Which setting goes where is ``megatron_table.TABLE``; this module reads the ``Field`` ones.
Semantics follow Megatron-LM's ``arguments.py`` and Megatron-Core: DP is the world size over
TP x PP x CP; ETP defaults to TP; ``--use-distributed-optimizer`` shards optimizer states and
master weights (ZeRO-1); Megatron-FSDP's ``--data-parallel-sharding-strategy`` optim /
optim_grads / optim_grads_params are ZeRO-1 / 2 / 3; virtual stages make the interleaved 1F1B
schedule; ``--recompute-granularity full --recompute-method uniform --recompute-num-layers 1``
recomputes every layer from its input, ``selective`` the ``--recompute-modules`` (default
core_attn); ``--num-distributed-optimizer-instances N`` shards the states within dp / N ranks
(``Layout.dp_shard``); activation, layer and optimizer offload read into their layout fields.
"""

from __future__ import annotations

from explorer.importers.comments import apply_explorer_comments, comment_lines
from explorer.importers.megatron_model import match_model, num_layers_of
from explorer.importers.megatron_pipeline import read_pipeline
from explorer.importers.megatron_precision import read_precision
from explorer.importers.megatron_table import (
    ALIASES,
    TABLE,
    Unsupported,
    is_ignored,
    is_model_detail,
)
from explorer.importers.scenario import Draft, Imported
from explorer.importers.settings import (
    RecipeError,
    Setting,
    Settings,
    argument_settings,
    check_recipe_text,
    looks_like_arguments,
    yaml_settings,
)
from explorer.specs import OFFLOAD_MODULES, RECOMPUTE_MODULES, ModelSpec

RECOMPUTE_METHODS = ("uniform", "block")

SECTION_PRIORITY = (
    "mixed_precision", "train", "trainer", "model", "ddp", "optimizer", "optim", "dist",
    "comm_overlap", "dataset",
)  # fmt: skip
"""Bridge repeats some settings in several sections (fp8 in model and mixed_precision); the
first section here that sets one wins."""


def read_megatron(
    text: str, num_gpus: int | None = None, model: ModelSpec | None = None
) -> Imported:
    """The scenario of a Megatron argument line, recipe YAML or override list.

    ``num_gpus`` is the world size when the settings do not give one; ``model`` the model
    whose layer count splits the pipeline when the settings carry no ``num_layers``.
    """
    check_recipe_text(text)
    arguments = looks_like_arguments(text)
    if arguments:
        raw, ours = argument_settings(text)
    else:
        raw, ours = yaml_settings(text, SECTION_PRIORITY), comment_lines(text)
    draft = Draft(_canonical(raw))
    draft.model, preset_layers = match_model(draft)
    num_layers = num_layers_of(draft) or preset_layers or (model and model.num_hidden_layers)
    _world(draft, num_gpus)
    _degrees(draft)
    if arguments:  # a launch line is complete: what it leaves out is Megatron's default
        for key in ("tp", "pp", "cp", "ep"):
            draft.layout.setdefault(key, 1)
        draft.batch_defaults_to_one_step = True
    _batch(draft)
    _sharding(draft)
    read_pipeline(draft, num_layers or None)
    _recompute(draft, num_layers or None)
    _offload(draft)
    _optimizer_instances(draft)
    read_precision(draft, "fp32" if arguments else None)
    apply_explorer_comments(draft, ours, "Megatron-LM")
    _leftovers(draft)
    return draft.finish("megatron")


def _canonical(raw: Settings) -> Settings:
    """Settings under Megatron's names (the first one set wins among aliases)."""
    out: Settings = {}
    for name, setting in raw.items():
        canonical = ALIASES.get(name, name)
        old = out.get(canonical)
        if old is None or (old.value in (None, False, "") and setting.value not in (None, False)):
            out[canonical] = type(setting)(canonical, setting.value, setting.spelled)
    return out


def _world(draft: Draft, num_gpus: int | None) -> None:
    nodes, per_node = draft.int("num_nodes"), draft.int("gpus_per_node")
    from_file = None if per_node is None else per_node * (nodes or 1)
    if from_file is not None and num_gpus is not None and from_file != num_gpus:
        raise RecipeError(
            f"the settings run on {from_file} GPUs ({nodes or 1} nodes x {per_node}), "
            f"not the {num_gpus} asked for"
        )
    draft.num_gpus = from_file if from_file is not None else num_gpus


def _degree(draft: Draft, name: str) -> int | None:
    value = draft.int(name)
    if value is not None and value <= 0:
        setting = draft.settings[name]
        raise RecipeError(f"{setting.spelled} must be a positive integer, got {value}")
    return value


def _degrees(draft: Draft) -> None:
    names = {
        "tp": "tensor_model_parallel_size", "pp": "pipeline_model_parallel_size",
        "cp": "context_parallel_size", "ep": "expert_model_parallel_size",
    }  # fmt: skip
    for key, name in names.items():
        value = _degree(draft, name)
        if value is not None:
            draft.layout[key] = value
    etp = _degree(draft, "expert_tensor_parallel_size")
    moe = draft.layout.get("ep", 1) > 1 or (draft.int("num_experts") or 0) > 0
    if etp is None and moe and draft.layout.get("tp", 1) > 1:
        etp = draft.layout["tp"]
        draft.notes.append(f"ETP {etp}: Megatron-Core defaults expert TP to TP.")
    if etp is not None:
        draft.layout["etp"] = etp
    sp = draft.flag("sequence_parallel")
    draft.layout["sequence_parallel"] = bool(sp) or draft.layout.get("tp", 1) == 1


def _batch(draft: Draft) -> None:
    mbs = _degree(draft, "micro_batch_size")
    if mbs is not None:
        draft.layout["micro_batch_size"] = mbs
    for key, name in (("global_batch_size", "global_batch_size"), ("seq_len", "seq_length")):
        value = _degree(draft, name)
        if value is not None:
            draft.workload[key] = value


_STRATEGY_ZERO = {"no_shard": 0, "optim": 1, "optim_grads": 2, "optim_grads_params": 3}
"""Megatron-FSDP sharding strategies as ZeRO stages (Megatron-LM megatron_fsdp README)."""


def _sharding(draft: Draft) -> None:
    distributed = bool(draft.flag("use_distributed_optimizer"))
    optim = draft.text("name")
    if optim in ("distributed_fused_adam", "mcore_distributed_optim"):
        distributed = True  # NeMo 1's sharded Adam (ZeRO-1 over the data-parallel ranks)
    zero = 1 if distributed else 0
    if draft.flag("use_torch_fsdp2"):
        zero = 3
    strategy = draft.text("data_parallel_sharding_strategy")
    if draft.flag("use_megatron_fsdp") and strategy is not None:
        if strategy not in _STRATEGY_ZERO:
            raise RecipeError(
                f"{draft.settings['data_parallel_sharding_strategy'].spelled} must be one of "
                f"{', '.join(_STRATEGY_ZERO)}, got {strategy!r}"
            )
        zero = max(zero, _STRATEGY_ZERO[strategy])
    if zero or "use_distributed_optimizer" in draft.settings:
        draft.layout["zero"] = zero


def _recompute(draft: Draft, num_layers: int | None) -> None:
    """Megatron-Core recompute (TransformerConfig recompute_granularity / recompute_method /
    recompute_num_layers / recompute_modules) into the layout's recompute fields."""
    granularity = draft.text("recompute_granularity")
    if granularity is None and draft.flag("recompute_activations"):
        granularity = "selective"  # the older spelling of selective recompute
    method = draft.text("recompute_method")
    count = _degree(draft, "recompute_num_layers")
    modules = _modules(draft)
    if granularity is None:
        return
    if granularity == "selective":
        if not modules:
            draft.layout["recompute"] = "none"
            draft.notes.append("Selective recompute of no modules: no recompute.")
            return
        draft.layout["recompute"] = "selective"
        draft.layout["recompute_modules"] = modules
        return
    if granularity != "full":
        raise RecipeError(f"recompute granularity must be full or selective, got {granularity!r}")
    method = method or "uniform"
    if method not in RECOMPUTE_METHODS:
        raise RecipeError(f"recompute method must be uniform or block, got {method!r}")
    draft.layout["recompute"] = "full"
    draft.layout["recompute_method"] = method
    if method == "uniform" and count not in (None, 1):
        draft.layout["recompute_num_layers"] = count  # None is one block per checkpoint
    elif method == "block" and count is not None:
        per_chunk = _layers_per_chunk(draft, num_layers)
        if per_chunk is None or count < per_chunk:
            draft.layout["recompute_num_layers"] = count  # None is every block of a chunk


def _layers_per_chunk(draft: Draft, num_layers: int | None) -> int | None:
    """The most blocks a model chunk holds (the block method's "all of them"), None without
    the layer count."""
    from explorer.partition import chunk_sizes, end_stage_layers
    from explorer.pipeline_layout import parse_pipeline_layout

    lay = draft.layout
    pp, virtual = lay.get("pp", 1), lay.get("virtual_stages", 1)
    if lay.get("pipeline_layout"):
        return max(c.blocks for c in parse_pipeline_layout(lay["pipeline_layout"], pp))
    if not num_layers:
        return None
    ends = lay.get("first_stage_layers"), lay.get("last_stage_layers")
    per_rank = lay.get("stage_layers") or end_stage_layers(num_layers, pp, *ends)
    return max(chunk_sizes(num_layers, pp, virtual, per_rank))


def _modules(draft: Draft) -> tuple[str, ...]:
    setting = draft.get("recompute_modules")
    if setting is None:
        return ("core_attn",)  # Megatron-LM's default module list
    return _names(setting, RECOMPUTE_MODULES)


def _names(setting: Setting, allowed: tuple[str, ...]) -> tuple[str, ...]:
    """A list setting's module names, checked against ``allowed`` (RecipeError naming it)."""
    value = setting.value
    if value is True:
        value = []
    words = value if isinstance(value, list) else str(value).replace(",", " ").split()
    names = tuple(dict.fromkeys(str(w).strip().lower() for w in words if str(w).strip()))
    wrong = [n for n in names if n not in allowed]
    if wrong:
        raise RecipeError(
            f"{setting.spelled} names {', '.join(wrong)}, not one of {', '.join(allowed)}"
        )
    return names


def _offload(draft: Draft) -> None:
    """Megatron-Core activation offload (fine-grained per module, or whole layers through
    Transformer Engine) and the CPU optimizer offload into the layout."""
    modules = draft.get("offload_modules")
    if draft.flag("fine_grained_activation_offloading") and modules is not None:
        names = _names(modules, OFFLOAD_MODULES)
        if names:
            draft.layout["activation_offload"] = names
    layers = _count(draft, "cpu_offloading_num_layers")
    if draft.flag("cpu_offloading"):
        if layers:
            draft.layout["offload_layers"] = layers
        else:  # Megatron-LM --cpu-offloading-num-layers defaults to 0
            draft.notes.append("--cpu-offloading with 0 layers to offload: nothing is offloaded.")
    fraction = draft.get("optimizer_offload_fraction")
    if draft.flag("optimizer_cpu_offload"):
        # Megatron-LM --optimizer-offload-fraction defaults to 1.0 (all states on the host)
        share = 1.0 if fraction is None else _fraction(fraction)
        if share:
            draft.layout["optimizer_offload_fraction"] = share


def _count(draft: Draft, name: str) -> int | None:
    value = draft.int(name)
    if value is not None and value < 0:
        raise RecipeError(f"{draft.settings[name].spelled} must be zero or more, got {value}")
    return value


def _fraction(setting: Setting) -> float:
    try:
        value = float(setting.value)
    except (TypeError, ValueError):
        value = -1.0
    if isinstance(setting.value, bool) or not 0 <= value <= 1:
        raise RecipeError(f"{setting.spelled} must be a number from 0 to 1, got {setting.value!r}")
    return value


def _optimizer_instances(draft: Draft) -> None:
    """Megatron's partial distributed optimizer (HSDP-like): each instance shards the optimizer
    over dp / instances ranks and the instances replicate it (Megatron-Core
    DistributedDataParallelConfig.num_distributed_optimizer_instances)."""
    instances = _degree(draft, "num_distributed_optimizer_instances")
    if instances is None or instances == 1:
        return
    setting = draft.settings["num_distributed_optimizer_instances"]
    if not draft.layout.get("zero"):
        draft.say(
            f"{setting.spelled} {instances}: without the distributed optimizer nothing is "
            f"sharded, so the instances change nothing."
        )
        return
    draft.replicas = (instances, setting.spelled)


def _leftovers(draft: Draft) -> None:
    """A sentence for each set unsupported setting, and one naming the unknown ones."""
    unknown, details = [], []
    for name, setting in draft.settings.items():
        if name in draft.used:
            continue
        entry = TABLE.get(name)
        if isinstance(entry, Unsupported):
            if setting.value not in entry.neutral:
                draft.say(f"{setting.spelled}{_shown(setting.value)}: {entry.reason}.")
        elif entry is None and is_model_detail(name) and setting.value not in _OFF:
            details.append(setting.spelled)
        elif entry is None and not is_ignored(name) and setting.value not in _OFF:
            unknown.append(setting.spelled)
    if details:
        source = f"the preset {draft.model}" if draft.model else "the --model given"
        draft.notes.append(
            f"Model details come from {source}, not from these settings: {', '.join(details)}."
        )
    if unknown:
        draft.say(f"Not known to the tool, so not read: {', '.join(unknown)}.")


_OFF: tuple[object, ...] = (None, False, 0, 0.0, "", [], "none", "null")
"""Values that leave a feature off (a YAML dump lists every default)."""


def _shown(value: object) -> str:
    return "" if value is True else f" {value}"
