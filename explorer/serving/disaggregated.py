"""Disaggregated prefill and decode: a prefill pool and a decode pool with their own layouts,
the KV cache sent between them over the fabric, and the split of GPUs that balances them.

Model (DistServe, Zhong et al. 2024, arXiv:2401.09670, sec. 3; Splitwise, Patel et al. 2024,
arXiv:2311.18677, sec. 4; SGLang's large-scale EP blog runs DeepSeek-V3 this way):
- The prefill pool runs prompt-only steps of the token budget per attention group (chunked
  prefill packs prompts into ``prefill_chunk_tokens``); its rate is requests/s = prompt tokens
  a second / prompt tokens per request (after the prefix cache's hits).
- Each request's KV cache crosses the fabric once: prompt x kv_bytes_per_token bytes (the whole
  model's, one copy), over the NICs of the attention group that prefilled it (tp x pp GPUs,
  one NIC each, a point-to-point message each at the scale-out fabric's achievable bandwidth,
  explorer.comm). Overlapped with the prefill (``kv_transfer_overlap``) only the last
  block's share adds to TTFT and the NIC caps the pool's rate; not overlapped, TTFT and the
  prefill time per request both add it.
- The decode pool runs decode-only steps (no prompt mixed in) at the workload's concurrency
  per replica, at most what its KV cache holds; requests/s = tokens/s / output tokens.
- A split of N GPUs into n_p prefill and n_d decode replicas serves min(n_p R_p, n_d R_d)
  requests/s; the balanced ratio of prefill to decode GPUs is (R_d / g_d) / (R_p / g_p).
So the whole never beats the better of its two pools' bounds (each pool's rate per GPU).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from explorer.comm.collectives import collective_s
from explorer.memory.serving import ServingLayout, max_concurrency
from explorer.memory.serving_layout import kv_cache_bytes_per_sequence
from explorer.serving.assumptions import ServingAssumptions
from explorer.serving.latency import EngineStep, _group, replica_latency
from explorer.serving.layouts import layout_problem, serving_layouts, with_redundant_experts
from explorer.specs import ClusterSpec, ModelSpec, ServingWorkload


@dataclass(frozen=True, slots=True)
class PoolRate:
    """One replica layout run as a prefill or a decode pool."""

    layout: ServingLayout
    requests_per_s: float
    """Requests a second one replica finishes (its prefill or its decode)."""
    step_s: float
    """Seconds of one of its steps (prefill: one budget per attention group; decode: one
    token for each of ``concurrency`` sequences)."""
    concurrency: int
    """Sequences per replica decoding (decode pool); prompts in a step (prefill pool)."""

    @property
    def requests_per_s_per_gpu(self) -> float:
        return self.requests_per_s / self.layout.gpus_per_replica


@dataclass(frozen=True, slots=True)
class KvTransfer:
    """The KV cache of one request sent from the prefill pool to the decode pool."""

    bytes_per_request: float
    """prompt x kv_bytes_per_token (whole model, one copy); blocks with a sliding window or
    chunk their window only, Mamba2 and Gated DeltaNet blocks their fixed state
    (explorer.memory.serving_layout.kv_cache_bytes_per_sequence)."""
    seconds: float
    """One point-to-point message of its share over each NIC of the prefill group, at the
    scale-out fabric's achievable bandwidth (explorer.comm), all NICs at once."""
    overlapped: bool

    @property
    def bandwidth_bytes_per_s(self) -> float:
        """The bytes over the seconds: what the prefill group's NICs reach together."""
        return self.bytes_per_request / self.seconds if self.seconds else 0.0


