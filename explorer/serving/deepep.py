"""The EP dispatch and combine of one MoE block as DeepEP runs them (the engines' EP backend:
SGLang, vLLM and TensorRT-LLM's wide-EP use DeepEP or kernels like it).

Source: DeepEP (github.com/deepseek-ai/DeepEP, docs/legacy.md, "Performance", V1 kernels on
H800 with ~160 GB/s NVLink and one CX7 400 Gb/s NIC, ~50 GB/s, per GPU; DeepSeek-V3 hidden
7168, top-8, FP8 dispatch, BF16 combine):
- Normal kernels (prefill, or a step with prompt tokens): intranode EP8 153 GB/s dispatch and
  158 GB/s combine over H800's NVLink (not used: see ``ep_exchange_s``); internode they send
  a token once per destination node over RDMA and forward it over NVLink, at a bottleneck
  bandwidth of 43/43 (EP16), 58/57 (EP32) and 51/50 GB/s (EP64) for dispatch/combine.
- Low-latency kernels (decode-only steps): every token copy straight over RDMA, at
  98/127 (EP8), 63/74 (EP16), 48/53 (EP32), 43/46 (EP64), 39/39 (EP128), 39/40 GB/s (EP256).
DeepEP's measured bandwidths stand in for the fabric model across nodes; they scale with the
cluster's fabric per GPU over 50 GB/s, the nearest EP degree's figure used.
Bytes per token copy: dispatch h fp8 values plus one fp32 scale per 128 (DeepSeek-V3 report
sec. 3.3.2 tiles), or h bf16 values without FP8 dispatch; combine h bf16 values.
Node-limited routing (DeepSeek-V3 report sec. 2.1.2, "each token ... sent to at most M = 4
nodes"; ``topk_group`` of ``n_group`` groups): a token reaches at most topk_group groups'
nodes, and on average N (1 - (1 - 1/N)^k) of N nodes with uniform routing.
"""

from __future__ import annotations

import math

from explorer.memory.serving import ACTIVATION_BYTES, ServingLayout
from explorer.specs import ClusterSpec, ModelSpec

MEASURED_RDMA_BYTES_PER_S = 50e9
"""The CX7 400 Gb/s NIC per GPU in DeepEP's tests (~50 GB/s)."""
INTERNODE_BYTES_PER_S = {16: (43e9, 43e9), 32: (58e9, 57e9), 64: (51e9, 50e9)}
"""Normal kernels across nodes: (dispatch, combine) RDMA bottleneck bandwidth by EP."""
LOW_LATENCY_BYTES_PER_S = {
    8: (98e9, 127e9),
    16: (63e9, 74e9),
    32: (48e9, 53e9),
    64: (43e9, 46e9),
    128: (39e9, 39e9),
    256: (39e9, 40e9),
}
"""Low-latency kernels: (dispatch, combine) RDMA bandwidth by EP (128 tokens a batch)."""
FP8_SCALE_BLOCK = 128
"""Values per fp32 scale in FP8 dispatch (1 x 128 activation tiles)."""


def _nearest(table: dict[int, tuple[float, float]], ep: int) -> tuple[float, float]:
    """The figure of the EP degree nearest to ``ep`` on a log scale."""
    return table[min(table, key=lambda e: abs(math.log(e / ep)))]


def copy_bytes(hidden: int, fp8_dispatch: bool) -> tuple[float, float]:
    """(dispatch, combine) bytes of one token copy."""
    dispatch = hidden * (1.0 + 4.0 / FP8_SCALE_BLOCK) if fp8_dispatch else hidden * ACTIVATION_BYTES
    return dispatch, hidden * ACTIVATION_BYTES


def nodes_reached(model: ModelSpec, nodes: int) -> float:
    """Expected nodes one token's top-k experts sit on, of ``nodes`` the EP group spans: the
    uniform-routing expectation, at most the nodes of the top groups (node-limited routing)."""
    k = model.num_experts_per_tok
    expected = nodes * (1 - (1 - 1 / nodes) ** k)
    if model.topk_group and model.n_group > 1:
        cap = model.topk_group * math.ceil(nodes / model.n_group)
        return min(expected, float(cap))
    return expected


def ep_exchange_s(
    model: ModelSpec,
    cluster: ClusterSpec,
    layout: ServingLayout,
    tokens: float,
    low_latency: bool,
    fp8_dispatch: bool,
) -> float:
    """Seconds of one MoE block's dispatch plus combine for ``tokens`` per attention group
    (each TP rank sends its 1/tp share) of an EP group across nodes, DeepEP's kernels (the
    module docstring). An EP group inside one NVLink domain is the fabric model's all-to-all
    (explorer.serving.latency): DeepEP's intranode figure is H800's, whose NVLink (160 GB/s)
    is not the H100's or B200's."""
    ep, tp = layout.ep, layout.tp
    if ep == 1 or tokens <= 0:
        return 0.0
    per_gpu = tokens / tp
    sizes = copy_bytes(model.hidden_size, fp8_dispatch)
    k = model.num_experts_per_tok
    domain = cluster.domain_size
    nodes = math.ceil(tp * ep / domain)
    if nodes == 1:
        raise ValueError("DeepEP's figures here are for EP groups across nodes")
    scale = cluster.fabric_bytes_per_s / MEASURED_RDMA_BYTES_PER_S
    if low_latency:  # every copy over RDMA
        figures = _nearest(LOW_LATENCY_BYTES_PER_S, ep)
        return sum(
            per_gpu * k * size / (bw * scale) for size, bw in zip(sizes, figures, strict=True)
        )
    # normal kernels: once per remote node over RDMA (the NVLink forwarding is faster)
    remote_nodes = nodes_reached(model, nodes) * (nodes - 1) / nodes
    figures = _nearest(INTERNODE_BYTES_PER_S, ep)
    return sum(
        per_gpu * remote_nodes * size / (bw * scale)
        for size, bw in zip(sizes, figures, strict=True)
    )
