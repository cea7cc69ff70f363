"""Transformer Engine's comm-GEMM overlap (explorer.comm.tp_overlap): hand-worked GEMMs of the
GPT-3 175B NeMo 24.07 row with its published userbuffers config, and the default left alone."""

from __future__ import annotations

from dataclasses import replace
from typing import get_args

import pytest

from explorer.comm import CommAssumptions
from explorer.comm import tp_overlap as ub
from explorer.comm.collectives import LinkEfficiency, collective_s
from explorer.comm.userbuffers import UB_CONFIGS, UbConfigName, UbGemm
from explorer.compute import ComputeContext
from explorer.compute.passes import linear_s
from explorer.estimate import estimate
from explorer.estimate.stages import stage_context
from explorer.published_runs import compare, load_published_runs, scenario

GPT3 = "nemo-24.07-h100-gpt3-175b-128gpu"
H100_FP8_PEAK = 1978.9e12  # presets/gpus/h100-sxm.toml (datasheet, dense)
H100_FP8_CEILING = 0.70878 * 0.9726  # MAMF FP8 best shape x TE training-shape share (preset)
NVLINK4_BUSBW = 450e9 * 0.822  # NVLink 4 line rate x NCCL's large-message share (nvlink4.toml)
SIMPLE = (8.4e-6, 3.4e-6)  # NCCL Simple protocol on NVLink: base and per-step latency


def _run(run_id: str):  # type: ignore[no-untyped-def]
    return next(r for r in load_published_runs().run if r.id == run_id)


def _tp_calls(run_id: str, comm: CommAssumptions | None = None, overlap: bool = True):  # type: ignore[no-untyped-def]
    s = scenario(_run(run_id), tp_comm_overlap=overlap)
    a = s.assumptions if comm is None else replace(s.assumptions, comm=comm)
    result = estimate(s.model, s.cluster, s.layout, s.workload, a)
    stage = result.stages[1]
    return {c.what: c for c in stage.collectives if c.axis == "tp"}, s, a, stage


def test_gpt3_fc1_ring_exchange_worked_by_hand() -> None:
    """fc1_fprop of GPT-3 175B on H100 (TP4, seq 2048, mbs 1; ub_cfg_h100_h12288_tp4_mbs2_
    seqlen2048: ring exchange): 4 chunks of 512 rows x 12288 (4h / 4) x 12288, each at the FP8
    ceiling; 3 FP8 messages of 512 x 12288 bytes. At a tenth of NVLink's bandwidth each message
    (Simple protocol) outlasts its chunk: 3 x (c - g) exposed per layer, no GEMM time added
    (the whole GEMM runs at the same ceiling)."""
    base, s, _, stage = _tp_calls(GPT3)
    slow = replace(s.assumptions.comm, links=LinkEfficiency(scale_up=0.1))
    calls, _, _, _ = _tp_calls(GPT3, slow)
    layers = len(stage.layers)
    assert layers == 12  # 96 layers over PP8 x VP6
    g = 2 * 512 * 12288 * 12288 / (H100_FP8_PEAK * H100_FP8_CEILING)
    c = SIMPLE[0] + SIMPLE[1] + 512 * 12288 * 1 / (NVLINK4_BUSBW * 0.1)
    assert g == pytest.approx(113.3e-6, rel=1e-3)
    assert c == pytest.approx(181.9e-6, rel=1e-3)
    fc1 = calls["fc1_fprop (userbuffers)"]
    assert fc1.count == layers
    assert fc1.gemm_s == pytest.approx(0.0, abs=1e-12)
    assert fc1.exposed_s == pytest.approx(layers * 3 * (c - g), rel=1e-6)
    assert fc1.time_s == pytest.approx(layers * 3 * c, rel=1e-6)
    # at NVLink's full rate each 6.3 MB message (28.8 us) hides behind its 113 us chunk
    assert base["fc1_fprop (userbuffers)"].exposed_s == pytest.approx(0.0, abs=1e-12)


def test_gpt3_proj_pipeline_reduce_scatter_formula() -> None:
    """proj_fprop (pipeline, 24 SMs, 4 splits, set_sm_margin, fp8_buf): each 512-row chunk of
    512 x 12288 x 3072 runs on 108 of the 132 SMs; the FP8 reduce-scatter of each chunk hides
    behind the next chunk, the last one's is exposed: c + 3 max(0, c - g) + (4 g - G)."""
    calls, s, a, stage = _tp_calls(GPT3)
    ctx = stage_context(s.model, s.cluster, s.layout, s.workload, a)
    comp = ComputeContext(
        model=s.model, gpu=s.cluster.gpu, layout=s.layout, workload=s.workload,
        assumptions=a.compute,
    )  # fmt: skip
    c = collective_s("reduce-scatter", 512 * 12288 * 1, ctx.groups["tp"], a.comm.links)
    g = linear_s(comp, 512, 12288, 3072, 24)
    whole = linear_s(comp, 2048, 12288, 3072)
    assert g > whole / 4  # fewer SMs and a smaller chunk: slower than a quarter
    proj = calls["proj_fprop (userbuffers)"]
    per_layer = c + 3 * max(0.0, c - g) + (4 * g - whole)
    assert proj.exposed_s == pytest.approx(len(stage.layers) * per_layer, rel=1e-9)
    assert proj.gemm_s == pytest.approx(len(stage.layers) * (4 * g - whole), rel=1e-9)


