"""``python -m explorer report``: write the layout report of a training scenario to a file.

The flags become one ``Scenario`` (the app's input), so the JSON report written here loads back
into the app. Without LAYOUT flags the search runs and its fastest layout is reported (with the
ranking); ``--rank`` runs it for a given layout too. HTML and PDF figures are drawn by
``explorer.charts.report`` (imported only for those formats: Markdown and JSON stay fast).
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path
from typing import cast

from explorer.cli import UserError
from explorer.cli.args import (
    add_assume,
    add_calibration,
    add_cluster,
    add_layout,
    add_model,
    add_space,
    add_workload,
    calibration_from,
    overrides_from,
    recipes_from,
    space_choices,
)
from explorer.cli.importing import (
    LAYOUT_DESTS,
    WORKLOAD_DESTS,
    add_import,
    apply_import,
    imported_result,
)
from explorer.estimate import DEFAULT_ESTIMATE_ASSUMPTIONS
from explorer.report import ReportFormatUnavailable, build_report, report_json, report_markdown
from explorer.report.assumptions import with_overrides
from explorer.report.content import file_name
from explorer.report.ranking import TOP
from explorer.scenario import (
    ClusterInputs,
    LayoutInputs,
    ModelRef,
    Scenario,
    SearchInputs,
    TrainingInputs,
    from_dict,
    model_ref_from_upload,
    resolve_cluster,
    resolve_model,
    to_dict,
)
from explorer.scenario.inputs import Overrides
from explorer.search import SearchResult
from explorer.specs import ScheduleName

NAME = "report"
HELP = "write the layout report (Markdown, HTML, PDF or JSON) of a training scenario to a file"
FORMATS = ("md", "html", "pdf", "json")
SUFFIXES = {".md": "md", ".markdown": "md", ".html": "html", ".htm": "html", ".pdf": "pdf",
            ".json": "json"}  # fmt: skip
"""File suffix -> format, when --format is left out."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """MODEL, CLUSTER with --gpus, WORKLOAD, optional LAYOUT, --format and --output."""
    add_model(parser)
    add_cluster(parser, gpus=True)
    add_workload(parser)
    add_layout(parser, required=False)
    parser.set_defaults(tp=None, pp=None, dp=None)  # tell "left out" from "1"
    parser.add_argument("--format", choices=FORMATS, help="report format (default: from --output)")
    parser.add_argument("--output", required=True, help="file to write")
    parser.add_argument(
        "--rank",
        action="store_true",
        help="with LAYOUT: also run the search and rank the layout against the best ones "
        "(without LAYOUT the search always runs)",
    )
    add_space(parser.add_argument_group("search (without LAYOUT, or with --rank)"))
    add_assume(parser)
    add_calibration(parser)
    # a report's scenario holds no expert TP or gradient dtype (see _unsupported)
    held = ("etp", "grad_dtype", "bf16_layers_at_start", "bf16_layers_at_end")
    dests = tuple(d for d in LAYOUT_DESTS + WORKLOAD_DESTS if d not in held)
    add_import(parser, dests)
    from explorer.cli.search import add_mixed_search

    add_mixed_search(parser)  # the mixed cluster and straggler sections


# ------------------------------------------------------------------------------ scenario


def model_ref(model: str) -> ModelRef:
    """A preset id as a preset reference; a path to a config.json as an upload."""
    from explorer.hf_config import read_config_bytes
    from explorer.presets import load_model, model_ids

    if model in model_ids():
        return ModelRef(preset=model)
    path = Path(model)
    if not path.is_file():
        load_model(model)  # raises the standard sentence (unknown preset or missing file)
    return model_ref_from_upload(read_config_bytes(path), path.name)


def cluster_inputs(args: argparse.Namespace) -> ClusterInputs:
    """--gpu, --gpus-per-node and --gpus as nodes of GPUs (fewer GPUs than a node: one node)."""
    gpus, per_node = args.gpus, args.gpus_per_node
    if gpus <= 0 or per_node <= 0:
        raise ValueError(f"--gpus and --gpus-per-node must be positive, got {gpus} and {per_node}")
    if gpus < per_node:
        per_node = gpus
    elif gpus % per_node:
        raise ValueError(f"--gpus {gpus} is not a whole number of nodes of {per_node} GPUs")
    return ClusterInputs(
        gpu=args.gpu,
        gpus_per_node=per_node,
        num_nodes=gpus // per_node,
        intra_node_GBps=args.intra_node_GBps,
        inter_node_GBps=args.inter_node_GBps,
    )


def layout_inputs(args: argparse.Namespace) -> LayoutInputs:
    """The LAYOUT flags; DP left out fills the GPUs (--gpus / (TP x PP x CP))."""
    tp, pp, cp = args.tp or 1, args.pp or 1, args.cp
    dp = args.dp
    if dp is None:
        dp = args.gpus // (tp * pp * cp) if tp * pp * cp > 0 else 0
    schedule: ScheduleName = args.schedule
    if args.virtual > 1 and schedule == "1f1b":
        schedule = "interleaved"  # --virtual V with the default schedule (as explorer.cli.args)
    return LayoutInputs(
        dp=dp, tp=tp, pp=pp, cp=cp, ep=args.ep, zero=args.zero, recompute=args.recompute,
        schedule=schedule, virtual_stages=args.virtual,
        sequence_parallel=args.sequence_parallel == "on", micro_batch_size=args.mbs,
        **recipes_from(args),  # type: ignore[arg-type]
    )  # fmt: skip


def _unsupported(args: argparse.Namespace) -> None:
    if args.etp != 1:
        raise ValueError("--etp is not part of a report's scenario yet; leave it at 1")
    if args.grad_dtype is not None:
        raise ValueError("--grad-dtype is not part of a report's scenario; leave it out")
    if getattr(args, "bf16_layers_at_start", None) or getattr(args, "bf16_layers_at_end", None):
        raise ValueError("--bf16-layers-at-start/-end are not part of a report's scenario yet")
    if getattr(args, "scale_up_domain", None) is not None:
        raise ValueError(
            "--scale-up-domain is not part of a report's scenario; the GPU preset's is used"
        )


def base_scenario(args: argparse.Namespace) -> Scenario:
    """MODEL, CLUSTER and WORKLOAD as a Scenario, with the LAYOUT flags when any is given."""
    _unsupported(args)
    scenario = Scenario(
        model=model_ref(args.model),
        training=TrainingInputs(
            precision=args.precision, seq_len=args.seq, global_batch_size=args.gbs
        ),
        cluster=cluster_inputs(args),
        # the pydantic round trip below checks each value against AssumptionValue
        assumptions=cast(
            Overrides, tuple(overrides_from(args, DEFAULT_ESTIMATE_ASSUMPTIONS).items())
        ),
    )
    if layout_given(args):
        scenario = replace(scenario, layout=layout_inputs(args))
    scenario = replace(scenario, search=SearchInputs(**space_choices(args)))
    scenario = calibrated(scenario, args)
    scenario = with_hetero(scenario, args)
    return from_dict(to_dict(scenario))  # pydantic checks every field's bounds


def with_hetero(scenario: Scenario, args: argparse.Namespace) -> Scenario:
    """``scenario`` with the mixed cluster (cluster presets as GPU x per node x nodes) and the
    straggler (fraction as percent) the flags give."""
    from explorer.hetero import parse_groups
    from explorer.presets import cluster_entry, load_cluster
    from explorer.scenario import MixedInputs, StragglerInputs

    if getattr(args, "mixed_groups", None) is not None:
        groups = tuple(
            (cluster_entry(name).gpu_id, load_cluster(name).gpus_per_node, nodes)
            for name, nodes in parse_groups(args.mixed_groups)
        )
        mixed = MixedInputs(groups=groups, split=args.mixed_split, mode=args.mixed_mode)
        scenario = replace(scenario, mixed=mixed)
    if getattr(args, "straggler_slowdown", None) is not None:
        slow = StragglerInputs(
            slowdown_pct=100 * args.straggler_slowdown, where=args.straggler_where,
            stage=args.straggler_stage, axis=args.straggler_axis,
        )  # fmt: skip
        scenario = replace(scenario, straggler=slow)
    return scenario


def calibrated(scenario: Scenario, args: argparse.Namespace) -> Scenario:
    """``scenario`` with the figures of ``--calibration`` as overrides (``--assume`` wins over
    them) and, for the report's section, the measurement each came from."""
    from explorer.precision import precision_policy

    if not args.calibration:
        return scenario
    cluster = resolve_cluster(scenario.cluster)
    figures = calibration_from(args, cluster, precision_policy(args.precision).compute)
    if figures is None:
        return scenario
    given = dict(scenario.assumptions)
    kept = [f for f in figures.figures if f.key not in given]
    return replace(
        scenario,
        assumptions=tuple({**{f.key: f.value for f in kept}, **given}.items()),
        calibration=tuple((f.key, f.measurement[:400]) for f in kept),
    )


