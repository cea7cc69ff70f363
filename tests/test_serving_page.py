"""The Serving page's engine under load (AppTest): percentiles of the best layout's engine."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

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
