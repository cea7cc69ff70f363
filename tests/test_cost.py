"""Cost and time of a run (explorer.cost): linear in price and tokens, energy by hand."""

from __future__ import annotations

import dataclasses
import json

import pytest

from explorer.cli import main
from explorer.cost import CostAssumptions, run_cost, serving_cost
from explorer.presets import load_gpu

H100 = load_gpu("h100-sxm")


def _cost(tokens: float = 1e12, price: float | None = 2.0, **kw: float) -> object:
    return run_cost(
        train_tokens=tokens,
        tokens_per_s=kw.pop("tokens_per_s", 1e6),
        tokens_per_step=kw.pop("tokens_per_step", 4e6),
        num_gpus=int(kw.pop("num_gpus", 512)),
        gpu=H100,
        assumptions=CostAssumptions(price_per_gpu_hour=price, **kw),
    )


def test_hand_worked_run() -> None:
    # 1e12 tokens at 1e6 tokens/s = 1e6 s; 512 GPUs x 1e6 s / 3600 = 142,222.2 GPU-hours.
    cost = _cost()
    assert cost.time_s == pytest.approx(1e6)
    assert cost.steps == pytest.approx(250_000)
    assert cost.gpu_hours == pytest.approx(142_222.222, rel=1e-6)
    assert cost.cost_usd == pytest.approx(284_444.444, rel=1e-6)
    # $ per million tokens: 512 x $2 / 3600 s per GPU-hour / 1e6 tokens/s x 1e6 = $0.28444.
    assert cost.cost_per_million_tokens_usd == pytest.approx(0.284444, rel=1e-5)


def test_energy_hand_worked() -> None:
    # 512 GPUs x 700 W (H100 SXM TDP) x 0.8 x PUE 1.2 x 1e6 s = 3.44064e11 J = 95,573.3 kWh.
    cost = _cost(power_utilisation=0.8, pue=1.2)
    assert cost.gpu_power_w == 700.0
    assert cost.energy_j == pytest.approx(3.44064e11)
    assert cost.energy_j / 3.6e6 == pytest.approx(95_573.33, rel=1e-6)


def test_cost_linear_in_price_and_tokens() -> None:
    base = _cost()
    assert _cost(price=6.0).cost_usd == pytest.approx(3 * base.cost_usd)
    assert _cost(tokens=5e12).cost_usd == pytest.approx(5 * base.cost_usd)
    assert _cost(tokens=5e12).energy_j == pytest.approx(5 * base.energy_j)
    # The price per million tokens does not depend on how many tokens are trained.
    assert _cost(tokens=5e12).cost_per_million_tokens_usd == pytest.approx(
        base.cost_per_million_tokens_usd
    )


def test_preset_price_used_and_named() -> None:
    cost = _cost(price=None)
    assert cost.price_per_gpu_hour == H100.price_per_gpu_hour == 3.78
    assert "lambda.ai/pricing" in cost.price_source
    unpriced = dataclasses.replace(load_gpu("h200"), price_per_gpu_hour=None, price_source="")
    no_price = run_cost(
        train_tokens=1e9, tokens_per_s=1e5, tokens_per_step=1e6, num_gpus=8, gpu=unpriced,
    )  # fmt: skip
    assert no_price.cost_usd is None and "no published price" in no_price.price_source


def test_preset_without_tdp_gives_no_energy() -> None:
    gb200 = load_gpu("gb200")
    cost = run_cost(train_tokens=1e9, tokens_per_s=1e5, tokens_per_step=1e6, num_gpus=72, gpu=gb200)
    assert cost.energy_j is None and "TDP" in cost.power_source
    given = dataclasses.replace(gb200, tdp_w=1200.0)
    assert run_cost(
        train_tokens=1e9, tokens_per_s=1e5, tokens_per_step=1e6, num_gpus=72, gpu=given
    ).energy_j == pytest.approx(72 * 1200 * 1.58 * 1e4)


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("price_per_gpu_hour", -1.0, "price_per_gpu_hour must be zero or more"),
        ("gpu_power_w", float("nan"), "gpu_power_w must be zero or more"),
        ("power_utilisation", 1.5, "power_utilisation must be in (0, 1]"),
        ("pue", 0.9, "pue must be at least 1"),
    ],
)
def test_bad_assumptions_one_sentence(field: str, value: float, words: str) -> None:
    with pytest.raises(ValueError, match=words.replace("(", r"\(").replace("]", r"\]")):
        CostAssumptions(**{field: value})


def test_bad_tokens_one_sentence() -> None:
    with pytest.raises(ValueError, match="train_tokens must be positive"):
        _cost(tokens=0)
    with pytest.raises(ValueError, match="throughput must be positive"):
        _cost(tokens_per_s=0.0)


