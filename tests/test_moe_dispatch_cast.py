"""The routed experts' FP8 input cast: once per token before an FP8 dispatch, on every top-k
copy after a BF16 one (the comm model's CommAssumptions.fp8_dispatch sets both)."""

from __future__ import annotations

from dataclasses import replace

from explorer.compute import ComputeContext, pass_times, stage_work
from explorer.compute.kernels import expert_gemms, gemm_times
from explorer.estimate import DEFAULT_ESTIMATE_ASSUMPTIONS, estimate
from explorer.presets import load_cluster, load_gpu, load_model
from explorer.specs import Layout, TrainingWorkload

QWEN3 = load_model("qwen3-235b-a22b")
B200 = load_gpu("b200")
LAYOUT = Layout(dp=8, ep=8)
FP8 = TrainingWorkload(seq_len=4096, global_batch_size=64, precision="fp8-mixed")


def test_a_bf16_dispatch_casts_all_top_k_copies() -> None:
    # EP8, 4096 tokens, top-8 over 128 experts: 16 local experts of 2048 rows, h = 4096; the
    # up projection's input: 2048 x 4096 x 16 = 134,217,728 elements after a BF16 dispatch,
    # an eighth (16,777,216) when the tokens were cast once before an FP8 one
    for fp8, elements in ((False, 134_217_728), (True, 16_777_216)):
        up = expert_gemms(QWEN3, LAYOUT, tokens=4096, fp8_dispatch=fp8)[1]
        _, times = gemm_times((up,), "fp8", B200, B200.hbm_bytes_per_s * 0.8)
        assert times.cast_forward == elements


def test_the_estimate_follows_the_comm_models_dispatch_format() -> None:
    work = stage_work(QWEN3, tuple(range(4)), 4096, False, False)
    ctx = ComputeContext(model=QWEN3, gpu=B200, layout=LAYOUT, workload=FP8)
    bf16, fp8 = pass_times(work, ctx), pass_times(work, replace(ctx, fp8_dispatch=True))
    assert bf16.forward_s > fp8.forward_s  # seven more casts of each token's copies
    assert bf16.backward_input_s == fp8.backward_input_s  # the gradients' casts: unchanged
    cluster = load_cluster("dgx-b200", 1)
    base = DEFAULT_ESTIMATE_ASSUMPTIONS
    fast = replace(base, comm=replace(base.comm, fp8_dispatch=True))
    plain = estimate(QWEN3, cluster, Layout(dp=8, ep=8, pp=1), FP8, base)
    quick = estimate(QWEN3, cluster, Layout(dp=8, ep=8, pp=1), FP8, fast)
    assert quick.stages[0].compute.forward_s < plain.stages[0].compute.forward_s