def layout_given(args: argparse.Namespace) -> bool:
    return not (args.tp is None and args.pp is None and args.dp is None)


def run_search(scenario: Scenario) -> SearchResult:
    """The search over the scenario's cluster, ranking the report's top layouts."""
    from explorer.search import search

    model, cluster = resolve_model(scenario.model), resolve_cluster(scenario.cluster)
    assumptions = with_overrides(DEFAULT_ESTIMATE_ASSUMPTIONS, scenario.assumption_overrides())
    space = scenario.search_space()
    return search(
        model, cluster, scenario.training_spec(), space=space, assumptions=assumptions, ranked=TOP
    )


def best_layout(result: SearchResult) -> LayoutInputs:
    """The fastest ranked layout a scenario can hold (expert TP is not part of one)."""
    for e in result.estimates:
        lay = e.layout
        if lay.etp == 1:
            return LayoutInputs(
                dp=lay.dp, tp=lay.tp, pp=lay.pp, cp=lay.cp, ep=lay.ep, zero=lay.zero,
                recompute=lay.recompute, schedule=lay.schedule,
                virtual_stages=lay.virtual_stages, sequence_parallel=lay.sequence_parallel,
                micro_batch_size=lay.micro_batch_size,
            )  # fmt: skip
    raise UserError("the search found no layout that fits; pass --tp, --pp and --dp to see why")


