"""Variable-length sequences: flexible sequence-parallel groups (FlexSP) against one fixed group.

Source: Wang et al., "FlexSP: Accelerating Large Language Model Training via Flexible Sequence
Parallelism" (ASPLOS '25, arXiv:2412.01523). Training corpora have long-tailed sequence lengths;
one fixed sequence-parallel (SP) degree must be large enough for the longest sequence, so every
short sequence pays the large group's communication. FlexSP forms, per step, SP groups of
different sizes, sends long sequences to large groups and short ones to small groups, and
balances the groups' times (the paper: a MILP over bucketed lengths, up to 1.98x over fixed SP).

What is modelled here (a documented simpler solver than the paper's MILP):
- A step holds ``global_batch`` sequences drawn from a length profile (a list or histogram of
  lengths, or a named synthetic long-tail family), expanded in proportion (largest remainder;
  the profile's longest length at least once: the tail is what fixed SP must size for).
- Lengths are bucketed up to a geometric grid (4 buckets per doubling, multiples of 128 tokens;
  FlexSP's "sequence blaster" buckets lengths the same way) and padded to 2 x group size (the
  load-balanced causal split of context parallelism).
- A group of g GPUs runs the core's context parallelism (``explorer.estimate`` with cp = g; ring
  exchange of K/V as Megatron-Core, where the paper's groups use Ulysses all-to-alls: a
  stated difference). A micro-batch packs sequences up to a token capacity: the longest
  sequence of the step, and at most what fits the group's memory. Its time is
  overhead + sum of marginal costs, both from two estimates of the core per bucket and group
  size (one and two sequences per micro-batch: marginal = C2 - C1, overhead = 2 C1 - C2), so a
  micro-batch of one sequence costs exactly the core's estimate. Attention cost is quadratic in
  each sequence's own length because each bucket's estimate runs at that length.
- Plans: every group of one size (fixed SP; the best size that holds the longest sequence is the
  baseline), and two sizes (small S, large B, with n_B large groups found by a ternary search).
  Sequences are placed longest first on the eligible group with the earliest finish (LPT;
  Graham 1969, "Bounds on multiprocessing timing anomalies", a 4/3 bound), each group's time
  being the sum of its sequences' costs; the step is the slowest group plus the core's per-step
  tail (gradient reduction over all GPUs and the optimizer step, the same for every plan).
- Memory: each group's peak is the core's estimate at its longest packed micro-batch.
With every sequence of one length, FlexSP and fixed SP both equal the core's estimate of that
layout (tests/test_flexsp.py).
"""

from __future__ import annotations

import heapq
import math
import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache

from explorer.estimate import DEFAULT_ESTIMATE_ASSUMPTIONS, Estimate, EstimateAssumptions, estimate
from explorer.specs import ClusterSpec, Layout, ModelSpec, Precision, TrainingWorkload

MAX_SEQUENCES = 65_536
"""Sequences per step a FlexSP plan takes (the assignment is O(n log groups) per plan)."""
MAX_PROFILE_ENTRIES = 4_096
"""Distinct lengths (or list entries before bucketing) a profile may hold."""
BUCKETS_PER_DOUBLING = 4
"""Length grid: 2^(k/4) tokens rounded up to a multiple of ``BUCKET_ALIGN`` (at most 19% more)."""
BUCKET_ALIGN = 128
"""Bucket lengths are multiples of this many tokens."""
MAX_GROUPS = 1024
"""SP groups one phase may hold: smaller groups are not tried on larger clusters (the
placement keeps a heap entry per group)."""
BUDGET_S = 30.0
"""Seconds a FlexSP plan may take before it stops with a sentence."""
MIN_LENGTH = 128
"""Shortest length a profile may name, tokens."""
LONG_TAIL_MIN = 1024
"""Shortest length of the synthetic long-tail family, tokens."""


