"""Published serving runs against the serving estimator (``python -m validation.serving``
prints them; explorer.trust and the Validation page read them from here).

Reads ``validation/serving_runs.toml`` (every figure from the source named in its row), runs
the estimator on each run's model, GPUs, layout, precision and lengths with its default
assumptions (nothing set per run or per table), and prints the estimate, the error and the
summary (mean |error| and the worst), bad rows included.

How a run is estimated, by its ``phase``:
- ``throughput`` (the engine at maximum load, as trtllm-bench throughput): the estimate of
  ``explorer.serving.estimate_serving`` at the most sequences the KV cache holds at prompt +
  output tokens each (``max_concurrency``), capped at ``MAX_BATCH``; the token budget caps the
  prefill mixed into each step (``sustained_decodes``). A TensorRT-LLM run takes trtllm-bench's
  own max_batch_size and max_num_tokens (``trtllm_bench_settings``) with prompts admitted
  whole, as trtllm-bench leaves chunked prefill off.
- ``decode`` (a disaggregated decode pool): ``batch_per_gpu`` x GPUs sequences over the decode
  step at a KV length of ``prompt_len``.
- ``prefill`` (a disaggregated prefill pool): ``tokens_per_gpu`` prompt tokens per GPU a step,
  over the step of ``explorer.serving.latency.EngineStep`` with the prompt's mean keys.
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from explorer.counting import param_counts
from explorer.memory.serving import MemoryAssumptions, ServingLayout
from explorer.presets import load_gpu, load_model
from explorer.serving import ServingAssumptions, estimate_serving
from explorer.serving.assumptions import GraphSizes
from explorer.serving.latency import EngineStep
from explorer.specs import ClusterSpec, ModelSpec, ServingWorkload

RUNS_PATH = Path(__file__).resolve().parents[1] / "validation" / "serving_runs.toml"
GPUS_PER_NODE = 8
MAX_BATCH = 8192
"""Most sequences a step at maximum load for an engine without its own rule (a TensorRT-LLM
run takes trtllm-bench's, ``trtllm_bench_settings``). Source: TensorRT-LLM's perf-overview
options capture CUDA graphs for batches up to 8192, so the KV cache, not the batch, is the
cap."""

ENGINE_MEMORY = {"TensorRT-LLM": MemoryAssumptions(kv_free_memory_fraction=0.9)}
"""How each engine sizes its KV cache, where it differs from vLLM's default rule. Source:
TensorRT-LLM ``KvCacheConfig.free_gpu_memory_fraction``, 0.9 of the memory free after the
model loads (perf-overview.md names 0.90 the default; some of its runs used 0.95, which ones
it does not say, so the default stands)."""

TRTLLM_BENCH_BATCH_CAP = 4096
"""Most sequences trtllm-bench's heuristic lets a replica schedule (divided over pipeline
stages). Source: TensorRT-LLM tensorrt_llm/bench/build/tuning.py, ``finetune_setting``
(the total batch is capped at 4096 "to avoid decoder buffer size becoming too large")."""
TRTLLM_BENCH_TOKEN_CAP = 32768
"""Most tokens a step trtllm-bench's heuristic allows. Source: the same ``finetune_setting``."""
TRTLLM_BENCH_KV_FRACTION = 0.9
"""Share of the memory left after the weights that trtllm-bench's estimate gives the KV cache.
Source: trtllm-bench throughput's ``--kv_cache_free_gpu_mem_fraction`` default, 0.90 (the
perf-overview names it the default)."""
TRTLLM_BENCH_BYTES = {"bf16": 2.0, "fp8": 1.0, "nvfp4": 0.5}
"""Bytes per weight and per KV element in trtllm-bench's memory estimate (other formats count
2). Source: tuning.py ``BYTES_PER_ELEM``."""


