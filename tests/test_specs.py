"""Specs reject impossible values with a sentence naming the field; valid ones round-trip."""

from __future__ import annotations

import pydantic
import pytest
from hypothesis import given
from hypothesis import strategies as st

from explorer.precision import precision_policy
from explorer.specs import PRECISIONS, Layout, ModelSpec, TrainingWorkload

VALID = {
    "num_hidden_layers": 4,
    "hidden_size": 256,
    "num_attention_heads": 4,
    "intermediate_size": 512,
    "vocab_size": 1000,
}


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("hidden_size", 0, "hidden_size must be positive"),
        ("num_hidden_layers", -3, "num_hidden_layers must be positive"),
        ("num_key_value_heads", 3, "multiple of num_key_value_heads"),
        ("hidden_size", 250, "not divisible by num_attention_heads"),
        ("n_routed_experts", -1, "n_routed_experts must be zero or more"),
    ],
)
def test_invalid_model_fields_raise_a_sentence_naming_the_field(field, value, message):
    with pytest.raises(ValueError, match=message):
        ModelSpec(**{**VALID, field: value})


def test_moe_needs_a_top_k_within_the_experts():
    with pytest.raises(ValueError, match="num_experts_per_tok"):
        ModelSpec(**VALID, n_routed_experts=8, num_experts_per_tok=9, moe_intermediate_size=64)


def test_layout_world_size_multiplies_dp_tp_pp_cp_but_not_ep():
    assert Layout(dp=8, tp=4, pp=2, cp=2, ep=16).world_size == 128


def test_virtual_stages_need_the_interleaved_schedule():
    with pytest.raises(ValueError, match="interleaved"):
        Layout(pp=4, virtual_stages=2, schedule="1f1b")


def test_pydantic_validates_the_dataclasses_at_the_boundary():
    adapter = pydantic.TypeAdapter(Layout)
    assert adapter.validate_python({"dp": 2, "tp": 4}).world_size == 8
    with pytest.raises(pydantic.ValidationError, match="tp must be positive"):
        adapter.validate_python({"tp": 0})
    with pytest.raises(pydantic.ValidationError):
        adapter.validate_python({"tp": "many"})


@pytest.mark.parametrize("name", PRECISIONS)
def test_every_precision_policy_states_its_bytes_and_source(name):
    policy = precision_policy(name)
    assert policy.param_bytes > 0 and policy.optimizer_bytes > 0 and policy.source


def test_bf16_mixed_is_the_zero_papers_sixteen_bytes_with_bf16_grads():
    # Rajbhandari et al. 2020 (arXiv:1910.02054) sec. 3.1: 2 + 2 + K, K = 12.
    p = precision_policy("bf16-mixed", "bf16")
    assert p.param_bytes + p.grad_bytes + p.master_bytes + p.optimizer_bytes == 16
    q = precision_policy("bf16-mixed")  # Megatron's fp32 main grads: 18 bytes
    assert q.param_bytes + q.grad_bytes + q.master_bytes + q.optimizer_bytes == 18


@given(
    st.dictionaries(
        st.sampled_from([*sorted(VALID), "num_key_value_heads", "head_dim", "n_routed_experts"]),
        st.one_of(st.integers(-5, 5000), st.none(), st.text(max_size=3), st.floats()),
    )
)
def test_any_model_input_either_validates_or_raises_a_validation_error(overrides):
    adapter = pydantic.TypeAdapter(ModelSpec)
    try:
        model = adapter.validate_python({**VALID, **overrides})
    except pydantic.ValidationError:
        return
    assert model.hidden_size > 0


@given(seq=st.integers(-10, 10**7), gbs=st.integers(-10, 10**5))
def test_workload_accepts_only_positive_sizes(seq, gbs):
    if seq > 0 and gbs > 0:
        assert TrainingWorkload(seq_len=seq, global_batch_size=gbs).tokens_per_step == seq * gbs
    else:
        with pytest.raises(ValueError, match="must be positive"):
            TrainingWorkload(seq_len=seq, global_batch_size=gbs)
