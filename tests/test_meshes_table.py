"""The ranked meshes as shown: units in the headers, a row back to the layout it stands for."""

from __future__ import annotations

import pytest

from explorer.presets import load_model
from explorer.scenario import ClusterInputs, LayoutInputs, resolve_cluster
from explorer.search import search
from explorer.specs import TrainingWorkload
from explorer.ui.meshes_table import COLUMNS, COMPARED, display, label, layout_of
from explorer.units import GiB


@pytest.fixture(scope="module")
def ranked():
    cluster = resolve_cluster(ClusterInputs(num_nodes=1))
    workload = TrainingWorkload(seq_len=4096, global_batch_size=64)
    return search(load_model("llama-3.1-8b"), cluster, workload, ranked=3).layouts


def test_the_shown_table_has_every_column_with_its_unit(ranked):
    frame = display(ranked)
    assert set(COLUMNS) <= set(frame.columns)
    assert list(frame["rank"]) == [1, 2, 3]
    assert frame["peak_gib"].iloc[0] == pytest.approx(ranked["peak_bytes"].iloc[0] / GiB)
    assert frame["mfu_pct"].iloc[0] == pytest.approx(100 * ranked["mfu"].iloc[0])
    assert frame["bubble_pct"].iloc[0] == pytest.approx(100 * ranked["bubble_fraction"].iloc[0])
    assert frame["spare_gib"].iloc[0] == pytest.approx(ranked["spare_bytes"].iloc[0] / GiB)


UNITS = {"_per_s": "/s", "_per_s_per_gpu": "/s per GPU", "_s": "(s)", "_pct": "(%)",
         "_gib": "(GiB)", "_usd": "US$"}  # fmt: skip
"""A source column's unit suffix and what its header must show (the longest suffix counts)."""


def _suffix(column: str) -> str | None:
    found = [s for s in UNITS if column.endswith(s)]
    return max(found, key=len) if found else None


def test_every_header_shows_the_unit_of_its_column():
    shown = {column: header for column, header in COLUMNS.items() if _suffix(column)}
    assert set(shown) >= {"step_time_s", "mfu_pct", "peak_gib", "spare_gib", "bubble_pct",
                          "exposed_comm_s", "cost_per_million_tokens_usd", "tokens_per_s",
                          "tokens_per_s_per_gpu"}  # fmt: skip
    for column, header in shown.items():
        assert UNITS[_suffix(column)] in header, f"{column} is shown as {header!r}"


def test_a_row_becomes_the_layout_it_ranks(ranked):
    row = display(ranked).iloc[0]
    layout = layout_of(row, LayoutInputs(sequence_parallel=False))
    assert (layout.tp, layout.pp, layout.dp) == (row["tp"], row["pp"], row["dp"])
    assert layout.micro_batch_size == row["mbs"] and layout.schedule == row["schedule"]
    assert layout.sequence_parallel is False  # kept from the current layout
    assert layout.dp * layout.tp * layout.pp * layout.cp == 8


def test_a_row_label_names_its_rank_and_degrees(ranked):
    row = display(ranked).iloc[0]
    text = label(row)
    assert text.startswith("#1 ") and f"ZeRO-{row['zero']}" in text and "recompute" in text


WORKED = {
    "step_time_s": (12.3456, "12.346 s", "+12.346 s"),
    "tokens_per_s": (1234567.8, "1,234,568", "+1,234,568"),
    "mfu": (0.4213, "42.1%", "+42.1 pts"),  # a difference of shares is in points
    "peak_bytes": (1.5 * GiB, "1.5 GiB", "+1.5 GiB"),
    "exposed_comm_s": (0.0426, "0.043 s", "+0.043 s"),
    "bubble_s": (1.0, "1.000 s", "+1.000 s"),
    "compute_s": (-0.25, "-0.250 s", "-0.250 s"),
}
"""Per compared column: a value, as shown, and as a signed difference (worked by hand)."""


@pytest.mark.parametrize(("name", "column", "fmt"), COMPARED)
def test_compared_quantities_format_with_their_unit_and_sign(name, column, fmt):
    value, plain, signed = WORKED[column]
    assert fmt(value) == plain
    assert fmt(value, signed=True) == signed
