"""Property tests with hostile values: the command line (in this process) and the scenario codec
(URL query parameters to a scenario). Whatever arrives, the command line exits 0 or 2, says one
sentence on a failure and writes strict JSON with finite numbers; a link gives a scenario inside
the limits, and resolving it gives specs or one sentence."""

from __future__ import annotations

import contextlib
import io
import json
import math
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from explorer.cli import main
from explorer.scenario import (
    QUERY_KEYS,
    Scenario,
    from_dict,
    from_query,
    resolve_cluster,
    resolve_model,
    to_dict,
)
from explorer.specs import SCHEDULES

ROOT = Path(__file__).resolve().parents[1]
LLAMA_8B = json.loads((ROOT / "presets" / "models" / "llama-3.1-8b.json").read_text())

ODD = ["0", "-1", "1.5", "1e308", "inf", "-inf", "nan", "1048577", str(10**23), "9" * 5000, "",
       "x", " 4", "0x10", "1_000", "\n", "<img src=x onerror=alert(1)>"]  # fmt: skip
"""Values an attacker types for a number."""


SMALL = st.integers(-2, 64).map(str)
ANY = SMALL | st.sampled_from(ODD)
BASES: dict[str, list[str]] = {
    "params": ["--model", "llama-3.1-8b", "--seq", "4096"],
    "schedule": ["--schedule", "1f1b", "--stages", "4", "--microbatches", "8"],
    "estimate": ["--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--tp", "8", "--pp", "1",
                 "--dp", "1", "--seq", "4096", "--gbs", "64"],
    "serve": ["--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--gpus", "8", "--prompt-len",
              "1024", "--output-len", "128", "--concurrency", "8"],
    "search": ["--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--gpus", "8", "--seq", "4096",
               "--gbs", "64", "--top", "3"],
    "flexsp": ["--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--gpus", "8", "--lengths",
               "4096:8,16384:1", "--gbs", "9"],
    "helix": ["--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--gpus", "8", "--context",
              "65536", "--users", "1,4"],
}  # fmt: skip
"""A valid command line per subcommand, which the test then spoils."""
MODELS = st.sampled_from(["mixtral-8x7b", "/dev/null", "/", "", "no-such-model"]) | ANY
CLUSTER = {"--gpu": st.sampled_from(["a100-80g", "mi300x", "no-such-gpu"]) | ANY,
           "--gpus-per-node": ANY, "--intra-node-GBps": ANY, "--inter-node-GBps": ANY}  # fmt: skip
WORKLOAD = {"--seq": ANY, "--gbs": ANY, "--mbs": ANY}
FLAGS: dict[str, dict[str, st.SearchStrategy[str]]] = {
    "params": {"--model": MODELS, "--seq": ANY},
    "schedule": {"--schedule": st.sampled_from(SCHEDULES) | ANY, "--stages": ANY,
                 "--microbatches": ANY, "--virtual": ANY, "--forward": ANY, "--backward": ANY,
                 "--weight": ANY, "--p2p": ANY},
    "estimate": {"--model": MODELS, **CLUSTER, **WORKLOAD, "--tp": ANY, "--pp": ANY,
                 "--dp": ANY, "--cp": ANY, "--ep": ANY, "--virtual": ANY, "--headroom": ANY,
                 "--assume": st.sampled_from(["comm.tp_overlap=0.5", "comm.tp_overlap=nan",
                                              "memory.moe_imbalance=1e308", "x"])},
    "serve": {"--model": MODELS, **CLUSTER, "--gpus": ANY, "--prompt-len": ANY,
              "--output-len": ANY, "--concurrency": ANY, "--gpu-memory-utilization": ANY},
    "search": {**CLUSTER, **WORKLOAD, "--gpus": ANY, "--top": ANY, "--mbs-values": ANY,
               "--max-virtual": ANY},
    "flexsp": {"--model": MODELS, **CLUSTER, "--gpus": ANY, "--tp": ANY, "--gbs": ANY,
               "--tokens-per-step": ANY, "--sweep-skew": ANY,
               "--lengths": st.sampled_from(["longtail:skew=9", "longtail:longest=1e9",
                                             "4096:nan", "4096:1e308", "1,2,3"]) | ANY},
    "helix": {"--model": MODELS, **CLUSTER, "--gpus": ANY, "--context": ANY,
              "--output-len": ANY, "--users": ANY, "--batch": ANY},
}  # fmt: skip
"""Per subcommand, the flags the test may spoil and what it may put there."""


