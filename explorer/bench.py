"""Benchmarks of the core's speed: ``python -m explorer.bench [--repeat N] [--only NAME]``.

Each case is timed with ``time.perf_counter``: the first run (cold: the core's module caches
emptied before it, ``clear_core_caches``, as in a fresh process with the presets loaded,
whatever earlier cases filled; as after a slider move to a new shape) and the best of N runs
(warm). The
presets the cases read are loaded before any is timed (``load_inputs``; they are cached per
process, so only a first run would pay for parsing them): a search's first run times the
search alone, as the app runs one on a model and cluster it has loaded already. The
process pins itself to one CPU core where the platform allows it. Searches report the layouts
they considered per second. Cases:
- the mesh search for Llama 3.1 405B on 16,384 H100s (8 K tokens, 2,048 sequences per step,
  the Llama 3 pre-training batch: Dubey et al. 2024, arXiv:2407.21783, sec. 3.4);
- the mesh search for DeepSeek-V3 on 2,048 H800s (4 K tokens, 15,360 sequences, FP8: DeepSeek-V3
  report, arXiv:2412.19437, sec. 3 and 4.2);
- one estimate (Llama 3.1 405B, TP8 PP16 DP128);
- one schedule simulation (interleaved 1F1B, P = 16, M = 256, V = 4);
- training memory of Llama 3.1 70B and DeepSeek-V3;
- a serving plan of DeepSeek-V3 (FP8) on 16 H200s (every layout, the frontier over its loads)
  and the same with ``serve --frontier``'s wider sweep and two-batch overlap on and off;
- the mixed-cluster search (even and speed split, pipeline across types) of Llama 3.1 70B and
  405B on H100 + A100 and DeepSeek-V3 on H800 + A100, a straggler search on one type, and the
  FlexSP plan of a long-tail length profile (``MIXED_CASES``, ``FLEXSP_CASES``).

A search's time is also given as a ratio to a numpy stand-in timed in the same run
(``standin_s``): the machine's speed at array work on as many layouts, so figures from a shared,
noisy machine compare across runs; and as the process's own CPU time (``time.process_time``),
which leaves out the time it waited for a core other work held.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from explorer.estimate import estimate
from explorer.memory import training_memory
from explorer.presets import load_cluster, load_model
from explorer.schedules import StageTimes, build_schedule, simulate
from explorer.search import search
from explorer.specs import Layout, Precision, TrainingWorkload

LLAMA_WORKLOAD = TrainingWorkload(seq_len=8192, global_batch_size=2048)
DEEPSEEK_WORKLOAD = TrainingWorkload(seq_len=4096, global_batch_size=15360, precision="fp8-mixed")


@dataclass(frozen=True, slots=True)
class Timing:
    """One case's timings, s, and the layouts a search considered."""

    name: str
    first_s: float
    best_s: float
    runs: int
    layouts: int = 0
    first_cpu_s: float = 0.0
    """CPU time of the first run (``time.process_time``: this process's own, without the time
    it waited for a core that other work on a shared machine held)."""
    best_cpu_s: float = 0.0
    """The least CPU time of the runs."""

    @property
    def layouts_per_s(self) -> float:
        return self.layouts / self.best_s if self.layouts else 0.0


def clear_core_caches() -> int:
    """Empty the functools caches of the core's modules (``explorer.*``; the presets' loaders
    and ``explorer.ui`` kept), so the next run is as cold as a fresh process's with its presets
    loaded, whatever earlier cases filled; returns how many were emptied."""
    emptied = 0
    for name, module in list(sys.modules.items()):
        if not name.startswith("explorer.") or name.startswith(("explorer.ui", "explorer.presets")):
            continue
        for value in list(vars(module).values()):
            clear = getattr(value, "cache_clear", None)
            if callable(clear) and getattr(value, "__module__", None) == name:
                clear()
                emptied += 1
    return emptied


def timed(name: str, run: Callable[[], int], repeat: int) -> Timing:
    """First and best-of-``repeat`` wall time of ``run`` (which returns layouts considered);
    the core's caches are emptied before the first (``clear_core_caches``)."""
    clear_core_caches()
    times, cpu, layouts = [], [], 0
    for _ in range(max(repeat, 1)):
        start, start_cpu = time.perf_counter(), time.process_time()
        layouts = run()
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return Timing(name, times[0], min(times), len(times), layouts, cpu[0], min(cpu))


def load_inputs() -> None:
    """Load the presets of the search, estimate and memory cases (cached per process)."""
    for model in ("llama-3.1-405b", "llama-3.1-70b", "deepseek-v3"):
        load_model(model)
    for cluster, nodes in (("hgx-h100", 2048), ("hgx-h100", 32), ("h800-deepseek", 256)):
        load_cluster(cluster, nodes)


def search_405b() -> int:
    cluster = load_cluster("hgx-h100", 2048)
    return search(load_model("llama-3.1-405b"), cluster, LLAMA_WORKLOAD).evaluated


def search_deepseek() -> int:
    cluster = load_cluster("h800-deepseek", 256)
    return search(load_model("deepseek-v3"), cluster, DEEPSEEK_WORKLOAD).evaluated


