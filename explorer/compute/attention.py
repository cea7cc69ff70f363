"""Attention-core efficiency by sequence length, causal mask and pass, from published figures.

FlashAttention-style kernels run at a share of the dense BF16 peak that rises with the
sequence length (more key blocks per query block amortise each block's softmax rescaling and
write-back) and falls under a causal mask at short lengths (the diagonal blocks are half
empty). The GPU preset names a measured table (``presets/kernels/attention.toml``: FA3 on H100,
FA2 on A100, cuDNN's fused attention on B200 and GB200, which Transformer Engine and PyTorch's
SDPA run there: NVIDIA cudnn-frontend's published SDPA training benchmark), and where
Transformer Engine calls another kernel than that table's, TE's own (cuDNN's FusedAttention on
Hopper, which TE prefers to FlashAttention there; Megatron-Core's profile follows it:
``explorer.compute.passes.attention_curve``); between its
sequence lengths the share is interpolated in log2(length), outside
them it is held at the nearest end. A table may carry the same kernel's tables at other head
dimensions (FA3's Figs. 5-6 measure 64, 128 and 256: a larger head does more MMA work per
softmax element); between them the share is interpolated in log2(head dimension), outside them
held at the nearest. MLA's heads are 192 wide in Q K^T and 128 in P V: the head dimension is
their mean, as the two products' FLOPs weigh them. The causal backward is not published: it
takes the backward share times the forward's causal / no-mask ratio at the same length (the
same half-empty diagonal blocks). cuDNN's benchmark measures the causal passes only: its
tables' no-mask rows are built so that this rule gives back the measured causal backward.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from dataclasses import dataclass
from typing import Literal

from explorer.specs import AttentionCurve

BACKWARD_FLOPS_RATIO = 2.5
"""FlashAttention's backward executes 5 s^2 d products per head against the forward's 2: it
recomputes the scores (Q K^T), then dV, dP, dQ and dK. Source: Dao 2023 (arXiv:2307.08691)
sec. 3.1.2 and 4.1, which count backward FLOPs as 2.5 x the forward's."""


FP8_SHARE_RATIO = (1200 / 1978.9) / (740 / 989.4)
"""FP8 attention's share of the FP8 peak over BF16's share of the BF16 peak: FA3 reaches
"close to 1.2 PFLOPs/s" in FP8 and 740 TFLOPs/s in BF16 at its best (head dim 256) on H100
(Shah et al. 2024, arXiv:2407.08608, abstract): 0.61 against 0.75 of the peaks."""


def _interpolated(lengths: tuple[int, ...], shares: tuple[float, ...], seq_len: float) -> float:
    """``shares`` at ``seq_len``, linear in log2(length) between the table's lengths."""
    if seq_len <= lengths[0]:
        return shares[0]
    if seq_len >= lengths[-1]:
        return shares[-1]
    i = bisect_left(lengths, seq_len)
    lo, hi = math.log2(lengths[i - 1]), math.log2(lengths[i])
    t = (math.log2(seq_len) - lo) / (hi - lo)
    return shares[i - 1] + t * (shares[i] - shares[i - 1])


def _curve_share(curve: AttentionCurve, seq_len: float, causal: bool, backward: bool) -> float:
    """One head dimension's share (module docstring)."""
    n = curve.seq_lens
    forward = _interpolated(n, curve.forward, seq_len)
    if not backward:
        return _interpolated(n, curve.forward_causal, seq_len) if causal else forward
    share = _interpolated(n, curve.backward, seq_len)
    if causal:
        share *= _interpolated(n, curve.forward_causal, seq_len) / forward
    return share


def attention_share(
    curve: AttentionCurve,
    seq_len: float,
    causal: bool,
    backward: bool,
    head_dim: float | None = None,
) -> float:
    """Achieved share of the dense BF16 peak of the attention core's forward or backward at
    ``seq_len`` keys per query (the context-parallel shard's length where CP splits it) and
    ``head_dim`` (None: the table's own head dimension).

    Source: the table's measurements (``curve.source``); module docstring for the rest.
    """
    tables = sorted((curve, *curve.head_dims), key=lambda c: c.head_dim)
    if head_dim is None or len(tables) == 1:
        return _curve_share(curve, seq_len, causal, backward)
    dims = tuple(c.head_dim for c in tables)
    shares = tuple(_curve_share(c, seq_len, causal, backward) for c in tables)
    return _interpolated(dims, shares, head_dim)


# PyTorch's context parallelism (torch.distributed.tensor.experimental.context_parallel, the
# ring torchtitan runs): per layer and pass, each CP rank calls SDPA once per ring step on its
# load-balanced chunks and merges the partial outputs itself. Source for everything below:
# pytorch/pytorch torch/distributed/tensor/experimental/_attention.py (_templated_ring_attention,
# _templated_ring_attention_backward, _SDPAMerger, _partial_update, _is_causal_behavior; the
# same code from torch 2.6 (Dec 2024, commit 1963fc8 of torchtitan's December 2024 page) to
# 2025: _ContextParallelOptions convert_to_f32 = True, enable_load_balance = True).


TorchCp = Literal["none", "eager", "compiled"]
"""PyTorch's context-parallel ring and how it runs (explorer.comm.step.CommAssumptions.torch_cp):
not at all, eagerly, or compiled into the block's graph."""


