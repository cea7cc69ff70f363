"""Pipeline shapes for the search's bounds: which blocks sit where, and floors on the pipelined
part of a step that hold for every schedule's timing in ``explorer.estimate``.

Pure functions of layer counts and seconds; ``explorer.search.bounds`` feeds them whole-model
figures (``Unit``) or per-part times.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from itertools import accumulate
from typing import NamedTuple

from explorer.partition import balanced_chunk_sizes
from explorer.schedules import StageTimes
from explorer.specs import V_SHAPED, ScheduleName


def arrival_bound_s(
    times: StageTimes, microbatches: int, bidirectional: bool, virtual: int = 1
) -> float:
    """max over ranks of (forward chain before the rank's first micro-batch + busy time), s.

    Every action on a rank waits, through its dependencies, for a forward that has run the
    route up to that rank: chunk 0 of the ranks before it, each 1/V of its part's forward;
    DualPipe's ranks are reached from both ends, each holding parts r and P-1-r for half the
    micro-batches. Source: dependency rules of explorer.schedules.
    """
    zipped = zip(times.forward_s, times.backward_s, times.weight_s, strict=True)
    cycles = [f + b + w for f, b, w in zipped]
    before = [0.0, *accumulate(f / virtual for f in times.forward_s)]  # chunk 0 of parts < j
    p, m = times.stages, microbatches
    if not bidirectional:
        return max(before[r] + m * cycles[r] for r in range(p))
    return max(
        min(before[r], before[p - 1 - r]) + m / 2 * (cycles[r] + cycles[p - 1 - r])
        for r in range(p)
    )


@cache
def chain_layers(num_layers: int, pp: int, virtual: int) -> tuple[int, ...]:
    """Blocks on the first chunk of the ranks before rank r, for r = 0 .. pp - 1."""
    sizes = balanced_chunk_sizes(num_layers, pp * virtual)
    return tuple(accumulate(sizes[: pp - 1], initial=0))


@cache
def layers_ahead(num_layers: int, pp: int, virtual: int, dualpipe: bool) -> float:
    """Blocks a first micro-batch passes before reaching a rank, averaged over the ranks.

    Balanced split (explorer.partition); DualPipe ranks are reached from both ends.
    """
    before = chain_layers(num_layers, pp, virtual)
    if not dualpipe:
        return sum(before) / pp
    return sum(min(before[r], before[pp - 1 - r]) for r in range(pp)) / pp


class Unit(NamedTuple):
    """Compute seconds of one micro-batch on one GPU at fixed degrees, recompute included."""

    whole_s: float
    """The whole model: every block, the embedding and the head."""
    block_s: float
    """The cheapest block (forward, backward, weight gradient, recompute)."""
    block_forward_s: float
    """The cheapest block's forward."""
    kinds: tuple[float, float, float, float]
    """Cycles of one dense block, one MoE block, the embedding and the head (final norm, LM
    head, multi-token-prediction modules): a part's compute is their sum over what it holds
    (explorer.compute.pass_times is linear in the work)."""


Mix = tuple[int, int, int, int]
"""What a pipeline rank holds: dense blocks, MoE blocks, embedding (0/1), head (0/1)."""


def rank_loads(mixes: tuple[Mix, ...], last: Mix, unit: Unit) -> tuple[float, float]:
    """(heaviest rank's, last rank's) compute per micro-batch, s, from the ranks' mixes."""

    dense, moe, embedding, head = unit.kinds
    heaviest = max(d * dense + m * moe + e * embedding + h * head for d, m, e, h in mixes)
    d, m, e, h = last
    return heaviest, d * dense + m * moe + e * embedding + h * head


def pipelined_floor(
    variant: tuple[ScheduleName, int],
    pp: int,
    num_layers: int,
    unit: Unit,
    microbatches: int,
    closed: bool,
    loads: tuple[float, float],
) -> Callable[[float], float]:
    """Lower bound on the pipelined part of one schedule from whole-model figures, s, as a
    function of the exposed communication per micro-batch (the rest fixed).

    Sum of part cycles S = whole + comm; each rank's cycle is at least its compute, the
    heaviest's H and the last's (the head's) L (``loads``); each block's forward takes at least
    f. Closed forms (``closed``): the bottleneck form M C_max + (S - C_max) / V with
    C_max >= max(S / P, H). ZB-H1 and the simulator: the ranks' mean arrival plus busy time,
    the last rank's, or M H. DualPipe: the mean, or the heaviest rank (two parts, half the
    micro-batches each way). Source: explorer.estimate.pipeline; ``arrival_bound_s``.
    """
    (schedule, v), p, layers, m = variant, pp, num_layers, microbatches
    heaviest, last = loads
    whole = unit.whole_s
    if schedule in V_SHAPED:  # simulated; chunk 0 of a rank is half its blocks
        v, closed = 2, False
    if schedule not in ("zb-h1", "dualpipe") and closed:
        ramp = m - 1 / v

        def bottleneck(comm_s: float) -> float:
            total = whole + comm_s
            return ramp * max(total / p, heaviest) + total / v

        return bottleneck
    dualpipe = schedule == "dualpipe" and p > 1
    ahead = layers_ahead(layers, p, v, dualpipe) * unit.block_forward_s
    floor = m / 2 * heaviest
    if not dualpipe:
        chain = chain_layers(layers, p, v)[-1] * unit.block_forward_s
        floor = max(chain + m * last, m * heaviest)

    def arrival(comm_s: float) -> float:
        return max(m * (whole + comm_s) / p + ahead, floor)

    return arrival