def one_estimate() -> int:
    layout = Layout(tp=8, pp=16, dp=128, zero=1, recompute="selective")
    estimate(load_model("llama-3.1-405b"), load_cluster("hgx-h100", 2048), layout, LLAMA_WORKLOAD)
    return 0


def one_simulation() -> int:
    times = StageTimes.uniform(16, forward_s=1.0, backward_s=1.0, weight_s=1.0)
    simulate(build_schedule("interleaved", 16, 256, 4), times)
    return 0


def memory_70b() -> int:
    layout = Layout(tp=8, pp=4, dp=8, zero=1, recompute="selective")
    training_memory(load_model("llama-3.1-70b"), load_cluster("hgx-h100", 32).gpu, layout,
                    LLAMA_WORKLOAD)  # fmt: skip
    return 0


def memory_671b() -> int:
    layout = Layout(tp=1, pp=16, dp=128, ep=64, zero=1, schedule="dualpipe", recompute="full")
    gpu = load_cluster("h800-deepseek", 256).gpu
    training_memory(load_model("deepseek-v3"), gpu, layout, DEEPSEEK_WORKLOAD)
    return 0


def _serving_plan(frontier: bool) -> int:
    from explorer.serving import plan_serving
    from explorer.serving.frontier import DEFAULT_CONCURRENCIES, FRONTIER_CONCURRENCIES
    from explorer.specs import ServingWorkload

    w = ServingWorkload(prompt_len=2048, output_len=1024, concurrency=64, weights_dtype="fp8")
    sweep = FRONTIER_CONCURRENCIES if frontier else DEFAULT_CONCURRENCIES
    plan = plan_serving(
        load_model("deepseek-v3"),
        load_cluster("hgx-h200", 2),
        16,
        w,
        concurrencies=sweep,
        overlap_options=(False, True) if frontier else None,
    )
    return len(plan.layouts)  # fmt: skip


def serving_plan() -> int:
    return _serving_plan(frontier=False)


def serving_frontier() -> int:
    return _serving_plan(frontier=True)


CASES: dict[str, tuple[Callable[[], int], int]] = {
    "search llama-3.1-405b, 16384 x H100": (search_405b, 5),
    "search deepseek-v3, 2048 x H800": (search_deepseek, 3),
    "estimate llama-3.1-405b TP8 PP16 DP128": (one_estimate, 20),
    "simulate interleaved P16 M256 V4": (one_simulation, 3),
    "training_memory llama-3.1-70b": (memory_70b, 20),
    "training_memory deepseek-v3 (671B)": (memory_671b, 20),
    "serving plan deepseek-v3, 16 x H200": (serving_plan, 5),
    "serving frontier deepseek-v3, 16 x H200": (serving_frontier, 3),
}
"""Name -> (case, default repeats)."""


STANDIN_REPEAT = 5


def standin_s(layouts: int) -> float:
    """Best of ``STANDIN_REPEAT`` wall times of a numpy stand-in over ``layouts`` layouts, s:
    per layout, a step time from its degrees (a compute term over tp x pp x dp, a bubble
    (pp - 1) / m and a ring all-reduce term 2 (dp - 1) / dp), the minimum taken. A yardstick of
    the machine's array speed, not a model: it reads no preset."""
    rng = np.random.default_rng(0)
    tp, pp, dp = (2.0 ** rng.integers(0, 5, layouts) for _ in range(3))
    m = 2.0 ** rng.integers(3, 9, layouts)
    best = float("inf")
    for _ in range(STANDIN_REPEAT):
        start = time.perf_counter()
        step = 1.0 / (tp * pp * dp) * (1 + (pp - 1) / m) + 2 * (dp - 1) / dp * 1e-3 / tp
        float(step.min())
        best = min(best, time.perf_counter() - start)
    return best


def pin_one_core() -> str:
    """Pin this process to one CPU core where the platform allows it; say which."""
    if not hasattr(os, "sched_setaffinity"):
        return "not pinned (no sched_setaffinity)"
    core = min(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {core})
    return f"pinned to CPU {core}"


def render(timings: list[Timing], pinned: str) -> str:
    lines = [f"explorer.bench ({pinned}); first run cold, best of N warm", ""]
    lines.append(f"{'case':<42} {'first':>10} {'best':>10} {'N':>3} {'layouts/s':>12}")
    for t in timings:
        rate = f"{t.layouts_per_s:,.0f}" if t.layouts else "-"
        lines.append(
            f"{t.name:<42} {t.first_s * 1e3:>8.1f}ms {t.best_s * 1e3:>8.1f}ms {t.runs:>3} "
            f"{rate:>12}" + (f"  ({t.layouts:,} layouts)" if t.layouts else "")
        )
    searches = [t for t in timings if t.layouts]
    if searches:
        lines += ["", "ratio to the numpy stand-in over as many layouts (same run):"]
    for t in searches:
        yardstick = standin_s(t.layouts)
        lines.append(
            f"{t.name:<42} stand-in {yardstick * 1e3:.2f}ms: first {t.first_s / yardstick:,.0f}x,"
            f" best {t.best_s / yardstick:,.0f}x, first/best {t.first_s / t.best_s:.2f}"
        )
    if searches:  # a shared core stretches wall time; the process's own CPU time much less
        lines += ["", "CPU time of this process (time.process_time), the searches:"]
    for t in searches:
        lines.append(
            f"{t.name:<42} first {t.first_cpu_s * 1e3:.1f}ms, best {t.best_cpu_s * 1e3:.1f}ms, "
            f"first/best {t.first_cpu_s / t.best_cpu_s:.2f}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m explorer.bench", description=__doc__)
    parser.add_argument("--repeat", type=int, help="runs per case (default: per case)")
    parser.add_argument("--only", help="run the cases whose name contains this text")
    args = parser.parse_args(argv)
    pinned = pin_one_core()
    load_inputs()
    chosen = {k: v for k, v in CASES.items() if args.only is None or args.only in k}
    timings = [timed(name, run, args.repeat or n) for name, (run, n) in chosen.items()]
    print(render(timings, pinned))
    return 0