def test_serving_cost_and_gpus_for_rate() -> None:
    # A TP 8 replica decoding 4,000 output tokens/s at $3.78: 8 x 3.78 / 3600 / 4000 x 1e6 = $2.10.
    plan = serving_cost(
        output_tokens_per_s_per_replica=4000.0, output_len=500, gpus_per_replica=8, gpu=H100,
        target_requests_per_s=20.0,
    )  # fmt: skip
    assert plan.cost_per_million_output_tokens_usd == pytest.approx(2.1)
    assert plan.requests_per_s_per_replica == pytest.approx(8.0)
    assert (plan.replicas_needed, plan.gpus_needed) == (3, 24)  # 20 / 8 = 2.5 -> 3 replicas
    exact = serving_cost(
        output_tokens_per_s_per_replica=4000.0, output_len=500, gpus_per_replica=8, gpu=H100,
        target_requests_per_s=16.0,
    )  # fmt: skip
    assert exact.replicas_needed == 2
    with pytest.raises(ValueError, match="target request rate must be positive"):
        serving_cost(
            output_tokens_per_s_per_replica=1.0, output_len=1, gpus_per_replica=1, gpu=H100,
            target_requests_per_s=-1.0,
        )  # fmt: skip


_ESTIMATE = [
    "estimate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--tp", "2", "--pp", "1",
    "--dp", "4", "--seq", "4096", "--mbs", "1", "--gbs", "64", "--json",
]  # fmt: skip


def _estimate_json(capsys: pytest.CaptureFixture[str], *extra: str) -> dict:
    assert main([*_ESTIMATE, *extra]) == 0
    return json.loads(capsys.readouterr().out)


def test_estimate_cli_cost_keys(capsys: pytest.CaptureFixture[str]) -> None:
    out = _estimate_json(capsys, "--train-steps", "1000", "--price-per-gpu-hour", "2")
    cost, run = out["cost"], out["cost"]["run"]
    # 1000 steps x 64 x 4096 tokens; time from the estimate's own throughput.
    assert run["train_tokens"] == 1000 * 64 * 4096
    assert run["time_s"] == pytest.approx(run["train_tokens"] / out["tokens_per_s"])
    assert run["time_s"] == pytest.approx(1000 * out["step_time_s"], rel=1e-9)
    assert run["cost_usd"] == pytest.approx(8 * 2.0 * run["time_s"] / 3600)
    assert cost["cost_per_million_tokens_usd"] == pytest.approx(
        8 * 2.0 / 3600 / out["tokens_per_s"] * 1e6
    )
    assert run["energy_j"] == pytest.approx(8 * 700 * 1.58 * run["time_s"])


