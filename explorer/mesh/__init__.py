"""Candidate training layouts: divisor generators, the search space and named validity rules.

``space`` holds the search space, the problem and candidates; ``rules`` the named validity
rules (``RULES`` maps each kind to its predicate, which returns a reason in words or None);
``tree`` the levels that build a candidate (mesh, experts, micro-batch, recompute, pipeline,
ZeRO), where a rule that fails early rejects a whole subtree as one row with ``num_layouts`` and
the later fields left None ("any").

Decisions (each rule's comment gives the reason):
- KV heads fewer than TP are *not* replicated: Megatron-Core's TransformerConfig requires
  num_query_groups to be a multiple of the TP size; replicating K/V heads is a serving
  technique (vLLM), so training layouts with TP above the KV heads are rejected.
- TP outside the scale-up domain is a rejection by default (``SearchSpace.tp_across_domain``
  lets it through, and the estimate then warns); published layouts keep TP on the fast links.
- Uneven pipeline stages are allowed while the layer imbalance idles at most
  ``SearchSpace.max_stage_idle`` of the pipeline's compute (61 layers on 16 stages idles 4.7%,
  126 on 16 idles 1.6%); the split itself is ``explorer.partition.balanced_chunk_sizes``.
- The default context-parallel degrees leave each CP rank at least 4,096 tokens (1 only for
  4K sequences, up to 2 at 8K, 8 at 32K); ``SearchSpace.cp_values`` widens them.
- With one pipeline stage only 1F1B is enumerated (every schedule is then plain gradient
  accumulation); interleaving is enumerated for V >= 2 (V = 1 is 1F1B itself).
"""

from explorer.mesh.rules import RULES, Rule, check
from explorer.mesh.space import (
    Candidate,
    Problem,
    SearchSpace,
    divisors,
    expert_data_parallel,
    from_layout,
    num_microbatches,
    to_layout,
)
from explorer.mesh.tree import (
    LEAF,
    LEVELS,
    ROOT,
    Enumeration,
    Level,
    Rejection,
    Tree,
    enumerate_layouts,
    expert_options,
    pipelines,
    valid_pipelines,
)

__all__ = [
    "LEAF",
    "LEVELS",
    "ROOT",
    "RULES",
    "Candidate",
    "Enumeration",
    "Level",
    "Problem",
    "Rejection",
    "Rule",
    "SearchSpace",
    "Tree",
    "check",
    "divisors",
    "enumerate_layouts",
    "expert_data_parallel",
    "expert_options",
    "from_layout",
    "num_microbatches",
    "pipelines",
    "to_layout",
    "valid_pipelines",
]
