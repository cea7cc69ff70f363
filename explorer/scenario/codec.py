"""The scenario as URL query parameters (flat keys) and as JSON, validated by pydantic.

Query parameters are flat (``?model=deepseek-v3&seq=4096&tp=1``); a value that does not
validate falls back to the default, with a message naming the key. Structured values (the
uploaded config, assumption overrides) are JSON validated by pydantic, never pickle. Only values
that differ from the defaults are written, so a link stays short.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, fields, replace
from functools import cache
from typing import Any, get_type_hints

from pydantic import TypeAdapter, ValidationError

from explorer.limits import (
    MAX_REPORT_BYTES,
    MAX_URL_CONFIG_CHARS,
    MAX_URL_VALUE_CHARS,
    LimitError,
    check_json_text,
)
from explorer.scenario.inputs import (
    AssumptionValue,
    ClusterInputs,
    LayoutInputs,
    MixedInputs,
    ModelRef,
    Scenario,
    SearchInputs,
    ServingInputs,
    StragglerInputs,
    TrainingInputs,
)

_GROUPS: dict[str, type] = {
    "model": ModelRef,
    "training": TrainingInputs,
    "cluster": ClusterInputs,
    "layout": LayoutInputs,
    "serving": ServingInputs,
    "search": SearchInputs,
    "mixed": MixedInputs,
    "straggler": StragglerInputs,
}
QUERY_KEYS: Mapping[str, tuple[str, str]] = {
    "workload": ("", "workload"),
    "source": ("model", "source"),
    "model": ("model", "preset"),
    "size_b": ("model", "generic_params_b"),
    "config": ("model", "config_json"),
    "config_name": ("model", "config_name"),
    "precision": ("training", "precision"),
    "seq": ("training", "seq_len"),
    "gbs": ("training", "global_batch_size"),
    "gpu": ("cluster", "gpu"),
    "gpus_per_node": ("cluster", "gpus_per_node"),
    "nodes": ("cluster", "num_nodes"),
    "intra_GBps": ("cluster", "intra_node_GBps"),
    "inter_GBps": ("cluster", "inter_node_GBps"),
    "oversub": ("cluster", "oversubscription"),
    "dp": ("layout", "dp"),
    "tp": ("layout", "tp"),
    "pp": ("layout", "pp"),
    "cp": ("layout", "cp"),
    "ep": ("layout", "ep"),
    "zero": ("layout", "zero"),
    "recompute": ("layout", "recompute"),
    "schedule": ("layout", "schedule"),
    "virtual": ("layout", "virtual_stages"),
    "sp": ("layout", "sequence_parallel"),
    "mbs": ("layout", "micro_batch_size"),
    "rc_modules": ("layout", "recompute_modules"),
    "rc_ops": ("layout", "recompute_ops"),
    "rc_method": ("layout", "recompute_method"),
    "rc_layers": ("layout", "recompute_num_layers"),
    "rc_every": ("layout", "recompute_every"),
    "first_layers": ("layout", "first_stage_layers"),
    "last_layers": ("layout", "last_stage_layers"),
    "pp_layout": ("layout", "pipeline_layout"),
    "offload": ("layout", "activation_offload"),
    "offload_layers": ("layout", "offload_layers"),
    "opt_offload": ("layout", "optimizer_offload_fraction"),
    "reshard": ("layout", "reshard_after_forward"),
    "dp_shard": ("layout", "dp_shard"),
    "prompt": ("serving", "prompt_len"),
    "output": ("serving", "output_len"),
    "concurrency": ("serving", "concurrency"),
    "weights": ("serving", "weights_dtype"),
    "kv": ("serving", "kv_dtype"),
    "schedules": ("search", "schedules"),
    "zeros": ("search", "zero_stages"),
    "recomputes": ("search", "recomputes"),
    "mbs_tried": ("search", "micro_batch_sizes"),
    "max_virtual": ("search", "max_virtual"),
    "tp_cross": ("search", "tp_across_domain"),
    "ranked": ("search", "ranked"),
    "assume": ("", "assumptions"),
    "calib": ("", "calibration"),
    "reserve": ("", "reserve_gib"),
    "measured_step": ("", "measured_step_s"),
    "measured_peak": ("", "measured_peak_gib"),
    "mixed": ("mixed", "groups"),
    "mixed_split": ("mixed", "split"),
    "mixed_mode": ("mixed", "mode"),
    "slow": ("straggler", "slowdown_pct"),
    "slow_where": ("straggler", "where"),
    "slow_stage": ("straggler", "stage"),
    "slow_axis": ("straggler", "axis"),
}
"""URL key -> (group, field); group "" is a field of Scenario itself."""


_NULLABLE = frozenset(
    {"recompute_num_layers", "first_stage_layers", "last_stage_layers", "pipeline_layout",
     "dp_shard", "measured_step_s", "measured_peak_gib"}
)  # fmt: skip
"""Layout fields (and the measured run's) whose None is written "None" in a link."""


@cache
def _adapter(group: str, name: str) -> TypeAdapter[Any]:
    owner = _GROUPS.get(group, Scenario)
    return TypeAdapter(get_type_hints(owner, include_extras=True)[name])


def _get(scenario: Scenario, group: str, name: str) -> Any:
    holder = getattr(scenario, group) if group else scenario
    return getattr(holder, name)


def encode_groups(groups: tuple[tuple[str, int, int], ...]) -> str:
    """Mixed-cluster groups as ``gpu:per_node:nodes`` separated by commas."""
    return ",".join(f"{gpu}:{per}:{nodes}" for gpu, per, nodes in groups)


def decode_groups(raw: str) -> tuple[tuple[str, int, int], ...]:
    """``gpu:per_node:nodes,...`` as groups; ValueError (one sentence) otherwise."""
    out = []
    for item in (p.strip() for p in raw.split(",") if p.strip()):
        parts = item.split(":")
        if len(parts) != 3 or not parts[1].isdigit() or not parts[2].isdigit():
            shown = item if len(item) <= 40 else item[:37] + "..."  # a link's value is 4,096 long
            raise ValueError(f"a mixed-cluster group is GPU:PER_NODE:NODES, got {shown!r}")
        out.append((parts[0], int(parts[1]), int(parts[2])))
    return tuple(out)


def _encode(value: Any) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, tuple) and value and isinstance(value[0], tuple):  # overrides
        return json.dumps(dict(value), sort_keys=True, separators=(",", ":"))
    if isinstance(value, tuple):  # the search's choices: comma-separated
        return ",".join(str(v) for v in value)
    if isinstance(value, float):
        return repr(value)
    return str(value)


