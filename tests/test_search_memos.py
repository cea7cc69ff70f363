"""The bounds' memos hold nothing of the node that filled them: a bound is the same whichever
nodes a ``Bounds`` met before (explorer.search.context keeps memos on the whole candidate)."""

from __future__ import annotations

import random

import pytest

from explorer.estimate import DEFAULT_ESTIMATE_ASSUMPTIONS
from explorer.mesh import Problem, enumerate_layouts
from explorer.presets import load_cluster, load_model
from explorer.search.bounds import Bounds
from explorer.search.floor import MemoryFloor
from explorer.specs import TrainingWorkload


def _bounds(p: Problem) -> Bounds:
    return Bounds(p, DEFAULT_ESTIMATE_ASSUMPTIONS, MemoryFloor(p, DEFAULT_ESTIMATE_ASSUMPTIONS))


@pytest.mark.parametrize(
    ("model_id", "cluster_id", "gpus", "seq", "gbs"),
    [
        pytest.param("deepseek-v3", "h800-deepseek", 512, 4096, 1920, id="deepseek-v3"),
        pytest.param("mixtral-8x7b", "hgx-h100", 64, 4096, 256, id="mixtral-8x7b"),
    ],
)
def test_tier0_and_tier1_bounds_do_not_depend_on_the_nodes_met_before(
    model_id, cluster_id, gpus, seq, gbs
):
    # Selective and no recompute share their TP, CP and EP calls (only full adds calls), so a
    # memo that handed one policy's windows or calls to another would change these numbers.
    p = Problem(
        model=load_model(model_id),
        cluster=load_cluster(cluster_id, gpus // 8),
        workload=TrainingWorkload(seq_len=seq, global_batch_size=gbs),
        num_gpus=gpus,
    )
    pool = random.Random(3).sample(enumerate_layouts(p).valid, 60)
    experts = list(dict.fromkeys(
        c._replace(mbs=None, recompute=None, schedule=None, virtual=None, zero=None) for c in pool
    ))  # fmt: skip
    policies = list(dict.fromkeys(c._replace(schedule=None, virtual=None, zero=None) for c in pool))
    forward, backward = _bounds(p), _bounds(p)
    ahead = [forward.degrees_s(c) for c in experts] + [forward.node_s(c) for c in policies]
    behind = [backward.node_s(c) for c in reversed(policies)][::-1]
    behind = [backward.degrees_s(c) for c in reversed(experts)][::-1] + behind
    assert ahead == behind
    # A fresh Bounds per node is the slow part (each fills its memos from nothing): a sample.
    few_experts = random.Random(4).sample(range(len(experts)), min(12, len(experts)))
    few_policies = random.Random(4).sample(range(len(policies)), min(12, len(policies)))
    alone = [_bounds(p).degrees_s(experts[i]) for i in few_experts]
    alone += [_bounds(p).node_s(policies[i]) for i in few_policies]
    met = [ahead[i] for i in few_experts] + [ahead[len(experts) + i] for i in few_policies]
    assert alone == met


def test_tier0_of_the_whole_expert_level_equals_each_node_bounded_alone():
    # degrees_level takes the sums and minima over arrays of every node of the level at once
    # (node x micro-batch x policy or ZeRO stage): a row handed to the wrong node, or a batch
    # size the batch rule rejects left in a minimum, would change some node's bound.
    p = Problem(
        model=load_model("deepseek-v3"),
        cluster=load_cluster("h800-deepseek", 64),
        workload=TrainingWorkload(seq_len=4096, global_batch_size=1920),
        num_gpus=512,
    )
    bounds = _bounds(p)
    level = list(bounds._expert_level())
    assert len(level) > 50  # meshes x expert degrees of this problem that pass the rules
    together = bounds.degrees_level(level)
    alone = [_bounds(p).degrees_level((c,))[0] for c in random.Random(5).sample(level, 12)]
    sample = [together[level.index(c)] for c in random.Random(5).sample(level, 12)]
    assert alone == sample
    assert [bounds.degrees_s(c) for c in level] == together
