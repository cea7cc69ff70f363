"""A serving step as engines run it: kernels in sequence, CUDA graphs, two-batch overlap,
windowed decode reads, and TensorRT-LLM's KV memory rule."""

from __future__ import annotations

from dataclasses import replace

import pytest

from explorer.memory.serving import MemoryAssumptions, ServingLayout, serving_memory, stage_shapes
from explorer.presets import load_cluster, load_gpu, load_model
from explorer.published_serving import ENGINE_GRAPHS, engine_assumptions
from explorer.serving import ServingAssumptions
from explorer.serving.assumptions import graph_batch
from explorer.serving.latency import EngineStep, _Case, _kernel_step, _mixed_stage_step
from explorer.specs import ClusterSpec, ServingWorkload

LLAMA_8B = load_model("llama-3.1-8b")
H200 = ClusterSpec(gpu=load_gpu("h200"))
A = ServingAssumptions()
FP8 = ServingWorkload(prompt_len=1000, output_len=2, concurrency=256, weights_dtype="fp8",
                      kv_dtype="fp8")  # fmt: skip


def _step(model, cluster, layout, workload, a, decode, context, prefill=0.0, keys=0.0):
    case = _Case(model, cluster, layout, workload, a)
    shape = stage_shapes(model, layout, workload.weights_dtype, workload.kv_dtype, a.memory)[0]
    return _kernel_step(case, shape, decode, context, prefill, keys, 1.0)


def test_gemms_and_attention_run_one_after_another_each_at_its_own_bound():
    # Llama 3.1 8B, fp8, 256 sequences at 1000 keys on one H200 (hand count):
    # GEMMs: 2 x 6.98e9 linear weights (FP8) + 2 x 4096 x 128256 LM head (BF16) FLOPs a token,
    #   x 256 rows at the kernel model's shares (0.53-0.73 of the FP8 peak, 0.77 of BF16's for
    #   the head) = 3.11 ms, above their 8.03e9-byte read and 0.99e9 bytes of activations
    # attention: 256 x 1000 keys x 65,536 fp8 KV bytes = 16.8e9 bytes / (4.8e12 x 2826 / 3352)
    #   = 4.15 ms; norms, residuals and SwiGLU: 256 x 32 x 2 x (10 x 4096 + 3 x 14336) bytes =
    #   1.376e9 / (0.8 x 4.8e12) = 0.358 ms, one after another
    step = _step(LLAMA_8B, H200, ServingLayout(), FP8, A, 256.0, 1000.0)
    assert step.kernels_s == pytest.approx(3.11e-3 + 4.15e-3 + 0.358e-3, rel=0.01)
    # the old roofline let the reads hide the GEMMs' compute: (9.02e9 + 1.376e9) / 3.84e12 +
    # 4.15 ms = 6.85 ms
    assert max(step.compute_s, step.memory_s) == pytest.approx(6.85e-3, rel=0.01)
    assert step.total_s == step.kernels_s


def test_a_cuda_graph_pads_the_batch_to_its_captured_size():
    trt = replace(A, cuda_graph_sizes=ENGINE_GRAPHS["TensorRT-LLM"])
    assert graph_batch(trt, 129) == 256 and graph_batch(trt, 8192) == 8192
    assert graph_batch(A, 201) == 208 and graph_batch(A, 257) is None  # vLLM: 8 x 1..32
    assert graph_batch(replace(A, cuda_graphs=False), 8) is None
    # 129 rows eager already take two 128-row tiles (DeepGEMM's block_m 128 above 64 rows),
    # so the 256-row graph's GEMMs cost the same main loop (the same tiles; within 5%, not
    # less); the padded rows cost the activations and the memory-bound kernels 256 / 129 of
    # their bytes
    graphed = _step(LLAMA_8B, H200, ServingLayout(), FP8, trt, 129.0, 10.0)
    eager = _step(LLAMA_8B, H200, ServingLayout(), FP8, replace(trt, launch_s=0.0,
                  cuda_graphs=False), 129.0, 10.0)  # fmt: skip
    assert graphed.compute_s == pytest.approx(eager.compute_s, rel=0.05)
    assert graphed.compute_s >= eager.compute_s
    assert graphed.kernels_s > eager.kernels_s