def _decode(group: str, name: str, raw: str) -> Any:
    if group == "mixed" and name == "groups":
        return _adapter(group, name).validate_python(decode_groups(raw))
    if name == "assumptions":
        mapping = TypeAdapter(dict[str, AssumptionValue]).validate_json(raw)
        return _adapter(group, name).validate_python(tuple(sorted(mapping.items())))
    if name == "calibration":
        notes = TypeAdapter(dict[str, str]).validate_json(raw)
        return _adapter(group, name).validate_python(tuple(sorted(notes.items())))
    default = getattr(_GROUPS[group](), name) if group else None
    nullable = name.endswith("_GBps") or name in _NULLABLE
    if nullable and raw in ("", "none", "None"):
        return None
    adapter = _adapter(group, name)
    if group in ("search", "layout") and isinstance(default, tuple):
        parts = [int(p) if p.strip().isdigit() else p.strip() for p in raw.split(",") if p]
        return adapter.validate_python(tuple(parts))
    try:
        return adapter.validate_python(raw)
    except ValidationError:
        try:  # numbers in a Literal (the ZeRO stage) validate from their JSON form
            return adapter.validate_json(raw)
        except ValidationError:
            pass
        raise


def to_query(scenario: Scenario) -> dict[str, str]:
    """The URL query parameters of ``scenario``: one flat key per value that is not a default."""
    default = Scenario()
    out: dict[str, str] = {}
    for key, (group, name) in QUERY_KEYS.items():
        value = _get(scenario, group, name)
        if value != _get(default, group, name):
            out[key] = encode_groups(value) if key == "mixed" else _encode(value)
    return out


