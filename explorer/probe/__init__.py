"""Measure this machine's GPUs (or CPU) with PyTorch, and use the measurements as calibration.

``python -m explorer probe --out FILE.toml [--quick]`` (``explorer.probe.run``) writes a probe
file; ``--calibration FILE`` on estimate, search, scaling, serve and report, and the app's
upload, read it (``explorer.probe.schema``) and turn it into overrides of the named assumptions
(``explorer.probe.derive``, the one place that does). Only ``kernels``, ``collectives`` and
``run`` import torch, and only inside functions: reading a file never loads it.

The file (TOML, ``schema = "parallelism-explorer-probe"``, ``schema_version = 1``)::

    schema, schema_version, kind ("cuda" | "cpu"), device_name, torch_version, cuda_version,
    date (ISO 8601, UTC), quick, world_size, local_world_size (ranks per node), backend
    ("" | "nccl" | "gloo"), elapsed_s, skipped (one sentence per measurement not made)
    [timing]        method ("cuda-events" | "perf-counter-synchronize"), warmup, repeats,
                    statistic ("median")
    [[gemm]]        dtype (fp32 | tf32 | bf16 | fp16 | fp8), m, n, k, median_s, flops_per_s
    [[attention]]   dtype, batch, heads, seq_len, head_dim, causal, forward_s, backward_s,
                    forward_flops_per_s, backward_flops_per_s (FlashAttention-2's counts)
    [[memory]]      kernel (copy | triad), size_bytes (moved per call), median_s, bytes_per_s
    [[collective]]  kind (all-reduce | all-gather | reduce-scatter | all-to-all), size_bytes
                    (nccl-tests' size), num_ranks, median_s, algbw_bytes_per_s,
                    busbw_bytes_per_s (nccl-tests' bus factors)

Unknown keys, negative or non-finite numbers, another schema or version, or a file over 2 MB
are refused with one sentence (``CalibrationError``, a ValueError).

For models that read measured points directly (a per-(m, n, k, dtype) GEMM model, a
bus-bandwidth-by-size comm model), ``Calibration`` keeps every point:
``gemm_points(dtype)`` (sorted by the core's GEMM size), ``busbw_points(kind)`` and
``bandwidth_points(kernel)`` ((size_bytes, rate) sorted by size), ``attention``, and
``num_nodes`` (whether the collectives crossed nodes).
"""

from explorer.probe.derive import (
    CalibratedFigure,
    CalibratedFigures,
    check_device,
    serving_figures,
    training_figures,
)
from explorer.probe.schema import (
    Calibration,
    CalibrationError,
    load_calibration,
    parse_calibration,
    to_toml,
)

__all__ = [
    "CalibratedFigure",
    "CalibratedFigures",
    "Calibration",
    "CalibrationError",
    "check_device",
    "load_calibration",
    "parse_calibration",
    "serving_figures",
    "to_toml",
    "training_figures",
]
