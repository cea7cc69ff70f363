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
  prefill mixed into each step (``sustained_decodes``).
- ``decode`` (a disaggregated decode pool): ``batch_per_gpu`` x GPUs sequences over the decode
  step at a KV length of ``prompt_len``.
- ``prefill`` (a disaggregated prefill pool): ``tokens_per_gpu`` prompt tokens per GPU a step,
  over the step of ``explorer.serving.latency.EngineStep`` with the prompt's mean keys.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from explorer.memory.serving import MemoryAssumptions, ServingLayout
from explorer.presets import load_gpu, load_model
from explorer.serving import ServingAssumptions, estimate_serving
from explorer.serving.assumptions import GraphSizes
from explorer.serving.latency import EngineStep
from explorer.specs import ClusterSpec, ServingWorkload

RUNS_PATH = Path(__file__).resolve().parents[1] / "validation" / "serving_runs.toml"
GPUS_PER_NODE = 8
MAX_BATCH = 8192
"""Most sequences a step at maximum load. Source: TensorRT-LLM's perf-overview options
capture CUDA graphs for batches up to 8192, so the KV cache, not the batch, is the cap."""

ENGINE_MEMORY = {"TensorRT-LLM": MemoryAssumptions(kv_free_memory_fraction=0.9)}
"""How each engine sizes its KV cache, where it differs from vLLM's default rule. Source:
TensorRT-LLM ``KvCacheConfig.free_gpu_memory_fraction``, 0.9 of the memory free after the
model loads (perf-overview.md names 0.90 the default; some of its runs used 0.95, which ones
it does not say, so the default stands)."""

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
            most = estimate_serving(model, cluster, layout, workload, a).max_concurrency
            concurrency = min(most, MAX_BATCH)
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
