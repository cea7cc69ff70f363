"""The scenario survives URL query parameters and JSON unchanged; bad values fall back politely."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from explorer.hf_config import ConfigError
from explorer.limits import limit
from explorer.scenario import (
    DEEPSEEK_V3,
    EXAMPLES,
    ClusterInputs,
    LayoutInputs,
    ModelRef,
    Scenario,
    SearchInputs,
    ServingInputs,
    TrainingInputs,
    fitted_dp,
    from_dict,
    from_json,
    from_query,
    model_ref_from_upload,
    resolve_cluster,
    resolve_model,
    to_json,
    to_query,
    world_size_error,
)
from explorer.specs import PRECISIONS, RECOMPUTES, SCHEDULES

PRESETS = Path(__file__).resolve().parents[1] / "presets"
names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-._", min_size=1, max_size=30)
degrees = st.integers(1, 1 << 20)
finite = {"allow_nan": False, "allow_infinity": False}

scenarios = st.builds(
    Scenario,
    workload=st.sampled_from(["training", "serving"]),
    model=st.builds(
        ModelRef,
        source=st.sampled_from(["preset", "generic", "upload"]),
        preset=names,
        generic_params_b=st.floats(0.1, 5000, **finite),
        config_json=st.text(max_size=200),
        config_name=st.text(max_size=40),
    ),
    training=st.builds(
        TrainingInputs,
        precision=st.sampled_from(PRECISIONS),
        seq_len=st.integers(1, 1 << 24),
        global_batch_size=st.integers(1, 1 << 24),
    ),
    cluster=st.builds(
        ClusterInputs,
        gpu=names,
        gpus_per_node=st.integers(0, int(limit("gpus_per_node"))),
        num_nodes=st.integers(0, 1 << 20),
        intra_node_GBps=st.none() | st.floats(0.001, 1e6, **finite),
        inter_node_GBps=st.none() | st.floats(0.001, 1e6, **finite),
        oversubscription=st.floats(1, 64, **finite),
    ),
    layout=st.builds(
        LayoutInputs,
        dp=degrees,
        tp=degrees,
        pp=degrees,
        cp=degrees,
        ep=degrees,
        zero=st.sampled_from([0, 1, 2, 3]),
        recompute=st.sampled_from(RECOMPUTES),
        schedule=st.sampled_from(SCHEDULES),
        virtual_stages=st.integers(1, 64),
        sequence_parallel=st.booleans(),
        micro_batch_size=st.integers(1, 1 << 24),
    ),
    serving=st.builds(
        ServingInputs,
        prompt_len=st.integers(1, 1 << 24),
        output_len=st.integers(1, 1 << 24),
        concurrency=st.integers(1, 1 << 24),
        weights_dtype=st.sampled_from(["bf16", "fp8", "int8", "int4"]),
        kv_dtype=st.sampled_from(["bf16", "fp8"]),
    ),
    search=st.builds(
        SearchInputs,
        schedules=st.lists(st.sampled_from(SCHEDULES), min_size=1, max_size=5).map(tuple),
        zero_stages=st.lists(st.sampled_from([0, 1, 2, 3]), min_size=1, max_size=4).map(tuple),
        recomputes=st.lists(st.sampled_from(RECOMPUTES), min_size=1, max_size=3).map(tuple),
        micro_batch_sizes=st.lists(st.integers(1, 1024), min_size=1, max_size=8).map(tuple),
        max_virtual=st.integers(1, 16),
        tp_across_domain=st.booleans(),
        ranked=st.integers(1, 200),
    ),
    assumptions=st.dictionaries(
        st.text(min_size=1, max_size=20),
        st.floats(-1e9, 1e9, **finite) | st.booleans() | st.text(max_size=12),
        max_size=4,
    ).map(lambda d: tuple(sorted(d.items()))),
)  # fmt: skip


@given(scenarios)
def test_every_scenario_survives_the_url(scenario):
    back, messages = from_query(to_query(scenario))
    assert messages == []
    assert back == scenario


@given(scenarios)
def test_every_scenario_survives_json(scenario):
    assert from_json(to_json(scenario)) == scenario


@pytest.mark.parametrize("scenario", list(EXAMPLES.values()), ids=list(EXAMPLES))
def test_examples_round_trip_and_fill_their_cluster(scenario):
    assert from_query(to_query(scenario)) == (scenario, [])
    assert world_size_error(scenario.layout, scenario.cluster) is None
    scenario.layout_spec()  # a valid Layout


def test_the_default_scenario_writes_an_empty_query():
    assert to_query(Scenario()) == {}


def test_a_link_writes_only_what_differs_from_the_defaults():
    assert to_query(DEEPSEEK_V3)["model"] == "deepseek-v3"
    assert "workload" not in to_query(DEEPSEEK_V3)


@pytest.mark.parametrize(
    ("params", "key"),
    [
        ({"seq": "abc"}, "seq"),
        ({"tp": "0"}, "tp"),
        ({"zero": "5"}, "zero"),
        ({"sp": "maybe"}, "sp"),
        ({"precision": "fp4"}, "precision"),
        ({"assume": "{not json"}, "assume"),
        ({"assume": '{"x": [1, 2]}'}, "assume"),
        ({"nodes": "-1"}, "nodes"),
        ({"size_b": "1e9"}, "size_b"),
        ({"schedules": ""}, "schedules"),
        ({"schedules": "1f1b,dualpip"}, "schedules"),
        ({"zeros": "4"}, "zeros"),
        ({"mbs_tried": "1,0"}, "mbs_tried"),
        ({"max_virtual": "99"}, "max_virtual"),
    ],
)
def test_a_malformed_value_keeps_the_default_with_a_message_naming_the_key(params, key):
    scenario, messages = from_query(params)
    assert scenario == Scenario()
    assert len(messages) == 1
    assert messages[0].startswith(f"Ignored {key}=")


def test_good_values_next_to_a_bad_one_are_kept():
    scenario, messages = from_query({"seq": "4096", "tp": "x", "model": "deepseek-v3"})
    assert scenario.training.seq_len == 4096
    assert scenario.model.preset == "deepseek-v3"
    assert scenario.layout.tp == Scenario().layout.tp
    assert len(messages) == 1


def test_unknown_query_keys_are_ignored_silently():
    assert from_query({"utm_source": "mail", "embed": "true"}) == (Scenario(), [])


def test_repeated_query_keys_take_the_last_value():
    scenario, _ = from_query({"seq": ["1024", "2048"]})
    assert scenario.training.seq_len == 2048


def test_assumption_overrides_travel_as_a_json_object():
    scenario = Scenario(assumptions=(("headroom_fraction", 0.1), ("flash_attention", False)))
    query = to_query(scenario)
    assert json.loads(query["assume"]) == {"flash_attention": False, "headroom_fraction": 0.1}
    assert from_query(query) == (scenario, [])


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([], "JSON object"),
        ({"colour": "red"}, "unknown keys: colour"),
        ({"layout": {"tp": 0}}, "layout.tp"),
    ],
)
def test_a_bad_scenario_json_raises_one_sentence(data, message):
    with pytest.raises(ValueError, match=message):
        from_dict(data)


def test_a_scenario_json_that_is_not_json_raises_one_sentence():
    with pytest.raises(ValueError, match="not valid JSON"):
        from_json("{")


def test_world_size_mismatch_names_the_degrees_and_the_fix():
    message = world_size_error(LayoutInputs(dp=3, tp=8, pp=4), ClusterInputs(num_nodes=8))
    assert message is not None
    assert "3 × 8 × 4 × 1 = 96" in message and "64" in message and "set DP to 2" in message
    assert fitted_dp(LayoutInputs(dp=3, tp=8, pp=4), ClusterInputs(num_nodes=8)) == 2


def test_world_size_mismatch_without_a_fitting_dp_says_so():
    message = world_size_error(LayoutInputs(dp=1, tp=3), ClusterInputs(num_nodes=1))
    assert message is not None and "does not divide" in message
    assert fitted_dp(LayoutInputs(dp=1, tp=3), ClusterInputs(num_nodes=1)) is None


def test_a_cluster_without_gpus_raises_one_sentence():
    with pytest.raises(ValueError, match="no GPUs"):
        resolve_cluster(ClusterInputs(num_nodes=0))


def test_an_impossible_layout_raises_one_sentence():
    scenario = Scenario(layout=LayoutInputs(virtual_stages=2, schedule="1f1b"))
    with pytest.raises(ValueError, match="interleaved"):
        scenario.layout_spec()


def test_link_bandwidths_override_the_presets():
    cluster = resolve_cluster(ClusterInputs(intra_node_GBps=200.0, inter_node_GBps=25.0))
    assert cluster.fast_bytes_per_s == 200e9
    assert cluster.fabric_bytes_per_s == 25e9
    assert resolve_cluster(ClusterInputs()).fast_bytes_per_s == 450e9  # H100 NVLink, one way


def test_an_nvl72_tray_cluster_keeps_its_72_gpu_domain():
    cluster = resolve_cluster(ClusterInputs(gpu="gb200", gpus_per_node=4, num_nodes=18))
    assert cluster.domain_size == 72


def test_a_good_upload_becomes_a_model_reference():
    data = (PRESETS / "models" / "mixtral-8x7b.json").read_bytes()
    ref = model_ref_from_upload(data, "mixtral.json")
    assert ref.source == "upload" and ref.config_name == "mixtral"
    assert resolve_model(ref).n_routed_experts == 8
    assert from_query(to_query(Scenario(model=ref))) == (Scenario(model=ref), [])


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"{not json", "not valid JSON"),
        (b"[1, 2]", "JSON object"),
        (b'{"model_type": "llama", "hidden_size": 4096}', "config.json"),
        (b'{"a": "\xc3\x28"}', "UTF-8"),
    ],
)
def test_a_bad_upload_raises_a_config_error_sentence(data, message):
    with pytest.raises(ConfigError, match=message):
        model_ref_from_upload(data, "bad.json")


def test_the_generic_size_resolves_near_its_target():
    from explorer.counting import param_counts

    model = resolve_model(ModelRef(source="generic", generic_params_b=30.0))
    assert param_counts(model).total == pytest.approx(30e9, rel=0.05)


def test_an_upload_reference_without_a_file_says_so():
    with pytest.raises(ValueError, match=r"No config\.json"):
        resolve_model(ModelRef(source="upload"))


def test_the_search_space_travels_as_comma_separated_choices():
    narrowed = Scenario(search=SearchInputs(schedules=("1f1b", "interleaved"), zero_stages=(1,)))
    assert to_query(narrowed) == {"schedules": "1f1b,interleaved", "zeros": "1"}
    space = narrowed.search_space()
    assert space.schedules == ("1f1b", "interleaved") and space.zero_stages == (1,)
    assert Scenario().search_space().schedules == SCHEDULES