def scenario_and_search(args: argparse.Namespace) -> tuple[Scenario, SearchResult | None]:
    """The report's scenario, and the search behind its ranking (None: the layout alone)."""
    scenario = base_scenario(args)
    if layout_given(args) and not args.rank:
        return scenario, None
    result = run_search(scenario)
    if not layout_given(args):
        scenario = replace(scenario, layout=best_layout(result))
    return scenario, result


# ------------------------------------------------------------------------------ writing


def output_format(args: argparse.Namespace) -> str:
    if args.format:
        return str(args.format)
    suffix = Path(args.output).suffix.lower()
    if suffix not in SUFFIXES:
        raise ValueError(
            f"cannot tell the format from {args.output!r}: pass --format md, html, pdf or json"
        )
    return SUFFIXES[suffix]


def run(args: argparse.Namespace) -> dict[str, object]:
    """Build the report, render it, write it; the JSON says what was written."""
    apply_import(args)
    fmt = output_format(args)
    scenario, result = scenario_and_search(args)
    report = build_report(scenario, search=result)
    note = ""
    if fmt == "md":
        data = report_markdown(report).encode()
    elif fmt == "json":
        data = report_json(report).encode()
    else:
        from explorer.charts.report import render_report

        try:
            rendered = render_report(report, fmt)  # type: ignore[arg-type]
        except ReportFormatUnavailable as error:
            raise UserError(str(error)) from None
        data, note = rendered.data, rendered.note
    path = Path(args.output)
    path.write_bytes(data)
    return {
        "path": str(path),
        "format": fmt,
        "bytes": len(data),
        "title": report.title,
        "suggested_name": file_name(report, fmt),
        "figures": list(report.figure_names) if fmt in ("html", "pdf") and not note else [],
        "note": note,
        "imported": imported_result(args),
    }


def render(result: dict) -> str:
    line = f"wrote {result['bytes']:,} bytes of {result['format']} to {result['path']}"
    return line + (f" ({result['note']})" if result["note"] else "")