def test_held_sms_slow_a_ceiling_gemm_by_their_share() -> None:
    """A GEMM at the FP8 ceiling on 108 of the H100's 132 SMs takes 132 / 108 as long."""
    s = scenario(_run(GPT3), tp_comm_overlap=True)
    comp = ComputeContext(
        model=s.model, gpu=s.cluster.gpu, layout=s.layout, workload=s.workload,
        assumptions=s.assumptions.compute,
    )  # fmt: skip
    whole = linear_s(comp, 2048, 12288, 12288)
    assert whole == pytest.approx(
        2 * 2048 * 12288 * 12288 / (H100_FP8_PEAK * H100_FP8_CEILING), rel=1e-9
    )
    assert linear_s(comp, 2048, 12288, 12288, 24) == pytest.approx(whole * 132 / 108, rel=1e-9)


def test_bulk_beside_its_gemm_worked_by_hand(monkeypatch: pytest.MonkeyPatch) -> None:
    """Bulk: the GEMM runs on the SMs the collective leaves while it runs. GEMM 3 ms alone,
    4 ms on the SMs left; a 1 ms collective: 1 + (1 - 1/4) x 3 = 3.25 ms, 0.25 added, nothing
    exposed; with set_sm_margin 4 ms throughout (1 added); a 5 ms collective: 1 ms exposed."""
    monkeypatch.setattr(ub, "linear_s", lambda comp, m, n, k, held=0: 4e-3 if held else 3e-3)
    ctx = _tp_calls(GPT3)[1]
    stage_ctx = stage_context(ctx.model, ctx.cluster, ctx.layout, ctx.workload, ctx.assumptions)
    for comm, margin, exposed, added in (
        (1e-3, False, 0.0, 0.25e-3), (1e-3, True, 0.0, 1e-3), (5e-3, False, 1e-3, 1e-3),
    ):  # fmt: skip
        monkeypatch.setattr(ub, "collective_s", lambda *a, _c=comm: _c)
        f = ub.bulk(stage_ctx, None, (1, 1, 1), UbGemm("bulk", 8, set_sm_margin=margin),  # type: ignore[arg-type]
                    "all-gather", 1.0)  # fmt: skip
        assert (f.comm_s, f.exposed_s) == (pytest.approx(comm), pytest.approx(exposed))
        assert f.gemm_s == pytest.approx(added)


def test_overlap_hides_most_of_the_tp_time() -> None:
    """The GPT-3 row's TP collectives: exposed with overlap well under the exposed default."""
    on = sum(c.exposed_s for c in _tp_calls(GPT3)[0].values())
    off = sum(c.exposed_s for c in _tp_calls(GPT3, overlap=False)[0].values())
    assert 0 < on < 0.25 * off


def test_without_overlap_nothing_changes() -> None:
    """Runs that did not publish the overlap (torchtitan's TP8, NeMo's TP2 rows whose config is
    not known) come out the same either way, and the default table times no run with it."""
    for run_id in ("torchtitan-2412-h100-llama31-70b-fsdp32-tp8", "nemo-24.07-h100-gpt3-20b"):
        run = _run(run_id)
        assert not run.tp_comm_overlap
        assert compare(run, True)["error"] == compare(run, False)["error"]
    gpt3 = _run(GPT3)
    assert compare(gpt3)["error"] == compare(gpt3, False)["error"]
    assert compare(gpt3, True)["error"] > compare(gpt3, False)["error"]
    assert "TP comm-GEMM overlap" in compare(gpt3)["unmodelled"]
    assert scenario(gpt3).assumptions.comm.tp_comm_overlap == ""


def test_configs_and_refusal() -> None:
    """Every published row's config is known; an unknown name is one sentence."""
    assert set(get_args(UbConfigName)) == {"", *UB_CONFIGS}
    for run in load_published_runs().run:
        assert not run.tp_comm_overlap or run.tp_comm_overlap in UB_CONFIGS
    with pytest.raises(ValueError, match="userbuffers config"):
        CommAssumptions(tp_comm_overlap="ub_cfg_nope")
    gpt3 = UB_CONFIGS["ub_cfg_h100_h12288_tp4_mbs2_seqlen2048"]
    assert gpt3.proj_fprop == UbGemm("pipeline", 24, 4, True, fp8_buf=True)
    assert gpt3.fc2_fprop.method == "ring" and gpt3.qkv_wgrad == UbGemm("bulk", 4)


def test_without_sequence_parallelism_the_overlap_changes_nothing() -> None:
    """The sidebar disables comm.tp_comm_overlap without SP (explorer.ui.help_text): the core
    fuses only the sequence-parallel collectives, so the step is the same with it named."""
    s = scenario(_run(GPT3), tp_comm_overlap=True)
    named = s.assumptions
    plain = replace(named, comm=replace(named.comm, tp_comm_overlap=""))
    no_sp = replace(s.layout, sequence_parallel=False)

    def step(layout, a):  # type: ignore[no-untyped-def]
        return estimate(s.model, s.cluster, layout, s.workload, a).step_time_s

    assert step(no_sp, named) == step(no_sp, plain)
    assert step(s.layout, named) != step(s.layout, plain)  # with SP it does change the step
