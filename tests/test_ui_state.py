"""Widget state and the scenario map one to one; assumption knobs name the core's fields."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from explorer.scenario import (
    DEEPSEEK_V3,
    LayoutInputs,
    ModelRef,
    Scenario,
    SearchInputs,
    from_query,
    to_query,
)
from explorer.ui.assumptions import estimate_assumptions, knobs, overrides_from, serving_assumptions
from explorer.ui.format import flop, gib, layout_label, sentence, tokens
from explorer.ui.state import (
    GENERIC,
    MODEL_CHOICE,
    UPLOAD,
    key,
    layout_state,
    scenario_from_state,
    state_from_scenario,
)
from explorer.units import MiB


@pytest.mark.parametrize(
    "scenario",
    [
        Scenario(),
        DEEPSEEK_V3,
        Scenario(model=ModelRef(source="generic", generic_params_b=30.0, preset="qwen3-32b")),
        Scenario(model=ModelRef(source="upload", config_json="{}", config_name="mine")),
        Scenario(workload="serving", assumptions=(("serving.hbm_efficiency", 0.7),)),
        Scenario(search=SearchInputs(schedules=("1f1b",), micro_batch_sizes=(1, 8))),
    ],
)
def test_widget_state_reproduces_the_scenario(scenario):
    assert scenario_from_state(state_from_scenario(scenario)) == scenario


def test_the_search_choices_are_lists_for_the_widgets_and_tuples_in_the_scenario():
    state = state_from_scenario(Scenario())
    assert isinstance(state[key("schedules")], list)
    state[key("zeros")] = [1, 3]  # what a multiselect leaves in session state
    scenario = scenario_from_state(state)
    assert scenario.search.zero_stages == (1, 3)
    assert hash(scenario) == hash(scenario_from_state(state))  # caches key on it


def test_the_model_choice_says_which_source_is_used():
    assert state_from_scenario(DEEPSEEK_V3)[MODEL_CHOICE] == "deepseek-v3"
    generic = Scenario(model=ModelRef(source="generic"))
    assert state_from_scenario(generic)[MODEL_CHOICE] == GENERIC
    assert state_from_scenario(Scenario(model=ModelRef(source="upload")))[MODEL_CHOICE] == UPLOAD


def test_a_picked_layout_sets_only_the_layout_widgets():
    state = layout_state(LayoutInputs(dp=4, tp=2, pp=8))
    assert state[key("tp")] == 2 and state[key("pp")] == 8 and state[key("mbs")] == 1
    assert key("seq") not in state and key("model") not in state


def _changed(knob):
    """A value of the knob's kind other than its default."""
    if knob.kind == "flag":
        return not knob.default
    if knob.kind == "choice":
        return next(o for o in knob.options if o != knob.default)
    if knob.kind == "int":
        return (knob.default or 0) + 1
    return (knob.default or 1.0) * 0.5


@given(st.sampled_from(knobs("training") + knobs("serving")))
def test_every_knob_round_trips_through_the_url_and_the_core(knob):
    overrides = overrides_from({knob.key: _changed(knob)})
    assert overrides, knob.key
    scenario = Scenario(assumptions=overrides)
    assert from_query(to_query(scenario)) == (scenario, [])
    if knob.key.startswith("serving."):
        assert serving_assumptions(dict(overrides)) is not None
    else:
        assert estimate_assumptions(dict(overrides)) is not None


def test_knobs_show_large_byte_sizes_in_mib():
    context = next(k for k in knobs("training") if k.key == "memory.cuda_context_bytes")
    assert context.scale == MiB and context.label == "CUDA context (MiB)"
    assert context.stored(context.shown(context.default)) == context.default
    assert "Source" in context.help or "assumption" in context.help


def test_overrides_keep_only_what_differs_from_the_defaults():
    knob = next(k for k in knobs("training") if k.key == "memory.headroom_fraction")
    assert overrides_from({knob.key: knob.default}) == ()
    assert overrides_from({knob.key: 0.1}) == ((knob.key, 0.1),)


def test_numbers_are_formatted_with_their_unit():
    assert gib(2**31) == "2.0 GiB"
    assert tokens(131072) == "128K" and tokens(1 << 20) == "1M" and tokens(3000) == "3,000"
    assert flop(4.492e11) == "449.2 GFLOP"
    assert layout_label(LayoutInputs(dp=2, tp=8, pp=4, zero=1)) == "TP 8 · PP 4 · DP 2 · ZeRO-1"
    assert sentence(ValueError("dp must be positive")) == "dp must be positive."
    assert sentence(ValueError("global batch too small")) == "Global batch too small."
    assert sentence(ValueError("headroom_fraction must be < 1")) == "headroom_fraction must be < 1."