def test_estimate_cli_bad_cost_flag(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main([*_ESTIMATE, "--pue", "0.5"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "--pue: pue must be at least 1" in err
    with pytest.raises(SystemExit):
        main([*_ESTIMATE, "--train-tokens", "1e9", "--train-steps", "3"])
    assert "not both" in capsys.readouterr().err


def test_search_rows_carry_cost_column(capsys: pytest.CaptureFixture[str]) -> None:
    argv = [
        "search", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--gpus", "16", "--seq",
        "4096", "--gbs", "256", "--top", "3", "--price-per-gpu-hour", "2.5", "--json",
    ]  # fmt: skip
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["price_per_gpu_hour"] == 2.5 and out["price_source"] == "given by the user"
    for row in out["layouts"]:
        expected = 16 * 2.5 / 3600 / row["tokens_per_s"] * 1e6
        assert row["cost_per_million_tokens_usd"] == pytest.approx(expected)
    costs = [row["cost_per_million_tokens_usd"] for row in out["layouts"]]
    assert costs == sorted(costs)  # same GPUs: the fastest layout is the cheapest


def test_scaling_points_priced(capsys: pytest.CaptureFixture[str]) -> None:
    argv = [
        "scaling", "--model", "llama-3.1-8b", "--gpu", "a100-80g", "--gpu-counts", "8,16",
        "--seq", "2048", "--gbs", "64", "--recompute", "none", "--train-tokens", "1e11",
        "--json",
    ]  # fmt: skip
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["price_per_gpu_hour"] == 2.4984  # the A100 preset's published price
    for p in out["points"]:
        days = 1e11 / p["tokens_per_s"] / 86400
        assert p["train_days"] == pytest.approx(days)
        assert p["train_cost_usd"] == pytest.approx(p["num_gpus"] * days * 24 * 2.4984)


def test_serve_cost_per_layout(capsys: pytest.CaptureFixture[str]) -> None:
    argv = [
        "serve", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--gpus", "8", "--prompt-len",
        "1024", "--output-len", "256", "--concurrency", "32", "--target-rps", "50", "--json",
    ]  # fmt: skip
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    for layout in (lay for lay in out["layouts"] if lay["fits"]):
        cost = layout["cost"]
        per_replica = layout["tokens_per_s"] / layout["replicas"]
        gpus = layout["gpus_per_replica"]
        assert cost["cost_per_million_output_tokens_usd"] == pytest.approx(
            gpus * 3.78 / 3600 / per_replica * 1e6
        )
        replicas = -(-50 // (per_replica / 256))
        assert cost["gpus_needed"] == replicas * gpus


# Every GPU preset's price per GPU-hour and the page it comes from (presets/gpus/*.toml); a
# figure that is not a provider's own list price says so in its source.
GPU_PRICES = {
    "a100-80g": (2.4984, "modal.com/pricing"),
    "h100-sxm": (3.78, "lambda.ai/pricing"),
    "h200": (4.54, "spheron.network"),
    "b200": (6.03, "spheron.network"),
    "gb200": (4.54, "$9.08 per Superchip-hour"),  # 2 GPUs a Superchip: 9.08 / 2
    "mi300x": (1.85, "second-hand"),
    "h800": (2.0, "assumption, not a list price"),
}


@pytest.mark.parametrize(("gpu_id", "price", "words"), [(k, *v) for k, v in GPU_PRICES.items()])
def test_every_gpu_preset_has_a_named_price(gpu_id: str, price: float, words: str) -> None:
    from explorer.presets import gpu_ids

    assert set(GPU_PRICES) == set(gpu_ids())
    gpu = load_gpu(gpu_id)
    assert gpu.price_per_gpu_hour == price and words in gpu.price_source
    # the preset's price is the one a run is charged: 10 GPU-hours cost ten times the price
    cost = run_cost(train_tokens=3.6e9, tokens_per_s=1e6, tokens_per_step=1e6, num_gpus=10, gpu=gpu)
    assert cost.gpu_hours == pytest.approx(10.0) and cost.cost_usd == pytest.approx(10 * price)


def test_report_cost_section_prices_a_trillion_tokens() -> None:
    from explorer.report import build_report
    from explorer.scenario import ClusterInputs, LayoutInputs, ModelRef, Scenario, TrainingInputs

    scenario = Scenario(
        model=ModelRef(preset="llama-3.1-8b"),
        training=TrainingInputs(seq_len=4096, global_batch_size=64),
        cluster=ClusterInputs(gpus_per_node=8, num_nodes=1),
        layout=LayoutInputs(dp=2, tp=2, pp=2, zero=1, recompute="selective"),
    )
    report = build_report(scenario)
    results = report.results
    cost, tokens_per_s = results["cost"], results["estimate"]["tokens_per_s"]
    price = load_gpu("h100-sxm").price_per_gpu_hour  # the scenario's default GPU
    assert cost["price_per_gpu_hour"] == price == 3.78
    # 1e12 tokens at the estimate's tokens/s on 8 GPUs; $ = GPU-hours x price; energy at the
    # 700 W TDP, utilisation 1 and PUE 1.58.
    time_s = 1e12 / tokens_per_s
    assert cost["time_s"] == pytest.approx(time_s)
    assert cost["gpu_hours"] == pytest.approx(8 * time_s / 3600)
    assert cost["cost_usd"] == pytest.approx(8 * time_s / 3600 * 3.78)
    per_million = 8 * 3.78 / 3600 / tokens_per_s * 1e6
    assert cost["cost_per_million_tokens_usd"] == pytest.approx(per_million)
    assert cost["energy_j"] == pytest.approx(8 * 700 * 1.0 * 1.58 * time_s)
    # the section's table shows the same figures
    table = report.section("cost").tables[0].frame.set_index("quantity")["value"]
    assert table["US$ per trillion tokens"] == pytest.approx(cost["cost_usd"])
    assert table["days per trillion tokens"] == pytest.approx(time_s / 86400)


def test_scaling_page_table_has_a_cost_column() -> None:
    from explorer.calibration import dgx_a100
    from explorer.presets import load_model
    from explorer.scaling import LayoutFamily, scaling_sweep
    from explorer.specs import TrainingWorkload
    from explorer.ui.pages.scaling import _table

    sweep = scaling_sweep(
        "strong", load_model("llama-3.1-8b"), dgx_a100(16), (8, 16),
        TrainingWorkload(seq_len=2048, global_batch_size=64), LayoutFamily(recomputes=("none",)),
    )  # fmt: skip
    table = _table(sweep, 2.5)
    for _, row in table.iterrows():
        expected = row["GPUs"] * 2.5 / 3600 / row["tokens/s"] * 1e6
        assert row["US$ per M tokens"] == pytest.approx(expected)
    # twice the price, twice the column
    doubled = _table(sweep, 5.0)["US$ per M tokens"]
    assert list(doubled) == pytest.approx([2 * c for c in table["US$ per M tokens"]])
