"""Upper bounds on every size, count, rate and time a person can enter: one table, one place.

The specs (``explorer.specs``), the Hugging Face parser, the scenario (URL and JSON), the app's
widgets and the command line all take their bounds from here, so the same number is refused
the same way everywhere, with one sentence naming the field and the limit. The bounds lie far
beyond any model or cluster built so far (the largest published models have 126 layers, a
hidden size of 25,600, a vocabulary of 256K and 384 experts; the largest clusters about 10^5
GPUs), but they keep every computation of the core bounded in time and memory: with them a
parameter count stays below 2^60 (exact in a 64-bit integer) and every byte, FLOP and time
figure is a finite float.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from itertools import accumulate
from types import MappingProxyType
from typing import Final

MAX_GPUS: Final = 1 << 20
"""GPUs in one cluster or one layout (1,048,576)."""
MAX_LAYERS: Final = 1_000
"""Transformer blocks of one model."""
MAX_TOKENS: Final = 1 << 24
"""Tokens in one sequence, prompt or output (16,777,216)."""
MAX_SEQUENCES: Final = 1 << 24
"""Sequences in a batch, a micro-batch or a replica's concurrency (16,777,216)."""
MAX_BYTES_PER_S: Final = 1e15
"""A link or memory bandwidth, bytes/s (1 PB/s; the fastest HBM is 8e12 B/s)."""
MAX_PASS_S: Final = 1e6
"""One pass (forward, backward, weight, transfer) of a pipeline stage, s (about 11.6 days)."""
MAX_SCHEDULE_ACTIONS: Final = 1 << 19
"""Actions of one pipeline schedule built or simulated action by action (524,288: about 5 s and
1 GB); longer steps of 1F1B, ZB-H1 and DualPipe are extrapolated (explorer.schedules.periodic)."""
MAX_CONFIG_BYTES: Final = 1 << 20
"""Size of an uploaded or read config.json (1 MiB; published ones are under 10 KB)."""
MAX_RECIPE_BYTES: Final = 1 << 20
"""Size of a launch-settings file to import (1 MiB; published recipes are under 50 KB)."""
MAX_REPORT_BYTES: Final = 8 << 20
"""Size of a JSON report to restore (8 MiB; a report with a search is well under 1 MB)."""
MAX_JSON_DEPTH: Final = 64
"""Nesting of objects and lists in an uploaded JSON file (a report nests about 6 deep)."""
MAX_URL_VALUE_CHARS: Final = 4_096
"""Characters of one URL query value (the uploaded config has its own, larger bound)."""
MAX_URL_CONFIG_CHARS: Final = 200_000
"""Characters of the uploaded config.json kept, compacted, in the URL and the scenario."""
MAX_ASSUMPTION: Final = 1e15
"""Magnitude of a number given for a named assumption (fractions, bytes, seconds)."""
SEARCH_BUDGET_S: Final = 60.0
"""Wall time one mesh search may take before it stops with a sentence, s (searches of the
presets take 0.1 to 3 s)."""
SERVING_BUDGET_S: Final = 60.0
"""Wall time one serving plan may take before it stops with a sentence, s."""
SCALING_BUDGET_S: Final = 120.0
"""Wall time one scaling sweep (every GPU count's best layout) may take, s."""
MAX_QUEUED: Final = 4_000_000
"""Nodes a mesh search may hold in its queue (about 1 GB) before it stops with a sentence."""

