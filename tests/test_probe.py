"""``python -m explorer probe`` and ``--calibration``: the probe on the CPU writes a file that
loads back; a calibration file moves the estimate the way its measurements say; a malformed or
foreign file gets one sentence and exit 2; two gloo ranks measure finite bus bandwidths."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from explorer.cli import main
from explorer.compute.assumptions import DEFAULT_COMPUTE_ASSUMPTIONS
from explorer.compute.gemm import gemm_efficiency
from explorer.presets import load_gpu
from explorer.probe.derive import device_matches, fit_saturating
from explorer.probe.schema import (
    SCHEMA,
    AttentionPoint,
    BandwidthPoint,
    Calibration,
    CollectivePoint,
    GemmPoint,
    Timing,
    load_calibration,
    parse_calibration,
    to_toml,
)
from explorer.probe.sweep import QUICK, attention_forward_flops, bus_factor

H100_BF16_FLOPS_PER_S = 989.4e12  # presets/gpus/h100-sxm.toml
H100_NVLINK_BYTES_PER_S = 450e9
LLAMA_70B = ["--model", "llama-3.1-70b", "--gpu", "h100-sxm", "--seq", "4096", "--gbs", "64"]
LAYOUT = ["--tp", "8", "--pp", "4", "--dp", "2"]
FIT_TOLERANCE = 0.02
"""The fit's grid has 40 steps per decade: x_half within about 3%, e_max within 2%."""


def h100_file(
    path: Path, *, gemm_share: float = 1.0, busbw_bytes_per_s: float | None = None
) -> Path:
    """A probe file as an H100 would write it: bf16 GEMMs at ``gemm_share`` of the core's
    kernel model for the H100 preset, and one all-reduce on 8 ranks of one node when a busbw is
    given."""
    gemm = []
    gpu = load_gpu("h100-sxm")
    bandwidth = gpu.hbm_bytes_per_s * DEFAULT_COMPUTE_ASSUMPTIONS.hbm_efficiency
    for width in (1024, 4096, 8192, 16384):
        for m in (16, 128, 1024, 4096, 16384):
            share = gemm_share * gemm_efficiency(m, width, width, "bf16", gpu, bandwidth)
            rate = share * H100_BF16_FLOPS_PER_S
            seconds = 2 * m * width * width / rate
            gemm.append(
                GemmPoint(dtype="bf16", m=m, n=width, k=width, median_s=seconds, flops_per_s=rate)
            )
    collective = []
    if busbw_bytes_per_s:
        size = 2.0**30
        algbw = busbw_bytes_per_s / bus_factor("all-reduce", 8)
        collective.append(
            CollectivePoint(
                kind="all-reduce",
                size_bytes=size,
                num_ranks=8,
                median_s=size / algbw,
                algbw_bytes_per_s=algbw,
                busbw_bytes_per_s=busbw_bytes_per_s,
            )
        )
    calibration = Calibration(
        schema=SCHEMA,
        schema_version=1,
        kind="cuda",
        device_name="NVIDIA H100 80GB HBM3",
        torch_version="2.5.1+cu124",
        date="2026-12-01T00:00:00+00:00",
        world_size=8,
        local_world_size=8,
        backend="nccl",
        gemm=tuple(gemm),
        collective=tuple(collective),
        timing=Timing(method="cuda-events", warmup=3, repeats=10),
    )
    path.write_text(to_toml(calibration))
    return path


