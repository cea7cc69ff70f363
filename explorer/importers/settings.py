"""Launch settings as written, read into one flat map: setting name -> value and how it was spelled.

Three spellings reach the Megatron importer: an argument line (``--tensor-model-parallel-size 8
--sequence-parallel ...``, with a ``torchrun ... pretrain_gpt.py`` prefix and ``\\`` line ends),
a recipe YAML (Megatron-Bridge's ``ConfigContainer`` sections or a NeMo ``trainer:`` /
``model:`` file) and an override list (``model.tensor_model_parallel_size=8``, one per line or
space-separated, as Hydra and Megatron-Bridge take them). Names become Megatron's argparse
destinations (dashes to underscores); a value keeps its type (YAML) or stays text (argument line).
Bad input raises ``RecipeError`` with one sentence naming where.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from explorer.limits import MAX_RECIPE_BYTES


class RecipeError(ValueError):
    """Launch settings that cannot be read; the message is one sentence naming the field."""


@dataclass(frozen=True, slots=True)
class Setting:
    """One setting as the user wrote it."""

    name: str
    """Canonical name (Megatron's argparse destination, or torchtitan's ``section.field``)."""
    value: Any
    """The value: text from an argument line, typed from YAML or TOML; True for a bare flag."""
    spelled: str
    """How the user wrote the name (``--pipeline-model-parallel-size``, ``model.num_layers``)."""


Settings = dict[str, Setting]

EXPLORER_COMMENT = "# explorer:"
"""Prefix of the comment lines our exporter writes for what a framework has no flag for."""


def _lines_without_comments(text: str) -> tuple[str, list[str]]:
    """The text with ``#`` comments removed, and the exporter's ``# explorer:`` comments."""
    kept, ours = [], []
    for line in text.replace("\\\n", " ").splitlines():
        stripped = line.strip()
        if stripped.startswith(EXPLORER_COMMENT):
            ours.append(stripped[len(EXPLORER_COMMENT) :].strip())
        kept.append(re.sub(r"(^|\s)#.*$", "", line))
    return "\n".join(kept), ours


def _flag_name(token: str) -> str:
    return token.lstrip("-").replace("-", "_")


def _ends_values(token: str) -> bool:
    """The next flag, or the training script after the launcher's flags (``torchrun --nnodes 2
    pretrain_gpt.py --tensor-model-parallel-size 8``)."""
    return (token.startswith("--") and len(token) > 2) or token.endswith(".py")


def argument_settings(text: str) -> tuple[Settings, list[str]]:
    """An argument line as settings (a bare flag is True; several values make a list), and the
    exporter's ``# explorer:`` comments."""
    body, ours = _lines_without_comments(text)
    try:
        tokens = shlex.split(body)
    except ValueError as error:
        raise RecipeError(f"the argument line cannot be split into words: {error}") from None
    settings: Settings = {}
    i = 0
    while i < len(tokens):
        token = tokens[i]
        i += 1
        if not token.startswith("--"):
            continue  # torchrun, the script path, an environment assignment
        if "=" in token:
            token, value = token.split("=", 1)
            values = [value]
        else:
            values = []
            while i < len(tokens) and not _ends_values(tokens[i]):
                values.append(tokens[i])
                i += 1
        name = _flag_name(token)
        parsed: Any = True if not values else values[0] if len(values) == 1 else values
        if name.startswith("no_") and parsed is True:
            name, parsed = name[3:], False
        settings[name] = Setting(name, parsed, token)
    return settings, ours


def looks_like_arguments(text: str) -> bool:
    """Whether the text is an argument line (its first word that is not a launcher starts
    with ``--``) rather than YAML or an override list."""
    body, _ = _lines_without_comments(text)
    return bool(re.search(r"(^|\s)--[A-Za-z]", body))


def flatten(data: Mapping[str, Any], priority: Iterable[str] = ()) -> Settings:
    """Nested sections as settings by their leaf name. A name found in several sections keeps
    the first value that is set (not None, not False), sections in ``priority`` first."""
    order = [*priority, *(k for k in data if k not in priority)]
    settings: Settings = {}
    budget = [MAX_SETTINGS_VISITED]
    for section in order:
        if section in data:
            _collect(data[section], [section], settings, budget)
    return settings


