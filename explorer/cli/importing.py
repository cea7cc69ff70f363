"""``--from-megatron FILE`` / ``--from-torchtitan FILE`` for ``estimate``, ``search``, ``report``.

The imported settings fill the flags they name (layout, workload, model, GPUs); a flag given on
the command line overrides them. Flags that are required without an import (``--tp``, ``--seq``,
``--model``, ...) become optional with one; a flag still missing after the import is named in one
sentence. The result gains ``imported``: where the settings came from and what the tool could not
express of them.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

from explorer.importers import Imported

RECIPE_DESTS = (
    "recompute_modules", "recompute_ops", "recompute_method", "recompute_num_layers",
    "recompute_every", "first_stage_layers", "last_stage_layers", "pipeline_layout",
    "offload_modules", "offload_layers", "optimizer_offload_fraction",
    "no_reshard_after_forward", "dp_shard",
)  # fmt: skip
"""``explorer.cli.args.add_recipes``' flags an import fills."""
_RECIPE_FIELDS = {"offload_modules": "activation_offload", "no_reshard_after_forward":
                  "reshard_after_forward"}  # fmt: skip
_PIPELINE_RECIPES = ("first_stage_layers", "last_stage_layers", "pipeline_layout")
"""Recipe flags that describe one pipeline split: dropped when --pp or --virtual is given."""
LAYOUT_DESTS = (
    "tp", "pp", "dp", "cp", "ep", "etp", "zero", "schedule", "virtual", "recompute",
    "sequence_parallel", "mbs", *RECIPE_DESTS,
)  # fmt: skip
WORKLOAD_DESTS = (
    "seq", "gbs", "precision", "grad_dtype", "bf16_layers_at_start", "bf16_layers_at_end",
    "model", "gpus",
)  # fmt: skip
IMPORT_HELP = (
    "take {what} from a user's launch settings (Megatron-LM argument line, Megatron-Bridge / "
    "NeMo YAML, or torchtitan TOML); flags given on the command line override them"
)


@dataclass(frozen=True, slots=True)
class _Unset:
    """A flag's default, marked so that an import can tell it from a value the user gave."""

    value: Any


def add_import(
    parser: argparse.ArgumentParser,
    dests: tuple[str, ...],
    what: str = "the layout, workload and model",
) -> None:
    """The --from-* flags; ``dests`` are the flags the import may fill, ``what`` says which."""
    group = parser.add_argument_group("import", IMPORT_HELP.format(what=what))
    source = group.add_mutually_exclusive_group()
    source.add_argument("--from-megatron", metavar="FILE", help="Megatron settings; - for stdin")
    source.add_argument("--from-torchtitan", metavar="FILE", help="torchtitan TOML; - for stdin")
    required = []
    for action in parser._actions:
        if action.dest in dests:
            if action.required:
                action.required = False
                required.append(action.option_strings[0])
            action.default = _Unset(action.default)
    parser.set_defaults(_import_dests=dests, _import_required=tuple(required))


def _imported_value(imported: Imported, dest: str) -> Any:
    lay, work = imported.layout, imported.workload
    given = imported.given
    values: dict[str, tuple[str, Any]] = {
        "tp": ("tp", lay.tp), "pp": ("pp", lay.pp), "dp": ("dp", lay.dp), "cp": ("cp", lay.cp),
        "ep": ("ep", lay.ep), "etp": ("etp", lay.etp), "zero": ("zero", lay.zero),
        "schedule": ("schedule", lay.schedule), "virtual": ("virtual", lay.virtual_stages),
        "recompute": ("recompute", lay.recompute), "mbs": ("mbs", lay.micro_batch_size),
        "sequence_parallel": ("sequence_parallel", "on" if lay.sequence_parallel else "off"),
        "seq": ("seq_len", work.seq_len), "gbs": ("global_batch_size", work.global_batch_size),
        "precision": ("precision", work.precision), "grad_dtype": ("grad_dtype", work.grad_dtype),
        "bf16_layers_at_start": ("bf16_layers_at_start", work.bf16_layers_at_start),
        "bf16_layers_at_end": ("bf16_layers_at_end", work.bf16_layers_at_end),
    }  # fmt: skip
    if dest in RECIPE_DESTS:
        return _recipe_value(imported, dest)
    if dest == "model":
        return imported.model
    if dest == "gpus":
        return imported.num_gpus
    key, value = values[dest]
    return value if key in given else None