def test_an_eager_step_lasts_at_least_its_host_launches():
    # GPT-2 (12 blocks): one sequence reads 0.25 GB in 0.07 ms; eager, 12 x 14 launches x 4 us
    gpt2 = load_model("gpt2")
    w = ServingWorkload(prompt_len=100, output_len=2, concurrency=1)
    eager = _step(gpt2, H200, ServingLayout(), w, replace(A, cuda_graphs=False), 1.0, 100.0)
    graphed = _step(gpt2, H200, ServingLayout(), w, A, 1.0, 100.0)
    assert eager.kernels_s == pytest.approx(12 * 14 * 4e-6, rel=1e-12)
    # graphed, the step is the GPU's own work: 0.36 ms, most of it the fixed 5.3825 us of each
    # small GEMM kernel (KernelFigures.kernel_fixed_s), well under the eager host launches
    assert graphed.kernels_s < 0.6 * eager.kernels_s
    assert graphed.kernels_s == pytest.approx(graphed.compute_s, rel=0.01)


def test_a_sliding_window_decode_reads_only_its_window():
    # Mistral 7B keeps a 4096-token window on every block: at 8192 keys it reads half the KV
    mistral = load_model("mistral-7b")
    full = replace(mistral, sliding_window=None)
    w = ServingWorkload(prompt_len=8192, output_len=2, concurrency=8)
    kv = {m.sliding_window: _step(m, H200, ServingLayout(), w, A, 8.0, 8192.0).memory_s
          for m in (mistral, full)}  # fmt: skip
    shape = stage_shapes(full, ServingLayout(), "bf16", "bf16", A.memory)[0]
    # the full cache: 8 sequences x 8192 keys at the decode attention kernel's bandwidth
    full_kv = 8 * 8192 * shape.kv_bytes_per_token
    full_kv_s = full_kv / (A.decode_attention_hbm_efficiency * H200.gpu.hbm_bytes_per_s)
    assert kv[None] - kv[4096] == pytest.approx(full_kv_s / 2, rel=1e-3)


def test_two_batch_overlap_hides_the_smaller_of_compute_and_exchange():
    qwen, layout = load_model("qwen3-235b-a22b"), ServingLayout(ep=8)
    cluster = load_cluster("hgx-h100", 1)
    w = ServingWorkload(prompt_len=2048, output_len=2048, concurrency=1024, weights_dtype="fp8")
    tbo = replace(A, two_batch_overlap=True)
    case, plain_case = _Case(qwen, cluster, layout, w, tbo), _Case(qwen, cluster, layout, w, A)
    shape = stage_shapes(qwen, layout, "fp8", "bf16", A.memory)[0]
    # prefill, compute-bound: two halves of 2048 tokens; each half's exchange 5 ms
    half = _kernel_step(case, shape, 0.0, 0.0, 2048.0, 1024.0, 1.0).total_s
    step = _mixed_stage_step(case, shape, 0.0, 0.0, 4096.0, 1024.0, half_comm_s=5e-3)
    # max(2 x busy, 2 x 5 ms) + min(busy, 5 ms) / 94 blocks (the first half's block alone)
    assert step.total_s == pytest.approx(max(2 * half, 10e-3) + min(half, 5e-3) / 94, rel=1e-12)
    plain = _mixed_stage_step(plain_case, shape, 0.0, 0.0, 4096.0, 1024.0, comm_s=10e-3)
    # most of the 10 ms exchange hidden (6.83 ms); each half's GEMMs pay their per-wave and
    # per-kernel fixed work again
    assert step.total_s < plain.total_s - 6.5e-3
    # memory-bound decode: each half reads every expert again, so overlap costs more than
    # the 1 ms it hides
    d_half = _kernel_step(case, shape, 64.0, 3072.0, 0.0, 0.0, 1.0).total_s
    d_step = _mixed_stage_step(case, shape, 128.0, 3072.0, 0.0, 0.0, half_comm_s=0.5e-3)
    d_plain = _mixed_stage_step(plain_case, shape, 128.0, 3072.0, 0.0, 0.0, comm_s=1e-3)
    assert d_step.total_s == pytest.approx(2 * d_half + 0.5e-3 / 94, rel=1e-12)
    assert d_step.total_s > d_plain.total_s
    # without expert parallelism there is nothing to overlap: the option changes nothing
    dense = [EngineStep(LLAMA_8B, H200, ServingLayout(tp=1), FP8, a).seconds(64, 0, 500.0, 0.0)
             for a in (A, tbo)]  # fmt: skip
    assert dense[0] == dense[1]


