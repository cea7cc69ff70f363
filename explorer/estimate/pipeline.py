"""Time of the pipelined part of a step: closed forms where they are exact, else the simulator.

Rules (one method per case, so every layout of a schedule is timed the same way):
- gpipe, 1f1b, interleaved (Megatron's schedules): the bottleneck form
  T = M C_max + (sum_i C_i - C_max) / V, C_i = F_i + B_i + W_i the cycle of stage i per
  micro-batch. With equal stages it is the textbook (M + (P - 1) / V) C (Narayanan et al. 2021,
  arXiv:2104.04473, sec. 2.2); it equals the simulator whenever the slowest stage is the last
  (the usual case: the LM head sits there) and is otherwise an upper bound: on 168 preset
  layouts of Llama 3.1, Qwen3, DeepSeek-V3, Mixtral and GPT-3 with pp 2-16 the median error
  is 0, the range -0.5% (GPipe) to +2.2%; synthetic stages within +-10% of each other give up
  to +8% when M <= P, and a middle stage 50% heavier than the rest +7%.
  tests/test_estimate.py checks both against ``explorer.schedules.simulate``;
  ``pipeline_model="simulate"`` is exact everywhere at about 1-10 ms per layout instead of
  microseconds.
- zb-h1 with equal stages and M >= P: T = M C + (P - 1)(F + B - W) (Qi et al. 2024,
  arXiv:2401.10241, sec. 3.1; B the input-gradient part); otherwise the simulator.
- dualpipe: the simulator (its bubble depends on the F&B pairing; DeepSeek-V3 report Table 2).
Point-to-point transfers are folded into the stage times as blocking (see explorer.comm.step),
so the simulator runs with p2p_s = 0 and both methods see the same times. "The simulator" here
is ``explorer.schedules.step_time``: ``simulate``'s makespan and busy times without its events,
long 1F1B, ZB-H1 and DualPipe steps extrapolated from a shorter one's settled steady state
(within 1e-11 of the full simulation, tests/test_periodic.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

from explorer.schedules import StageTimes, step_time
from explorer.schedules.builders import require_valid
from explorer.specs import ScheduleName

PipelineModel = Literal["closed-form", "simulate"]
Method = Literal["no pipeline", "closed-form", "simulated"]


@dataclass(frozen=True, slots=True)
class PipelineTime:
    """The pipelined part of a step: its length and how busy each stage is."""

    makespan_s: float
    """From the first forward to the last backward, s."""
    busy_s: tuple[float, ...]
    """Compute (and exposed per-micro-batch communication) on each pipeline rank, s."""
    method: Method
    """How it was timed."""

    @property
    def bubble_fraction(self) -> float:
        """Idle share of the stages' time: 1 - busy / (P x makespan)."""
        if self.makespan_s <= 0:
            return 0.0
        return max(0.0, 1.0 - sum(self.busy_s) / (len(self.busy_s) * self.makespan_s))


def cycles_s(times: StageTimes) -> tuple[float, ...]:
    """Seconds of one micro-batch's F + B + W on each stage (part)."""
    return tuple(
        f + b + w for f, b, w in zip(times.forward_s, times.backward_s, times.weight_s, strict=True)
    )


def bottleneck_makespan_s(times: StageTimes, microbatches: int, virtual: int) -> float:
    """Makespan of GPipe / 1F1B / interleaved 1F1B with the slowest stage setting the pace, s.

    Source: Narayanan et al. 2021 (arXiv:2104.04473) sec. 2.2: (M + (P-1)/V) (F + B) for equal
    stages; the ramp generalised to the other stages' cycles (module docstring).
    """
    cycles = cycles_s(times)
    slowest = max(cycles)
    return microbatches * slowest + (sum(cycles) - slowest) / virtual


def zb_h1_makespan_s(times: StageTimes, microbatches: int) -> float:
    """Makespan of ZB-H1 with equal stages and M >= P, s.

    Source: Qi et al. 2024 (arXiv:2401.10241) sec. 3.1: bubble (P-1)(F + B - W), B the input
    gradient (a third of 1F1B's when F = B = W).
    """
    f, b, w = times.forward_s[0], times.backward_s[0], times.weight_s[0]
    return microbatches * (f + b + w) + (times.stages - 1) * (f + b - w)


def _equal(values: tuple[float, ...]) -> bool:
    first = values[0]
    return all(abs(v - first) <= 1e-12 * max(abs(first), 1e-30) for v in values)


def equal_stages(times: StageTimes) -> bool:
    """Whether every stage has the same F, B and W."""
    return _equal(times.forward_s) and _equal(times.backward_s) and _equal(times.weight_s)


@lru_cache(maxsize=4096)
def _simulated(
    name: ScheduleName, microbatches: int, virtual: int, times: StageTimes
) -> PipelineTime:
    timed = step_time(name, times.stages, microbatches, virtual, times)
    return PipelineTime(timed.makespan_s, timed.busy_s, "simulated")


def _closed_form(
    name: ScheduleName, microbatches: int, virtual: int, times: StageTimes
) -> float | None:
    """The closed-form makespan where one applies (module docstring), else None."""
    if name in ("gpipe", "1f1b", "interleaved"):
        return bottleneck_makespan_s(times, microbatches, virtual)
    stable = times.weight_s[0] <= times.forward_s[0] + times.backward_s[0]
    if name == "zb-h1" and equal_stages(times) and microbatches >= times.stages and stable:
        return zb_h1_makespan_s(times, microbatches)
    return None


def pipeline_time(
    name: ScheduleName,
    microbatches: int,
    virtual: int,
    times: StageTimes,
    model: PipelineModel = "closed-form",
) -> PipelineTime:
    """Time of the pipelined part of one step for ``times`` per stage and micro-batch.

    ``model`` "simulate" always runs the simulator; "closed-form" follows the module rules.
    Raises ValueError when the schedule cannot run M micro-batches on P stages.
    """
    cycles = cycles_s(times)
    if times.stages == 1:
        return PipelineTime(microbatches * cycles[0], (microbatches * cycles[0],), "no pipeline")
    require_valid(name, times.stages, microbatches, virtual)  # one sentence if P, M, V fail
    found = None if model == "simulate" else _closed_form(name, microbatches, virtual, times)
    if found is None:
        return _simulated(name, microbatches, virtual, times)
    busy = tuple(microbatches * c for c in cycles)
    return PipelineTime(found, busy, "closed-form")
