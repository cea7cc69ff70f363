"""Communication: process groups on the topology, collective costs, a step's collectives.

``topology`` places groups on scale-up domains; ``fabrics`` holds what NCCL reaches on each kind
of link by message size (``presets/fabrics``); ``links`` and ``collectives`` give times;
``step`` and ``data_parallel`` list what a training step moves on each axis, with overlap;
``inventory`` gathers a stage's collectives and sums exposed time by kind and axis.
"""

from explorer.comm.collectives import (
    COLLECTIVE_KINDS,
    DEFAULT_LINK_EFFICIENCY,
    CollectiveKind,
    LinkEfficiency,
    all_gather_s,
    all_reduce_s,
    all_to_all_group_s,
    all_to_all_s,
    collective_s,
    point_to_point_s,
    reduce_scatter_s,
    ring_all_gather_s,
    ring_all_reduce_s,
    ring_reduce_scatter_s,
    send_s,
    tree_all_reduce_s,
)
from explorer.comm.fabrics import Fabric, Protocol, fabric_ids, load_fabric, ramp
from explorer.comm.inventory import (
    exposed_by_axis,
    exposed_by_kind,
    exposed_in_phase,
    stage_collectives,
)
from explorer.comm.step import (
    DEFAULT_COMM_ASSUMPTIONS,
    Collective,
    CommAssumptions,
    StageContext,
    hidden_s,
)
from explorer.comm.topology import GroupPlacement, place_group, place_groups

__all__ = [
    "COLLECTIVE_KINDS",
    "DEFAULT_COMM_ASSUMPTIONS",
    "DEFAULT_LINK_EFFICIENCY",
    "Collective",
    "CollectiveKind",
    "CommAssumptions",
    "Fabric",
    "GroupPlacement",
    "LinkEfficiency",
    "Protocol",
    "StageContext",
    "all_gather_s",
    "all_reduce_s",
    "all_to_all_group_s",
    "all_to_all_s",
    "collective_s",
    "exposed_by_axis",
    "exposed_by_kind",
    "exposed_in_phase",
    "fabric_ids",
    "hidden_s",
    "load_fabric",
    "place_group",
    "place_groups",
    "point_to_point_s",
    "ramp",
    "reduce_scatter_s",
    "ring_all_gather_s",
    "ring_all_reduce_s",
    "ring_reduce_scatter_s",
    "send_s",
    "stage_collectives",
    "tree_all_reduce_s",
]
