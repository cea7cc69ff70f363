"""A search ranked further call by call (explorer.search.core.resumable_search) against fresh
searches: the same estimates in the same order, and the same count of layouts evaluated."""

from __future__ import annotations

import pytest

from explorer.mesh import SearchSpace
from explorer.presets import load_cluster, load_model
from explorer.search import search
from explorer.search.core import resumable_search
from explorer.specs import TrainingWorkload

MODEL = load_model("llama-3.1-8b")
WORKLOAD = TrainingWorkload(seq_len=4096, global_batch_size=64)
SPACE = SearchSpace(schedules=("1f1b", "interleaved"), zero_stages=(1,),
                    recomputes=("selective", "full"), micro_batch_sizes=(1, 2))  # fmt: skip


def test_each_call_ranks_what_a_fresh_search_of_that_many_ranks():
    cluster = load_cluster("dgx-a100", 4)
    rank = resumable_search(MODEL, cluster, WORKLOAD, space=SPACE)
    whole = search(MODEL, cluster, WORKLOAD, space=SPACE, ranked=None)
    assert len(whole.estimates) > 40  # the K asked below stop inside the space
    for k in (1, 7, 3, 20, 40, 40):  # up, down to a prefix, up again, the same again
        estimates, evaluated = rank(k)
        fresh = search(MODEL, cluster, WORKLOAD, space=SPACE, ranked=k)
        assert [(e.layout, e.step_time_s) for e in estimates] == [
            (e.layout, e.step_time_s) for e in fresh.estimates]  # fmt: skip
        assert evaluated == fresh.evaluated == whole.evaluated
    estimates, evaluated = rank(10_000)  # past the end: everything that fits, in order
    assert [e.layout for e in estimates] == [e.layout for e in whole.estimates]
    assert evaluated == whole.evaluated


def test_a_bad_k_is_one_sentence():
    rank = resumable_search(MODEL, load_cluster("hgx-h100", 4), WORKLOAD, space=SPACE)
    with pytest.raises(ValueError, match="at least 1"):
        rank(0)
