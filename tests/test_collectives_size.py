"""Collectives by message size: published nccl-tests sweeps, large-message figures, latency-bound
small messages, NVLS and SHARP, hand-worked hierarchical cases, measured sweeps, and the
monotonicity the search's lower bounds rely on."""

from __future__ import annotations

import math
from dataclasses import replace
from itertools import pairwise

import pytest
from hypothesis import given
from hypothesis import strategies as st

from explorer.comm import (
    DEFAULT_LINK_EFFICIENCY,
    Fabric,
    GroupPlacement,
    LinkEfficiency,
    Protocol,
    collective_s,
    fabric_ids,
    load_fabric,
    place_group,
    ramp,
)
from explorer.presets import load_cluster
from explorer.specs import Layout, MeasuredBusbw

GB = 1e9
EFF = DEFAULT_LINK_EFFICIENCY
PUBLISHED = 0.10
"""Largest relative error of the model's busbw against a published sweep point (1 MB up): the
model reads the same sweep, so what remains is the large-message share written to the
fabric file (0.3% off the sweep's own top point) and the protocol choice."""
VENDOR = 0.03
"""Largest relative error against a large-message figure quoted by NCCL's maintainers."""
OTHER = 0.20
"""Largest relative error against a published figure of another kind of run (DeepEP)."""

KINDS = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "point-to-point")


def busbw(kind: str, size: float, group: GroupPlacement, eff: LinkEfficiency = EFF) -> float:
    """nccl-tests bus bandwidth of the model's time (doc/PERFORMANCE.md factors)."""
    n = group.size
    factor = {"all-reduce": 2 * (n - 1) / n, "point-to-point": 1.0}.get(kind, (n - 1) / n)
    return factor * size / collective_s(kind, size, group, eff)  # type: ignore[arg-type]


def node_group(cluster_id: str, n: int, nodes: int = 1, **changes: object) -> GroupPlacement:
    """The TP group of n ranks on one node (or an n x nodes DP-over-TP group)."""
    cluster = replace(load_cluster(cluster_id, max(1, nodes)), **changes)  # type: ignore[arg-type]
    if nodes == 1:
        return place_group("tp", cluster, Layout(tp=n))
    return place_group(
        "dp_cp", cluster, Layout(dp=n * nodes, mesh_order=("dp", "tp", "cp", "ep", "pp"))
    )


SIZES = tuple(2.0**k for k in range(10, 35))  # 1 KiB to 16 GiB

# --- the published sweeps --------------------------------------------------------------------

# (cluster, ranks, NVLS on, fabric whose sweep it is, published points (bytes, busbw GB/s))
AZURE = [
    pytest.param(
        "hgx-h200",
        8,
        True,
        [(2**20, 52.96), (2**24, 240.41), (2**26, 368.11), (2**30, 467.58), (2**33, 479.98)],
        id="azure-nd-h200-v5-nvls-all-reduce-8-gpus",
    ),
    pytest.param(
        "dgx-a100",
        8,
        False,
        [(2**20, 36.22), (2**24, 109.22), (2**27, 174.18), (2**30, 228.10), (2**33, 231.58)],
        id="azure-nd-a100-v4-all-reduce-8-gpus",
    ),
    pytest.param(
        "gb200-nvl72",
        4,
        False,
        [(2**20, 80.48), (2**24, 331.09), (2**27, 574.19), (2**30, 646.87), (2**33, 679.61)],
        id="azure-nd-gb200-v6-ring-all-reduce-4-gpus",
    ),
]


@pytest.mark.parametrize(("cluster", "n", "nvls", "points"), AZURE)
def test_all_reduce_busbw_follows_the_published_sweep_from_one_megabyte_up(
    cluster: str, n: int, nvls: bool, points: list[tuple[int, float]]
) -> None:
    group = node_group(cluster, n, nvls=nvls)
    for size, published in points:
        assert busbw("all-reduce", size, group) == pytest.approx(published * GB, rel=PUBLISHED)


