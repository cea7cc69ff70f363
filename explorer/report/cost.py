"""The training report's cost section: price per million tokens, and a reference run priced.

The scenario carries no run length, so the section prices a reference run of
``REFERENCE_TOKENS`` (stated in the text) at the GPU preset's published price and TDP with the
default cost assumptions (explorer.cost); everything scales linearly with the tokens.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from explorer.cost import DEFAULT_COST_ASSUMPTIONS, RunCost, run_cost
from explorer.report.tables import Section, Table
from explorer.report.training import TrainingCase

REFERENCE_TOKENS = 1e12
"""Tokens of the reference run the report prices (one trillion)."""


def reference_cost(case: TrainingCase) -> RunCost:
    """The reference run at the chosen layout's throughput."""
    est = case.estimate
    return run_cost(
        train_tokens=REFERENCE_TOKENS,
        tokens_per_s=est.tokens_per_s,
        tokens_per_step=est.tokens_per_step,
        num_gpus=est.num_gpus,
        gpu=case.cluster.gpu,
        assumptions=DEFAULT_COST_ASSUMPTIONS,
    )


def _rows(cost: RunCost) -> pd.DataFrame:
    a = DEFAULT_COST_ASSUMPTIONS
    rows: list[tuple[str, object, str]] = [
        ("days per trillion tokens", cost.time_s / 86400.0, "at the estimated tokens/s"),
        ("GPU-hours per trillion tokens", cost.gpu_hours, f"{cost.num_gpus:,} GPUs held"),
        ("price per GPU-hour (US$)", cost.price_per_gpu_hour, cost.price_source),
        ("US$ per million tokens", cost.cost_per_million_tokens_usd, ""),
        ("US$ per trillion tokens", cost.cost_usd, ""),
        ("power per GPU (W)", cost.gpu_power_w, cost.power_source),
        (
            "facility MWh per trillion tokens",
            None if cost.energy_j is None else cost.energy_j / 3.6e9,
            f"power utilisation {a.power_utilisation:g}, PUE {a.pue:g} (Uptime Institute 2023)",
        ),
    ]
    return pd.DataFrame(rows, columns=["quantity", "value", "source"])


def cost_section(case: TrainingCase) -> Section:
    """Time, GPU-hours, money and energy per trillion training tokens for the chosen layout."""
    cost = reference_cost(case)
    return Section(
        "cost",
        "Cost and time",
        paragraphs=(
            f"A run of {REFERENCE_TOKENS:.0e} tokens at {case.estimate.tokens_per_s:,.0f} "
            f"tokens/s takes {cost.time_s / 86400.0:,.1f} days on {cost.num_gpus:,} GPUs; "
            "time, money and energy scale linearly with the tokens. Restarts, evaluation and "
            "idle time are left out.",
        ),
        tables=(Table("Per trillion training tokens", _rows(cost), {"value": "{:,.4g}"}),),
    )


def cost_results(case: TrainingCase) -> dict[str, Any]:
    """The reference run as JSON-ready data (seconds, joules, US dollars)."""
    return {
        "reference_tokens": REFERENCE_TOKENS,
        **reference_cost(case).as_dict(),
        "assumptions": DEFAULT_COST_ASSUMPTIONS.as_dict(),
    }
