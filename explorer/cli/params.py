"""``params``: parameter counts of a model, by component, total and active per token."""

from __future__ import annotations

import argparse

from explorer.cli.args import add_model, model_from, whole
from explorer.counting import active_param_counts, param_counts
from explorer.flops import forward_flops_per_token

NAME = "params"
HELP = "parameter counts of a model by component, total and active per token"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_model(parser)
    parser.add_argument(
        "--seq", type=whole("seq_len"), default=4096, help="sequence length for FLOPs/token"
    )


def run(args: argparse.Namespace) -> dict:
    model = model_from(args)
    if args.seq <= 0:
        raise ValueError(f"--seq must be positive, got {args.seq}")
    total, active = param_counts(model), active_param_counts(model)
    forward = forward_flops_per_token(model, args.seq)
    return {
        "model": model.name,
        "total_params": total.total_without_mtp,
        "active_params": active.total_without_mtp,
        "total_params_with_mtp": total.total,
        "components": total.as_dict(),
        "active_components": active.as_dict(),
        "forward_flops_per_token": forward.total,
        "training_flops_per_token": 3 * forward.total,
        "flops_convention": "matmuls only, 2 per multiply-add, backward = 2 x forward, "
        "causal attention halved (Megatron-LM)",
        "seq_len": args.seq,
    }


def render(result: dict) -> str:
    lines = [f"{result['model']}", f"  total  {result['total_params'] / 1e9:10.3f} B parameters"]
    lines.append(f"  active {result['active_params'] / 1e9:10.3f} B parameters per token")
    for name, count in result["components"].items():
        if count:
            lines.append(f"    {name:<20} {count / 1e9:10.3f} B")
    tflop = result["training_flops_per_token"] / 1e12
    lines.append(f"  training {tflop:.4f} TFLOP per token at s = {result['seq_len']}")
    return "\n".join(lines)