def test_the_three_published_nvlink_sweeps_ramp_alike() -> None:
    # One ramp per fabric is a fair reading only if the generations' shapes agree: at 16 MB the
    # A100, H200 and GB200 sweeps reach 47%, 50% and 49% of their 8 GB figures (Azure).
    shares = [ramp(load_fabric(f), 2**24) for f in ("nvlink3", "nvlink4", "nvlink5")]
    assert max(shares) / min(shares) < 1.1
    assert shares[0] == pytest.approx(109.22 / 231.58, rel=1e-9)


def test_busbw_approaches_the_large_message_figures_nccl_maintainers_quote() -> None:
    # sjeaugey, NVIDIA/nccl-tests#212: ~370 GB/s ring busbw, ~480 GB/s NVLS all-reduce on 8 H100
    ring = node_group("hgx-h100", 8, nvls=False)
    nvls = node_group("hgx-h100", 8)
    assert busbw("all-gather", 8 * GB, ring) == pytest.approx(370 * GB, rel=VENDOR)
    assert busbw("all-reduce", 8 * GB, ring) == pytest.approx(370 * GB, rel=VENDOR)
    assert busbw("all-reduce", 8 * GB, nvls) == pytest.approx(480 * GB, rel=VENDOR)


def test_nvls_on_the_export_limited_h800_matches_its_reported_busbw() -> None:
    # NVIDIA/nccl#1374: 8 x H800 all-reduce busbw 215 GB/s (NVLS; NVLink 200 GB/s a direction)
    group = node_group("h800-deepseek", 8)
    assert busbw("all-reduce", 8 * GB, group) == pytest.approx(215 * GB, rel=VENDOR)


def test_256_megabytes_is_too_small_to_reach_peak_on_h100() -> None:
    # the same comment: "256M is too small to reach peak bandwidth" (H200 sweep: 432 of 480)
    group = node_group("hgx-h100", 8)
    assert busbw("all-reduce", 2**28, group) < 0.93 * busbw("all-reduce", 2**33, group)


def test_per_nic_busbw_across_nodes_matches_nvidia_figures() -> None:
    # NDR 400 Gb/s: 46-48 GB/s per NIC (nccl-tests#290); HDR: 24 GB/s per NIC (nccl-tests#119)
    for cluster, low, high in (("hgx-h100", 46, 48), ("dgx-a100", 23.5, 24.5)):
        group = place_group("dp", load_cluster(cluster, 16), Layout(tp=8, dp=16))
        assert group.ranks_per_domain == 1 and group.num_domains == 16
        assert low * GB <= busbw("all-gather", 8 * GB, group) <= high * GB


def test_two_dgx_a100_reach_the_nics_sum_as_nvidia_measured() -> None:
    # AddyLaddy, NVIDIA/nccl#812: 8 x 200 Gb/s IB per DGX A100, 192 GB/s all-reduce busbw
    group = node_group("dgx-a100", 8, nodes=2)
    assert (group.size, group.ranks_per_domain, group.num_domains) == (16, 8, 2)
    assert busbw("all-reduce", 8 * GB, group) == pytest.approx(192 * GB, rel=VENDOR)


# --- small messages ----------------------------------------------------------------------------


def test_small_all_reduces_are_latency_bound_at_nccls_ll_latency() -> None:
    # NCCL tuning.cc: ring LL base 6.6 us + 2(n-1) x 0.6 us per NVLink step = 15.0 us on 8 GPUs
    group = node_group("hgx-h100", 8)
    small = [collective_s("all-reduce", s, group, EFF) for s in (1024, 4096, 16384)]
    assert small[0] == pytest.approx(15.0e-6, rel=0.01)
    assert small[-1] / small[0] < 1.02  # 16 x the bytes, the same time
    # the forced-NVLS sweep needs ~30 us at 1 KB (Azure H200); NCCL's LL ring is faster
    assert small[0] < 1.75 * 1024 / (0.06 * GB)


def test_busbw_falls_at_small_sizes_as_published() -> None:
    group = node_group("hgx-h200", 8)
    assert busbw("all-reduce", 2**20, group) < 0.12 * busbw("all-reduce", 2**33, group)
    assert busbw("all-reduce", 2**10, group) < 1e-3 * busbw("all-reduce", 2**33, group)