@dataclass(frozen=True, slots=True)
class Disaggregated:
    """A prefill pool and a decode pool sharing ``num_gpus``, and what the pair serves."""

    prefill: PoolRate
    decode: PoolRate
    prefill_replicas: int
    decode_replicas: int
    transfer: KvTransfer
    output_len: int
    ttft_s: float
    """One request's prefill on an idle prefill replica plus the exposed KV transfer."""
    itl_s: float
    """The decode pool's step (no prefill interference)."""

    @property
    def prefill_gpus(self) -> int:
        return self.prefill_replicas * self.prefill.layout.gpus_per_replica

    @property
    def decode_gpus(self) -> int:
        return self.decode_replicas * self.decode.layout.gpus_per_replica

    @property
    def gpus(self) -> int:
        return self.prefill_gpus + self.decode_gpus

    @property
    def requests_per_s(self) -> float:
        """The slower pool sets the pace (requests are not dropped, they queue)."""
        return min(
            self.prefill_replicas * self.prefill.requests_per_s,
            self.decode_replicas * self.decode.requests_per_s,
        )

    @property
    def tokens_per_s(self) -> float:
        return self.requests_per_s * self.output_len

    @property
    def tokens_per_s_per_gpu(self) -> float:
        return self.tokens_per_s / self.gpus

    @property
    def balanced_ratio(self) -> float:
        """Prefill GPUs per decode GPU at which both pools serve the same requests/s."""
        return self.decode.requests_per_s_per_gpu / self.prefill.requests_per_s_per_gpu

    @property
    def pool_bounds_tokens_per_s_per_gpu(self) -> tuple[float, float]:
        """(prefill, decode): output tokens/s per GPU if every GPU ran that pool's work at
        its rate; the pair cannot beat the better of the two."""
        o = self.output_len
        return self.prefill.requests_per_s_per_gpu * o, self.decode.requests_per_s_per_gpu * o


def computed_prompt_tokens(workload: ServingWorkload, a: ServingAssumptions) -> float:
    """Prompt tokens each request prefills: the prefix cache's hits are skipped."""
    return workload.prompt_len * (1.0 - a.prefix_cache_hit_rate)


def kv_transfer(
    model: ModelSpec,
    cluster: ClusterSpec,
    prefill: ServingLayout,
    workload: ServingWorkload,
    a: ServingAssumptions,
) -> KvTransfer:
    """One request's KV cache over the prefill group's NICs (the module docstring)."""
    # the cache the prompt leaves: windowed blocks their window, Mamba2 / DeltaNet their state
    size = kv_cache_bytes_per_sequence(model, workload.kv_dtype, workload.prompt_len)
    nics = prefill.tp * prefill.pp  # one attention group: one NIC per GPU (DGX H100/H200/B200)
    pair = _group(cluster, "pp", 2, cluster.domain_size)  # two GPUs in different domains
    return KvTransfer(
        size, collective_s("point-to-point", size / nics, pair, a.links), a.kv_transfer_overlap
    )


def prefill_rate(
    model: ModelSpec,
    cluster: ClusterSpec,
    layout: ServingLayout,
    workload: ServingWorkload,
    a: ServingAssumptions,
) -> PoolRate | None:
    """A replica's requests/s as a prefill pool, None when its weights leave no room for one
    prompt's KV cache per attention group."""
    one = replace(workload, output_len=1, concurrency=layout.ep)
    if max_concurrency(model, cluster.gpu, layout, one, a.memory) < layout.ep:
        return None
    budget = a.memory.prefill_chunk_tokens
    tokens = budget * layout.ep * layout.pp  # one budget per attention group and micro-batch
    keys = workload.prompt_len - computed_prompt_tokens(workload, a) / 2
    step_s = EngineStep(model, cluster, layout, workload, a).seconds(0, tokens, 0.0, keys)
    per_request_s = step_s * computed_prompt_tokens(workload, a) / tokens
    transfer = kv_transfer(model, cluster, layout, workload, a)
    send_s = transfer.seconds / layout.ep  # ep groups send at once, each over its own NICs
    busy_s = max(per_request_s, send_s) if transfer.overlapped else per_request_s + send_s
    return PoolRate(layout, 1.0 / busy_s, step_s, max(1, round(tokens / workload.prompt_len)))


def decode_rate(
    model: ModelSpec,
    cluster: ClusterSpec,
    layout: ServingLayout,
    workload: ServingWorkload,
    a: ServingAssumptions,
) -> PoolRate | None:
    """A replica's requests/s as a decode pool at the workload's concurrency (at most what
    its KV cache holds), None when no sequence fits."""
    most = max_concurrency(model, cluster.gpu, layout, workload, a.memory)
    seqs = min(workload.concurrency, most)
    if seqs == 0:
        return None
    context = workload.prompt_len + workload.output_len / 2
    step_s = EngineStep(model, cluster, layout, workload, a).seconds(seqs, 0, context, 0.0)
    return PoolRate(layout, seqs / step_s / workload.output_len, step_s, seqs)


