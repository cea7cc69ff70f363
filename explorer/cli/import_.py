"""``python -m explorer import``: a user's Megatron or torchtitan launch settings as the scenario.

``--megatron`` takes a Megatron-LM argument line (``torchrun ... pretrain_gpt.py --tensor-model-
parallel-size 8 ...``), a Megatron-Bridge or NeMo recipe YAML, or an override list
(``model.tensor_model_parallel_size=8 ...``); ``--torchtitan`` a torchtitan job TOML. ``-`` reads
standard input. The layout comes out under the search rows' keys, with ``unsupported``: one
sentence per setting the tool cannot express.
"""

from __future__ import annotations

import argparse

from explorer.files import UserFileError, read_user_text
from explorer.importers import Imported, imported_json, read_megatron, read_torchtitan
from explorer.importers.settings import RecipeError
from explorer.limits import MAX_RECIPE_BYTES

NAME = "import"
HELP = "read Megatron-LM / Megatron-Bridge / NeMo or torchtitan launch settings into the scenario"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--megatron", metavar="FILE", help="argument line, recipe YAML or overrides; - for stdin"
    )
    source.add_argument(
        "--torchtitan", metavar="FILE", help="torchtitan job config (TOML); - for stdin"
    )
    parser.add_argument(
        "--gpus", type=int, help="GPUs the job runs on, when the settings do not say (sets DP)"
    )
    parser.add_argument(
        "--model", help="preset id or config.json whose layer count splits the pipeline, when "
        "the settings carry none"
    )  # fmt: skip


def read_text(path: str) -> str:
    """The file's text, or standard input for ``-`` (a regular file of at most
    MAX_RECIPE_BYTES, explorer.files)."""
    try:
        return read_user_text(path, "launch settings", MAX_RECIPE_BYTES)
    except UserFileError as error:
        raise RecipeError(str(error)) from None


def imported_from(
    framework: str, path: str, num_gpus: int | None = None, model: str | None = None
) -> Imported:
    """The import of one file (``framework`` megatron or torchtitan)."""
    from explorer.presets import load_model

    if num_gpus is not None and num_gpus <= 0:
        raise ValueError(f"--gpus must be positive, got {num_gpus}")
    spec = load_model(model) if model else None
    reader = read_megatron if framework == "megatron" else read_torchtitan
    return reader(read_text(path), num_gpus, spec)


def run(args: argparse.Namespace) -> dict:
    framework = "megatron" if args.megatron else "torchtitan"
    imported = imported_from(framework, args.megatron or args.torchtitan, args.gpus, args.model)
    return imported_json(imported)


def render(result: dict) -> str:
    lay, work = result["layout"], result["workload"]
    fields = " ".join(f"{k}={v}" for k, v in lay.items() if v is not None)
    lines = [
        f"{result['framework']} settings: model {result['model'] or '(not named)'}, "
        f"{result['num_gpus'] or '?'} GPUs",
        f"  layout: {fields}",
        "  workload: " + " ".join(f"{k}={v}" for k, v in work.items()),
    ]
    lines += [f"  note: {n}" for n in result["notes"]]
    lines += [f"  unsupported: {s}" for s in result["unsupported"]]
    return "\n".join(lines)
