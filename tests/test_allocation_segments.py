"""Segmented allocation on NVL72 racks: Slurm topology/block ``--segment`` as Megatron-Bridge's
launcher sets it (scripts/performance/utils/executors.py: 4-GPU nodes, segment = nodes up to
18, else the largest divisor of the node count <= 18)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from explorer.comm import place_group
from explorer.comm.topology import placement_domain_size
from explorer.presets import load_cluster
from explorer.specs import Layout


@pytest.mark.parametrize(
    ("nodes", "segment_gpus"),
    [
        (2, 8),  # 8 GPUs: one 2-node segment
        (16, 64),  # 64 GPUs: one 16-node segment
        (18, 72),  # a whole rack
        (64, 64),  # 256 GPUs: 64 = 4 x 16, the largest divisor <= 18 is 16
        (20, 40),  # 80 GPUs: divisors of 20 up to 18 are 1, 2, 4, 5, 10: 10 nodes
        (37, 4),  # a prime node count above 18: one-node segments
    ],
)
def test_segment_is_the_largest_node_count_dividing_the_job_that_fits_a_rack(
    nodes: int, segment_gpus: int
) -> None:
    cluster = replace(load_cluster("gb200-nvl72"), num_nodes=nodes)
    assert placement_domain_size(cluster, nodes * 4) == segment_gpus


def test_a_32_rank_ep_group_on_256_gb200_stays_in_one_rack_segment() -> None:
    # Megatron-Bridge Qwen3-235B on 256 GB200: PP8 EP32 DP32 (25.11 performance table)
    cluster = replace(load_cluster("gb200-nvl72"), num_nodes=64)
    layout = Layout(pp=8, dp=32, ep=32)
    ep = place_group("ep", cluster, layout)
    assert (ep.ranks_per_domain, ep.num_domains) == (32, 1)
    # packed in order over 72-GPU racks instead, ranks 64-95 straddle racks 0 and 1
    packed = place_group("ep", replace(cluster, segment_allocation=False), layout)
    assert (packed.ranks_per_domain, packed.num_domains) == (16, 2)


def test_an_hgx_node_is_its_own_domain_whatever_the_flag() -> None:
    cluster = replace(load_cluster("hgx-h100"), num_nodes=32, segment_allocation=True)
    assert placement_domain_size(cluster, 256) == 8
