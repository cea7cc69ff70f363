"""Speculative decoding: a draft proposes k tokens a sequence, the target model verifies them
in one step, and the accepted prefix plus one token comes out.

Model (Leviathan et al. 2023, arXiv:2211.17192):
- With each draft token accepted with probability ``acceptance`` (a), independently, a step
  yields (1 - a^(k+1)) / (1 - a) tokens on average (their eq. 1; k + 1 when a = 1).
- A step costs the target's verify step on k + 1 tokens a sequence (``EngineStep`` with
  ``tokens_per_seq`` = k + 1: the weights and each sequence's KV cache are read once, the
  FLOPs and the communicated tokens are k + 1 times a decode's) plus k draft steps.
- Draft ``mtp``: DeepSeek-V3's multi-token-prediction module, one transformer block (MoE on
  DeepSeek-V3) with a 2h -> h projection, sharing the embedding and the LM head (report,
  arXiv:2412.19437, sec. 2.2), run k times on the target's layout (one pipeline stage), as
  SGLang runs it for k > 1 (EAGLE-style steps). The report (sec. 5.4.3) measures an
  acceptance of 85-90% for the second token and 1.8x the tokens per second.
- Draft ``draft``: a separate small model run k times, TP-sharded like the target and
  replicated over its attention groups, with its own weights and KV cache in memory.
At acceptance 0 a step yields one token: with k = 0 it is the plain decode step.
"""

from __future__ import annotations

from dataclasses import dataclass

from explorer.memory.serving import ServingLayout, serving_memory
from explorer.serving.assumptions import ServingAssumptions
from explorer.serving.drafts import (
    DraftKind,
    Speculation,
    check_speculation,
    draft_case,
    expected_tokens_per_step,
    extra_bytes,
)
from explorer.serving.latency import EngineStep
from explorer.specs import ClusterSpec, ModelSpec, ServingWorkload

__all__ = [
    "DraftKind",
    "Speculation",
    "SpeculativeDecode",
    "expected_tokens_per_step",
    "speculative_decode",
]


@dataclass(frozen=True, slots=True)
class SpeculativeDecode:
    """One layout's decode with speculation at a number of sequences per replica."""

    layout: ServingLayout
    concurrency: int
    speculation: Speculation
    plain_step_s: float
    """The decode step without speculation."""
    verify_step_s: float
    """The target's step on k + 1 tokens a sequence."""
    draft_step_s: float
    """One draft token for every sequence."""
    tokens_per_step: float
    extra_bytes_per_gpu: float
    """The draft's weights and KV cache on the busiest GPU."""
    fits: bool
    """Whether the layout still fits with the draft's memory."""

    @property
    def step_s(self) -> float:
        return self.verify_step_s + self.speculation.draft_tokens * self.draft_step_s

    @property
    def tpot_s(self) -> float:
        """Seconds per output token of one sequence."""
        return self.step_s / self.tokens_per_step

    @property
    def tokens_per_s(self) -> float:
        """Output tokens/s, all replicas."""
        return self.layout.replicas * self.concurrency * self.tokens_per_step / self.step_s

    @property
    def speedup(self) -> float:
        """Plain decode step over the speculative time per token (above 1: it pays)."""
        return self.plain_step_s / self.tpot_s


def speculative_decode(
    model: ModelSpec,
    cluster: ClusterSpec,
    layout: ServingLayout,
    workload: ServingWorkload,
    spec: Speculation,
    assumptions: ServingAssumptions | None = None,
) -> SpeculativeDecode:
    """Decode with ``spec`` on ``layout`` at the workload's concurrency per replica (the
    module docstring's model), decodes alone in each step."""
    a = assumptions or ServingAssumptions()
    check_speculation(model, spec)
    c, k = workload.concurrency, spec.draft_tokens
    context = workload.prompt_len + workload.output_len / 2
    target = EngineStep(model, cluster, layout, workload, a)
    plain = target.seconds(c, 0, context, 0.0)
    verify = target.seconds(c, 0, context, 0.0, tokens_per_seq=k + 1)
    draft_model, draft_layout = draft_case(model, layout, spec)
    draft = EngineStep(draft_model, cluster, draft_layout, workload, a).seconds(c, 0, context, 0.0)
    extra = extra_bytes(model, layout, workload, spec, a)
    memory = serving_memory(model, cluster.gpu, layout, workload, a.memory)
    return SpeculativeDecode(
        layout=layout,
        concurrency=c,
        speculation=spec,
        plain_step_s=plain,
        verify_step_s=verify,
        draft_step_s=draft if k else 0.0,
        tokens_per_step=expected_tokens_per_step(spec.acceptance, k),
        extra_bytes_per_gpu=extra,
        fits=memory.total + extra <= cluster.gpu.memory_bytes,
    )
