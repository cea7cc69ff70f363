"""Shared CLI argument groups turn flags into specs."""

from __future__ import annotations

import argparse

import pytest

from explorer.cli.args import add_cluster, cluster_from, scale_up_domain


def parse(*flags: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_cluster(parser)
    return parser.parse_args(list(flags))


def test_nvl72_gpu_gets_its_rack_scale_domain_across_four_gpu_trays():
    cluster = cluster_from(parse("--gpu", "gb200", "--gpus-per-node", "4"), world_size=144)
    assert cluster.num_nodes == 36
    assert cluster.domain_size == 72


def test_hgx_node_is_the_domain_and_flags_override_bandwidths():
    args = parse("--gpu", "h100-sxm", "--inter-node-GBps", "25", "--intra-node-GBps", "300")
    cluster = cluster_from(args, world_size=64)
    assert (cluster.num_nodes, cluster.domain_size) == (8, 8)
    assert cluster.scale_out_bytes_per_s == 25e9
    assert cluster.fast_bytes_per_s == 300e9


def test_partial_node_rounds_up_to_whole_nodes():
    assert cluster_from(parse("--gpu", "a100-80g"), world_size=12).num_nodes == 2


@pytest.mark.parametrize(("requested", "expected"), [(None, 8), (16, 16)])
def test_explicit_domain_wins(requested, expected):
    assert scale_up_domain(requested, 8, 8) == expected


def test_zero_gpus_is_a_sentence():
    with pytest.raises(ValueError, match="number of GPUs must be positive"):
        cluster_from(parse("--gpu", "h100-sxm"), world_size=0)
