"""Published end-to-end training runs (``validation/published_runs.toml``) against the estimate.

Pure: reads the stored table, builds each run's scenario from the existing core (presets, specs,
``explorer.estimate.estimate``) and returns pandas DataFrames; no streamlit. Nothing is fitted:
every run uses the default assumptions, changed only where the run's source says how it ran
(framework, forced-balanced routing, its dispatcher, its GPU's memory). What the core cannot
express is named per run, one sentence each, and the nearest expressible scenario is estimated.

Error convention: (estimate - published) / published of tokens/s per GPU, so positive means the
estimate is too optimistic. A run published in TFLOP/s per GPU is converted with the core's model
FLOPs per token (``Estimate.model_flops_per_token``); the run's ``formula`` says so.
"""

from explorer.published_runs.compare import (
    compare,
    layout_text,
    published_table,
    published_tokens_per_s_per_gpu,
    summary,
)
from explorer.published_runs.scenario import Scenario, scenario
from explorer.published_runs.table import (
    GENERATIONS,
    RUNS_PATH,
    PublishedRun,
    PublishedTable,
    Source,
    load_published_runs,
)

__all__ = [
    "GENERATIONS",
    "RUNS_PATH",
    "PublishedRun",
    "PublishedTable",
    "Scenario",
    "Source",
    "compare",
    "layout_text",
    "load_published_runs",
    "published_table",
    "published_tokens_per_s_per_gpu",
    "scenario",
    "summary",
]