@dataclass(frozen=True, slots=True)
class LengthProfile:
    """Sequence lengths of a corpus: each length with its share of sequences."""

    lengths: tuple[int, ...]
    """Distinct lengths, ascending, tokens."""
    weights: tuple[float, ...]
    """Share of sequences at each length (positive; need not sum to 1)."""
    name: str = "custom"
    source: str = "given by the user"

    def __post_init__(self) -> None:
        if not self.lengths or len(self.lengths) != len(self.weights):
            raise ValueError("a length profile needs one weight per length, and at least one")
        if len(self.lengths) > MAX_PROFILE_ENTRIES:
            raise ValueError(f"a length profile holds at most {MAX_PROFILE_ENTRIES} lengths")
        if any(b <= a for a, b in zip(self.lengths, self.lengths[1:], strict=False)):
            raise ValueError("a length profile's lengths must be distinct and ascending")
        if self.lengths[0] < MIN_LENGTH:
            raise ValueError(f"sequence lengths must be at least {MIN_LENGTH} tokens")
        if not all(math.isfinite(w) and w > 0 for w in self.weights):
            raise ValueError("length weights must be positive finite numbers")

    @property
    def longest(self) -> int:
        return self.lengths[-1]

    def mean_length(self) -> float:
        total = sum(self.weights)
        return sum(n * w for n, w in zip(self.lengths, self.weights, strict=True)) / total


def long_tail(longest: int, skew: float, shortest: int = LONG_TAIL_MIN) -> LengthProfile:
    """The synthetic long-tail family: lengths at powers of two from ``shortest`` to ``longest``,
    the share of sequences at length L proportional to L^-skew. skew 0 spreads sequences evenly
    over the doublings; larger skew puts more of them at short lengths while the longest stays.

    An assumption, not a measured corpus: web and code corpora have heavy-tailed document
    lengths (FlexSP sec. 2.3 and Fig. 2 on GitHub, CommonCrawl and Wikipedia); this family has
    one knob for how heavy. Pass a measured histogram instead where you have one.
    """
    if not math.isfinite(skew) or skew < 0:
        raise ValueError(f"long-tail skew must be zero or more, got {skew}")
    if longest < shortest:
        raise ValueError(f"longest length {longest} is shorter than {shortest} tokens")
    lengths = []
    n = shortest
    while n < longest:
        lengths.append(n)
        n *= 2
    lengths.append(longest)
    weights = tuple((n / shortest) ** -skew for n in lengths)
    return LengthProfile(
        lengths=tuple(lengths),
        weights=weights,
        name=f"long-tail (skew {skew:g}, longest {longest})",
        source="synthetic: share of sequences proportional to length^-skew over doublings "
        "(an assumption; FlexSP arXiv:2412.01523 sec. 2.3 on long-tailed corpora)",
    )


_NUMBER = re.compile(r"^\d{1,9}$")


def _length(text: str) -> int:
    text = text.strip()
    if not _NUMBER.match(text):
        raise ValueError(f"sequence length {text[:40]!r} is not a whole number of tokens")
    return int(text)


def parse_profile(text: str) -> LengthProfile:
    """A profile from the command line: ``longtail:skew=1,longest=131072`` (the synthetic
    family), ``4096:120,32768:8,131072:1`` (length:count pairs) or ``4096,4096,8192`` (a list
    of lengths, repeats counted). One sentence on anything else."""
    text = text.strip()
    if len(text) > 65_536:
        raise ValueError("the length profile is longer than 65,536 characters")
    if text.startswith("longtail"):
        options = dict(skew="1", longest="131072", shortest=str(LONG_TAIL_MIN))
        _, _, rest = text.partition(":")
        for part in filter(None, (p.strip() for p in rest.split(","))):
            key, eq, value = part.partition("=")
            if not eq or key not in options:
                raise ValueError(
                    f"long-tail option {part[:40]!r} is not one of skew=, longest=, shortest="
                )
            options[key] = value
        try:
            skew = float(options["skew"])
        except ValueError:
            raise ValueError(f"long-tail skew {options['skew'][:40]!r} is not a number") from None
        return long_tail(_length(options["longest"]), skew, _length(options["shortest"]))
    counts: dict[int, float] = {}
    parts = [p for p in text.split(",") if p.strip()]
    if not parts:
        raise ValueError("the length profile is empty: give lengths such as 4096:100,65536:2")
    if len(parts) > MAX_PROFILE_ENTRIES:
        raise ValueError(f"a length profile holds at most {MAX_PROFILE_ENTRIES} entries")
    for part in parts:
        text_length, colon, count = part.partition(":")
        weight = 1.0
        if colon:
            try:
                weight = float(count)
            except ValueError:
                raise ValueError(f"count {count.strip()[:40]!r} is not a number") from None
        tokens = _length(text_length)
        counts[tokens] = counts.get(tokens, 0.0) + weight
    ordered = sorted(counts)
    return LengthProfile(lengths=tuple(ordered), weights=tuple(counts[n] for n in ordered))


