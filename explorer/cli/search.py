"""``search``: rank the training layouts of a model on N GPUs; list the rejected ones with reasons.

``--mbs`` fixes the micro-batch (otherwise the search space's values are tried); the other
search-space flags narrow or widen what is tried. ``--top K`` ranks the K fastest layouts.
"""

from __future__ import annotations

import argparse
import math
from typing import Any

import pandas as pd

from explorer.cli.args import (
    add_assume,
    add_calibration,
    add_cluster,
    add_model,
    add_recipes,
    add_space,
    add_workload,
    assumed,
    calibration_from,
    calibration_json,
    calibration_lines,
    cluster_from,
    few,
    model_from,
    overrides_from,
    recipes_from,
    space_choices,
    whole,
    workload_from,
)
from explorer.cli.cost_args import add_cost, cost_from
from explorer.cli.importing import (
    RECIPE_DESTS,
    WORKLOAD_DESTS,
    add_import,
    apply_import,
    imported_lines,
    imported_result,
)
from explorer.cost import price_of
from explorer.estimate import DEFAULT_ESTIMATE_ASSUMPTIONS
from explorer.importers import Imported
from explorer.mesh import SearchSpace
from explorer.precision import precision_policy
from explorer.search import search
from explorer.search.recipe import FULL_FIELDS, OTHER_FIELDS, SELECTIVE_FIELDS, LayoutRecipe
from explorer.search.rows import LAYOUT_COLUMNS, with_cost_column
from explorer.specs import Layout, Recompute
from explorer.units import GiB

NAME = "search"
HELP = "rank the training layouts of a model on N GPUs, with the rejected ones and why"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_model(parser)
    add_cluster(parser, gpus=True)
    add_workload(parser)
    parser.set_defaults(mbs=None)  # --mbs fixes the micro-batch; by default the space's values
    group = parser.add_argument_group("search")
    group.add_argument(
        "--top", type=whole("ranked"), default=10, help="layouts to rank (default 10)"
    )
    add_space(group)
    group.add_argument("--cp-values", type=whole("cp"), nargs="+", help="context-parallel degrees")
    group.add_argument("--ep-values", type=whole("ep"), nargs="+", help="expert-parallel degrees")
    group.add_argument(
        "--etp-values",
        type=whole("etp"),
        nargs="+",
        help="expert-tensor-parallel degrees (default 1)",
    )
    assumptions = parser.add_argument_group("assumptions")
    add_assume(assumptions)
    add_calibration(assumptions)
    add_recipes(parser)  # kept in every layout they apply to (explorer.search.recipe)
    add_import(
        parser,
        (*WORKLOAD_DESTS, *RECIPE_DESTS),
        "the workload, model, GPU count and memory recipe (the search picks layouts)",
    )
    add_cost(parser, training=False)
    add_mixed_search(parser)


def add_mixed_search(parser: argparse.ArgumentParser) -> None:
    """``--mixed-groups``/``--mixed-split`` and ``--straggler-*``: the search re-ranked on a
    mixed cluster or with a straggler (explorer.hetero_search)."""
    from explorer.cli.estimate import add_mixed_groups, add_straggler

    group = parser.add_argument_group("mixed cluster")
    add_mixed_groups(group, "rank layouts on cluster presets mixed, e.g. hgx-h100:4,dgx-a100:4")
    group.add_argument(
        "--mixed-mode",
        choices=("dp", "pp"),
        default="dp",
        help="dp: data parallel across the types; pp: pipeline ranks on the types in the "
        "groups' order, layers balanced",
    )
    add_straggler(parser)