def trtllm_bench_settings(
    model: ModelSpec, gpu_memory_bytes: float, tp: int, pp: int, workload: ServingWorkload
) -> tuple[int, int]:
    """(max_batch_size, max_num_tokens) that ``trtllm-bench throughput`` picks when a run sets
    neither, as the perf-overview runs do, with chunked prefill off (its default).

    Source: TensorRT-LLM tensorrt_llm/bench/build/tuning.py ``calc_engine_setting`` and
    ``finetune_setting``, tensorrt_llm/bench/benchmark/utils/general.py ``get_settings``: the
    KV cache gets ``kv_cache_free_gpu_mem_fraction`` (0.90 by default) of the tp x pp GPUs'
    memory less the weights (parameters x bytes per element), a token taking 2 x layers x
    max(tp, KV heads) x head size x KV bytes; the requests that holds at prompt + output
    tokens, capped at 4096 and divided over pp, rounded up (to 32 below 256, at least 64; to
    128 below 1024; else to 256) is max_batch_size; that batch x (1 + prompt / output),
    capped at 32768, rounded up (to 256 below 4096, at least 2048; to 512 below 8192; else
    to 1024) is max_num_tokens, raised to the longest prompt + max_batch_size without
    chunked prefill. ``tp`` is trtllm-bench's ``--tp`` (with attention data parallel, every
    GPU of the replica).
    """
    weight_bytes = TRTLLM_BENCH_BYTES.get(workload.weights_dtype, 2.0)
    kv_bytes = TRTLLM_BENCH_BYTES.get(workload.kv_dtype, 2.0)
    fraction = TRTLLM_BENCH_KV_FRACTION
    layers = sum(model.holds_kv(i) for i in range(model.num_hidden_layers))
    per_token = 2 * layers * max(tp, model.kv_heads) * model.head_size * kv_bytes
    free = gpu_memory_bytes * tp * pp - param_counts(model).total * weight_bytes
    requests = max(0.0, free * fraction) / (per_token * (workload.prompt_len + workload.output_len))
    batch = min(requests, TRTLLM_BENCH_BATCH_CAP) / pp
    if batch < 256:
        max_batch = max(64, 32 * math.ceil(batch / 32))
    elif batch < 1024:
        max_batch = 128 * math.ceil(batch / 128)
    else:
        max_batch = 256 * math.ceil(batch / 256)
    tokens = min(batch * (1 + workload.prompt_len / workload.output_len), TRTLLM_BENCH_TOKEN_CAP)
    if tokens < 4096:
        max_tokens = max(2048, 256 * math.ceil(tokens / 256))
    elif tokens < 8192:
        max_tokens = 512 * math.ceil(tokens / 512)
    else:
        max_tokens = 1024 * math.ceil(tokens / 1024)
    return max_batch, max(max_tokens, workload.prompt_len + max_batch)


Phase = Literal["throughput", "decode", "prefill"]
REQUIRED = {
    "id": str, "source": str, "engine": str, "version": str, "model": str, "gpu": str,
    "num_gpus": int, "tp": int, "pp": int, "ep": int, "replicas": int,
    "redundant_experts": int, "weights_dtype": str, "kv_dtype": str, "phase": str,
    "prompt_len": int, "output_len": int, "measured_tokens_per_s": int | float,
    "measured_per": str,
}  # fmt: skip
PHASE_FIELD = {"throughput": None, "decode": "batch_per_gpu", "prefill": "tokens_per_gpu"}


@dataclass(frozen=True, slots=True)
class RunCheck:
    """One published run beside its estimate (tokens/s per GPU)."""

    id: str
    engine: str
    phase: str
    measured_per_gpu: float
    estimated_per_gpu: float | None
    """None when the estimator finds the run's layout does not fit."""
    why: str
    """What the estimate ran at (or why there is none)."""

    @property
    def error(self) -> float | None:
        """Estimate / measured - 1 (positive: the estimate is higher)."""
        if self.estimated_per_gpu is None:
            return None
        return self.estimated_per_gpu / self.measured_per_gpu - 1


