"""Routed experts under expert parallelism: experts a batch touches, redundant expert slots
(EPLB) and the load imbalance between EP ranks.

Sources: DeepSeek-V3 report (arXiv:2412.19437) sec. 3.4, redundant experts for prefill and
decode; SGLang's large-scale EP blog (lmsys.org, 2025-05-05), EPLB with 256 + 32 = 288 experts,
which makes EP 12 or 72 possible, and the balancedness it measures (mean / max tokens per GPU).
"""

from __future__ import annotations

import math

from explorer.specs import ModelSpec


def experts_touched(num_experts: int, top_k: int, tokens: float) -> float:
    """Expected distinct experts a batch of ``tokens`` visits in one MoE block.

    Source: each token picks k of E experts; an expert is missed by one token with probability
    1 - k/E, by all with (1 - k/E)^tokens (uniform routing, independent tokens).
    """
    if num_experts == 0:
        return 0.0
    return num_experts * (1 - (1 - top_k / num_experts) ** tokens)


def expert_slots(model: ModelSpec, redundant_experts: int) -> int:
    """Expert copies one MoE block holds over its EP ranks: the routed experts plus the
    redundant ones EPLB places (DeepSeek-V3 report sec. 3.4; 256 + 32 in SGLang's blog)."""
    return model.n_routed_experts + redundant_experts if model.is_moe else 0


def fewest_redundant_experts(model: ModelSpec, ep: int, at_least: int = 0) -> int:
    """The fewest redundant experts, at least ``at_least``, that make the expert slots divide
    evenly over ``ep`` ranks (each rank holds the same number of experts, as EPLB places them).
    0 for a dense model or without EP."""
    if not model.is_moe or ep == 1:
        return 0
    return at_least + (-(model.n_routed_experts + at_least)) % ep


def rank_load_imbalance(
    copies_per_rank: float, experts_per_rank: float, ep: int, expert_load_cv: float
) -> float:
    """Max / mean token copies per EP rank in one MoE block.

    Source: a rank's load is the sum of its experts' loads, whose coefficient of variation
    between experts is ``expert_load_cv``, so its own is cv / sqrt(experts per rank), plus
    Poisson noise of 1 / sqrt(copies per rank) (balls into bins); the largest of ``ep`` such
    loads lies about sqrt(2 ln ep) standard deviations above the mean (Gaussian extreme
    value). It cannot exceed ep (one rank taking every copy). With cv 0 this is random
    routing alone, 1 + sqrt(2 ln(ep) / m).
    """
    if ep == 1 or copies_per_rank <= 0:
        return 1.0
    spread = math.sqrt(expert_load_cv**2 / experts_per_rank + 1.0 / copies_per_rank)
    return min(float(ep), 1.0 + math.sqrt(2.0 * math.log(ep)) * spread)


def expert_imbalance(
    model: ModelSpec,
    ep: int,
    redundant_experts: int,
    tokens_per_group: float,
    expert_load_cv: float,
    balanced_load_cv: float,
) -> float:
    """Max / mean tokens per EP rank in one MoE block (the busiest rank sets the step).

    ``rank_load_imbalance`` at m = tokens x top-k copies per rank (each of the ep attention
    groups sends its tokens' k copies over the ep ranks) and (E + r) / ep experts per rank;
    the expert popularity spread is ``expert_load_cv`` where experts sit where they were
    loaded, ``balanced_load_cv`` where redundant experts let EPLB place them by load.
    """
    if not model.is_moe or ep == 1:
        return 1.0
    per_rank = expert_slots(model, redundant_experts) / ep
    cv = balanced_load_cv if redundant_experts > 0 else expert_load_cv
    return rank_load_imbalance(tokens_per_group * model.num_experts_per_tok, per_rank, ep, cv)