MAX_WORD_CHARS = 4_096
"""Longest run of text without a space a recipe may hold: shlex reads a word in time that
grows with the square of its length (a 1 MB word takes half a minute; issue 15)."""


def check_recipe_text(text: str) -> None:
    """RecipeError when ``text`` is too large for the readers (explorer.limits) or holds a word
    over MAX_WORD_CHARS."""
    if len(text) > MAX_RECIPE_BYTES:
        raise RecipeError(f"the settings are over {MAX_RECIPE_BYTES:,} characters, too long")
    longest = max((len(w) for w in re.findall(rf"\S{{{MAX_WORD_CHARS + 1},}}", text)), default=0)
    if longest:
        raise RecipeError(
            f"the settings hold a word of {longest:,} characters without a space; a setting is "
            f"at most {MAX_WORD_CHARS:,}"
        )


MAX_SETTINGS_VISITED = 100_000
"""Settings a recipe may hold, counted as visited: YAML aliases can make a few lines expand
into billions of entries ("billion laughs"), so the walk has a budget (issue 15)."""


def _collect(value: Any, path: list[str], settings: Settings, budget: list[int]) -> None:
    budget[0] -= 1
    if budget[0] < 0:
        raise RecipeError(
            f"the recipe holds more than {MAX_SETTINGS_VISITED:,} settings (counting repeated "
            "aliases), more than this tool reads"
        )
    if len(path) > 64:
        raise RecipeError(f"the recipe nests more than 64 levels deep at {'.'.join(path[:3])}...")
    if isinstance(value, Mapping) and not _is_dtype(value):
        for key, inner in value.items():
            _collect(inner, [*path, str(key)], settings, budget)
        return
    name = path[-1]
    if name.startswith("_"):
        return  # _target_, _partial_: Hydra's instantiation markers
    value = _dtype_name(value) if isinstance(value, Mapping) else value
    old = settings.get(name)
    if old is None or (old.value in (None, False) and value not in (None, False)):
        settings[name] = Setting(name, value, ".".join(path))


def _is_dtype(value: Mapping[str, Any]) -> bool:
    return str(value.get("_target_", "")).startswith("torch.")


def _dtype_name(value: Mapping[str, Any]) -> str:
    """``{_target_: torch.bfloat16, _call_: false}`` (how Bridge writes a dtype) as ``bfloat16``."""
    return str(value["_target_"]).removeprefix("torch.")


def yaml_settings(text: str, priority: Iterable[str] = ()) -> Settings:
    """A recipe YAML, or a list of ``section.key=value`` overrides, as settings."""
    import yaml

    if _is_override_list(text):
        return _override_settings(text)
    try:
        # the C parser where PyYAML has it: the pure-Python one takes seconds on a 1 MiB file
        data = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise RecipeError(f"the recipe is not valid YAML{where}") from None
    if not isinstance(data, Mapping):
        raise RecipeError("the recipe YAML must be a mapping of sections (model:, train:, ...)")
    if isinstance(data.get("ConfigContainer"), Mapping):
        data = data["ConfigContainer"]  # Megatron-Bridge perf overrides wrap the sections
    return flatten(data, priority)


def _is_override_list(text: str) -> bool:
    words = shlex.split(_lines_without_comments(text)[0])
    return bool(words) and all(re.fullmatch(r"\+{0,2}[\w.]+=.*", w) for w in words)


def _override_settings(text: str) -> Settings:
    """``model.tensor_model_parallel_size=8 train.global_batch_size=512`` as settings (values
    read as YAML scalars, as Hydra reads them)."""
    import yaml

    settings: Settings = {}
    for word in shlex.split(_lines_without_comments(text)[0]):
        key, raw = word.lstrip("+").split("=", 1)
        try:
            value = yaml.safe_load(raw) if raw else None
        except yaml.YAMLError:
            value = raw
        name = key.rsplit(".", 1)[-1]
        settings[name] = Setting(name, value, key)
    return settings