def load_runs(path: Path = RUNS_PATH) -> list[dict[str, Any]]:
    """The runs of ``path``, each checked for its fields, units and layout (ValueError)."""
    with path.open("rb") as handle:
        runs = tomllib.load(handle)["run"]
    seen: set[str] = set()
    for run in runs:
        _check_run(run, seen)
    return runs


def _check_run(run: dict[str, Any], seen: set[str]) -> None:
    name = run.get("id", "?")
    for key, kind in REQUIRED.items():
        if not isinstance(run.get(key), kind):
            raise ValueError(f"run {name}: {key} missing or not {kind}")
    if name in seen:
        raise ValueError(f"run {name} appears twice")
    seen.add(name)
    if run["phase"] not in PHASE_FIELD:
        raise ValueError(f"run {name}: phase {run['phase']!r} is not one of {list(PHASE_FIELD)}")
    extra = PHASE_FIELD[run["phase"]]
    if extra and not isinstance(run.get(extra), int):
        raise ValueError(f"run {name}: a {run['phase']} run needs {extra}")
    if not isinstance(run.get("experts_parallel_in_tp", False), bool):
        raise ValueError(f"run {name}: experts_parallel_in_tp must be true or false")
    if run["measured_per"] not in ("total", "node"):
        raise ValueError(f"run {name}: measured_per must be total or node")
    gpus = run["tp"] * run["pp"] * run["ep"] * run["replicas"]
    if gpus != run["num_gpus"]:
        raise ValueError(f"run {name}: the layout has {gpus} GPUs, the run {run['num_gpus']}")


def _measured_per_gpu(run: dict[str, Any]) -> float:
    per = run["num_gpus"] if run["measured_per"] == "total" else GPUS_PER_NODE
    return float(run["measured_tokens_per_s"]) / per