def step_sequences(profile: LengthProfile, global_batch: int) -> tuple[int, ...]:
    """The ``global_batch`` lengths of one step, longest first: the profile's shares times the
    batch, rounded by largest remainder, with the longest length at least once."""
    if global_batch < 1:
        raise ValueError(f"the global batch must hold at least one sequence, got {global_batch}")
    if global_batch > MAX_SEQUENCES:
        raise ValueError(f"a FlexSP step takes at most {MAX_SEQUENCES:,} sequences")
    total = sum(profile.weights)
    exact = [global_batch * w / total for w in profile.weights]
    counts = [math.floor(x) for x in exact]
    order = sorted(range(len(exact)), key=lambda i: counts[i] - exact[i])
    for i in order[: global_batch - sum(counts)]:
        counts[i] += 1
    if counts[-1] == 0:  # keep the tail: take one from the most frequent length
        counts[max(range(len(counts)), key=counts.__getitem__)] -= 1
        counts[-1] = 1
    out: list[int] = []
    for n, c in zip(profile.lengths, counts, strict=True):
        out.extend([n] * c)
    return tuple(sorted(out, reverse=True))


def bucket(length: int) -> int:
    """``length`` rounded up to the grid: 2^(k/4) tokens, a multiple of 128."""
    k = math.ceil(BUCKETS_PER_DOUBLING * math.log2(max(length, 1)) - 1e-9)
    grid = 2 ** (k / BUCKETS_PER_DOUBLING)
    aligned = math.ceil(round(grid, 6) / BUCKET_ALIGN) * BUCKET_ALIGN
    return max(aligned, math.ceil(length / BUCKET_ALIGN) * BUCKET_ALIGN)


@dataclass(frozen=True, slots=True)
class FlexSetting:
    """What every plan shares: model, cluster, the layout's other axes, precision."""

    model: ModelSpec
    cluster: ClusterSpec
    base: Layout
    """TP, ZeRO, recompute and the rest; its dp, cp, pp and micro-batch are set per group."""
    world_size: int
    precision: Precision = "bf16-mixed"
    assumptions: EstimateAssumptions = DEFAULT_ESTIMATE_ASSUMPTIONS

    @property
    def ranks(self) -> int:
        """GPUs per TP group's worth: the GPUs that sequence-parallel groups divide."""
        return self.world_size // self.base.tp


@dataclass(frozen=True, slots=True)
class SequenceCost:
    """One bucket length on one group size."""

    cycle_s: float
    """A micro-batch of this one sequence: forward, backward and recompute, s (the core's)."""
    marginal_s: float
    """One more sequence of this length in a packed micro-batch, s."""
    overhead_s: float
    """The part of a micro-batch that does not grow with its sequences, s (at least 0)."""
    peak_bytes: float
    fits: bool


def _layout(s: FlexSetting, group: int, mbs: int) -> Layout:
    return replace(
        s.base, cp=group, dp=s.ranks // group, pp=1, micro_batch_size=mbs, virtual_stages=1
    )


