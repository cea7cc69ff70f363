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
    assert all("(" in header for header in COLUMNS.values() if header.endswith(")"))


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


@pytest.mark.parametrize(("name", "column", "fmt"), COMPARED)
def test_compared_quantities_format_with_their_unit_and_sign(name, column, fmt):
    assert fmt(1.0, signed=True).startswith("+")
    assert fmt(1.0) != fmt(1.0, signed=True)