def best_split(prefill: PoolRate, decode: PoolRate, num_gpus: int) -> tuple[int, int] | None:
    """(prefill replicas, decode replicas) within ``num_gpus`` serving the most requests/s,
    fewest GPUs on ties; None when one of each does not fit."""
    gp, gd = prefill.layout.gpus_per_replica, decode.layout.gpus_per_replica
    rp, rd = prefill.requests_per_s, decode.requests_per_s
    best: tuple[float, int, int, int] | None = None
    for n_p in range(1, (num_gpus - gd) // gp + 1):
        most = (num_gpus - n_p * gp) // gd
        served = min(n_p * rp, most * rd)
        # the fewest decode replicas serving as much (the other GPUs stay free)
        n_d = most if n_p * rp > most * rd else max(1, math.ceil(n_p * rp / rd * (1 - 1e-12)))
        key = (served, -(n_p * gp + n_d * gd), n_p, n_d)
        if best is None or key[:2] > best[:2]:
            best = key
    return None if best is None else (best[2], best[3])


def disaggregate(
    model: ModelSpec,
    cluster: ClusterSpec,
    prefill: PoolRate,
    decode: PoolRate,
    num_gpus: int,
    workload: ServingWorkload,
    a: ServingAssumptions,
) -> Disaggregated | None:
    """The pair at its best split of ``num_gpus``, with TTFT and ITL; None if it cannot fit."""
    split = best_split(prefill, decode, num_gpus)
    if split is None:
        return None
    transfer = kv_transfer(model, cluster, prefill.layout, workload, a)
    alone = replace(workload, concurrency=1)
    ttft = replica_latency(model, cluster, prefill.layout, alone, a).ttft_s
    exposed = (
        transfer.seconds / model.num_hidden_layers if transfer.overlapped else transfer.seconds
    )
    return Disaggregated(
        prefill=prefill,
        decode=decode,
        prefill_replicas=split[0],
        decode_replicas=split[1],
        transfer=transfer,
        output_len=workload.output_len,
        ttft_s=ttft + exposed,
        itl_s=decode.step_s,
    )


def pool_layouts(
    model: ModelSpec, cluster: ClusterSpec, num_gpus: int, a: ServingAssumptions
) -> list[ServingLayout]:
    """Single-replica layouts of fewer than ``num_gpus`` GPUs that can run (a pool of each
    kind must leave room for the other; 16 + 8 of 24 GPUs is a split too)."""
    out = []
    for size in range(1, num_gpus):
        for plain in serving_layouts(size):
            if plain.replicas != 1:
                continue
            layout = with_redundant_experts(model, plain, a)
            if not layout_problem(model, cluster, layout, a):
                out.append(layout)
    return out


def plan_disaggregated(
    model: ModelSpec,
    cluster: ClusterSpec,
    num_gpus: int,
    workload: ServingWorkload,
    assumptions: ServingAssumptions | None = None,
    keep: int = 5,
) -> tuple[Disaggregated, ...]:
    """The ``keep`` best (prefill layout, decode layout, split) of ``num_gpus`` GPUs by output
    tokens/s, each pool's rate computed once per layout."""
    a = assumptions or ServingAssumptions()
    layouts = pool_layouts(model, cluster, num_gpus, a)
    prefills = [r for lay in layouts if (r := prefill_rate(model, cluster, lay, workload, a))]
    decodes = [r for lay in layouts if (r := decode_rate(model, cluster, lay, workload, a))]
    pairs = []
    for p in prefills:
        for d in decodes:
            split = best_split(p, d, num_gpus)
            if split is not None:
                served = min(split[0] * p.requests_per_s, split[1] * d.requests_per_s)
                pairs.append((served, p, d))
    pairs.sort(key=lambda t: -t[0])
    out = (disaggregate(model, cluster, p, d, num_gpus, workload, a) for _, p, d in pairs[:keep])
    return tuple(x for x in out if x is not None)