LIMITS: Mapping[str, float] = MappingProxyType(
    {
        # ModelSpec (Hugging Face field names)
        "num_hidden_layers": MAX_LAYERS,
        "hidden_size": 1 << 17,
        "num_attention_heads": 1 << 14,
        "num_key_value_heads": 1 << 14,
        "head_dim": 1 << 14,
        "intermediate_size": 1 << 20,
        "vocab_size": 1 << 24,
        "max_position_embeddings": 1 << 27,
        "n_routed_experts": 1 << 12,
        "n_shared_experts": 1 << 8,
        "num_experts_per_tok": 1 << 12,
        "moe_intermediate_size": 1 << 18,
        "shared_expert_intermediate_size": 1 << 22,
        "first_k_dense_replace": MAX_LAYERS,
        "moe_layer_freq": MAX_LAYERS,
        "n_group": 1 << 12,
        "topk_group": 1 << 12,
        "q_lora_rank": 1 << 17,
        "kv_lora_rank": 1 << 17,
        "qk_rope_head_dim": 1 << 14,
        "qk_nope_head_dim": 1 << 14,
        "v_head_dim": 1 << 14,
        "num_nextn_predict_layers": 64,
        # GpuSpec
        "memory_bytes": 1 << 50,
        "bf16_flops_per_s": 1e18,
        "fp8_flops_per_s": 1e18,
        "tf32_flops_per_s": 1e18,
        "hbm_bytes_per_s": MAX_BYTES_PER_S,
        "scale_up_bytes_per_s": MAX_BYTES_PER_S,
        # ClusterSpec
        "gpus_per_node": 1 << 10,
        "num_nodes": MAX_GPUS,
        "world_size": MAX_GPUS,
        "scale_up_domain_size": MAX_GPUS,
        "scale_out_bytes_per_s": MAX_BYTES_PER_S,
        "intra_node_latency_s": 1.0,
        "inter_node_latency_s": 1.0,
        "oversubscription": 64.0,
        # Layout
        "dp": MAX_GPUS,
        "tp": MAX_GPUS,
        "pp": MAX_GPUS,
        "cp": MAX_GPUS,
        "ep": MAX_GPUS,
        "etp": MAX_GPUS,
        "micro_batch_size": MAX_SEQUENCES,
        "virtual_stages": 64,
        # Workloads
        "seq_len": MAX_TOKENS,
        "global_batch_size": MAX_SEQUENCES,
        "prompt_len": MAX_TOKENS,
        "output_len": MAX_TOKENS,
        "concurrency": MAX_SEQUENCES,
        # Search, scaling and schedules (command line and app)
        "ranked": 200,
        "max_virtual": 64,  # published recipes use 20 and 24 virtual stages
        "search_values": 16,
        "gpu_counts": 32,
        "stages": 1 << 10,
        "microbatches": MAX_SEQUENCES,
        "pass_s": MAX_PASS_S,
    }
)
"""Field name -> the largest value accepted (inclusive)."""


class LimitError(ValueError):
    """A value beyond this tool's limits; the message is one sentence naming field and limit."""


def limit(name: str) -> float:
    """The largest value accepted for field ``name``."""
    return LIMITS[name]


def shown(value: float) -> str:
    """A limit or a value for a sentence: 1,048,576; 1e+15; about 10^30 for a huge integer
    (formatting it in full could itself fail)."""
    if isinstance(value, int) and not isinstance(value, bool):
        if abs(value) < 10**15:
            return f"{value:,}"
        return f"about 10^{int(value.bit_length() * math.log10(2))}"
    return f"{value:.6g}"


def check_at_most(name: str, value: float, *, label: str | None = None) -> None:
    """Raise LimitError (one sentence naming the field and the limit) unless ``value`` is a
    finite number at most ``LIMITS[name]``; ``label`` names the field as the person typed it."""
    most = LIMITS[name]
    field = label or name
    if isinstance(value, float) and not math.isfinite(value):
        raise LimitError(f"{field} must be a finite number, got {value}")
    if value > most:
        raise LimitError(
            f"{field} must be at most {shown(most)} (this tool's limit), got {shown(value)}"
        )


_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)


def json_depth(data: bytes) -> int:
    """The deepest nesting of objects and lists in JSON text, counted without parsing it
    (strings are skipped, so brackets inside them do not count)."""
    brackets = _STRING.sub(b"", data).translate(None, _NOT_BRACKETS)
    if len(brackets) <= _SMALL:  # a running sum in Python; numpy (imported here) for the rest
        return max(accumulate((_STEP[b] for b in brackets), initial=0))
    import numpy as np

    steps = np.array(_STEP, dtype=np.int8)[np.frombuffer(brackets, dtype=np.uint8)]
    return int(np.cumsum(steps, dtype=np.int64).max(initial=0))


_STEP: Final = tuple(1 if b in b"[{" else -1 if b in b"]}" else 0 for b in range(256))
"""+1 for a byte that opens a level, -1 for one that closes it, 0 for the others."""
_NOT_BRACKETS: Final = bytes(b for b in range(256) if not _STEP[b])
_SMALL: Final = 1 << 16
"""Brackets summed in Python (a config.json holds dozens); numpy only for larger texts, so a
command that reads a preset does not import it."""


def check_json_text(
    text: str | bytes, what: str, max_bytes: int, max_depth: int = MAX_JSON_DEPTH
) -> bytes:
    """``text`` as bytes, or LimitError (one sentence) when it is larger than ``max_bytes`` or
    nested deeper than ``max_depth``: checked before parsing, so a hostile file costs little."""
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else bytes(text)
    if len(data) > max_bytes:
        raise LimitError(f"{what} is {len(data):,} bytes; this tool reads at most {max_bytes:,}")
    if json_depth(data) > max_depth:
        raise LimitError(f"{what} is nested more than {max_depth} levels deep, this tool's limit")
    return data
