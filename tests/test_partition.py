"""Layers on pipeline stages and micro-batches in flight, against published splits and schedules."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from explorer.partition import (
    balanced_chunk_sizes,
    closed_form_inflight,
    inflight_microbatches,
    loss_inflight,
    pipeline_plan,
)
from explorer.schedules import peak_inflight
from explorer.schedules.builders import require_valid
from explorer.specs import Layout, ModelSpec

DEEPSEEK_V3_LAYERS = ModelSpec(
    name="deepseek-v3-layers",
    num_hidden_layers=61,
    hidden_size=7168,
    num_attention_heads=128,
    intermediate_size=18432,
    vocab_size=129280,
    n_routed_experts=256,
    n_shared_experts=1,
    num_experts_per_tok=8,
    moe_intermediate_size=2048,
    first_k_dense_replace=3,
    kv_lora_rank=512,
    q_lora_rank=1536,
    qk_rope_head_dim=64,
    qk_nope_head_dim=128,
    v_head_dim=128,
)

LLAMA_405B_LAYERS = ModelSpec(
    num_hidden_layers=126,
    hidden_size=16384,
    num_attention_heads=128,
    num_key_value_heads=8,
    intermediate_size=53248,
    vocab_size=128256,
)


def test_llama3_405b_puts_one_layer_fewer_on_first_and_last_of_16_stages() -> None:
    # Dubey et al. 2024 (arXiv:2407.21783) sec. 3.3.2: 126 layers, 16 stages.
    assert balanced_chunk_sizes(126, 16) == (7,) + (8,) * 14 + (7,)


@given(layers=st.integers(1, 200), chunks=st.integers(1, 64))
def test_balanced_split_covers_every_layer_with_sizes_one_apart(layers: int, chunks: int) -> None:
    if chunks > layers:
        with pytest.raises(ValueError):
            balanced_chunk_sizes(layers, chunks)
        return
    sizes = balanced_chunk_sizes(layers, chunks)
    assert sum(sizes) == layers
    assert max(sizes) - min(sizes) <= 1
    assert sizes[0] <= max(sizes) and sizes[-1] <= max(sizes)


def test_plan_puts_embedding_first_and_head_last() -> None:
    plans = pipeline_plan(LLAMA_405B_LAYERS, Layout(pp=16))
    assert [p.has_embedding for p in plans] == [True] + [False] * 15
    assert [p.has_head for p in plans] == [False] * 15 + [True]
    assert plans[0].layers == tuple(range(7))
    assert plans[-1].layers == tuple(range(119, 126))


def test_interleaved_chunk_c_runs_on_rank_c_mod_p() -> None:
    # Narayanan et al. 2021 (arXiv:2104.04473) sec. 2.2.2: 8 layers, 2 ranks, 2 chunks each.
    model = ModelSpec(
        num_hidden_layers=8,
        hidden_size=64,
        num_attention_heads=4,
        intermediate_size=256,
        vocab_size=100,
    )
    plans = pipeline_plan(model, Layout(pp=2, virtual_stages=2, schedule="interleaved"))
    assert plans[0].layers == (0, 1, 4, 5)
    assert plans[1].layers == (2, 3, 6, 7)
    assert plans[0].has_embedding and plans[1].has_head


def test_dualpipe_rank_holds_its_stage_and_the_mirror_stage() -> None:
    # DeepSeek-V3 report (arXiv:2412.19437) sec. 3.2.1: two copies of parameters per rank.
    plans = pipeline_plan(LLAMA_405B_LAYERS, Layout(pp=4, schedule="dualpipe"))
    sizes = balanced_chunk_sizes(126, 4)
    ends, middle = sizes[0] + sizes[3], sizes[1] + sizes[2]
    assert [len(p.layers) for p in plans] == [ends, middle, middle, ends]
    assert plans[0].has_embedding and plans[0].has_head
    assert plans[3].has_embedding and plans[3].has_head
    assert all(p.copies == 2 for p in plans)


def test_dualpipe_needs_an_even_number_of_stages() -> None:
    with pytest.raises(ValueError, match="even"):
        pipeline_plan(LLAMA_405B_LAYERS, Layout(pp=3, schedule="dualpipe"))


def test_deepseek_dense_layers_fall_on_the_first_stage() -> None:
    plans = pipeline_plan(DEEPSEEK_V3_LAYERS, Layout(pp=16))
    assert plans[0].num_dense_layers == 3
    assert sum(p.num_moe_layers for p in plans) == 58


def test_explicit_stage_layers_are_used_and_checked() -> None:
    plans = pipeline_plan(DEEPSEEK_V3_LAYERS, Layout(pp=2, stage_layers=(30, 31)))
    assert [len(p.layers) for p in plans] == [30, 31]
    with pytest.raises(ValueError, match="sum to 60"):
        pipeline_plan(DEEPSEEK_V3_LAYERS, Layout(pp=2, stage_layers=(30, 30)))


def test_more_chunks_than_layers_is_rejected() -> None:
    with pytest.raises(ValueError, match="exceed"):
        pipeline_plan(DEEPSEEK_V3_LAYERS, Layout(pp=16, virtual_stages=4, schedule="interleaved"))


@pytest.mark.parametrize(
    ("schedule", "pp", "m", "v"),
    [
        pytest.param("gpipe", 4, 8, 1, id="huang2019-gpipe-holds-all-m"),
        pytest.param("1f1b", 8, 32, 1, id="narayanan2021-1f1b-stage-i-holds-p-minus-i"),
        pytest.param("1f1b", 8, 3, 1, id="1f1b-capped-at-m"),
        pytest.param("interleaved", 4, 8, 2, id="megatron-interleaved-warmup"),
        pytest.param("interleaved", 8, 64, 4, id="megatron-interleaved-warmup-v4"),
        pytest.param("zb-h1", 4, 16, 1, id="qi2024-zb-h1-peak-p"),
        pytest.param("dualpipe", 8, 32, 1, id="deepseek-v3-table2-dualpipe-p-plus-1"),
        pytest.param("zb-v", 8, 32, 1, id="qi2024-sec6-zb-v-peak-p-like-1f1b"),
        pytest.param("dualpipev", 8, 32, 1, id="dualpipe-readme-dualpipev-pp-plus-1-chunks"),
    ],
)
def test_simulated_inflight_matches_the_closed_form(schedule, pp: int, m: int, v: int) -> None:
    assert peak_inflight(schedule, pp, m, v) == closed_form_inflight(schedule, pp, m, v)
    assert inflight_microbatches(schedule, pp, m, v) == closed_form_inflight(schedule, pp, m, v)


def _valid_shapes(schedule: str, stages: range, extra: int, virtuals: tuple[int, ...]):
    for pp in stages:
        for m in range(1, 3 * pp + extra):
            for v in virtuals:
                try:
                    require_valid(schedule, pp, m, v)
                except ValueError:
                    continue
                yield pp, m, v


@pytest.mark.parametrize(
    ("schedule", "virtuals"),
    [
        ("gpipe", (1,)),
        ("1f1b", (1,)),
        ("zb-h1", (1,)),
        ("interleaved", (1, 2, 3, 4)),
        ("dualpipe", (1,)),
        ("zb-v", (1,)),
        ("dualpipev", (1,)),
    ],
)
def test_closed_forms_equal_the_simulator_on_a_dense_grid(schedule, virtuals) -> None:
    # Every valid (P, M, V) with P <= 12 and M <= 3P + 2 (interleaved: every group size N).
    shapes = list(_valid_shapes(schedule, range(2, 13), 3, virtuals))
    assert len(shapes) > 30
    for pp, m, v in shapes:
        assert inflight_microbatches(schedule, pp, m, v) == peak_inflight(schedule, pp, m, v)


@pytest.mark.parametrize(
    ("schedule", "pp", "m", "v"),
    [
        ("1f1b", 32, 480, 1),
        ("gpipe", 16, 240, 1),
        ("zb-h1", 64, 128, 1),
        ("interleaved", 16, 240, 2),
        ("interleaved", 16, 72, 4),  # N = 18: P does not divide M
        ("interleaved", 8, 50, 6),
        ("dualpipe", 32, 240, 1),
        ("dualpipe", 64, 128, 1),
        ("zb-v", 16, 240, 1),
        ("dualpipev", 16, 64, 1),
    ],
)
def test_closed_forms_equal_the_simulator_on_search_shapes(schedule, pp, m, v) -> None:
    # Shapes the bench searches reach (Llama 3.1 405B on 16,384 GPUs, DeepSeek-V3 on 2,048).
    assert inflight_microbatches(schedule, pp, m, v) == peak_inflight(schedule, pp, m, v)


def test_1f1b_first_stage_holds_p_microbatches() -> None:
    # Narayanan et al. 2021 sec. 2.2.1; Korthikanti et al. 2022 sec. 4.2.3.
    assert inflight_microbatches("1f1b", 16, 64)[0] == 16


@pytest.mark.parametrize(("pp", "v"), [(4, 2), (8, 4), (16, 3)])
def test_interleaving_multiplies_the_first_stage_by_megatrons_factor(pp: int, v: int) -> None:
    # Korthikanti et al. 2022 (arXiv:2205.05198) sec. 4.2.3: P (1 + (P-1)/(P V)).
    first = inflight_microbatches("interleaved", pp, 4 * pp, v)[0]
    assert first == pytest.approx(pp * (1 + (pp - 1) / (pp * v)))


def test_without_pipelining_one_microbatch_is_in_flight() -> None:
    assert inflight_microbatches("gpipe", 1, 64) == (1.0,)


def test_loss_buffers_wait_for_all_microbatches_only_under_gpipe() -> None:
    assert loss_inflight("gpipe", 4, 16) == 16
    assert loss_inflight("1f1b", 4, 16) == 1
    assert loss_inflight("gpipe", 1, 16) == 1


def test_v_placement_puts_chunks_r_and_2p_minus_1_minus_r_on_rank_r() -> None:
    # Qi et al. 2024 sec. 6: 2P chunks in a V, so rank 0 holds the first and the last blocks,
    # the embedding and the head, and every rank holds one copy of its share.
    model = DEEPSEEK_V3_LAYERS
    plan = pipeline_plan(model, Layout(pp=4, schedule="zb-v"))
    sizes = balanced_chunk_sizes(model.num_hidden_layers, 8)
    starts = [sum(sizes[:q]) for q in range(8)]
    for rank, stage in enumerate(plan):
        chunks = (rank, 7 - rank)
        want = [i for q in chunks for i in range(starts[q], starts[q] + sizes[q])]
        assert list(stage.layers) == want
        assert stage.copies == 1
    assert plan[0].has_embedding and plan[0].has_head
    assert not any(s.has_embedding or s.has_head for s in plan[1:])