def mixed_search_result(args: argparse.Namespace, model, workload, space, assumptions) -> dict:
    """The ``mixed`` and ``straggler`` objects the flags ask for (none without the flags)."""
    from explorer.cli.estimate import straggler_from
    from explorer.hetero import parse_groups
    from explorer.hetero_search import (
        mixed_search,
        mixed_search_dict,
        pipeline_search,
        straggler_search,
        straggler_search_dict,
    )
    from explorer.presets import load_cluster

    out: dict = {}
    straggler = straggler_from(args)
    if args.mixed_groups is not None:
        if straggler is not None:
            raise ValueError("give --mixed-groups or --straggler-slowdown, not both")
        groups = tuple(load_cluster(n, k) for n, k in parse_groups(args.mixed_groups))
        if args.mixed_mode == "pp":
            found = pipeline_search(model, groups, workload, space=space,
                                    assumptions=assumptions, ranked=args.top)  # fmt: skip
        else:
            found = mixed_search(model, groups, workload, split=args.mixed_split, space=space,
                                 assumptions=assumptions, ranked=args.top)  # fmt: skip
        out["mixed"] = mixed_search_dict(found)
    elif straggler is not None:
        cluster = cluster_from(args, args.gpus)
        slow = straggler_search(model, cluster, workload, straggler, num_gpus=args.gpus,
                                space=space, assumptions=assumptions, ranked=args.top)  # fmt: skip
        out["straggler"] = straggler_search_dict(slow)
    return out


def space_from(args: argparse.Namespace) -> SearchSpace:
    """The search space the flags ask for (defaults where a flag is absent)."""
    chosen: dict[str, Any] = {
        **space_choices(args),
        "cp_values": few(args.cp_values, "--cp-values"),
        "ep_values": few(args.ep_values, "--ep-values"),
        "etp_values": few(args.etp_values, "--etp-values"),
    }
    if args.mbs is not None:  # --mbs fixes the micro-batch
        chosen["micro_batch_sizes"] = (args.mbs,)
    given: dict[str, Any] = {
        k: tuple(v) if isinstance(v, list) else v for k, v in chosen.items() if v is not None
    }
    return SearchSpace(**given)


def _plain(value: object) -> object:
    """A JSON-ready value: numpy scalars as Python numbers, NaN and NA as None."""
    if hasattr(value, "item"):
        value = value.item()
    if value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA:
        return None
    return list(value) if isinstance(value, tuple) else value


def records(frame: pd.DataFrame) -> list[dict[str, object]]:
    """Rows of a result DataFrame as JSON-ready dicts."""
    return [{str(k): _plain(v) for k, v in row.items()} for row in frame.to_dict(orient="records")]


def recipe_from(args: argparse.Namespace, imported: Imported | None) -> LayoutRecipe | None:
    """The memory recipe of the flags and the import; its uneven stages pinned to the imported
    pipeline split (any split with pp > 1 without an import); a recompute it refines replaces
    the searched ones (``explorer.search.recipe``). One sentence when it is wrong."""
    from explorer.cli import UserError

    fields = recipes_from(args)
    defaults = Layout()
    chosen = {k: v for k, v in fields.items() if v != getattr(defaults, k)}
    if not chosen:
        return None
    shard = chosen.get("dp_shard")
    dp = shard if isinstance(shard, int) else 1
    groups: tuple[tuple[Recompute, tuple[str, ...]], ...] = (
        ("selective", SELECTIVE_FIELDS),
        ("full", FULL_FIELDS),
    )
    for recompute, names in groups:
        group: dict[str, Any] = {k: v for k, v in chosen.items() if k in names or k in OTHER_FIELDS}
        try:  # each group checked on a layout of the recompute it is written for
            Layout(recompute=recompute, dp=dp, **group)
        except ValueError as error:
            raise UserError(str(error)) from None
    split = imported.layout if imported is not None else None
    try:
        return LayoutRecipe(
            tuple(chosen.items()),
            pp=split.pp if split else None,
            virtual_stages=split.virtual_stages if split else None,
        )
    except ValueError as error:
        raise UserError(str(error)) from None


def run(args: argparse.Namespace) -> dict:
    imported = apply_import(args)
    model, workload = model_from(args), workload_from(args)
    cluster = cluster_from(args, args.gpus)
    figures = calibration_from(args, cluster, precision_policy(workload.precision).compute)
    calibrated = figures.overrides() if figures else {}
    assumptions = assumed(args, DEFAULT_ESTIMATE_ASSUMPTIONS, calibrated=calibrated)
    extra = mixed_search_result(args, model, workload, space_from(args), assumptions)
    result = search(
        model, cluster, workload, num_gpus=args.gpus, space=space_from(args), ranked=args.top,
        assumptions=assumptions, recipe=recipe_from(args, imported),
    )  # fmt: skip
    by_kind = result.rejected.groupby("kind", observed=True)["num_layouts"].sum()
    price, price_source = price_of(cluster.gpu, cost_from(args))
    return {
        "model": model.name,
        "gpu": cluster.gpu.name,
        "num_gpus": args.gpus,
        "evaluated": result.evaluated,
        "estimated": result.estimated,
        "elapsed_s": result.elapsed_s,
        "layouts": records(with_cost_column(result.layouts, args.gpus, price)),
        "price_per_gpu_hour": price,
        "price_source": price_source,
        "rejected": records(result.rejected),
        "rejected_by_kind": {str(k): int(v) for k, v in by_kind.items()},
        "assumed": overrides_from(args, assumptions),
        "calibration": calibration_json(args, figures),
        "imported": imported_result(args),
        **extra,
    }