def _case(run: dict[str, Any]) -> tuple[Any, ClusterSpec, ServingLayout, ServingWorkload]:
    model = load_model(run["model"])
    nodes = -(-run["num_gpus"] // GPUS_PER_NODE)
    cluster = ClusterSpec(gpu=load_gpu(run["gpu"]), num_nodes=nodes)
    layout = ServingLayout(
        tp=run["tp"], pp=run["pp"], ep=run["ep"], replicas=run["replicas"],
        redundant_experts=run["redundant_experts"],
    )  # fmt: skip
    workload = ServingWorkload(
        prompt_len=run["prompt_len"], output_len=run["output_len"], concurrency=1,
        weights_dtype=run["weights_dtype"], kv_dtype=run["kv_dtype"],
    )  # fmt: skip
    return model, cluster, layout, workload


def estimate_run(run: dict[str, Any], a: ServingAssumptions | None = None) -> RunCheck:
    """The estimator's tokens/s per GPU for one published run (the module docstring's rules)."""
    a = a or engine_assumptions(run["engine"])
    if run.get("experts_parallel_in_tp", False):  # the run's experts are EP over its TP ranks
        a = replace(a, experts_parallel_in_tp=True)
    model, cluster, layout, workload = _case(run)
    gpus = layout.world_size
    estimate: float | None
    if run["phase"] == "prefill":
        tokens = run["tokens_per_gpu"]
        step = EngineStep(model, cluster, layout, workload, a)
        seconds = step.seconds(0, tokens * layout.gpus_per_replica, 0.0, run["prompt_len"] / 2)
        estimate, why = (
            tokens / seconds,
            f"{tokens:,} prompt tokens a GPU in {seconds * 1e3:.1f} ms",
        )
    else:
        if run["phase"] == "decode":
            concurrency = run["batch_per_gpu"] * layout.gpus_per_replica
        else:
            cap = MAX_BATCH
            if run["engine"] == "TensorRT-LLM":  # trtllm-bench's own batch and token budget
                a, cap = _trtllm_bench(a, model, cluster, layout, workload)
            most = estimate_serving(model, cluster, layout, workload, a).max_concurrency
            concurrency = min(most, cap)
        if concurrency == 0:
            return RunCheck(run["id"], run["engine"], run["phase"], _measured_per_gpu(run), None,
                            "no sequence fits the KV cache")  # fmt: skip
        loaded = estimate_serving(model, cluster, layout, _with(workload, concurrency), a)
        if not loaded.fits or loaded.itl_s is None or loaded.tokens_per_s is None:
            return RunCheck(run["id"], run["engine"], run["phase"], _measured_per_gpu(run), None,
                            f"does not fit: {loaded.reason}")  # fmt: skip
        if run["phase"] == "decode":  # decodes alone: no prompt mixed into the step
            step = EngineStep(model, cluster, layout, workload, a)
            seconds = step.seconds(concurrency, 0, float(run["prompt_len"]), 0.0)
            rate = concurrency * layout.replicas / seconds
            why = f"{concurrency:,} sequences a replica, a step of {seconds * 1e3:.1f} ms"
        else:
            rate = loaded.tokens_per_s
            why = f"{concurrency:,} sequences a replica, ITL {loaded.itl_s * 1e3:.1f} ms"
        estimate = rate / gpus
    return RunCheck(run["id"], run["engine"], run["phase"], _measured_per_gpu(run), estimate, why)


ENGINE_GRAPHS: dict[str, GraphSizes] = {"TensorRT-LLM": "tensorrt-llm"}
"""Which CUDA-graph batch sizes each engine's runs captured, where they differ from vLLM's
(explorer.serving.assumptions.CUDA_GRAPH_SIZES; TensorRT-LLM: its perf-overview options)."""


def engine_assumptions(engine: str) -> ServingAssumptions:
    """The default assumptions with the engine's own memory rule (``ENGINE_MEMORY``) and CUDA
    graph sizes (``ENGINE_GRAPHS``)."""
    a = ServingAssumptions()
    if (memory := ENGINE_MEMORY.get(engine)) is not None:
        a = replace(a, memory=memory)
    if (sizes := ENGINE_GRAPHS.get(engine)) is not None:
        a = replace(a, cuda_graph_sizes=sizes)
    return a


def _trtllm_bench(
    a: ServingAssumptions,
    model: ModelSpec,
    cluster: ClusterSpec,
    layout: ServingLayout,
    workload: ServingWorkload,
) -> tuple[ServingAssumptions, int]:
    """The assumptions and the most sequences per replica of a ``trtllm-bench throughput`` run
    (``trtllm_bench_settings``): its max_num_tokens is the token budget, prompts enter whole,
    max_batch_size caps each attention-DP rank's batch (each rank schedules its own), and
    the CUDA graphs stop at min(max_batch_size, max_num_tokens)."""
    tp = layout.tp * layout.ep  # trtllm-bench --tp spans the attention-DP ranks too
    batch, tokens = trtllm_bench_settings(model, cluster.gpu.memory_bytes, tp, layout.pp, workload)
    memory = replace(a.memory, prefill_chunk_tokens=tokens)
    graphs = min(batch, tokens)  # the largest decode batch it captures (``cuda_graph_max``)
    a = replace(a, memory=memory, chunked_prefill=False, cuda_graph_max=graphs)
    return a, batch * layout.pp * layout.ep


def _with(workload: ServingWorkload, concurrency: int) -> ServingWorkload:
    return replace(workload, concurrency=concurrency)


def summary(checks: list[RunCheck]) -> tuple[float, RunCheck, int]:
    """(mean |error|, the worst run, runs without an estimate) over the runs estimated."""
    scored = [c for c in checks if c.error is not None]
    if not scored:
        raise ValueError("no run could be estimated")
    mean = sum(abs(c.error or 0.0) for c in scored) / len(scored)
    worst = max(scored, key=lambda c: abs(c.error or 0.0))
    return mean, worst, len(checks) - len(scored)
