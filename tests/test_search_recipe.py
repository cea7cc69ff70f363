"""The search carries the user's memory recipe into the layouts it ranks (explorer.search.recipe):
the published layout ranks with the recipe's memory, a field applies only where it is written
for, and a recipe that can go below the memory floors turns their pruning off."""

from __future__ import annotations

import dataclasses
import json

import pytest

from explorer.cli import main
from explorer.cli.import_ import imported_from
from explorer.memory import training_memory
from explorer.mesh import SearchSpace
from explorer.presets import load_cluster, load_model
from explorer.search import search
from explorer.search.recipe import LayoutRecipe, UnprunedFloor, apply_recipe
from explorer.specs import Layout

TITAN_8B = "tests/recipes/torchtitan_llama3_8b.toml"


@pytest.fixture(scope="module")
def titan():
    return imported_from("torchtitan", TITAN_8B, 8, None)


def test_recipe_fields_apply_only_where_they_are_written_for() -> None:
    recipe = LayoutRecipe.of(
        Layout(
            pp=4,
            dp=2,
            recompute="selective",
            recompute_modules=("core_attn", "mlp"),
            first_stage_layers=6,
            optimizer_offload_fraction=0.5,
            dp_shard=2,
        )
    )
    # the recipe's recompute goes on a layout built without one (the search fixes it)
    assert recipe.recompute == "selective"
    ours = apply_recipe(Layout(pp=4, dp=2), recipe)
    assert ours.recompute == "selective" and ours.recompute_modules == ("core_attn", "mlp")
    assert ours.first_stage_layers == 6 and ours.dp_shard == 2
    other = apply_recipe(Layout(pp=2, dp=3, recompute="full"), recipe)
    # no modules on another recompute, no stage split of another pp, no shard group of 2 in DP 3
    assert other.recompute == "full" and other.recompute_modules == ("core_attn",)
    assert other.first_stage_layers is None and other.dp_shard is None
    assert other.optimizer_offload_fraction == 0.5


def test_a_recipe_refining_recompute_fixes_the_searched_recompute() -> None:
    block = LayoutRecipe((("recompute_method", "block"), ("recompute_num_layers", 2)))
    assert block.recompute == "full"
    assert block.space(SearchSpace()).recomputes == ("none",)
    offload = LayoutRecipe((("offload_layers", 1),))
    assert offload.recompute is None and offload.space(SearchSpace()) == SearchSpace()
    with pytest.raises(ValueError, match="not both"):
        LayoutRecipe((("recompute_ops", True), ("recompute_every", 2)))


def test_a_layout_string_of_another_chunk_count_leaves_the_rest_of_the_recipe() -> None:
    recipe = LayoutRecipe(
        (("pipeline_layout", "Et|t|t|tL"), ("offload_layers", 1)), pp=None, virtual_stages=None
    )
    two = apply_recipe(Layout(pp=2, dp=4), recipe)  # 4 chunks on 2 ranks needs virtual 2
    assert two.pipeline_layout is None and two.offload_layers == 1
    four = apply_recipe(Layout(pp=4, dp=2), recipe)
    assert four.pipeline_layout == "Et|t|t|tL"


def test_the_imported_layout_ranks_with_the_recipes_memory(titan) -> None:
    model, cluster = load_model("llama-3.1-8b"), load_cluster("hgx-h100")
    space = SearchSpace(tp_values=(1,), pp_values=(1,), zero_stages=(3,), micro_batch_sizes=(1,))
    recipe = LayoutRecipe.of(titan.layout)
    assert recipe.below_floors  # op-level SAC keeps less than the floors' selective
    result = search(model, cluster, titan.workload, num_gpus=8, space=space, ranked=None,
                    recipe=recipe)  # fmt: skip
    ours = list(result.estimates)
    assert ours and all(e.layout.recompute == "selective" and e.layout.recompute_ops for e in ours)
    published = next(e for e in ours if e.layout.zero == 3 and e.layout.dp == 8)
    expected = training_memory(model, cluster.gpu, titan.layout, titan.workload)
    assert published.memory.peak_bytes == pytest.approx(expected.peak_bytes, rel=1e-12)
    plain = dataclasses.replace(titan.layout, recompute_ops=False)
    without = training_memory(model, cluster.gpu, plain, titan.workload).peak_bytes
    assert published.memory.peak_bytes != pytest.approx(without, rel=1e-3)


def test_a_recipe_below_the_floors_searches_with_floors_that_prune_nothing() -> None:
    from explorer.estimate import DEFAULT_ESTIMATE_ASSUMPTIONS
    from explorer.mesh import Problem
    from explorer.search.core import _searcher
    from explorer.specs import TrainingWorkload

    problem = Problem(
        model=load_model("llama-3.1-8b"),
        cluster=load_cluster("hgx-h100"),
        workload=TrainingWorkload(seq_len=4096, global_batch_size=8),
        num_gpus=8,
    )
    offload = LayoutRecipe((("activation_offload", ("core_attn",)),))
    shard = LayoutRecipe((("reshard_after_forward", False),))
    a = DEFAULT_ESTIMATE_ASSUMPTIONS
    assert isinstance(_searcher(problem, a, 5, offload).bounds.floor, UnprunedFloor)
    assert not isinstance(_searcher(problem, a, 5, shard).bounds.floor, UnprunedFloor)


def test_search_from_torchtitan_keeps_the_recipe_in_its_rows(capsys) -> None:
    argv = ["search", "--from-torchtitan", TITAN_8B, "--gpus", "8", "--gpu", "h100-sxm",
            "--zero-stages", "3", "--mbs-values", "1",
            "--top", "50", "--json"]  # fmt: skip
    assert main(argv) == 0
    rows = json.loads(capsys.readouterr().out)["layouts"]
    # the estimate of the same import (its layout, workload and framework assumptions)
    estimate = ["estimate", "--from-torchtitan", TITAN_8B, "--gpu", "h100-sxm", "--dp", "8"]
    assert main([*estimate, "--gbs", "8", "--json"]) == 0
    expected = json.loads(capsys.readouterr().out)["peak_bytes"]
    fsdp8 = [r for r in rows if (r["tp"], r["pp"], r["cp"], r["dp"]) == (1, 1, 1, 8)]
    assert all(r["recompute"] == "selective" for r in rows)  # the recipe's recompute only
    assert len(fsdp8) == 1  # the published layout ranks, with op-level SAC's memory
    assert fsdp8[0]["peak_bytes"] == pytest.approx(expected, rel=1e-12)


def test_a_wrong_recipe_flag_on_search_is_one_sentence(capsys) -> None:
    argv = ["search", "--model", "llama-3.1-8b", "--gpus", "8", "--gpu", "h100-sxm",
            "--seq", "4096", "--gbs", "8", "--optimizer-offload-fraction", "2"]  # fmt: skip
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "optimizer_offload_fraction" in err and "\n" not in err
