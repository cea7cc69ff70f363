"""Attention-core efficiency by sequence length, causal mask and pass, from published figures.

FlashAttention-style kernels run at a share of the dense BF16 peak that rises with the
sequence length (more key blocks per query block amortise each block's softmax rescaling and
write-back) and falls under a causal mask at short lengths (the diagonal blocks are half
empty). The GPU preset names a measured table (``presets/kernels/attention.toml``: FA3 on H100,
FA2 on A100, cuDNN's fused attention on B200 and GB200, which Transformer Engine and PyTorch's
SDPA run there: NVIDIA cudnn-frontend's published SDPA training benchmark); between its
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
