"""Which inputs do nothing for a layout and model, and why (no streamlit)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from explorer.scenario import LayoutInputs
from explorer.ui.help_text import HELP, inert_reason, with_reason

DEFAULT = LayoutInputs()  # DP 2, TP 8, PP 4, CP 1, EP 1, ZeRO 1, selective, 1F1B


@pytest.mark.parametrize(
    ("name", "changes", "is_moe", "off"),
    [
        ("ep", {}, False, True),  # a dense model has no experts to spread
        ("ep", {}, True, False),
        ("ep", {"ep": 8}, False, False),  # a value to undo stays editable
        ("schedule", {"pp": 1}, None, True),
        ("schedule", {}, None, False),
        ("virtual", {}, None, True),  # 1F1B runs one chunk per stage
        ("virtual", {"schedule": "interleaved"}, None, False),
        ("virtual", {"virtual_stages": 2}, None, False),  # the contradiction stays fixable
        ("sp", {"tp": 1}, None, True),
        ("sp", {}, None, False),
        ("memory.zero3_prefetch_layers", {}, None, True),
        ("memory.zero3_prefetch_layers", {"zero": 3}, None, False),
        ("comm.cp_comm", {}, None, True),
        ("comm.cp_comm", {"cp": 2}, None, False),
        ("comm.ep_overlap", {"ep": 8}, True, False),
        ("comm.ep_overlap", {}, True, True),  # EP 1: no all-to-all
        ("comm.dualpipe_ep_overlap", {"ep": 8}, True, True),  # 1F1B: nothing overlapped
        ("comm.dualpipe_ep_overlap", {"ep": 8, "schedule": "dualpipe"}, True, False),
        ("memory.moe_imbalance", {}, False, True),
        ("memory.offload_overlap", {}, None, True),
        ("memory.offload_overlap", {"offload_layers": 2}, None, False),
        ("rc_modules", {"recompute": "full"}, None, True),
        ("rc_modules", {}, None, False),
        ("rc_method", {}, None, True),
        ("rc_method", {"recompute": "full"}, None, False),
        ("comm.tp_comm_overlap", {}, None, False),
        ("comm.tp_comm_overlap", {"tp": 1}, None, True),
        ("comm.tp_comm_overlap", {"sequence_parallel": False}, None, True),
        ("dp", {}, None, False),
    ],
)
def test_an_input_is_off_exactly_when_it_changes_nothing(name, changes, is_moe, off):
    reason = inert_reason(name, replace(DEFAULT, **changes), is_moe=is_moe)
    assert (reason is not None) == off, reason


def test_fp8_kernel_choices_are_off_outside_the_fp8_precision():
    assert inert_reason("compute.fp8_recipe", DEFAULT, precision="bf16-mixed")
    assert inert_reason("compute.fp8_recipe", DEFAULT, precision="fp8-mixed") is None


def test_every_layout_and_workload_input_has_a_definition_and_a_reason_joins_it():
    for name in ("seq", "mbs", "gbs", "gpu", "nodes", "dp", "tp", "pp", "cp", "ep", "schedule"):
        assert len(HELP[name]) > 30
    assert with_reason("Definition.", "Off: why.") == "Definition. Off: why."
    assert with_reason("Definition.", None) == "Definition."