@st.composite
def commands(draw: st.DrawFn) -> list[str]:
    """A subcommand's valid command line with up to two values replaced or added."""
    name = draw(st.sampled_from(sorted(BASES)))
    argv = list(BASES[name])
    for _ in range(draw(st.integers(0, 2))):
        flag = draw(st.sampled_from(sorted(FLAGS[name])))
        value = draw(FLAGS[name][flag])
        if flag in argv:
            argv[argv.index(flag) + 1] = value
        else:
            argv += [flag, value]
    return [name, *argv]


def run_cli(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as stop:
            code = int(stop.code or 0)
    return code, out.getvalue(), err.getvalue()


def finite_numbers(value: object) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(finite_numbers(v) for v in value.values())
    if isinstance(value, list):
        return all(finite_numbers(v) for v in value)
    return True


def no_constants(name: str) -> object:
    raise AssertionError(f"{name} is not JSON")


@settings(max_examples=40)
@given(command=commands(), as_json=st.booleans())
def test_the_command_line_exits_0_or_2_with_one_sentence_or_strict_json(command, as_json):
    argv = [command[0], *(["--json"] if as_json else []), *command[1:]]
    code, out, err = run_cli(argv)
    assert code in (0, 2), (argv, code, err)
    if code == 2:
        assert out == ""
        assert err.count("\n") == 1 and err.endswith(".\n"), err
        assert not err.startswith("internal error"), (argv, err)
        return
    if as_json:
        assert finite_numbers(json.loads(out, parse_constant=no_constants))


CONFIGS = [
    json.dumps({**LLAMA_8B, "num_hidden_layers": 10**12}),
    json.dumps({**LLAMA_8B, "vocab_size": 10**30}),
    json.dumps({**LLAMA_8B, "hidden_size": 1e308}),
    json.dumps(LLAMA_8B).replace("128256", "9" * 5000),
    "[" * 50_000 + "]" * 50_000,
    json.dumps(LLAMA_8B),
    "{",
    "null",
]
"""Uploaded config.json texts a link can carry."""
LINK_ODD = ["1", "0", "true", "none", "{}", '{"a": Infinity}', '{"x": 1e999}', "a" * 5000,
            "gpipe,1f1b", "0,1,2,3,4", "9" * 400]  # fmt: skip
VALUES = (
    st.sampled_from(ODD + LINK_ODD)
    | st.integers(-(10**30), 10**30).map(str)
    | st.floats(allow_nan=True, allow_infinity=True).map(repr)
    | st.text(max_size=40)
)
QUERIES = st.dictionaries(
    st.sampled_from(sorted(QUERY_KEYS)), VALUES | st.sampled_from(CONFIGS), max_size=8
)


@settings(max_examples=150)
@given(query=QUERIES)
def test_a_hostile_link_gives_a_scenario_within_the_limits_and_specs_or_one_sentence(query):
    scenario, messages = from_query(query)
    assert isinstance(scenario, Scenario)
    assert all("\n" not in m and len(m) < 400 for m in messages), messages
    assert from_dict(to_dict(scenario)) == scenario  # every field within its bounds
    steps = (
        lambda: resolve_model(scenario.model),
        lambda: resolve_cluster(scenario.cluster),
        scenario.layout_spec,
        scenario.training_spec,
        scenario.serving_spec,
        scenario.search_space,
    )
    for step in steps:
        try:
            step()
        except ValueError as error:  # ConfigError is a ValueError
            assert "\n" not in str(error) and str(error)


def test_a_long_mixed_group_in_a_link_is_quoted_short():
    # a 400-digit group once put all 400 digits into the sentence twice (543 characters)
    _, messages = from_query({"mixed": "9" * 400})
    assert len(messages) == 1 and len(messages[0]) < 200, messages
    assert "GPU:PER_NODE:NODES" in messages[0]
