"""Cost flags shared by ``estimate``, ``search``, ``scaling``, ``serve`` and ``report``."""

from __future__ import annotations

import argparse

from explorer.cost import (
    DEFAULT_COST_ASSUMPTIONS,
    CostAssumptions,
    cost_per_million_tokens,
    price_of,
    run_cost,
)
from explorer.specs import GpuSpec


def add_cost(parser: argparse.ArgumentParser, *, training: bool = True) -> None:
    """The cost group: tokens or steps to train, price per GPU-hour, power, PUE."""
    group = parser.add_argument_group("cost (US dollars, watts)")
    if training:
        group.add_argument(
            "--train-tokens", type=float, help="tokens to train (e.g. 15e12): time, money, energy"
        )
        group.add_argument(
            "--train-steps", type=float, help="optimizer steps to train (instead of tokens)"
        )
    group.add_argument(
        "--price-per-gpu-hour",
        type=float,
        help="US dollars per GPU-hour (default: the GPU preset's published list price, if any)",
    )
    group.add_argument(
        "--gpu-power-w", type=float, help="watts per GPU (default: the preset's datasheet TDP)"
    )
    group.add_argument(
        "--power-utilisation",
        type=float,
        default=DEFAULT_COST_ASSUMPTIONS.power_utilisation,
        help="average draw as a fraction of the GPU's power (default 1.0: full TDP)",
    )
    group.add_argument(
        "--pue",
        type=float,
        default=DEFAULT_COST_ASSUMPTIONS.pue,
        help="data-centre power usage effectiveness (default 1.58, Uptime Institute 2023)",
    )


def cost_from(args: argparse.Namespace) -> CostAssumptions:
    """The cost assumptions the flags set (ValueError naming the flag when one is bad)."""
    try:
        return CostAssumptions(
            price_per_gpu_hour=args.price_per_gpu_hour,
            gpu_power_w=args.gpu_power_w,
            power_utilisation=args.power_utilisation,
            pue=args.pue,
        )
    except ValueError as error:
        flag = "--" + str(error).split(" ", 1)[0].replace("_", "-")
        raise ValueError(f"{flag}: {error}") from None


def train_tokens_from(args: argparse.Namespace, tokens_per_step: int) -> float | None:
    """Tokens to train from --train-tokens or --train-steps (None when neither is given)."""
    tokens, steps = getattr(args, "train_tokens", None), getattr(args, "train_steps", None)
    if tokens is not None and steps is not None:
        raise ValueError("give --train-tokens or --train-steps, not both")
    for flag, value in (("--train-tokens", tokens), ("--train-steps", steps)):
        if value is not None and not value > 0:
            raise ValueError(f"{flag} must be positive, got {value}")
    return steps * tokens_per_step if steps is not None else tokens


def training_cost_json(
    args: argparse.Namespace,
    *,
    tokens_per_s: float,
    tokens_per_step: int,
    num_gpus: int,
    gpu: GpuSpec,
) -> dict[str, object]:
    """The ``cost`` object of a training result: price, $ per million tokens, and the run."""
    assumptions = cost_from(args)
    train_tokens = train_tokens_from(args, tokens_per_step)
    price, price_source = price_of(gpu, assumptions)
    per_million = None
    if price is not None and tokens_per_s > 0:
        per_million = cost_per_million_tokens(num_gpus, price, tokens_per_s)
    run = None
    if train_tokens is not None and tokens_per_s > 0:
        run = run_cost(
            train_tokens=train_tokens,
            tokens_per_s=tokens_per_s,
            tokens_per_step=tokens_per_step,
            num_gpus=num_gpus,
            gpu=gpu,
            assumptions=assumptions,
        ).as_dict()
    return {
        "price_per_gpu_hour": price,
        "price_source": price_source,
        "cost_per_million_tokens_usd": per_million,
        "assumptions": assumptions.as_dict(),
        "run": run,
    }


def cost_lines(cost: dict | None) -> list[str]:
    """Text lines of a ``cost`` object (US dollars, days, MWh = 3.6e9 J)."""
    if not cost:
        return []
    if cost["cost_per_million_tokens_usd"] is None:
        lines = [f"  cost: {cost['price_source']}"]
    else:
        lines = [
            f"  cost: ${cost['cost_per_million_tokens_usd']:.4f} per million tokens at "
            f"${cost['price_per_gpu_hour']:.2f} per GPU-hour ({cost['price_source']})"
        ]
    run = cost.get("run")
    if run:
        money = "no price" if run["cost_usd"] is None else f"${run['cost_usd']:,.0f}"
        energy = (
            "no power figure"
            if run["energy_j"] is None
            else f"{run['energy_j'] / 3.6e9:,.1f} MWh at PUE {cost['assumptions']['pue']}"
        )
        lines.append(
            f"  run: {run['train_tokens']:.4g} tokens in {run['steps']:,.0f} steps, "
            f"{run['time_days']:.2f} days, {run['gpu_hours']:,.0f} GPU-hours, {money}, {energy}"
        )
    return lines
