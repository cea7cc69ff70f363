"""An engine under load: a step-by-step simulation of one serving replica's scheduler.

Requests arrive (Poisson at a rate with a seed, or a fixed number of users closed-loop, each
sending its next request when the last one finishes). Each step the scheduler, as vLLM V1
does (``max_num_seqs``, ``max_num_batched_tokens``, chunked prefill), runs one token of every
decoding sequence first, then prompt chunks of the sequences still prefilling and of newly
admitted ones, up to the token budget; admission and decode growth take paged KV blocks from
the pool the memory model leaves (explorer.memory.serving.kv_capacity_tokens), and when a
decode needs a block and none is free the most recently admitted sequence is preempted (its
blocks freed, its prompt and generated tokens recomputed later: vLLM's recompute
preemption). Static batching (TensorRT-LLM's and Orca's baseline) admits a batch only when the
engine is empty, reserving each sequence's full length, and runs it to the end. A step's
duration comes from the per-step roofline (explorer.serving.latency.EngineStep); with
speculative decoding each decode reserves its k drafted slots and gets the expected accepted
tokens a step (whole tokens, the fraction carried over).

Out come TTFT, TPOT and end-to-end latency at p50/p90/p99, the throughput at that load and
the time-averaged number of requests in the system (for Little's law).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Literal

import numpy as np

from explorer.memory.serving import ServingLayout, kv_capacity_tokens
from explorer.serving.assumptions import ServingAssumptions
from explorer.serving.drafts import Speculation
from explorer.serving.latency import EngineStep
from explorer.specs import ClusterSpec, ModelSpec, ServingWorkload

Batching = Literal["continuous", "static"]
StepSeconds = Callable[[int, int, float, float], float]
"""(decode sequences, prefill tokens, mean decode context, mean prefill keys) -> seconds."""

MAX_REQUESTS = 20_000
"""Most requests one simulation runs (more are cut, with a sentence)."""
MAX_STEPS = 200_000
"""Most scheduler steps one simulation runs (then it stops, with a sentence)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class EngineLoad:
    """The load on one engine and its scheduler's limits."""

    rate_per_s: float | None = None
    """Poisson arrival rate of requests per second, all replicas; None for closed loop."""
    users: int | None = None
    """Concurrent users, all replicas, each sending a request when its last one finished."""
    max_batch: int = 256
    """Most sequences in a step. Source: vLLM ``max_num_seqs`` default 256."""
    token_budget: int = 8192
    """Most tokens in a step (decodes + prefill chunks). Source: vLLM V1
    ``max_num_batched_tokens``, 8192 for its server on GPUs of 70 GiB or more."""
    batching: Batching = "continuous"
    """In-flight (continuous) batching, or static batches run to the end."""
    num_requests: int = 1000
    """Requests simulated, all replicas (capped at ``MAX_REQUESTS``)."""
    seed: int = 0
    """Seed of the Poisson arrivals."""

    def __post_init__(self) -> None:
        if (self.rate_per_s is None) == (self.users is None):
            raise ValueError("give exactly one of a request rate or a number of users")
        if self.rate_per_s is not None and not self.rate_per_s > 0:
            raise ValueError(f"rate_per_s must be positive, got {self.rate_per_s}")
        for name in ("users", "max_batch", "token_budget", "num_requests"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ValueError(f"{name} must be positive, got {value}")
        if self.batching not in ("continuous", "static"):
            raise ValueError(f"batching must be continuous or static, got {self.batching!r}")


@dataclass(frozen=True, slots=True)
class Percentiles:
    """p50, p90 and p99 of one latency over the finished requests (seconds)."""

    p50_s: float
    p90_s: float
    p99_s: float
    mean_s: float


@dataclass(frozen=True, slots=True)
class LoadResult:
    """What one replica's simulation measured."""

    finished: int
    """Requests that finished."""
    ttft: Percentiles
    tpot: Percentiles
    """Time per output token after the first, per request (requests of one token left out)."""
    e2e: Percentiles
    tokens_per_s: float
    """Output tokens per second over the run (first arrival to last finish)."""
    requests_per_s: float
    mean_in_system: float
    """Time-averaged requests waiting or running (Little's law: rate x mean latency)."""
    duration_s: float
    steps: int
    preemptions: int
    note: str = ""
    """A sentence when a cap cut the run short ('' otherwise)."""


@dataclass(slots=True)
class _Request:
    arrival_s: float
    prompt: int  # tokens to prefill: the prompt, plus the generated ones after a preemption
    prefilled: int = 0
    generated: int = 0
    kv_tokens: int = 0
    blocks: int = 0
    credit: float = 0.0  # speculative decoding: the fraction of a token a step left over
    first_s: float = -1.0
    finish_s: float = -1.0


@dataclass(slots=True)
class _Engine:
    """Mutable state of one simulated engine (private to ``simulate``)."""

    load: EngineLoad
    prompt_len: int
    output_len: int
    free_blocks: int
    block_tokens: int
    cached_tokens: int = 0
    """Prompt tokens each request finds in the prefix cache: not prefilled (their KV blocks
    are the request's own, as sharing between sequences is left out)."""
    lookahead: int = 0
    """KV slots a decode reserves beyond its next token: the k drafted tokens it verifies
    (vLLM's ``num_lookahead_slots``); 0 without speculation."""
    tokens_per_step: float = 1.0
    """Tokens a decoding sequence gets from a step on average (speculation: above 1)."""
    waiting: deque[_Request] = field(default_factory=deque)
    running: list[_Request] = field(default_factory=list)
    preemptions: int = 0

    def grow(self, r: _Request, tokens: int) -> bool:
        """Take the blocks ``r`` needs to hold ``tokens`` in all; False when too few are free."""
        need = max(0, -(-tokens // self.block_tokens) - r.blocks)
        if need > self.free_blocks:
            return False
        self.free_blocks -= need
        r.blocks += need
        return True

    def release(self, r: _Request) -> None:
        self.free_blocks += r.blocks
        r.blocks, r.kv_tokens = 0, 0

    def preempt_last(self) -> None:
        """vLLM's recompute preemption: the latest-admitted sequence gives back its blocks and
        waits at the head of the queue to prefill its prompt and generated tokens again."""
        victim = self.running.pop()
        self.release(victim)
        victim.prompt = self.prompt_len + victim.generated
        victim.prefilled = victim.kv_tokens = self.cached_tokens  # the prefix is still cached
        self.waiting.appendleft(victim)
        self.preemptions += 1

    def admit_static_batch(self) -> None:
        """Static batching: into an empty engine, up to max_batch whole sequences (each
        reserving its prompt and output), run to the end before the next batch."""
        while self.waiting and len(self.running) < self.load.max_batch:
            r = self.waiting[0]
            if not self.grow(r, r.prompt + self.output_len):
                break
            self.running.append(self.waiting.popleft())

    def decodes(self) -> list[_Request]:
        """Decoding sequences, each with a block for its next token (preempting as needed)."""
        while True:
            ready = [r for r in self.running if r.prefilled == r.prompt]
            if all(self.grow(r, r.kv_tokens + 1 + self.lookahead) for r in ready):
                return ready
            self.preempt_last()

    def prefills(self, budget: int, chunked: bool = True) -> list[tuple[_Request, int]]:
        """Prompt chunks up to ``budget`` tokens: running sequences first, then admissions;
        without ``chunked`` prefill a prompt is admitted only whole, unless it exceeds the whole
        token budget (a preempted sequence's recompute), which is still split."""
        chunks = []
        for r in self.running:
            take = min(budget, r.prompt - r.prefilled)
            if take > 0 and self.grow(r, r.kv_tokens + take):
                chunks.append((r, take))
                budget -= take
        static = self.load.batching == "static"
        while not static and self.waiting and len(self.running) < self.load.max_batch:
            r = self.waiting[0]
            whole = r.prompt - r.prefilled
            if not chunked and budget < whole <= self.load.token_budget:
                break  # waits for a step with room for all of it
            take = min(budget, whole)
            if take <= 0 or not self.grow(r, r.kv_tokens + take):
                break
            self.running.append(self.waiting.popleft())
            chunks.append((r, take))
            budget -= take
        return chunks


def _percentiles(values: list[float]) -> Percentiles:
    if not values:
        return Percentiles(0.0, 0.0, 0.0, 0.0)
    p50, p90, p99 = np.percentile(values, [50, 90, 99])
    return Percentiles(float(p50), float(p90), float(p99), float(np.mean(values)))


def _arrivals(load: EngineLoad, count: int) -> list[float]:
    """Poisson arrival times (exponential gaps, seeded), or every user at time 0."""
    if load.rate_per_s is None:
        return [0.0] * min(count, load.users or 0)
    gaps = np.random.default_rng(load.seed).exponential(1.0 / load.rate_per_s, count)
    return [float(t) for t in np.cumsum(gaps)]


def simulate(
    step_s: StepSeconds,
    load: EngineLoad,
    prompt_len: int,
    output_len: int,
    kv_capacity_tokens: int,
    block_tokens: int = 16,
    cached_tokens: int = 0,
    tokens_per_step: float = 1.0,
    lookahead: int = 0,
    chunked_prefill: bool = True,
) -> LoadResult:
    """Simulate one engine under ``load`` (its rate or users already this replica's share)
    until ``load.num_requests`` requests finish (model in the module docstring); each prompt
    finds its first ``cached_tokens`` in the prefix cache. Speculative decoding: each decode
    reserves ``lookahead`` more KV slots and gets ``tokens_per_step`` tokens a step on
    average (whole tokens, the fraction carried to its next step). Without
    ``chunked_prefill`` prompts are admitted whole (``ServingAssumptions.chunked_prefill``)."""
    if tokens_per_step < 1 or lookahead < 0:
        raise ValueError("tokens_per_step must be at least 1 and lookahead at least 0")
    if not 0 <= cached_tokens < prompt_len:
        raise ValueError(f"cached tokens must be in [0, {prompt_len}), got {cached_tokens}")
    count = min(load.num_requests, MAX_REQUESTS)
    note = f"cut to {MAX_REQUESTS:,} simulated requests" if load.num_requests > count else ""
    blocks = kv_capacity_tokens // block_tokens
    e = _Engine(load, prompt_len, output_len, blocks, block_tokens, cached_tokens, lookahead,
                tokens_per_step)  # fmt: skip
    if prompt_len + output_len > e.free_blocks * block_tokens:
        raise ValueError(
            f"one request of {prompt_len + output_len:,} tokens does not fit the KV cache of "
            f"{e.free_blocks * block_tokens:,} tokens"
        )
    pending = deque(_arrivals(load, count))
    issued, done = len(pending), list[_Request]()
    t = start = pending[0]
    area = 0.0
    steps = 0
    while len(done) < count:
        if steps >= MAX_STEPS:
            note = f"stopped after {MAX_STEPS:,} steps with {len(done):,} requests finished"
            break
        while pending and pending[0] <= t:
            e.waiting.append(
                _Request(pending.popleft(), prompt_len, cached_tokens, kv_tokens=cached_tokens)
            )
        if not e.running and not e.waiting:
            if not pending:
                break
            t = pending[0]  # idle until the next arrival
            continue
        if load.batching == "static" and not e.running:
            e.admit_static_batch()
        decodes = e.decodes()
        chunks = e.prefills(load.token_budget - len(decodes), chunked_prefill)
        if not decodes and not chunks:  # every sequence prefilling and the cache full
            e.preempt_last()
            continue
        context = sum(r.kv_tokens + 1 for r in decodes) / max(1, len(decodes))
        tokens = sum(take for _, take in chunks)
        keys = sum((r.prefilled + take / 2) * take for r, take in chunks) / max(1, tokens)
        dt = step_s(len(decodes), tokens, context, keys)
        area += (len(e.running) + len(e.waiting)) * dt
        t += dt
        steps += 1
        finished = _advance(e, decodes, chunks, t)
        done += finished
        for _ in finished:  # closed loop: each user sends its next request at once
            if load.users is not None and issued < count:
                pending.append(t)
                issued += 1
    return _result(done, output_len, t - start, area, steps, e.preemptions, note)


def _advance(
    e: _Engine, decodes: list[_Request], chunks: list[tuple[_Request, int]], t: float
) -> list[_Request]:
    """Apply one step at time ``t``: chunks prefilled, tokens sampled; the finished ones."""
    sampled = list(decodes)
    for r, take in chunks:
        r.prefilled += take
        r.kv_tokens += take
        if r.prefilled == r.prompt:  # the last chunk samples a token
            sampled.append(r)
    emitted = {id(r): 1 for r in sampled}
    for r in decodes:
        r.credit += e.tokens_per_step
        count = min(int(r.credit + 1e-9), e.output_len - r.generated)
        r.credit -= int(r.credit + 1e-9)
        r.kv_tokens += count
        emitted[id(r)] = count
    finished = []
    for r in sampled:
        r.generated += emitted[id(r)]
        if r.first_s < 0:
            r.first_s = t
        if r.generated >= e.output_len:
            r.finish_s = t
            finished.append(r)
    for r in finished:
        e.running.remove(r)
        e.release(r)
    return finished


def _result(
    done: list[_Request],
    output_len: int,
    duration_s: float,
    area: float,
    steps: int,
    preemptions: int,
    note: str,
) -> LoadResult:
    duration_s = max(duration_s, 1e-30)
    tpot = [(r.finish_s - r.first_s) / (output_len - 1) for r in done if output_len > 1]
    return LoadResult(
        finished=len(done),
        ttft=_percentiles([r.first_s - r.arrival_s for r in done]),
        tpot=_percentiles(tpot),
        e2e=_percentiles([r.finish_s - r.arrival_s for r in done]),
        tokens_per_s=len(done) * output_len / duration_s,
        requests_per_s=len(done) / duration_s,
        mean_in_system=area / duration_s,
        duration_s=duration_s,
        steps=steps,
        preemptions=preemptions,
        note=note,
    )


def serve_under_load(
    model: ModelSpec,
    cluster: ClusterSpec,
    layout: ServingLayout,
    workload: ServingWorkload,
    load: EngineLoad,
    assumptions: ServingAssumptions | None = None,
    speculation: Speculation | None = None,
) -> LoadResult:
    """Simulate one replica of ``layout`` under its share of ``load`` (rate, users and
    requests split evenly over the replicas); the requests finished, the rates and the mean
    in system are for all replicas. The workload's prompt and output lengths are every
    request's. ``speculation``: each step drafts and verifies (``EngineStep``)."""
    a = assumptions or ServingAssumptions()
    n = layout.replicas
    share = replace(
        load,
        rate_per_s=None if load.rate_per_s is None else load.rate_per_s / n,
        users=None if load.users is None else -(-load.users // n),
        num_requests=-(-load.num_requests // n),
    )
    step = EngineStep(model, cluster, layout, workload, a, speculation)
    capacity = kv_capacity_tokens(model, cluster.gpu, layout, workload, a.memory)
    cached = int(workload.prompt_len * a.prefix_cache_hit_rate)
    one = simulate(
        step.seconds, share, workload.prompt_len, workload.output_len, capacity,
        a.memory.kv_block_tokens, cached, step.tokens_per_step, step.draft_tokens,
        a.chunked_prefill,
    )  # fmt: skip
    return replace(
        one,
        finished=one.finished * n,
        tokens_per_s=one.tokens_per_s * n,
        requests_per_s=one.requests_per_s * n,
        mean_in_system=one.mean_in_system * n,
    )