@dataclass(frozen=True, slots=True)
class SdpaCall:
    """One SDPA call of a ring step on one CP rank: query and key lengths, mask."""

    q_len: float
    kv_len: float
    causal: bool

    @property
    def score_pairs(self) -> float:
        """Query-key pairs the kernel computes (FlashAttention skips blocks a causal mask
        empties: half of a square's)."""
        return self.q_len * self.kv_len / (2.0 if self.causal else 1.0)


def ring_sdpa_calls(seq_len: float, cp: int, rank: int) -> tuple[SdpaCall, ...]:
    """The SDPA calls of rank ``rank`` for one layer's causal attention over ``seq_len``
    tokens under torch's load-balanced ring (chunks r and 2 cp - 1 - r on rank r).

    Step 0: the local query against the local keys, causal (the two chunks' own triangles and
    the later chunk against the earlier: a causal mask over their concatenation). Step i > 0,
    K/V from rank r - i: if i <= r, the whole local query against the first half of the
    received K/V (its earlier chunk), no mask; else the second half of the query (the later
    chunk) against all of it, no mask. No step is skipped: every rank computes the same
    ``seq_len^2 / (2 cp)`` pairs.
    """
    local = seq_len / cp
    calls = [SdpaCall(local, local, causal=True)]
    for i in range(1, cp):
        calls.append(
            SdpaCall(local, local / 2, False) if i <= rank else SdpaCall(local / 2, local, False)
        )
    return tuple(calls)


def ring_attention_share(
    curve: AttentionCurve,
    seq_len: float,
    cp: int,
    backward: bool,
    head_dim: float | None = None,
) -> float:
    """Achieved share of the dense peak of one CP rank's causal attention run as torch's
    ring steps (``ring_sdpa_calls``): the diagonal step at the table's causal share at the
    local length ``seq_len / cp``, the ``cp - 1`` off-diagonal steps at its no-mask share
    read at their shorter side ``seq_len / (2 cp)`` (the tables are measured on square calls:
    an assumption), combined by the FLOPs each does (seconds add: a harmonic mean).

    Source: ring_sdpa_calls; the table's measurements (``curve.source``).
    """
    calls = ring_sdpa_calls(seq_len, cp, cp - 1)
    seconds = 0.0
    for call in calls:
        length = min(call.q_len, call.kv_len)
        share = attention_share(curve, length, call.causal, backward, head_dim)
        seconds += call.score_pairs / share
    return sum(c.score_pairs for c in calls) / seconds


def ring_merge_bytes(
    cp: int, out_elements: float, kv_elements: float, fused: bool
) -> tuple[float, float]:
    """HBM bytes of torch's ring bookkeeping around the SDPA calls of one layer on the
    busiest CP rank (rank cp - 1, whose every off-diagonal step merges a whole output and adds a
    whole query gradient), forward and backward. ``out_elements``: the local attention output
    (tokens x heads x head dim); ``kv_elements``: the local K plus V as the kernel sees them.

    Eager (each torch op one kernel over HBM; bf16 2 bytes, fp32 4):
    forward: K, V ``contiguous()`` (2 + 2 per K/V element) and ``torch.cat`` of K and V before
    every rotation (cp - 1 times, 2 + 2); the merger's ``out.to(float32)`` per step (2 + 4 per
    output element), per later step ``out - block_out`` (4 + 4 + 4), ``sigmoid(...) * diff``
    (4 + 4), ``out - ...`` (4 + 4 + 4), and the result's cast back (4 + 2):
    4 KV cp + O (12 + 38 (cp - 1)).
    backward: fp32 ``zeros_like`` for dq, dk, dv (4 O + 4 KV); K, V ``contiguous()`` (4 KV);
    the K/V cats (4 KV per rotation, cp - 1); step 0's ``grad_key += grad_key_`` fp32 += bf16
    (4 + 2 + 4 per element: 10 KV); each later step ``_partial_update`` on the first half
    (5 KV) and its ``torch.cat`` (4 + 4: 8 KV); every step the fp32 cat of dk, dv to send
    (8 KV) and ``grad_query += grad_query_`` (10 O); the final casts to bf16 (6 O + 6 KV):
    O (10 + 10 cp) + KV (24 + 17 (cp - 1) + 8 cp).

    Fused (the block compiled with its ring, as torchtitan's per-block torch.compile traces
    it; an assumption, not measured): one K/V copy for the exchange (4 KV); per later step one
    merge pass reading the fp32 output and the bf16 step output and writing fp32 (10 O);
    backward one fp32 accumulate-and-pack of dk, dv per step (6 KV at step 0, then 4 + 1 + 4 =
    9 KV: the received fp32 buffer, half a bf16 gradient, the packed fp32 result), dq's
    accumulate (10 O per step), and the final dk, dv cast (6 KV):
    forward 4 KV + 10 O (cp - 1); backward KV (16 + 9 (cp - 1)) + 10 O cp.
    """
    o, kv = out_elements, kv_elements
    if cp <= 1:
        return 0.0, 0.0
    if fused:
        return 4 * kv + 10 * o * (cp - 1), kv * (16 + 9 * (cp - 1)) + 10 * o * cp
    forward = 4 * kv * cp + o * (12 + 38 * (cp - 1))
    backward = o * (10 + 10 * cp) + kv * (24 + 17 * (cp - 1) + 8 * cp)
    return forward, backward
