"""``python -m explorer flexsp``: variable-length sequences on flexible sequence-parallel groups
(FlexSP, arXiv:2412.01523) against the best fixed group size, on one step (explorer.flexsp)."""

from __future__ import annotations

import argparse

from explorer.cli.args import (
    PRECISIONS,
    RECOMPUTES,
    add_assume,
    add_cluster,
    add_model,
    assumed,
    cluster_from,
    model_from,
    number,
    whole,
)
from explorer.estimate import DEFAULT_ESTIMATE_ASSUMPTIONS
from explorer.flexsp import (
    FlexSetting,
    batch_for_tokens,
    compare_flexsp,
    comparison_dict,
    parse_profile,
)
from explorer.specs import Layout

NAME = "flexsp"
HELP = (
    "variable-length sequences: FlexSP's flexible sequence-parallel groups against one fixed "
    "group size on the same step"
)
MAX_SKEWS = 16
"""Skews one --sweep-skew may list."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_model(parser)
    add_cluster(parser, gpus=True)
    group = parser.add_argument_group("layout and step")
    group.add_argument("--tp", type=whole("tp"), default=1)
    group.add_argument("--zero", type=int, choices=(0, 1, 2, 3), default=3)
    group.add_argument("--recompute", choices=RECOMPUTES, default="full")
    group.add_argument("--precision", choices=PRECISIONS, default="bf16-mixed")
    group.add_argument(
        "--lengths",
        default="longtail:skew=1,longest=131072",
        help="length:count pairs (4096:120,65536:3), a list of lengths, or the synthetic "
        "family longtail:skew=S,longest=L[,shortest=N]",
    )
    size = group.add_mutually_exclusive_group()
    size.add_argument("--gbs", type=whole("global_batch_size"), help="sequences per step")
    size.add_argument(
        "--tokens-per-step",
        type=whole("global_batch_size"),
        default=None,
        help="tokens per step (default: 16 x the longest length)",
    )
    group.add_argument(
        "--sweep-skew",
        default=None,
        help="comma-separated skews of the long-tail family (with its longest length) at the "
        "same tokens per step: the speed-up as the skew grows",
    )
    add_assume(parser)


def _skews(text: str) -> list[float]:
    parts = [p for p in text.split(",") if p.strip()]
    if not parts or len(parts) > MAX_SKEWS:
        raise ValueError(f"--sweep-skew takes 1 to {MAX_SKEWS} comma-separated skews")
    parse = number(100.0)
    try:
        return [parse(p.strip()) for p in parts]
    except argparse.ArgumentTypeError as error:
        raise ValueError(f"--sweep-skew: {error}") from None


def run(args: argparse.Namespace) -> dict[str, object]:
    model = model_from(args)
    cluster = cluster_from(args, args.gpus)
    setting = FlexSetting(
        model=model,
        cluster=cluster,
        base=Layout(tp=args.tp, zero=args.zero, recompute=args.recompute),
        world_size=args.gpus,
        precision=args.precision,
        assumptions=assumed(args, DEFAULT_ESTIMATE_ASSUMPTIONS),
    )
    profile = parse_profile(args.lengths)
    if args.sweep_skew is not None:
        from explorer.flexsp import long_tail

        tokens = args.tokens_per_step or 16 * profile.longest
        rows = []
        for skew in _skews(args.sweep_skew):
            family = long_tail(profile.longest, skew)
            c = compare_flexsp(setting, family, batch_for_tokens(family, tokens))
            rows.append({"skew": skew, **comparison_dict(c)})
        return {"model": args.model, "gpus": args.gpus, "tokens_per_step": tokens, "sweep": rows}
    batch = args.gbs or batch_for_tokens(profile, args.tokens_per_step or 16 * profile.longest)
    result = comparison_dict(compare_flexsp(setting, profile, batch))
    return {"model": args.model, "gpus": args.gpus, **result}


def _plan_line(name: str, plan: dict) -> str:
    return (
        f"  {name:<9} {plan['groups']}: step {plan['step_s']:.3f} s, "
        f"{plan['tokens_per_s_per_gpu']:,.0f} tokens/s per GPU, peak {plan['peak_gib']:.1f} GiB"
        f"{'' if plan['fits'] else ' (does not fit)'}, groups busy {plan['balance']:.0%}"
    )


def render(result: dict) -> str:
    if "sweep" in result:
        lines = [
            f"FlexSP against fixed SP, {result['model']} on {result['gpus']} GPUs, "
            f"{result['tokens_per_step']:,} tokens per step:"
        ]
        for row in result["sweep"]:
            lines.append(
                f"  skew {row['skew']:g}: {row['sequences']} sequences (mean "
                f"{row['mean_length']:,.0f} tokens), FlexSP {row['flexible']['groups']} vs "
                f"fixed {row['fixed']['groups']}: {row['speedup']:.2f}x"
            )
        return "\n".join(lines)
    lines = [
        f"{result['sequences']} sequences, longest {result['longest']:,} tokens, mean "
        f"{result['mean_length']:,.0f} ({result['profile']['name']})",
        _plan_line("FlexSP", result["flexible"]),
        _plan_line("fixed SP", result["fixed"]),
        f"  speed-up {result['speedup']:.2f}x over the best fixed group size",
    ]
    lines += [f"  note: {n}" for n in result["notes"]]
    return "\n".join(lines)
