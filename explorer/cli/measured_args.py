"""``estimate --measured-step-s X [--measured-peak-gib Y] [--apply-correction KEY]``: a measured
run against the estimate (explorer.estimate.measured), as flags, JSON and text lines."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from explorer.cli.args import number
from explorer.estimate import Estimate, EstimateAssumptions
from explorer.estimate.measured import (
    CORRECTION_KEYS,
    compare_memory,
    compare_step,
    comparison_dict,
    correct,
)
from explorer.limits import limit
from explorer.units import GiB


def add_measured(parser: argparse.ArgumentParser) -> None:
    """The measured-run flags, bounded by explorer.limits like every other number."""
    group = parser.add_argument_group("your own run")
    group.add_argument(
        "--measured-step-s",
        type=number(limit("pass_s"), above=True),
        help="seconds per optimizer step you measured for this layout (the error is shown and "
        "attributed to the part of the step that explains it)",
    )
    group.add_argument(
        "--measured-peak-gib",
        type=number(limit("memory_bytes") / GiB, above=True),
        help="peak memory per GPU you measured, GiB = 2^30 bytes (compared with the peak "
        "stage without the allocator headroom)",
    )
    group.add_argument(
        "--apply-correction",
        choices=CORRECTION_KEYS,
        help="set this named assumption so the estimate meets --measured-step-s, and report "
        "the corrected estimate",
    )


def measured_from(
    args: argparse.Namespace,
    step: Estimate,
    estimate_with: Callable[[EstimateAssumptions], Estimate],
) -> tuple[Estimate, dict | None]:
    """(the estimate to report, the ``measured`` JSON key); the estimate is the corrected one
    under ``--apply-correction``. ValueError (one sentence) for a correction without a step."""
    seconds = getattr(args, "measured_step_s", None)
    peak = getattr(args, "measured_peak_gib", None)
    key = getattr(args, "apply_correction", None)
    if key and seconds is None:
        raise ValueError("--apply-correction needs --measured-step-s, the step it corrects to")
    if seconds is None and peak is None:
        return step, None
    out: dict = {"correction": None}
    if seconds is not None:
        out["step"] = comparison_dict(compare_step(step, seconds), "s")
    if peak is not None:
        out["memory"] = comparison_dict(compare_memory(step, peak * GiB), "bytes")
    if key and seconds is not None:
        fix, step = correct(key, seconds, step, estimate_with)
        out["correction"] = {
            "key": fix.key,
            "value": fix.value,
            "before": fix.before,
            "step_time_s": fix.step_time_s,
            "reached": fix.reached,
            "error_after": fix.step_time_s / seconds - 1,
        }
    return step, out


def _comparison_lines(found: dict, unit: str, scale: float, label: str) -> list[str]:
    name = "s" if unit == "s" else "GiB"
    head = (
        f"  measured {label} {found[f'measured_{unit}'] / scale:.4g} {name}, estimated "
        f"{found[f'estimated_{unit}'] / scale:.4g} {name}: error {found['error']:+.1%}"
    )
    if found["explained_by"] is None:
        return [head + (" (agrees)" if not found["attribution"] else ", no plausible part")]
    lines = [head + f"; explained by {found['explained_by']} x {found['factor']:.3g}"]
    for c in found["attribution"]:
        mark = "plausible" if c["plausible"] else "not plausible"
        fix = f", correct with {c['correction_key']}" if c["correction_key"] else ""
        lines.append(
            f"    {c['component']}: {c[f'estimated_{unit}'] / scale:.4g} {name} x "
            f"{c['factor']:.3g} ({mark}: {c['why']}){fix}"
        )
    return lines


def measured_lines(found: dict | None) -> list[str]:
    """Text lines of the ``measured`` key (seconds; GiB = 2^30 bytes); empty without it."""
    if not found:
        return []
    lines = []
    if "step" in found:
        lines += _comparison_lines(found["step"], "s", 1.0, "step")
    if "memory" in found:
        lines += _comparison_lines(found["memory"], "bytes", GiB, "peak")
    fix = found["correction"]
    if fix:
        reached = "meets the measured step" if fix["reached"] else "the nearest it reaches"
        lines.append(
            f"  correction applied (an assumption set from your run): {fix['key']} = "
            f"{fix['value']:.4g} (was {fix['before']:.4g}); corrected step "
            f"{fix['step_time_s']:.4g} s, {reached} ({fix['error_after']:+.2%}); every figure "
            "above is the corrected estimate"
        )
    return lines