def test_a_thousand_gpu_all_reduce_of_a_small_bucket_takes_the_tree() -> None:
    # 1 MB over 128 nodes (1 rank each): ring 2 x 127 network steps, tree 2 x 7 levels
    group = place_group("dp", load_cluster("hgx-h100", 128), Layout(tp=8, dp=128))
    out = load_fabric("infiniband-ndr")
    ring_ll = out.ring[0].base_latency_s + 2 * 127 * out.ring[0].step_latency_s
    tree_ll = out.tree[0].base_latency_s + 2 * 7 * out.tree[0].step_latency_s
    t = collective_s("all-reduce", 2**20, group, EFF)
    assert tree_ll < t < ring_ll


# --- NVLS and SHARP ------------------------------------------------------------------------------


def test_nvls_needs_nvswitch_gen3_and_can_be_turned_off() -> None:
    assert node_group("hgx-h100", 8).nvls and node_group("dgx-b200", 8).nvls
    assert not node_group("dgx-a100", 8).nvls and not node_group("mi300x-node", 8).nvls
    assert not node_group("hgx-h100", 8, nvls=False).nvls


def test_nvls_pays_on_eight_ranks_and_not_on_two() -> None:
    # NVLS algbw 275 GB/s whatever n; the ring's algbw is 370 n / (2(n-1)): 370 at n = 2
    size = 2**30
    for n, faster in ((8, True), (2, False)):
        on, off = node_group("hgx-h100", n), node_group("hgx-h100", n, nvls=False)
        t_on, t_off = (collective_s("all-reduce", size, g, EFF) for g in (on, off))
        assert (t_on < t_off) is faster
        assert t_on <= t_off


def test_sharp_reduces_in_the_switch_on_infiniband_only() -> None:
    # in-network reduction sends the shard once each way instead of 2(D-1)/D of it
    ib = load_cluster("hgx-h100", 64)
    layout = Layout(tp=8, dp=64)
    plain = place_group("dp", ib, layout)
    sharp = place_group("dp", replace(ib, sharp=True), layout)
    roce = place_group("dp", replace(ib, sharp=True, scale_out_fabric="roce-400g"), layout)
    assert sharp.sharp and not roce.sharp
    t_plain, t_sharp = (collective_s("all-reduce", 4 * GB, g, EFF) for g in (plain, sharp))
    # CollNet latency 31 us (NCCL tuning.cc) + the shard once at 0.94 x 50 GB/s
    assert t_sharp == pytest.approx(31e-6 + 4 * GB / (0.94 * 50e9), rel=1e-9)
    assert t_plain / t_sharp > 1.9  # the ring moves 2 x 63/64 of it


# --- all-to-all (EP) ---------------------------------------------------------------------------


def test_intranode_all_to_all_matches_deepeps_nvlink_bandwidth_on_h800() -> None:
    # DeepEP (docs/legacy.md): EP8 on H800, 4096 tokens x 7168 x top-8 in FP8: 153 GB/s NVLink
    group = node_group("h800-deepseek", 8)
    size = 4096 * 7168 * 8 * 1.0
    nvlink_bytes = 7 / 8 * size
    assert nvlink_bytes / collective_s("all-to-all", size, group, EFF) == pytest.approx(
        153 * GB, rel=OTHER
    )