def _layout_text(row: dict) -> str:
    fields = " ".join(f"{k}={row[k]}" for k in LAYOUT_COLUMNS if k not in ("etp",))
    return fields.replace("schedule=", "").replace("recompute=", "rc=")


def _cost_text(row: dict) -> str:
    cost = row.get("cost_per_million_tokens_usd")
    return "" if cost is None else f"  ${cost:.4f}/M tokens"


def render(result: dict) -> str:
    lines = [
        f"{result['model']} on {result['num_gpus']} x {result['gpu']}: "
        f"{result['evaluated']:,} layouts considered, {result['estimated']} estimated "
        f"in {result['elapsed_s']:.2f} s"
    ]
    if not result["layouts"]:
        lines.append("  no layout fits and passes every rule")
    for rank, row in enumerate(result["layouts"], start=1):
        lines.append(
            f"  #{rank:<3} {_layout_text(row):<70} step {row['step_time_s']:8.3f} s  "
            f"MFU {100 * row['mfu']:5.1f}%  peak {row['peak_bytes'] / GiB:6.1f} GiB"
            + _cost_text(row)
        )
    lines.append("  rejected (layouts by rule):")
    for kind, count in sorted(result["rejected_by_kind"].items(), key=lambda kv: -kv[1]):
        lines.append(f"    {kind:<12} {count:>10,}")
    if result.get("assumed"):
        lines.append("  assumed: " + ", ".join(f"{k}={v}" for k, v in result["assumed"].items()))
    lines += calibration_lines(result)
    lines += _mixed_search_lines(result)
    return "\n".join(lines + imported_lines(result))


def _mixed_search_lines(result: dict) -> list[str]:
    """The mixed cluster's or the straggler's ranking (seconds), when the flags asked."""
    mixed, slow = result.get("mixed"), result.get("straggler")
    lines: list[str] = []
    if mixed:
        kinds = " + ".join(f"{g['num_nodes']} x {g['gpus_per_node']} {g['gpu']}"
                           for g in mixed["groups"])  # fmt: skip
        sure = "exact" if mixed["certain"] else "not certain (more layouts may be faster)"
        how = ("pipeline across the types" if mixed["mode"] == "pp"
               else f"{mixed['split']} batch split")  # fmt: skip
        lines.append(f"  on the mixed cluster {kinds}, {how} "
                     f"({sure}, {mixed['elapsed_s']:.2f} s):")  # fmt: skip
        for rank, row in enumerate(mixed["layouts"], start=1):
            per = ", ".join(f"{t['gpu']} {t['replicas']} x {t['microbatches']} mb"
                            for t in row["mixed"]["types"])  # fmt: skip
            lines.append(f"  #{rank:<3} {_layout_text(row):<70} step {row['step_time_s']:8.3f} s"
                         f"  ({per})")  # fmt: skip
        if not mixed["layouts"]:
            lines.append("  no layout fits every GPU type with its replicas inside one group")
    if slow:
        top = slow["top"]
        lines.append(f"  with the straggler ({top['slowdown']:.0%} slower, {top['where']}):"
                     if top else "  with the straggler: no layout")  # fmt: skip
        for rank, row in enumerate(slow["layouts"], start=1):
            lines.append(f"  #{rank:<3} {_layout_text(row):<70} step {row['step_time_s']:8.3f} s"
                         f"  (at speed {row['baseline_step_time_s']:.3f} s)")  # fmt: skip
        for m in top["mitigations"] if top else ():
            lines.append(
                f"    mitigation {m['name']}: {m['detail']} (step {m['step_time_s']:.3f} s)"
            )
    return lines