def test_tensorrt_llm_gives_the_kv_cache_09_of_the_memory_left_after_loading():
    w = replace(FP8, concurrency=1)
    memory = MemoryAssumptions(kv_free_memory_fraction=0.9)
    m = serving_memory(LLAMA_8B, H200.gpu, ServingLayout(), w, memory)
    fixed = m.weights + m.communication + m.runtime + m.activations
    logits = 128256 * 4.0  # one fp32 logit row, per sequence (not before the KV pool)
    assert m.headroom == pytest.approx(0.1 * (H200.gpu.memory_bytes - fixed + logits), rel=1e-12)
    assert engine_assumptions("TensorRT-LLM").memory.kv_free_memory_fraction == 0.9
    assert engine_assumptions("SGLang") == A


def test_host_time_per_step_adds_to_every_step_and_draft_pass():
    # 2 ms of host time a step: a plain step and a speculative one (k = 2, MTP) each grow by
    # it once per pass; the planner's per-token step agrees with the scheduler's step
    from explorer.serving.speculative import Speculation

    slow = replace(A, step_overhead_s=2e-3)
    lay = ServingLayout(tp=8)
    w = ServingWorkload(prompt_len=1000, output_len=500, concurrency=32, weights_dtype="fp8")
    model = load_model("deepseek-v3")
    cluster = load_cluster("hgx-h200", 1)
    base, plus = (EngineStep(model, cluster, lay, w, a).seconds(32, 0, 1250.0, 0.0)
                  for a in (A, slow))  # fmt: skip
    assert plus - base == pytest.approx(2e-3, rel=1e-9)
    mtp = Speculation(kind="mtp", draft_tokens=2, acceptance=0.5)
    base, plus = (EngineStep(model, cluster, lay, w, a, mtp).seconds(32, 0, 1250.0, 0.0)
                  for a in (A, slow))  # fmt: skip
    assert plus - base == pytest.approx(3 * 2e-3, rel=1e-9)


def test_attention_runs_at_the_kv_formats_peak_not_the_weights():
    # FP8 weights with a BF16 KV cache: attention at BF16's 989.4 TFLOP/s; FP8 KV at 1978.9
    # times FA3's FP8-over-BF16 share (1.2 PFLOP/s against 740 TFLOP/s on H100): 1200 / 740
    from explorer.serving.latency import _compute_parts, _stage_flops

    model = load_model("deepseek-v3")
    f = _stage_flops(model, tuple(range(61)), True)
    times = {}
    for kv in ("bf16", "fp8"):
        w = ServingWorkload(prompt_len=4096, output_len=2, concurrency=1, weights_dtype="fp8",
                            kv_dtype=kv)  # fmt: skip
        case = _Case(model, H200, ServingLayout(), w, A)
        times[kv] = _compute_parts(case, f, 4096.0, 2048.0, True, 4096.0)
    assert times["bf16"].attention / times["fp8"].attention == pytest.approx(1200 / 740)
    assert times["bf16"].gemms == times["fp8"].gemms  # the GEMMs follow the weights
