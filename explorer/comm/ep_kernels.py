"""Published speeds of expert-parallel dispatch and combine inside one NVLink 5 domain.

NCCL's model of the fast links (``explorer.comm.fabrics``: an all-reduce sweep's share of the
line rate) puts an all-to-all of a few hundred MB inside a B200 node or a GB200 NVL72 at about
600-700 GB/s of algorithm bandwidth. No published EP kernel reaches that through PyTorch: the
Hybrid-EP tables of DeepEP (docs/README_Hybrid-EP.md, deepseek-ai/DeepEP at commit 41cad94,
"Torch API" columns, 4096 tokens x hidden 7168, top-8, 8 local experts per rank, random
uniform routing, algorithm bandwidth) give 470-550 GB/s for a BF16 dispatch and 418-538 GB/s
for a combine on GB200 at 8-36 ranks with 16 SMs (Megatron-Core's moe_hybridep_num_sms
default), 536 / 531 GB/s on 8 B200, and DeepEP's own kernels less at the same SMs (GB200 EP24
combine 127-207 GB/s). Megatron-Core's GB200 report says the NCCL all-to-all dispatcher "is not
optimal" there and that Hybrid-EP "can fully release the performance potential of the NVL72
architecture" (Megatron-LM docs/discussions/deepseek-v3-gb200-optimization, sec. 1 and 2.5;
DeepEP's EP32 kernels on GB200 reached about 400 GB/s dispatch and 190 GB/s combine with 24
SMs, sec. 2.2.1). So an EP all-to-all inside one NVLink 5 domain is timed at no less than these
published figures allow: ``published_dispatch_floor_s`` (a named assumption,
``CommAssumptions.ep_published_floor``: the NCCL all-to-all no faster than Hybrid-EP).
"""

from __future__ import annotations

import math
from typing import Final

from explorer.comm.topology import GroupPlacement

GB: Final = 1e9

NVL72_HYBRIDEP_GBPS: Final[dict[int, tuple[float, float, float]]] = {
    8: (421.67, 550.10, 538.44),
    16: (397.33, 472.84, 474.48),
    24: (281.73, 441.89, 444.40),
    32: (236.33, 485.50, 423.19),
    36: (215.36, 469.96, 418.27),
}
"""Hybrid-EP on GB200 by EP ranks: (FP8 dispatch, BF16 dispatch, combine) algorithm bandwidth,
GB/s, Torch API, 16 SMs. Source: deepseek-ai/DeepEP docs/README_Hybrid-EP.md at 41cad94
(GB200 Platform table)."""

HGX_HYBRIDEP_GBPS: Final = (409.71, 535.94, 530.86)
"""Hybrid-EP on 8 B200 (one 8-GPU NVLink domain): the same columns. Source: as above (B200
Platform table, Torch API, 16 SMs)."""

FLOOR_FABRICS: Final = ("nvlink5",)
"""Scale-up fabrics the tables were measured on (presets/fabrics)."""


def published_row(group: GroupPlacement) -> tuple[float, float, float] | None:
    """The published (FP8 dispatch, BF16 dispatch, combine) GB/s for an EP group inside one
    NVLink 5 domain, or None (another fabric, a group across domains, a single rank).

    Groups of at most 8 ranks take the 8-GPU B200 row (GB200's own EP8 row is 2.6% / 1.4%
    faster); larger groups the GB200 row of the nearest published rank count (log distance,
    as ``explorer.comm.links.measured_s`` picks a sweep), above 36 ranks the 36-rank row.
    """
    fabric = group.scale_up_fabric
    if group.size <= 1 or group.crosses_domains or fabric is None:
        return None
    if fabric.id not in FLOOR_FABRICS:
        return None
    if group.size <= 8:
        return HGX_HYBRIDEP_GBPS
    near = min(NVL72_HYBRIDEP_GBPS, key=lambda n: abs(math.log(n / group.size)))
    return NVL72_HYBRIDEP_GBPS[near]


def published_dispatch_floor_s(
    group: GroupPlacement,
    dispatch_bytes: float,
    combine_bytes: float,
    fp8_dispatch: bool,
    scale_up: float = 1.0,
) -> float:
    """Seconds of one dispatch-or-combine call (the mean of the two, as
    ``explorer.comm.model_parallel.ep_collectives`` counts them) at the published kernels'
    algorithm bandwidth; 0 where no table applies (``published_row``).

    Ledger: dispatch_bytes / dispatch GB/s (the FP8 column under an FP8 dispatch) plus
    combine_bytes / combine GB/s, halved; ``scale_up`` multiplies the bandwidths as it does
    the fast links' (``LinkEfficiency.scale_up``). Source: module docstring.
    """
    row = published_row(group)
    if row is None or dispatch_bytes <= 0:
        return 0.0
    dispatch = row[0] if fp8_dispatch else row[1]
    seconds = dispatch_bytes / (dispatch * GB) + combine_bytes / (row[2] * GB)
    return seconds / (2 * scale_up)
