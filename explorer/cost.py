"""What a run costs: time to train N tokens, GPU-hours, money and energy; serving cost.

Pure arithmetic on an estimate's throughput: no new model of the hardware. Every input a user
may want to change (price per GPU-hour, power per GPU, the fraction of it drawn, the data
centre's PUE) is a named field of ``CostAssumptions`` with its source; the GPU presets carry a
published price and TDP where one exists (``presets/gpus/*.toml``).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from explorer.specs import GpuSpec

SECONDS_PER_HOUR = 3600.0
JOULES_PER_KWH = 3.6e6
TOKENS_PER_MILLION = 1e6


@dataclass(frozen=True, slots=True, kw_only=True)
class CostAssumptions:
    """Price and power figures; None means the GPU preset's published figure (if any)."""

    price_per_gpu_hour: float | None = None
    """US dollars per GPU-hour; None means the GPU preset's list price (none: no money)."""
    gpu_power_w: float | None = None
    """Electrical power of one GPU, watts; None means the preset's TDP (vendor datasheet)."""
    power_utilisation: float = 1.0
    """Average draw as a fraction of gpu_power_w. 1.0 counts the full TDP, as the Llama 2 paper
    does for its carbon figures (Touvron et al. 2023, arXiv:2307.09288, sec. 2.2.1)."""
    pue: float = 1.58
    """Power usage effectiveness of the data centre (total facility / IT power). 1.58 is the
    industry average of the Uptime Institute Global Data Center Survey 2023 (UII Update 221,
    23 Nov 2023); hyperscale sites report about 1.1."""

    def __post_init__(self) -> None:
        for name in ("price_per_gpu_hour", "gpu_power_w"):
            value = getattr(self, name)
            if value is not None and not (math.isfinite(value) and value >= 0):
                raise ValueError(f"{name} must be zero or more, got {value!r}")
        if not 0 < self.power_utilisation <= 1:
            raise ValueError(f"power_utilisation must be in (0, 1], got {self.power_utilisation!r}")
        if not (math.isfinite(self.pue) and self.pue >= 1):
            raise ValueError(f"pue must be at least 1, got {self.pue!r}")

    def as_dict(self) -> dict[str, float | None]:
        return asdict(self)


DEFAULT_COST_ASSUMPTIONS = CostAssumptions()


@dataclass(frozen=True, slots=True, kw_only=True)
class RunCost:
    """A training run of ``train_tokens`` on ``num_gpus`` GPUs: time, GPU-hours, money, energy."""

    train_tokens: float
    """Tokens the run processes."""
    steps: float
    """Optimizer steps (train_tokens / tokens per step; fractional when it does not divide)."""
    time_s: float
    """Wall-clock seconds at the estimate's throughput (no restarts, no evaluation)."""
    num_gpus: int
    gpu_hours: float
    price_per_gpu_hour: float | None
    """US dollars; None when neither the user nor the preset gives a price."""
    price_source: str
    cost_usd: float | None
    cost_per_million_tokens_usd: float | None
    gpu_power_w: float | None
    power_source: str
    energy_j: float | None
    """Facility energy (GPUs x power x utilisation x PUE x time); None without a power figure."""

    def as_dict(self) -> dict[str, object]:
        return {**asdict(self), "time_days": self.time_s / 86400.0}


def training_time_s(train_tokens: float, tokens_per_s: float) -> float:
    """Seconds to process ``train_tokens`` at ``tokens_per_s`` (the estimate's throughput)."""
    return train_tokens / tokens_per_s


def gpu_hours(num_gpus: int, time_s: float) -> float:
    """GPU-hours: every GPU of the layout is held for the whole run."""
    return num_gpus * time_s / SECONDS_PER_HOUR


def energy_j(num_gpus: int, time_s: float, gpu_power_w: float, a: CostAssumptions) -> float:
    """Facility energy in joules: GPUs x watts x utilisation x PUE x seconds.

    Source: the Llama 2 paper's carbon method (arXiv:2307.09288, sec. 2.2.1: GPU-hours x TDP,
    scaled by PUE). Host CPUs, NICs and switches are left out (they are not in the GPU's TDP).
    """
    return num_gpus * gpu_power_w * a.power_utilisation * a.pue * time_s


def cost_per_million_tokens(num_gpus: int, price_per_gpu_hour: float, tokens_per_s: float) -> float:
    """US dollars per million tokens: the cluster's price per second over its tokens per second."""
    return num_gpus * price_per_gpu_hour / SECONDS_PER_HOUR / tokens_per_s * TOKENS_PER_MILLION


def price_of(gpu: GpuSpec, a: CostAssumptions) -> tuple[float | None, str]:
    """The price per GPU-hour in use and where it comes from."""
    if a.price_per_gpu_hour is not None:
        return a.price_per_gpu_hour, "given by the user"
    if gpu.price_per_gpu_hour is not None:
        return gpu.price_per_gpu_hour, gpu.price_source
    return None, gpu.price_source or "no published price for this GPU; give one"


def power_of(gpu: GpuSpec, a: CostAssumptions) -> tuple[float | None, str]:
    """The power per GPU in use and where it comes from."""
    if a.gpu_power_w is not None:
        return a.gpu_power_w, "given by the user"
    if gpu.tdp_w is not None:
        return gpu.tdp_w, gpu.power_source
    return None, gpu.power_source or "no published TDP for this GPU; give one"


