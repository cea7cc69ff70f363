"""The Serving page's engine under load (AppTest): percentiles of the best layout's engine."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from explorer.scenario import ServingInputs

APP = str(Path(__file__).parents[1] / "app.py")
PAGE = "explorer/ui/pages/serving.py"


def test_the_serving_page_simulates_its_best_layout_under_users():
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params["workload"] = "serving"
    at.run()
    at.switch_page(PAGE).run()
    assert not at.exception
    before = len(at.dataframe)  # layouts (and rejections); nothing simulated at 0 users
    at.number_input(key="serving_load_users").set_value(16).run()
    assert not at.exception and len(at.dataframe) == before + 1
    table = at.dataframe[-1].value
    assert list(table["latency"]) == ["time to first token", "time per output token", "end to end"]
    assert (table["p50 (ms)"] <= table["p90 (ms)"]).all()
    assert (table["p90 (ms)"] <= table["p99 (ms)"]).all() and (table["p50 (ms)"] > 0).all()
    assert any("output tokens/s" in c.value and "preemptions" in c.value for c in at.caption)


def test_the_serving_page_says_how_many_users_each_layout_holds_by_context():
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params["workload"] = "serving"
    at.run()
    at.switch_page(PAGE).run()
    assert not at.exception
    assert any("valid layouts hold a user at 4K tokens" in m.value for m in at.markdown)
    tables = [d.value for d in at.dataframe if "users at 4K" in d.value.columns]
    assert len(tables) == 1
    users = tables[0]
    assert (users["users at 4K"] >= users["users at 32K"]).all()
    assert (users["users at 32K"] >= users["users at 128K"]).all()


def test_the_serving_page_decodes_its_best_layout_speculatively():
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params["workload"] = "serving"
    at.run()
    at.switch_page(PAGE).run()
    assert not at.exception
    assert not any("tokens a step of" in m.value for m in at.markdown)  # 0 draft tokens: off
    at.selectbox(key="serving_spec_draft").set_value("llama-3.1-8b")
    at.number_input(key="serving_spec_tokens").set_value(3).run()
    assert not at.exception
    lines = [m.value for m in at.markdown if "tokens a step of" in m.value]
    # acceptance 0.85 and k = 3: (1 - 0.85^4) / 0.15 = 3.19 tokens a step
    assert len(lines) == 1 and "3.19 tokens a step" in lines[0] and "3 draft passes" in lines[0]


def test_the_serving_page_prices_each_layout_and_sizes_a_target_rate():
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params["workload"] = "serving"
    at.run()
    at.switch_page(PAGE).run()
    at.number_input(key="serving_price_per_gpu_hour").set_value(2.0)
    at.number_input(key="serving_target_rps").set_value(10.0).run()
    assert not at.exception
    (layouts,) = [d.value for d in at.dataframe if "output tokens/s" in d.value.columns]
    (cost,) = [d.value for d in at.dataframe if "US$ per M output tokens" in d.value.columns]
    fits = layouts[layouts["fits"]].reset_index(drop=True)
    assert list(cost["layout"]) == list(fits["layout"])
    row, priced = fits.iloc[0], cost.iloc[0]
    gpus = row["TP"] * row["PP"] * row["EP"]  # a replica's GPUs
    per_replica = row["output tokens/s"] / row["replicas"]
    # gpus x $2 an hour over 3,600 s, per output token, x 10^6
    assert priced["US$ per M output tokens"] == pytest.approx(gpus * 2.0 / 3600 / per_replica * 1e6)
    # 10 requests/s over the replica's output tokens/s / output tokens per request, rounded up
    output_len = ServingInputs().output_len  # the default scenario's
    replicas = math.ceil(10.0 / (per_replica / output_len) - 1e-12)
    assert priced["replicas for the target"] == replicas
    assert priced["GPUs for the target"] == replicas * gpus