def _padded(length: int, group: int) -> int:
    step = 2 * group
    return -(-length // step) * step


@lru_cache(maxsize=8192)
def sequence_cost(s: FlexSetting, length: int, group: int) -> SequenceCost:
    """Cost of a sequence of ``length`` (a bucket) on a group of ``group`` GPUs (module
    docstring: two estimates of the core)."""
    seq = _padded(length, group)
    dp = s.ranks // group

    def run(mbs: int) -> Estimate:
        workload = TrainingWorkload(
            seq_len=seq,
            global_batch_size=dp * mbs,
            precision=s.precision,
        )
        return estimate(s.model, s.cluster, _layout(s, group, mbs), workload, s.assumptions)

    one, two = run(1), run(2)
    c1 = max(st.cycle_s for st in one.stages)
    c2 = max(st.cycle_s for st in two.stages)
    marginal = max(c2 - c1, 0.0)
    overhead = max(c1 - marginal, 0.0)
    return SequenceCost(
        cycle_s=c1,
        marginal_s=c1 - overhead,
        overhead_s=overhead,
        peak_bytes=one.memory.peak_bytes,
        fits=one.fits,
    )


@lru_cache(maxsize=1024)
def step_tail_s(s: FlexSetting, length: int, group: int) -> float:
    """The per-step tail (gradient reduction, optimizer step) of a layout of groups of
    ``group``; the same reduction over all GPUs in every plan."""
    seq = _padded(length, group)
    dp = s.ranks // group
    workload = TrainingWorkload(seq_len=seq, global_batch_size=dp, precision=s.precision)
    return estimate(s.model, s.cluster, _layout(s, group, 1), workload, s.assumptions).tail_s


def group_sizes(s: FlexSetting) -> tuple[int, ...]:
    """Powers of two that divide the GPUs left after TP (candidate SP group sizes)."""
    sizes, g = [], 1
    while g <= s.ranks:
        if s.ranks % g == 0 and s.ranks // g <= MAX_GROUPS:
            sizes.append(g)
        g *= 2
    return tuple(sizes)


def capacity(s: FlexSetting, group: int, longest: int, buckets: Sequence[int]) -> int:
    """Tokens one micro-batch of a group may pack: the step's longest bucket, or the longest
    bucket that still fits the group's memory (0 if none fits)."""
    best = 0
    for n in sorted(b for b in buckets if b <= longest):
        if sequence_cost(s, n, group).fits:
            best = n
        else:
            break
    return best


@dataclass(frozen=True, slots=True)
class GroupLoad:
    """One SP group's share of a phase."""

    size: int
    sequences: int
    tokens: int
    longest: int
    busy_s: float
    peak_bytes: float
    fits: bool


@dataclass(frozen=True, slots=True)
class Phase:
    """GPUs split into SP groups that run side by side; the phase lasts as its slowest group."""

    groups: tuple[GroupLoad, ...]
    """Largest first; their sizes sum to the GPUs after TP."""

    @property
    def seconds(self) -> float:
        return max(g.busy_s for g in self.groups)

    def label(self) -> str:
        counts: dict[int, int] = {}
        for g in self.groups:
            counts[g.size] = counts.get(g.size, 0) + 1
        return " + ".join(f"{n} x SP{g}" for g, n in sorted(counts.items(), reverse=True))


@dataclass(frozen=True, slots=True)
class FlexPlan:
    """The SP groups of one step, phase by phase, and the step time."""

    phases: tuple[Phase, ...]
    tail_s: float
    """Per-step gradient reduction and optimizer step, s."""
    world_size: int

    @property
    def step_s(self) -> float:
        return sum(p.seconds for p in self.phases) + self.tail_s

    @property
    def tokens(self) -> int:
        return sum(g.tokens for p in self.phases for g in p.groups)

    @property
    def tokens_per_s_per_gpu(self) -> float:
        return self.tokens / self.step_s / self.world_size

    @property
    def peak_bytes(self) -> float:
        return max(g.peak_bytes for p in self.phases for g in p.groups)

    @property
    def fits(self) -> bool:
        return all(g.fits for p in self.phases for g in p.groups)

    @property
    def balance(self) -> float:
        """Busy share of the GPU-seconds of the phases (1 = no group waits)."""
        busy = sum(g.busy_s * g.size for p in self.phases for g in p.groups)
        ranks = sum(g.size for g in self.phases[0].groups)
        total = sum(p.seconds for p in self.phases) * ranks
        return busy / total if total > 0 else 1.0

    def label(self) -> str:
        return ", then ".join(p.label() for p in self.phases)


def _cost(s: FlexSetting, length: int, group: int, packing: int) -> float:
    """A sequence's share of its group's time: marginal cost, plus the micro-batch overhead in
    proportion to the share of the micro-batch's token capacity it takes."""
    c = sequence_cost(s, length, group)
    return c.marginal_s + c.overhead_s * min(1.0, length / packing)


@dataclass(frozen=True, slots=True)
class _Item:
    """What the placement moves: one sequence, or a pack of short ones (at most the smallest
    group's capacity in tokens, so any group may take it); its cost on each group size."""

    longest: int
    tokens: int
    count: int
    cost: dict[int, float]


def _items(
    s: FlexSetting, seqs: Sequence[int], sizes: Sequence[int], caps: dict[int, int]
) -> list[_Item]:
    """Sequences (descending) as placement items: those longer than the smallest usable
    capacity alone, the rest packed first-fit in order into packs of at most that many tokens
    (the placement then handles tens of items, not thousands; costs stay additive)."""
    usable = [g for g in sizes if caps[g] > 0]
    pack = min(caps[g] for g in usable)

    def cost(length: int) -> dict[int, float]:
        return {g: _cost(s, length, g, caps[g]) for g in usable if caps[g] >= length}

    out: list[_Item] = []
    open_tokens, open_count, open_longest = 0, 0, 0
    open_cost: dict[int, float] = {}
    for length in seqs:
        if length > pack:
            out.append(_Item(length, length, 1, cost(length)))
            continue
        if open_tokens + length > pack and open_count:
            out.append(_Item(open_longest, open_tokens, open_count, open_cost))
            open_tokens, open_count, open_longest, open_cost = 0, 0, 0, {}
        one = cost(length)
        open_cost = {g: open_cost.get(g, 0.0) + one[g] for g in one}
        open_tokens += length
        open_count += 1
        open_longest = max(open_longest, length)
    if open_count:
        out.append(_Item(open_longest, open_tokens, open_count, open_cost))
    return out


def assign(s: FlexSetting, sizes: Sequence[int], items: Sequence[_Item]) -> Phase | None:
    """Longest-first placement (LPT) of ``items`` on groups of ``sizes``: each on the eligible
    group (one whose capacity holds its longest sequence) that finishes it earliest. None when
    an item fits no group."""
    placed = _place(sizes, items)
    return None if placed is None else _phase(s, sizes, placed)


_Placed = tuple[list[float], list[int], list[int], list[int]]
"""Per group: busy seconds, sequences, tokens, longest sequence."""


def _place(sizes: Sequence[int], items: Sequence[_Item]) -> _Placed | None:
    """``assign``'s placement alone (no GroupLoad built): what a plan compares first."""
    kinds = sorted(set(sizes))
    heaps: dict[int, list[tuple[float, int]]] = {g: [] for g in kinds}
    for i, g in enumerate(sizes):
        heaps[g].append((0.0, i))
    n = len(sizes)
    count, tokens, longest = [0] * n, [0] * n, [0] * n
    for item in items:
        best: tuple[float, int] | None = None
        for g in kinds:
            c = item.cost.get(g)
            if c is None:
                continue
            finish = heaps[g][0][0] + c
            if best is None or finish < best[0]:
                best = (finish, g)
        if best is None:
            return None
        finish, g = best
        i = heaps[g][0][1]
        heapq.heapreplace(heaps[g], (finish, i))
        count[i] += item.count
        tokens[i] += item.tokens
        longest[i] = max(longest[i], item.longest)
    busy = [0.0] * n
    for h in heaps.values():
        for t, i in h:
            busy[i] = t
    return busy, count, tokens, longest


def _phase(s: FlexSetting, sizes: Sequence[int], placed: _Placed) -> Phase:
    """The phase of a placement: its groups largest first, each with its memory peak."""
    busy, count, tokens, longest = placed
    order = sorted(range(len(sizes)), key=lambda i: (-sizes[i], -busy[i]))
    tops: dict[tuple[int, int], SequenceCost] = {}  # a few (length, size) pairs over many groups
    groups = []
    for i in order:
        top = None
        if longest[i]:
            key = (longest[i], sizes[i])
            top = tops.get(key) or tops.setdefault(key, sequence_cost(s, *key))
        groups.append(
            GroupLoad(
                size=sizes[i],
                sequences=count[i],
                tokens=tokens[i],
                longest=longest[i],
                busy_s=busy[i],
                peak_bytes=top.peak_bytes if top else 0.0,
                fits=top.fits if top else True,
            )
        )
    return Phase(groups=tuple(groups))


@dataclass(frozen=True, slots=True)
class FlexComparison:
    """FlexSP's plan against the best fixed SP degree on the same step."""

    flexible: FlexPlan
    fixed: FlexPlan
    sequences: tuple[int, ...]
    """The step's lengths (before bucketing), longest first."""
    profile: LengthProfile
    plans_tried: int
    notes: tuple[str, ...] = field(default=())

    @property
    def speedup(self) -> float:
        return self.fixed.step_s / self.flexible.step_s


def _faster(a: Phase | None, b: Phase | None) -> Phase | None:
    if a is None:
        return b
    if b is None:
        return a
    return a if a.seconds <= b.seconds else b


class _Planner:
    """Phases of a step's items, tried and kept (module docstring)."""

    def __init__(self, s: FlexSetting, seqs: tuple[int, ...]) -> None:
        self.s = s
        buckets = sorted(set(seqs))
        self.sizes = group_sizes(s)
        self.caps = {g: capacity(s, g, buckets[-1], buckets) for g in self.sizes}
        self.tried = 0
        self.deadline = time.monotonic() + BUDGET_S

    def _count(self) -> None:
        self.tried += 1
        if time.monotonic() > self.deadline:
            raise ValueError(
                f"the FlexSP plan ran past its {BUDGET_S:.0f} s budget: give fewer GPUs, "
                "sequences or lengths"
            )

    def uniform(self, items: Sequence[_Item]) -> Phase | None:
        """The fastest phase of equal groups that holds every item."""
        best: Phase | None = None
        for g in self.sizes:
            if items and all(g in item.cost for item in items):
                self._count()
                best = _faster(best, assign(self.s, [g] * (self.s.ranks // g), items))
        return best

    def mixed(self, items: Sequence[_Item]) -> Phase | None:
        """The fastest phase of two group sizes side by side (large B for the long sequences,
        small S for the rest; n_B by a ternary search: the phase first shortens, then
        lengthens, as large groups are added)."""
        ranks, best = self.s.ranks, None
        first = items[0]
        for big in (g for g in self.sizes if g in first.cost):
            for small in (g for g in self.sizes if g < big and self.caps[g] > 0):

                def run(n_big: int, big: int = big, small: int = small) -> float:
                    self._count()
                    sizes = [big] * n_big + [small] * ((ranks - n_big * big) // small)
                    placed = _place(sizes, items)
                    if placed is None:
                        return math.inf
                    seconds = max(placed[0])  # Phase.seconds: the slowest group's busy time
                    nonlocal best
                    if best is None or seconds < best.seconds:  # _faster keeps best on ties
                        best = _phase(self.s, sizes, placed)
                    return seconds

                lo, hi = 1, ranks // big - 1  # at least one group of each size
                while hi - lo > 2:
                    m1, m2 = lo + (hi - lo) // 3, hi - (hi - lo) // 3
                    if run(m1) <= run(m2):
                        hi = m2
                    else:
                        lo = m1
                for n_big in range(lo, hi + 1):
                    run(n_big)
        return best


def batch_for_tokens(profile: LengthProfile, tokens_per_step: int) -> int:
    """Sequences per step that carry about ``tokens_per_step`` tokens at the profile's mean
    length (a fixed token budget per step, as training recipes set it), at least one."""
    if tokens_per_step < 1:
        raise ValueError(f"tokens per step must be positive, got {tokens_per_step}")
    count = max(1, round(tokens_per_step / profile.mean_length()))
    if count > MAX_SEQUENCES:
        raise ValueError(
            f"{tokens_per_step:,} tokens per step are {count:,} sequences of this profile; a "
            f"FlexSP step takes at most {MAX_SEQUENCES:,}"
        )
    return count


def compare_flexsp(s: FlexSetting, profile: LengthProfile, global_batch: int) -> FlexComparison:
    """The step's sequences on the best fixed SP degree, and FlexSP's best plan: one phase of
    one or two group sizes, or two phases (the longest sequences on large groups first, then
    the rest on smaller ones, split where an item's length changes). One sentence when no
    group size holds the longest sequence."""
    if s.world_size % s.base.tp:
        raise ValueError(f"{s.world_size} GPUs are not a multiple of TP = {s.base.tp}")
    raw = step_sequences(profile, global_batch)
    seqs = tuple(bucket(n) for n in raw)
    p = _Planner(s, seqs)
    if not any(p.caps[g] >= seqs[0] for g in p.sizes):
        raise ValueError(
            f"no sequence-parallel group of up to {s.ranks} GPUs fits a {raw[0]:,}-token "
            "sequence in memory: add GPUs, TP, ZeRO or recompute"
        )
    items = _items(s, seqs, p.sizes, p.caps)
    holding = min(g for g in p.sizes if p.caps[g] >= seqs[0])
    tail = step_tail_s(s, seqs[0], holding)
    fixed_phase = p.uniform(items)
    assert fixed_phase is not None  # a size that holds the longest holds every item
    fixed = FlexPlan(phases=(fixed_phase,), tail_s=tail, world_size=s.world_size)
    best = fixed
    one = _faster(fixed_phase, p.mixed(items))
    if one is not None and one.seconds + tail < best.step_s:
        best = FlexPlan(phases=(one,), tail_s=tail, world_size=s.world_size)
    for i in range(1, len(items)):
        if items[i].longest == items[i - 1].longest:
            continue  # split only where the length changes
        first, second = p.uniform(items[:i]), p.uniform(items[i:])
        if first and second and first.seconds + second.seconds + tail < best.step_s:
            best = FlexPlan(phases=(first, second), tail_s=tail, world_size=s.world_size)
    notes = []
    if len(items) < s.ranks // max(p.sizes):
        notes.append("the step holds fewer items than the largest group count: GPUs sit idle")
    if raw != seqs:
        notes.append(
            "lengths are rounded up to the bucket grid (4 per doubling, multiples of 128 tokens)"
        )
    return FlexComparison(
        flexible=best,
        fixed=fixed,
        sequences=raw,
        profile=profile,
        plans_tried=p.tried,
        notes=tuple(notes),
    )


def skew_sweep(
    s: FlexSetting, longest: int, skews: Iterable[float], tokens_per_step: int
) -> list[tuple[float, FlexComparison]]:
    """FlexSP against fixed SP over the synthetic long-tail family as the skew grows, at the
    same tokens per step (the paper's comparison in kind: its speed-up grows with the share of
    short sequences)."""
    out = []
    for k in skews:
        profile = long_tail(longest, k)
        out.append((k, compare_flexsp(s, profile, batch_for_tokens(profile, tokens_per_step))))
    return out


def plan_dict(plan: FlexPlan) -> dict[str, object]:
    """A plan as JSON-ready values."""
    return {
        "groups": plan.label(),
        "step_s": plan.step_s,
        "tail_s": plan.tail_s,
        "tokens_per_s_per_gpu": plan.tokens_per_s_per_gpu,
        "peak_gib": plan.peak_bytes / 2**30,
        "fits": plan.fits,
        "balance": plan.balance,
        "phases": [
            {
                "groups": phase.label(),
                "seconds": phase.seconds,
                "per_group": [
                    {
                        "size": g.size,
                        "sequences": g.sequences,
                        "tokens": g.tokens,
                        "longest": g.longest,
                        "busy_s": g.busy_s,
                        "peak_gib": g.peak_bytes / 2**30,
                    }
                    for g in phase.groups
                ],
            }
            for phase in plan.phases
        ],
    }


def comparison_dict(c: FlexComparison) -> dict[str, object]:
    """A comparison as JSON-ready values."""
    return {
        "profile": {
            "name": c.profile.name,
            "source": c.profile.source,
            "lengths": list(c.profile.lengths),
            "weights": list(c.profile.weights),
        },
        "sequences": len(c.sequences),
        "longest": c.sequences[0],
        "mean_length": sum(c.sequences) / len(c.sequences),
        "flexible": plan_dict(c.flexible),
        "fixed": plan_dict(c.fixed),
        "speedup": c.speedup,
        "plans_tried": c.plans_tried,
        "notes": list(c.notes),
    }