def _recipe_value(imported: Imported, dest: str) -> Any:
    """The flag's value for a recipe field the import set, None for one it left alone."""
    name = _RECIPE_FIELDS.get(dest, dest)
    if name not in imported.given:
        return None
    value = getattr(imported.layout, name)
    if dest == "no_reshard_after_forward":
        return not value
    return list(value) if isinstance(value, tuple) else value


def _degree(args: argparse.Namespace, explicit: set[str], imported: Imported, dest: str) -> int:
    value = getattr(args, dest) if dest in explicit else getattr(imported.layout, dest)
    return int(value)


def apply_import(args: argparse.Namespace) -> Imported | None:
    """Fill the flags from the imported settings (explicit flags win); the import, or None."""
    from explorer.cli import UserError
    from explorer.cli.import_ import imported_from

    dests = getattr(args, "_import_dests", ())
    explicit = {d for d in dests if not isinstance(getattr(args, d), _Unset)}
    path = args.from_megatron or args.from_torchtitan
    imported = None
    if path:
        framework = "megatron" if args.from_megatron else "torchtitan"
        gpus = args.gpus if "gpus" in explicit else None
        model = args.model if "model" in explicit else None
        imported = imported_from(framework, path, gpus, model)
        if imported.num_gpus is None and "dp" in explicit:
            # the settings leave the world size open: --dp (with the degrees) sets it
            world = (
                args.dp
                * _degree(args, explicit, imported, "tp")
                * _degree(args, explicit, imported, "pp")
                * _degree(args, explicit, imported, "cp")
            )
            imported = imported_from(framework, path, world, model)
    resplit = bool({"pp", "virtual"} & explicit)  # another pipeline: the import's split is moot
    for dest in dests:
        if dest in explicit:
            continue
        value = _imported_value(imported, dest) if imported else None
        if resplit and dest in _PIPELINE_RECIPES:
            value = None
        if dest == "dp_shard" and "dp" in explicit and value and args.dp % value:
            value = None  # the imported shard groups do not divide the DP given
        setattr(args, dest, value if value is not None else getattr(args, dest).value)
    if imported is not None and imported.layout.stage_layers and "pp" not in explicit:
        args.stage_layers = imported.layout.stage_layers
    if imported is not None and hasattr(args, "assume"):  # --assume given later wins
        args.assume = [*(f"{k}={v}" for k, v in imported.assumptions), *args.assume]
    missing = [
        flag
        for flag in args._import_required
        if getattr(args, flag.lstrip("-").replace("-", "_")) is None
    ]
    if missing:
        raise UserError(
            f"{', '.join(missing)} required (or given in --from-megatron / --from-torchtitan)"
        )
    args._imported = imported
    return imported


def imported_result(args: argparse.Namespace) -> dict[str, Any] | None:
    """``imported`` for the result JSON: the file and the sentences, or None without one."""
    imported: Imported | None = getattr(args, "_imported", None)
    if imported is None:
        return None
    return {
        "framework": imported.framework,
        "path": args.from_megatron or args.from_torchtitan,
        "unsupported": list(imported.unsupported),
        "notes": list(imported.notes),
        "assumptions": dict(imported.assumptions),
    }


def imported_lines(result: dict[str, Any]) -> list[str]:
    """Text lines for ``render``: what the import could not express."""
    imported = result.get("imported")
    if not imported:
        return []
    lines = [f"  imported from {imported['path']} ({imported['framework']})"]
    return lines + [f"  unsupported: {s}" for s in imported["unsupported"]]