def _first(value: str | list[str]) -> str:
    return value[-1] if isinstance(value, list) else value


def _reason(error: ValidationError) -> str:
    return error.errors()[0]["msg"].rstrip(".")


def _within_length(name: str, text: str) -> str:
    """``text``, or ValueError when it is longer than a URL value may be (explorer.limits)."""
    most = MAX_URL_CONFIG_CHARS if name == "config_json" else MAX_URL_VALUE_CHARS
    if len(text) > most:
        raise ValueError(f"{len(text):,} characters, more than the {most:,} a link may carry")
    return text


def from_query(params: Mapping[str, str | list[str]]) -> tuple[Scenario, list[str]]:
    """The scenario a link describes, and a message for every value that was ignored.

    Unknown keys are ignored silently (other tools add their own); a value that does not
    validate keeps the default for that field and adds a sentence naming the key.
    """
    values: dict[str, dict[str, Any]] = {group: {} for group in ("", *_GROUPS)}
    messages: list[str] = []
    for key, raw in params.items():
        if key not in QUERY_KEYS:
            continue
        group, name = QUERY_KEYS[key]
        text = _first(raw)
        try:
            values[group][name] = _decode(group, name, _within_length(name, text))
        except (ValidationError, ValueError, RecursionError) as error:
            reason = _reason(error) if isinstance(error, ValidationError) else str(error)
            if isinstance(error, RecursionError):
                reason = "nested too deeply"
            shown = text if len(text) <= 40 else text[:37] + "..."
            messages.append(f"Ignored {key}={shown!r} from the link ({reason}); kept the default.")
    return _assemble(values), messages


def _assemble(values: dict[str, dict[str, Any]]) -> Scenario:
    default = Scenario()
    groups = {group: replace(getattr(default, group), **values[group]) for group in _GROUPS}
    return replace(default, **values[""], **groups)


# ---------------------------------------------------------------------------------------------
# JSON (the report's "scenario" object, and the tests' round trip).

_SCENARIO_ADAPTER: TypeAdapter[Scenario] = TypeAdapter(Scenario)


def to_dict(scenario: Scenario) -> dict[str, Any]:
    """The scenario as plain JSON-able data (groups as objects, overrides as an object)."""
    data = asdict(scenario)
    data["assumptions"] = dict(scenario.assumptions)
    data["calibration"] = dict(scenario.calibration)
    for group in ("search", "layout"):  # tuples (choices, recompute modules) as JSON lists
        data[group] = {k: list(v) if isinstance(v, tuple) else v for k, v in data[group].items()}
    data["mixed"]["groups"] = [list(g) for g in scenario.mixed.groups]
    return data


def to_json(scenario: Scenario) -> str:
    return json.dumps(to_dict(scenario), indent=2, sort_keys=True)


def from_dict(data: Mapping[str, Any]) -> Scenario:
    """The scenario in ``data``; ValueError with one sentence when it does not validate."""
    if not isinstance(data, Mapping):
        raise ValueError("A scenario must be a JSON object.")
    data = dict(data)
    overrides = data.get("assumptions", {})
    if isinstance(overrides, Mapping):
        data["assumptions"] = tuple(sorted(overrides.items()))
    notes = data.get("calibration", {})
    if isinstance(notes, Mapping):
        data["calibration"] = tuple(sorted(notes.items()))
    unknown = sorted(set(data) - {f.name for f in fields(Scenario)})
    if unknown:
        raise ValueError(f"The scenario has unknown keys: {', '.join(unknown)}.")
    try:
        return _SCENARIO_ADAPTER.validate_python(data)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise ValueError(f"The scenario's {where} is invalid: {first['msg']}.") from None


def from_json(text: str | bytes) -> Scenario:
    """The scenario in JSON text, its size and nesting bounded before parsing."""
    try:
        data = json.loads(check_json_text(text, "The scenario", MAX_REPORT_BYTES))
    except LimitError as error:
        raise ValueError(f"{error}.") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ValueError(f"The scenario is not valid JSON ({error}).") from None
    except (ValueError, RecursionError):
        raise ValueError("The scenario holds JSON this tool cannot read.") from None
    return from_dict(data)