def test_the_rdma_leg_of_a_dispatch_matches_deepeps_rdma_bandwidth() -> None:
    # DeepEP normal kernels across H800 nodes, CX7 400 Gb/s (docs/legacy.md): dispatch
    # bottleneck RDMA bandwidth 43, 58 and 51 GB/s at EP16, 32 and 64 (4096 tokens x 7168,
    # top-8 of 4 nodes, FP8). 58 exceeds the 50 GB/s line rate (DeepEP counts logical bytes),
    # so the model's NIC leg is held to the three's mean.
    from explorer.comm.collectives import remote_domains_per_token
    from explorer.comm.links import fabric_ring_s

    ours = []
    for ep in (16, 32, 64):
        group = place_group("ep", load_cluster("h800-deepseek", ep // 8), Layout(dp=ep, ep=ep))
        rdma_bytes = remote_domains_per_token(8, ep // 8, 4) * 4096 * 7168
        ours.append(rdma_bytes / fabric_ring_s(rdma_bytes, 1, group, 1.0))
    assert sum(ours) / 3 == pytest.approx((43 + 58 + 51) / 3 * GB, rel=PUBLISHED)


def test_an_all_to_all_across_nodes_is_slower_per_byte_than_inside_one() -> None:
    inside = node_group("hgx-h100", 8)
    across = place_group("ep", load_cluster("hgx-h100", 4), Layout(dp=32, ep=32))
    size = 2**28
    assert busbw("all-to-all", size, across) < 0.25 * busbw("all-to-all", size, inside)


# --- hand-worked hierarchical case on real fabrics -----------------------------------------


def test_hierarchical_all_reduce_hand_worked_on_h100_with_a_slow_fabric() -> None:
    # 2 nodes x 8 H100 whose NICs give 5 GB/s each: RS and AG on NVLink (NVLS: S / (0.611 x
    # 450 GB/s x ramp)), the 1/8 shard all-reduced between the 2 nodes on NDR (ring, Simple)
    cluster = replace(load_cluster("hgx-h100", 2), scale_out_bytes_per_s=5e9)
    group = place_group("dp_cp", cluster, Layout(dp=16, mesh_order=("dp", "tp", "cp", "ep", "pp")))
    size = 2**30
    up, out = load_fabric("nvlink4"), load_fabric("infiniband-ndr")
    intra = size / (450e9 * up.nvls_share * ramp(up, size))
    simple = out.ring[-1]
    inter = simple.base_latency_s + 2 * simple.step_latency_s + (size / 8) / (5e9 * 0.94)
    assert collective_s("all-reduce", size, group, EFF) == pytest.approx(intra + inter, rel=1e-9)


# --- measured sweeps ---------------------------------------------------------------------------


def test_a_measured_sweep_replaces_the_model_where_it_matches() -> None:
    sweep = MeasuredBusbw(
        kind="all-reduce",
        group_size=8,
        crosses_domains=False,
        sizes_bytes=(2.0**20, 2.0**30),
        busbw_bytes_per_s=(20e9, 200e9),
    )
    cluster = replace(load_cluster("hgx-h100"), measured_busbw=(sweep,))
    tp8, tp4 = place_group("tp", cluster, Layout(tp=8)), place_group("tp", cluster, Layout(tp=4))
    assert busbw("all-reduce", 2**30, tp8) == pytest.approx(200e9, rel=1e-9)
    assert busbw("all-reduce", 2**40, tp8) == pytest.approx(200e9, rel=1e-9)
    # half-way in log size: the geometric mean; below the sweep the time of its smallest point
    assert busbw("all-reduce", 2**25, tp8) == pytest.approx(math.sqrt(20e9 * 200e9), rel=1e-9)
    assert collective_s("all-reduce", 2**10, tp8, EFF) == collective_s(
        "all-reduce", 2**20, tp8, EFF
    )
    assert busbw("all-reduce", 2**30, tp4) == pytest.approx(200e9, rel=1e-9)  # nearest group
    # other kinds keep the fabric model
    plain = place_group("tp", load_cluster("hgx-h100"), Layout(tp=8))
    assert collective_s("all-gather", 2**30, tp8, EFF) == collective_s(
        "all-gather", 2**30, plain, EFF
    )


def test_a_measured_sweep_rejects_sizes_out_of_order() -> None:
    with pytest.raises(ValueError, match="increase"):
        MeasuredBusbw(
            kind="all-reduce",
            group_size=8,
            crosses_domains=False,
            sizes_bytes=(2.0**30, 2.0**20),
            busbw_bytes_per_s=(1e9, 1e9),
        )


def test_the_link_efficiency_override_scales_large_messages_proportionally() -> None:
    group = node_group("hgx-h100", 8)
    slow = LinkEfficiency(scale_up=0.5)
    assert collective_s("all-reduce", 8 * GB, group, slow) == pytest.approx(
        2 * collective_s("all-reduce", 8 * GB, group, EFF), rel=1e-6
    )


# --- properties the search relies on -----------------------------------------------------------

PLACEMENTS = [
    pytest.param(cluster, layout, name, id=f"{cluster}-{name}-{layout}")
    for cluster in ("hgx-h100", "dgx-a100", "gb200-nvl72", "mi300x-node")
    for layout, name in (
        (Layout(tp=8, dp=8), "tp"),
        (Layout(tp=2, dp=32), "tp"),
        (Layout(tp=8, dp=8), "dp"),
        (Layout(tp=4, dp=16), "dp_cp"),
        (Layout(dp=64, ep=32), "ep"),
        (Layout(tp=8, pp=8), "pp"),
    )
]


@pytest.mark.parametrize(("cluster", "layout", "name"), PLACEMENTS)
def test_time_never_falls_and_busbw_never_falls_as_messages_grow(
    cluster: str, layout: Layout, name: str
) -> None:
    # busbw rising with size (time per byte falling) makes every collective subadditive in its
    # bytes: the whole-model figures of explorer.search stay below the sum over stages
    group = place_group(name, load_cluster(cluster, 8), layout)  # type: ignore[arg-type]
    for kind in KINDS:
        times = [collective_s(kind, s, group, EFF) for s in SIZES]  # type: ignore[arg-type]
        assert all(b >= a * (1 - 1e-12) for a, b in pairwise(times)), kind
        per_byte = [t / s for t, s in zip(times, SIZES, strict=True)]
        assert all(b <= a * (1 + 1e-12) for a, b in pairwise(per_byte)), kind


def test_every_fabric_preset_loads_with_a_source() -> None:
    assert set(fabric_ids()) >= {"nvlink3", "nvlink4", "nvlink5", "infiniband-ndr", "roce-400g"}
    for fabric_id in fabric_ids():
        fabric = load_fabric(fabric_id)
        assert fabric.source and fabric.ring[0].name == "LL"
        if fabric.ramp_sizes_bytes:
            assert fabric.ramp_efficiency[-1] == 1.0
            assert min(fabric.ramp_efficiency) > 0


def test_an_unknown_fabric_is_one_sentence() -> None:
    cluster = replace(load_cluster("hgx-h100"), scale_out_fabric="token-ring")
    with pytest.raises(ValueError, match="unknown fabric 'token-ring'; choose one of"):
        place_group("dp", cluster, Layout(dp=8))


def test_a_custom_fabric_runs_its_own_protocols() -> None:
    flat = Fabric(
        name="flat",
        large_message_share=0.5,
        ring=(Protocol(name="LL", base_latency_s=1e-6, step_latency_s=0.0, bandwidth_share=1.0),),
    )
    group = replace(node_group("hgx-h100", 8, nvls=False), scale_up_fabric=flat)
    assert collective_s("all-gather", 8 * GB, group, EFF) == pytest.approx(
        1e-6 + 7 / 8 * 8 * GB / (450e9 * 0.5), rel=1e-12
    )


@given(
    size=st.floats(1e3, 1e11),
    per_domain=st.sampled_from([1, 2, 4, 8]),
    domains=st.integers(1, 64),
    faster=st.floats(1.0, 10.0),
)
def test_faster_links_never_slow_a_collective_on_the_published_fabrics(
    size: float, per_domain: int, domains: int, faster: float
) -> None:
    base = node_group("hgx-h100", 8)
    group = replace(
        base, size=per_domain * domains, ranks_per_domain=per_domain, num_domains=domains
    )
    quick = replace(
        group,
        fast_bytes_per_s=group.fast_bytes_per_s * faster,
        fabric_bytes_per_s=group.fabric_bytes_per_s * faster,
    )
    for kind in KINDS:
        slow_s = collective_s(kind, size, group, EFF)  # type: ignore[arg-type]
        assert collective_s(kind, size, quick, EFF) <= slow_s * (1 + 1e-12)  # type: ignore[arg-type]