def run_cost(
    *,
    train_tokens: float,
    tokens_per_s: float,
    tokens_per_step: float,
    num_gpus: int,
    gpu: GpuSpec,
    assumptions: CostAssumptions = DEFAULT_COST_ASSUMPTIONS,
) -> RunCost:
    """Time, GPU-hours, money and energy of training ``train_tokens`` at an estimate's speed."""
    if not (math.isfinite(train_tokens) and train_tokens > 0):
        raise ValueError(f"train_tokens must be positive, got {train_tokens!r}")
    if not (math.isfinite(tokens_per_s) and tokens_per_s > 0):
        raise ValueError(f"the layout's throughput must be positive, got {tokens_per_s!r}")
    time_s = training_time_s(train_tokens, tokens_per_s)
    price, price_source = price_of(gpu, assumptions)
    power, power_source = power_of(gpu, assumptions)
    hours = gpu_hours(num_gpus, time_s)
    return RunCost(
        train_tokens=train_tokens,
        steps=train_tokens / tokens_per_step,
        time_s=time_s,
        num_gpus=num_gpus,
        gpu_hours=hours,
        price_per_gpu_hour=price,
        price_source=price_source,
        cost_usd=None if price is None else hours * price,
        cost_per_million_tokens_usd=(
            None if price is None else cost_per_million_tokens(num_gpus, price, tokens_per_s)
        ),
        gpu_power_w=power,
        power_source=power_source,
        energy_j=None if power is None else energy_j(num_gpus, time_s, power, assumptions),
    )


# ---------------------------------------------------------------- serving


@dataclass(frozen=True, slots=True, kw_only=True)
class ServingCost:
    """A serving plan priced: cost per million output tokens and GPUs for a request rate."""

    gpus_per_replica: int
    output_tokens_per_s_per_replica: float
    requests_per_s_per_replica: float
    price_per_gpu_hour: float | None
    price_source: str
    cost_per_million_output_tokens_usd: float | None
    target_requests_per_s: float | None
    replicas_needed: int | None
    gpus_needed: int | None

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def replicas_for_rate(target_requests_per_s: float, requests_per_s_per_replica: float) -> int:
    """Replicas that sustain ``target_requests_per_s`` (whole replicas, rounded up)."""
    return math.ceil(target_requests_per_s / requests_per_s_per_replica - 1e-12)


def serving_cost(
    *,
    output_tokens_per_s_per_replica: float,
    output_len: int,
    gpus_per_replica: int,
    gpu: GpuSpec,
    target_requests_per_s: float | None = None,
    assumptions: CostAssumptions = DEFAULT_COST_ASSUMPTIONS,
) -> ServingCost:
    """Price a serving layout from the planner's decode throughput at its planned load.

    A replica at that load finishes output_tokens_per_s / output_len requests per second
    (Little's law at steady state); the cost is the replica's GPUs' price over its output tokens.
    The planner's throughput is the decode rate (concurrency / ITL), so time spent on prefill
    is not taken out of it: at long prompts the replicas needed are a lower bound.
    """
    if not (math.isfinite(output_tokens_per_s_per_replica) and output_tokens_per_s_per_replica > 0):
        raise ValueError(
            "the serving layout's output throughput must be positive, got "
            f"{output_tokens_per_s_per_replica!r}"
        )
    if target_requests_per_s is not None and not (
        math.isfinite(target_requests_per_s) and target_requests_per_s > 0
    ):
        raise ValueError(f"the target request rate must be positive, got {target_requests_per_s!r}")
    price, source = price_of(gpu, assumptions)
    per_replica_rps = output_tokens_per_s_per_replica / output_len
    replicas = (
        None
        if target_requests_per_s is None
        else replicas_for_rate(target_requests_per_s, per_replica_rps)
    )
    return ServingCost(
        gpus_per_replica=gpus_per_replica,
        output_tokens_per_s_per_replica=output_tokens_per_s_per_replica,
        requests_per_s_per_replica=per_replica_rps,
        price_per_gpu_hour=price,
        price_source=source,
        cost_per_million_output_tokens_usd=(
            None
            if price is None
            else cost_per_million_tokens(gpus_per_replica, price, output_tokens_per_s_per_replica)
        ),
        target_requests_per_s=target_requests_per_s,
        replicas_needed=replicas,
        gpus_needed=None if replicas is None else replicas * gpus_per_replica,
    )


def point_cost(
    num_gpus: int,
    tokens_per_s: float | None,
    price_per_gpu_hour: float | None,
    train_tokens: float | None = None,
) -> dict[str, float | None]:
    """Cost columns of one scaling point: $ per million tokens, and days and $ for a run.

    None where the point has no fitting layout, no price, or no run length was given.
    """
    fits = tokens_per_s is not None and tokens_per_s > 0
    per_million = (
        cost_per_million_tokens(num_gpus, price_per_gpu_hour, tokens_per_s)
        if fits and price_per_gpu_hour is not None and tokens_per_s is not None
        else None
    )
    days = (
        training_time_s(train_tokens, tokens_per_s) / 86400.0
        if fits and train_tokens is not None and tokens_per_s is not None
        else None
    )
    money = None
    if days is not None and price_per_gpu_hour is not None:
        money = gpu_hours(num_gpus, days * 86400.0) * price_per_gpu_hour
    return {
        "cost_per_million_tokens_usd": per_million,
        "train_days": days,
        "train_cost_usd": money,
    }