# ---------------------------------------------------------------------------------------------
# Mixed clusters, a straggler and a sequence-length distribution (issue 17's speed line).
from functools import partial  # noqa: E402  (the cases below are appended to CASES)

# Cluster sizes: half the nodes of each model's case above on H100 (H800) and half on A100,
# the H100 + A100 mix the README's --mixed-groups example names.

MIXED_CASES = {
    "llama-3.1-70b": ((("hgx-h100", 32), ("dgx-a100", 32)), LLAMA_WORKLOAD),
    "llama-3.1-405b": ((("hgx-h100", 128), ("dgx-a100", 128)), LLAMA_WORKLOAD),
    "deepseek-v3": ((("h800-deepseek", 128), ("dgx-a100", 128)), DEEPSEEK_WORKLOAD),
}
"""Model -> (mixed cluster as (cluster preset, nodes) groups, workload)."""


def _mixed(model: str, mode: str) -> int:
    from explorer.hetero_search import mixed_search, pipeline_search

    spec, workload = MIXED_CASES[model]
    groups = tuple(load_cluster(name, nodes) for name, nodes in spec)
    if mode == "pp":
        found = pipeline_search(load_model(model), groups, workload)
    else:
        found = mixed_search(load_model(model), groups, workload, split=mode)  # type: ignore[arg-type]
    return found.evaluated


def _straggler(model: str) -> int:
    from explorer.hetero_search import straggler_search
    from explorer.straggler import Straggler

    spec, workload = MIXED_CASES[model]
    cluster = load_cluster(spec[0][0], 2 * spec[0][1])
    slow = Straggler(slowdown=0.2, where="pp-stage", stage=1)  # a node 20% slower
    return straggler_search(load_model(model), cluster, workload, slow).evaluated


FLEXSP_CASES: dict[str, tuple[str, int, int, Precision, int]] = {
    "llama-3.1-70b": ("hgx-h100", 64, 8, "bf16-mixed", 131072),
    "llama-3.1-405b": ("hgx-h100", 128, 8, "bf16-mixed", 131072),
    "deepseek-v3": ("h800-deepseek", 128, 1, "fp8-mixed", 32768),
}
"""Model -> (cluster preset, nodes, TP, precision, longest length of the long-tail profile)."""


def _flexsp(model: str) -> int:
    from explorer.flexsp import (
        FlexSetting,
        batch_for_tokens,
        compare_flexsp,
        long_tail,
        sequence_cost,
        step_tail_s,
    )

    preset, nodes, tp, precision, longest = FLEXSP_CASES[model]
    cluster = load_cluster(preset, nodes)
    ep = 8 if load_model(model).n_routed_experts else 1
    base = Layout(tp=tp, ep=ep, zero=3, recompute="full")
    setting = FlexSetting(model=load_model(model), cluster=cluster, base=base,
                          world_size=cluster.world_size, precision=precision)  # fmt: skip
    sequence_cost.cache_clear()  # each run plans from scratch, as a new profile does
    step_tail_s.cache_clear()
    profile = long_tail(longest, 1.0)  # the CLI's default family, skew 1
    return compare_flexsp(setting, profile, batch_for_tokens(profile, 16 * longest)).plans_tried


def _gpu(preset: str) -> str:
    return preset.split("-")[-1].upper().replace("DEEPSEEK", "H800")


for _model, (_spec, _) in MIXED_CASES.items():
    _label = f"{8 * sum(n for _, n in _spec)} " + "/".join(_gpu(c) for c, _ in _spec)
    for _mode in ("even", "speed", "pp"):
        CASES[f"mixed {_mode} {_model}, {_label}"] = (partial(_mixed, _model, _mode), 3)
    CASES[f"straggler {_model}, {16 * _spec[0][1]} {_gpu(_spec[0][0])}"] = (
        partial(_straggler, _model), 3)  # fmt: skip
for _model, (_preset, _nodes, *_rest) in FLEXSP_CASES.items():
    CASES[f"flexsp {_model}, {8 * _nodes} {_gpu(_preset)}"] = (partial(_flexsp, _model), 3)


if __name__ == "__main__":
    raise SystemExit(main())