def run_json(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict:
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def fails_with_one_sentence(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.endswith(".\n") and "Traceback" not in err
    return err


# ----------------------------------------------------------------------------- the probe


@pytest.fixture(scope="module")
def quick_file(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    path = tmp_path_factory.mktemp("probe") / "cpu.toml"
    assert main(["probe", "--out", str(path), "--quick", "--json"]) == 0
    return path, {}


def test_the_quick_probe_on_the_cpu_writes_a_file_that_loads_back(quick_file):
    path, _ = quick_file
    calibration = load_calibration(path)
    assert calibration.kind == "cpu" and calibration.quick
    assert calibration.timing.method == "perf-counter-synchronize"
    widths, tokens = QUICK.gemm_widths, QUICK.gemm_tokens
    for dtype in QUICK.gemm_dtypes:
        shapes = {(p.m, p.n) for p in calibration.gemm_points(dtype)}
        assert shapes == {(m, w) for m in tokens for w in widths}
    assert {p.kernel for p in calibration.memory} == {"copy", "triad"}
    assert len(calibration.attention) == 1 and calibration.attention[0].causal
    assert any(s.startswith("fp8:") for s in calibration.skipped)  # said, not silently missing
    assert any(s.startswith("collectives:") for s in calibration.skipped)
    assert parse_calibration(to_toml(calibration).encode()) == calibration


def test_the_core_reads_a_probe_file_without_importing_torch(quick_file):
    path, _ = quick_file
    code = (
        "import sys; from explorer.probe.schema import load_calibration; "
        "import explorer.probe.derive, explorer.cli.estimate; "
        f"load_calibration({str(path)!r}); print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_a_cpu_file_is_refused_for_a_gpu_preset_unless_forced(quick_file, capsys):
    path, _ = quick_file
    argv = ["estimate", *LLAMA_70B, *LAYOUT, "--calibration", str(path)]
    err = fails_with_one_sentence(argv, capsys)
    assert "h100-sxm" in err and "--calibration-force" in err
    forced = run_json([*argv, "--calibration-force"], capsys)
    assert {f["key"] for f in forced["calibration"]["figures"]} >= {"compute.gemm_efficiency_scale"}


# ------------------------------------------------------------------- pure parts, by hand


def test_bus_factors_are_nccl_tests_definitions():
    # nccl-tests doc/PERFORMANCE.md: 8 ranks, all-reduce 2 x 7/8 = 1.75, the others 7/8
    assert bus_factor("all-reduce", 8) == pytest.approx(1.75)
    assert bus_factor("all-gather", 8) == pytest.approx(0.875)
    assert bus_factor("reduce-scatter", 2) == pytest.approx(0.5)
    assert bus_factor("all-to-all", 4) == pytest.approx(0.75)


def test_causal_attention_forward_flops_by_hand():
    # 1 x 16 heads x 4096^2 x 128 x 4 / 2 = 68.7 GFLOP (FlashAttention-2 sec. 4.1 count)
    assert attention_forward_flops(1, 16, 4096, 128, True) == pytest.approx(68_719_476_736)


def test_the_fit_recovers_a_saturating_curve_it_was_made_from():
    sizes = [2.0**p for p in range(12, 30)]
    shares = [0.62 * x / (x + 3e6) for x in sizes]
    e_max, half, rms = fit_saturating(sizes, shares)
    assert e_max == pytest.approx(0.62, rel=FIT_TOLERANCE)
    assert half == pytest.approx(3e6, rel=0.03)
    assert rms < 1e-3


@pytest.mark.parametrize(
    ("device", "gpu", "matches"),
    [
        ("NVIDIA H100 80GB HBM3", "h100-sxm", True),
        ("NVIDIA GB200", "b200", False),  # B200 is not a word of GB200
        ("NVIDIA GB200", "gb200", True),
        ("NVIDIA A100-SXM4-80GB", "a100-80g", True),
        ("AMD Instinct MI300X", "mi300x", True),
        ("CPU AMD EPYC", "h200", False),
    ],
)
def test_a_device_name_matches_only_its_own_preset(device, gpu, matches):
    assert device_matches(device, gpu) is matches


# --------------------------------------------------------- the estimate moves as it should


def test_a_file_matching_the_kernel_model_leaves_the_step_time_unchanged(tmp_path, capsys):
    plain = run_json(["estimate", *LLAMA_70B, *LAYOUT], capsys)
    path = h100_file(tmp_path / "same.toml")
    same = run_json(["estimate", *LLAMA_70B, *LAYOUT, "--calibration", str(path)], capsys)
    assert same["step_time_s"] == pytest.approx(plain["step_time_s"], rel=0.01)
    figures = {f["key"]: f["value"] for f in same["calibration"]["figures"]}
    assert figures["compute.gemm_efficiency_scale"] == pytest.approx(1.0, rel=1e-9)


def test_halved_gemm_throughput_makes_the_step_longer(tmp_path, capsys):
    argv = ["estimate", *LLAMA_70B, *LAYOUT, "--calibration"]
    full = run_json([*argv, str(h100_file(tmp_path / "a.toml"))], capsys)
    half = run_json([*argv, str(h100_file(tmp_path / "b.toml", gemm_share=0.5))], capsys)
    compute_share = 1 - sum(full["exposed_comm_s"].values()) / full["step_time_s"]
    # GEMM time doubles; attention (its own kernel figures), memory-bound work and exposed
    # communication stay: the step grows, by at most the compute part (GEMMs are most of it)
    most = full["step_time_s"] * (1 + compute_share)
    assert full["step_time_s"] * (1 + compute_share / 2) < half["step_time_s"] < most
    assert half["mfu"] < full["mfu"]


def test_a_faster_link_makes_exposed_communication_shorter(tmp_path, capsys):
    argv = ["estimate", *LLAMA_70B, *LAYOUT, "--calibration"]
    slow_file = h100_file(tmp_path / "slow.toml", busbw_bytes_per_s=0.4 * H100_NVLINK_BYTES_PER_S)
    fast_file = h100_file(tmp_path / "fast.toml", busbw_bytes_per_s=0.9 * H100_NVLINK_BYTES_PER_S)
    slow = run_json([*argv, str(slow_file)], capsys)
    fast = run_json([*argv, str(fast_file)], capsys)
    links = {f["key"]: f["value"] for f in fast["calibration"]["figures"]}
    assert links["comm.links.scale_up"] == pytest.approx(0.9)
    tp_slow, tp_fast = (r["exposed_comm_by_axis_s"]["tp"] for r in (slow, fast))
    # at most the bandwidth ratio (latency terms stay), and mostly bandwidth-bound at 70B
    assert tp_slow * 0.4 / 0.9 <= tp_fast < 0.5 * tp_slow


def test_a_busbw_above_the_link_peak_is_capped_at_one_and_said(tmp_path, capsys):
    path = h100_file(tmp_path / "nvls.toml", busbw_bytes_per_s=480e9)  # NVLS beats 450 GB/s
    result = run_json(["estimate", *LLAMA_70B, *LAYOUT, "--calibration", str(path)], capsys)
    figures = {f["key"]: f["value"] for f in result["calibration"]["figures"]}
    assert figures["comm.links.scale_up"] == 1.0
    assert any("1.067" in note for note in result["calibration"]["notes"])  # 480 / 450


def test_attention_efficiency_counts_the_backward_as_the_core_does(tmp_path, capsys):
    # b 4, 16 heads, s 4096, d 128, causal: forward 4 b h s^2 d / 2 = 274.9 GFLOP; the core
    # counts forward + 2.5 x forward (FlashAttention recomputes the scores) = 962.1 GFLOP; at
    # half the 989.4 TFLOP/s peak: 1.945 ms
    forward_flops = 4 * 4 * 16 * 4096**2 * 128 / 2
    total_s = 3.5 * forward_flops / (0.5 * H100_BF16_FLOPS_PER_S)
    forward_s, backward_s = total_s / 3.5, total_s * 2.5 / 3.5
    point = AttentionPoint(
        dtype="bf16", batch=4, heads=16, seq_len=4096, head_dim=128, causal=True,
        forward_s=forward_s, backward_s=backward_s,
        forward_flops_per_s=forward_flops / forward_s,
        backward_flops_per_s=2.5 * forward_flops / backward_s,
    )  # fmt: skip
    calibration = load_calibration(h100_file(tmp_path / "h.toml"))
    path = tmp_path / "attention.toml"
    path.write_text(to_toml(calibration.model_copy(update={"attention": (point,)})))
    result = run_json(["estimate", *LLAMA_70B, *LAYOUT, "--calibration", str(path)], capsys)
    figures = {f["key"]: f["value"] for f in result["calibration"]["figures"]}
    assert figures["compute.attention_efficiency"] == pytest.approx(0.5)
    assert total_s == pytest.approx(1.945e-3, rel=1e-3)


def test_assume_wins_over_the_calibration_file(tmp_path, capsys):
    path = h100_file(tmp_path / "h.toml", gemm_share=0.5)
    argv = ["estimate", *LLAMA_70B, *LAYOUT, "--calibration", str(path)]
    both = run_json([*argv, "--assume", "compute.gemm_efficiency_scale=0.75"], capsys)
    assert both["step_assumptions"]["compute"]["gemm_efficiency_scale"] == 0.75


def test_search_scaling_serve_and_report_take_the_file(tmp_path, capsys):
    path = str(h100_file(tmp_path / "h.toml", busbw_bytes_per_s=300e9))
    search = [
        "search",
        "--model",
        "llama-3.1-8b",
        "--gpu",
        "h100-sxm",
        "--gpus",
        "8",
        "--seq",
        "4096",
        "--gbs",
        "32",
        "--top",
        "1",
        "--calibration",
        path,
    ]
    assert run_json(search, capsys)["calibration"]["figures"]
    scaling = [
        "scaling",
        "--model",
        "llama-3.1-8b",
        "--gpu",
        "h100-sxm",
        "--gpu-counts",
        "8",
        "--seq",
        "4096",
        "--gbs",
        "32",
        "--calibration",
        path,
    ]
    assert run_json(scaling, capsys)["calibration"]["figures"]
    serve = [
        "serve",
        "--model",
        "llama-3.1-8b",
        "--gpu",
        "h100-sxm",
        "--gpus",
        "8",
        "--prompt-len",
        "1024",
        "--output-len",
        "128",
        "--concurrency",
        "8",
        "--calibration",
        path,
    ]
    served = run_json(serve, capsys)
    assert served["assumptions"]["links"]["scale_up"] == pytest.approx(300e9 / 450e9)
    out = tmp_path / "r.json"
    report = [
        "report",
        *LLAMA_70B,
        "--gpus",
        "64",
        *LAYOUT,
        "--output",
        str(out),
        "--calibration",
        path,
    ]
    run_json(report, capsys)
    rows = json.loads(out.read_text())["results"]["calibration"]
    assert {r["assumption"] for r in rows} == {
        "compute.gemm_efficiency_scale",
        "comm.links.scale_up",
    }
    assert all(r["value"] is not None and r["measurement"] for r in rows)


def test_the_markdown_report_lists_each_calibrated_assumption(tmp_path, capsys):
    path = str(h100_file(tmp_path / "h.toml", gemm_share=0.5))
    out = tmp_path / "r.md"
    main(
        ["report", *LLAMA_70B, "--gpus", "64", *LAYOUT, "--output", str(out), "--calibration", path]
    )
    text = out.read_text()
    section = text[text.index("Measured on your cluster") :]
    # Markdown escapes the underscore of user-visible text (issue 15)
    assert r"compute.gemm\_efficiency\_scale" in section and "0.5" in section
    assert "median of measured / modelled" in section


# ------------------------------------------------------------------- malformed or foreign


def _write(tmp_path: Path, name: str, text: str | bytes) -> str:
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return str(path)


def _good_text(tmp_path: Path) -> str:
    return h100_file(tmp_path / "good.toml").read_text()


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (lambda t: "not = [toml", "not TOML"),
        (lambda t: b"\xff\xfe\x00", "not TOML"),
        (lambda t: Path("pyproject.toml").read_text(), "not a probe file"),
        (
            lambda t: _good_text(t).replace("schema_version = 1", "schema_version = 9"),
            "schema_version",
        ),
        (lambda t: _good_text(t).replace("flops_per_s = ", "flops_per_s = -", 1), "gemm.0.flops"),
        (lambda t: _good_text(t).replace("flops_per_s = ", "flops_per_s = inf #", 1), "gemm.0"),
        (lambda t: _good_text(t).replace('kind = "cuda"', 'kind = "tpu"'), "kind"),
        (lambda t: _good_text(t) + "\nextra_key = 1\n", "extra_key"),
        (lambda t: "x" * 2_000_001, "of at most 2,000,000 bytes"),
    ],
    ids=[
        "not-toml",
        "not-utf8",
        "foreign-toml",
        "future-version",
        "negative",
        "inf",
        "unknown-kind",
        "unknown-key",
        "too-large",
    ],
)
def test_a_malformed_or_foreign_file_gets_one_sentence(tmp_path, capsys, make, words):
    path = _write(tmp_path, "bad.toml", make(tmp_path))
    err = fails_with_one_sentence(["estimate", *LLAMA_70B, *LAYOUT, "--calibration", path], capsys)
    assert words in err


def test_a_missing_file_gets_one_sentence(tmp_path, capsys):
    missing = str(tmp_path / "none.toml")
    err = fails_with_one_sentence(
        [
            "serve",
            "--model",
            "llama-3.1-8b",
            "--gpu",
            "h100-sxm",
            "--gpus",
            "8",
            "--prompt-len",
            "128",
            "--output-len",
            "8",
            "--concurrency",
            "1",
            "--calibration",
            missing,
        ],
        capsys,
    )
    assert "cannot read" in err


# ------------------------------------------------------------------- collectives, 2 ranks


def _two_ranks(rank: int, init: str, out: str) -> None:
    import torch
    import torch.distributed as dist

    from explorer.probe.collectives import measure_collectives

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=2)
    skipped: list[str] = []
    points = measure_collectives(QUICK, torch.device("cpu"), skipped)
    if rank == 0:
        Path(out).write_text(
            json.dumps({"points": [p.model_dump() for p in points], "skipped": skipped})
        )
    dist.destroy_process_group()


def test_two_gloo_ranks_measure_finite_bus_bandwidth(tmp_path):
    import torch.multiprocessing as mp

    out = tmp_path / "points.json"
    init = f"file://{tmp_path / 'store'}"
    mp.spawn(_two_ranks, args=(init, str(out)), nprocs=2, join=True)
    result = json.loads(out.read_text())
    points = [CollectivePoint(**p) for p in result["points"]]
    measured = {p.kind for p in points}
    assert measured | {s.split(":")[0] for s in result["skipped"]} >= {
        "all-reduce",
        "all-gather",
        "reduce-scatter",
        "all-to-all",
    }
    assert "all-reduce" in measured
    for p in points:
        assert p.num_ranks == 2 and math.isfinite(p.busbw_bytes_per_s) and p.busbw_bytes_per_s > 0
        factor = 1.0 if p.kind == "all-reduce" else 0.5  # 2(n-1)/n and (n-1)/n at n = 2
        assert p.busbw_bytes_per_s == pytest.approx(factor * p.size_bytes / p.median_s)
    assert {p.size_bytes for p in points} == {float(s) for s in QUICK.collective_bytes}


def test_bandwidth_points_round_trip_through_the_file(tmp_path):
    point = BandwidthPoint(
        kernel="copy", size_bytes=2.0**31, median_s=1e-3, bytes_per_s=2.0**31 / 1e-3
    )
    calibration = load_calibration(h100_file(tmp_path / "h.toml"))
    with_memory = calibration.model_copy(update={"memory": (point,)})
    assert parse_calibration(to_toml(with_memory).encode()).bandwidth_points("copy") == (
        (2.0**31, 2.0**31 / 1e-3),
    )


# ------------------------------------------------------------------------------- the app


def _app():
    from streamlit.testing.v1 import AppTest

    app = Path(__file__).resolve().parents[1] / "app.py"
    at = AppTest.from_file(str(app), default_timeout=60)
    at.run()
    at.session_state["calibration_open"] = True  # the box draws its uploader only when open
    at.run()
    return at


def _uploader(at):
    return next(u for u in at.get("file_uploader") if u.label == "Probe file (TOML)")


def test_the_app_takes_a_calibration_upload_into_the_scenario_and_the_url(tmp_path):
    data = h100_file(tmp_path / "h.toml", gemm_share=0.5).read_bytes()
    at = _app()
    _uploader(at).set_value(("h100.toml", data, "application/toml")).run()
    assert not at.exception and not at.error
    overrides = dict(at.session_state["in_assume"])
    assert overrides["compute.gemm_efficiency_scale"] == pytest.approx(0.5, rel=1e-9)
    assert "compute.gemm_efficiency_scale" in dict(at.session_state["in_calib"])
    assert any("Set from the calibration file" in m.value for m in at.markdown)
    assert "calib" in at.query_params
    assert "compute.gemm_efficiency_scale" in at.query_params["assume"]
    at.button(key="calibration_remove").click().run()
    assert "compute.gemm_efficiency_scale" not in dict(at.session_state["in_assume"])


def test_the_app_says_one_sentence_for_a_foreign_file():
    at = _app()
    _uploader(at).set_value(("pyproject.toml", Path("pyproject.toml").read_bytes(), "text/plain"))
    at.run()
    assert not at.exception
    errors = [e.value for e in at.error]
    assert len(errors) == 1 and "not a probe file" in errors[0]
    assert "in_calib" not in at.session_state or not at.session_state["in_calib"]


def test_calibration_notes_survive_the_link_and_the_json_report():
    from explorer.scenario import Scenario, from_json, from_query, to_json, to_query

    scenario = Scenario(
        assumptions=(("compute.gemm_efficiency_scale", 0.41),),
        calibration=(("compute.gemm_efficiency_scale", "median of 24 bf16 GEMMs"),),
    )
    restored, messages = from_query(to_query(scenario))
    assert restored == scenario and not messages
    assert from_json(to_json(scenario)) == scenario
