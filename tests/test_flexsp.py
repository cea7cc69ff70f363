"""FlexSP (explorer.flexsp): variable-length sequences on flexible sequence-parallel groups."""

from __future__ import annotations

import dataclasses
import json

import pytest

from explorer.cli import main
from explorer.estimate import estimate
from explorer.flexsp import (
    FlexSetting,
    batch_for_tokens,
    bucket,
    compare_flexsp,
    long_tail,
    parse_profile,
    skew_sweep,
    step_sequences,
)
from explorer.presets import load_cluster, load_model
from explorer.specs import Layout, TrainingWorkload

MODEL = load_model("llama-3.1-8b")
CLUSTER = dataclasses.replace(load_cluster("hgx-h100"), num_nodes=8)
BASE = Layout(zero=3, recompute="full")
SETTING = FlexSetting(model=MODEL, cluster=CLUSTER, base=BASE, world_size=64)


@pytest.mark.parametrize("length", [16384, 131072])
def test_one_length_equals_the_cores_fixed_length_estimate(length):
    sequences = 256
    c = compare_flexsp(SETTING, parse_profile(f"{length}:1"), sequences)
    (phase,) = c.fixed.phases
    group = phase.groups[0].size
    layout = dataclasses.replace(BASE, cp=group, dp=64 // group)
    workload = TrainingWorkload(seq_len=length, global_batch_size=sequences)
    core = estimate(MODEL, CLUSTER, layout, workload)
    assert c.fixed.step_s == pytest.approx(core.step_time_s, rel=1e-9)
    assert c.flexible.step_s == pytest.approx(core.step_time_s, rel=1e-9)
    assert c.speedup == pytest.approx(1.0)


def test_fixed_sp_takes_the_smallest_group_that_holds_a_long_sequence_when_it_is_fastest():
    c = compare_flexsp(SETTING, parse_profile("131072:1"), 64)
    sizes = {g.size for g in c.fixed.phases[0].groups}
    assert sizes == {2}  # 128K tokens do not fit one GPU (no CP) at this layout
    one_gpu = estimate(MODEL, CLUSTER, dataclasses.replace(BASE, dp=64),
                       TrainingWorkload(seq_len=131072, global_batch_size=64))  # fmt: skip
    assert not one_gpu.fits


@pytest.mark.parametrize("profile", ["1024:500,65536:4", "2048:50,8192:20,131072:1",
                                     "longtail:skew=1.2,longest=65536"])  # fmt: skip
def test_flexsp_is_never_slower_than_fixed_sp_and_keeps_every_token(profile):
    p = parse_profile(profile)
    c = compare_flexsp(SETTING, p, batch_for_tokens(p, 1 << 20))
    assert c.flexible.step_s <= c.fixed.step_s
    tokens = sum(bucket(n) for n in c.sequences)
    assert c.flexible.tokens == c.fixed.tokens == tokens
    for plan in (c.flexible, c.fixed):
        for phase in plan.phases:
            assert sum(g.size for g in phase.groups) == 64


def test_the_speed_up_grows_with_the_length_skew_as_in_the_paper():
    # FlexSP (arXiv:2412.01523) gains more the more sequences are short beside a long tail:
    # here 1.0x with sequences spread evenly over the doublings, rising with the skew.
    rows = skew_sweep(SETTING, 131072, [0.0, 1.0, 1.5, 2.0], 1 << 21)
    speedups = [c.speedup for _, c in rows]
    assert speedups[0] == pytest.approx(1.0, abs=0.02)
    assert speedups == sorted(speedups)
    assert speedups[-1] > 1.5
    # the tail is kept: every step holds the longest length
    assert all(c.sequences[0] == 131072 for _, c in rows)


def test_largest_remainder_counts_and_the_tail_kept():
    assert step_sequences(parse_profile("1000:3,4000:1"), 8) == (4000,) * 2 + (1000,) * 6
    seqs = step_sequences(parse_profile("1000:1000,8192:1"), 10)
    assert seqs == (8192,) + (1000,) * 9


def test_buckets_are_quarter_doublings_in_multiples_of_128():
    assert bucket(1000) == 1024
    assert bucket(1024) == 1024
    assert bucket(1025) == 1280  # 2^10.25 = 1217.7, up to 10 x 128
    assert bucket(4096) == 4096
    assert bucket(5000) == 5888  # 2^12.5 = 5792.6, up to 46 x 128


def test_long_tail_shares_fall_as_length_to_the_minus_skew():
    p = long_tail(8192, 1.0)
    assert p.lengths == (1024, 2048, 4096, 8192)
    assert p.weights == pytest.approx((1.0, 0.5, 0.25, 0.125))
    assert long_tail(8192, 0.0).mean_length() == pytest.approx((1024 + 2048 + 4096 + 8192) / 4)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("", "empty"),
        ("4096:10,abc:2", "'abc' is not a whole number"),
        ("64:1", "at least 128"),
        ("4096:-1", "positive"),
        ("longtail:skew=-1", "zero or more"),
        ("longtail:width=3", "not one of"),
    ],
)
def test_a_bad_profile_is_one_sentence(text, words):
    with pytest.raises(ValueError, match=words):
        parse_profile(text)


def test_the_command_line_prints_the_comparison_as_json(capsys):
    code = main(["flexsp", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--gpus", "64",
                 "--lengths", "2048:50,131072:1", "--gbs", "51", "--json"])  # fmt: skip
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert out["longest"] == 131072 and out["sequences"] == 51
    assert out["speedup"] >= 1.0
    assert out["fixed"]["step_s"] >= out["flexible"]["step_s"]


def test_the_command_line_rejects_what_no_group_can_hold_in_one_sentence(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["flexsp", "--model", "llama-3.1-70b", "--gpu", "h100-sxm", "--gpus", "8",
              "--zero", "0", "--lengths", "1048576:1"])  # fmt: skip
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no sequence-parallel group" in err[0]
