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

from dataclasses import dataclass, replace
from typing import Literal

from explorer.memory.serving import (
    ServingLayout,
    kv_bytes_per_token_per_layer,
    kv_fraction_per_gpu,
    paged_tokens,
    serving_memory,
    stage_shapes,
    weight_bytes_per_param,
)
from explorer.memory.serving_layout import block_weights_bytes
from explorer.serving.assumptions import ServingAssumptions
from explorer.serving.latency import EngineStep
from explorer.specs import ClusterSpec, ModelSpec, ServingWorkload

DraftKind = Literal["mtp", "draft"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Speculation:
    """How a serving engine speculates: the draft, its tokens a step and their acceptance."""

    kind: DraftKind = "mtp"
    """``mtp`` (the model's own MTP module) or ``draft`` (a separate model)."""
    draft_tokens: int = 1
    """Tokens the draft proposes a step (k); 1 for DeepSeek-V3's one MTP module."""
    acceptance: float = 0.85
    """Probability each draft token is accepted (a named input). Source of the default:
    DeepSeek-V3 report sec. 5.4.3, 85-90% for the second token with one MTP module."""
    draft_model: ModelSpec | None = None
    """The draft model when ``kind`` is ``draft``."""

    def __post_init__(self) -> None:
        if self.draft_tokens < 0:
            raise ValueError(f"draft_tokens must be at least 0, got {self.draft_tokens}")
        if not 0 <= self.acceptance <= 1:
            raise ValueError(f"acceptance must be in [0, 1], got {self.acceptance}")
        if self.kind == "draft" and self.draft_model is None:
            raise ValueError("a draft-model speculation needs the draft model")


def expected_tokens_per_step(acceptance: float, draft_tokens: int) -> float:
    """Tokens a verify step yields on average: (1 - a^(k+1)) / (1 - a), Leviathan et al. 2023
    eq. 1 (k + 1 at a = 1)."""
    if acceptance == 1:
        return float(draft_tokens + 1)
    return (1 - acceptance ** (draft_tokens + 1)) / (1 - acceptance)


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


def _mtp_model(model: ModelSpec) -> ModelSpec:
    """The MTP module as a one-block model: a block like the last one (MoE on DeepSeek-V3)
    with the shared LM head."""
    moe = model.is_moe_layer(model.num_hidden_layers - 1)
    return replace(
        model,
        name=f"{model.name} MTP",
        num_hidden_layers=1,
        first_k_dense_replace=0 if moe else 1,
        num_nextn_predict_layers=0,
    )


def _draft_case(
    model: ModelSpec, layout: ServingLayout, spec: Speculation
) -> tuple[ModelSpec, ServingLayout]:
    if spec.kind == "mtp":
        return _mtp_model(model), replace(layout, pp=1, replicas=1)
    assert spec.draft_model is not None
    return spec.draft_model, ServingLayout(tp=layout.tp, ep=layout.ep)


def _extra_bytes(
    model: ModelSpec,
    layout: ServingLayout,
    workload: ServingWorkload,
    spec: Speculation,
    a: ServingAssumptions,
) -> float:
    """The draft's weights and its KV cache for the sequences of one attention group."""
    seqs = -(-workload.concurrency // layout.ep)
    tokens = paged_tokens(workload.prompt_len + workload.output_len, a.memory.kv_block_tokens)
    if spec.kind == "mtp":
        index = model.num_hidden_layers - 1
        block = block_weights_bytes(model, index, layout, workload.weights_dtype, a.memory)
        bpp = weight_bytes_per_param(workload.weights_dtype, a.memory)
        projection = 2 * model.hidden_size**2 * bpp / layout.tp  # the 2h -> h projection
        kv = kv_bytes_per_token_per_layer(model, workload.kv_dtype)
        kv *= kv_fraction_per_gpu(model, layout.tp)
        return block + projection + seqs * tokens * kv
    draft, draft_layout = _draft_case(model, layout, spec)
    shapes = stage_shapes(draft, draft_layout, workload.weights_dtype, workload.kv_dtype, a.memory)
    return shapes[0].weights_bytes + seqs * tokens * shapes[0].kv_bytes_per_token


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
    if spec.kind == "mtp" and model.num_nextn_predict_layers == 0:
        raise ValueError(
            f"{model.name} has no multi-token-prediction module; speculate with a draft model"
        )
    c, k = workload.concurrency, spec.draft_tokens
    context = workload.prompt_len + workload.output_len / 2
    target = EngineStep(model, cluster, layout, workload, a)
    plain = target.seconds(c, 0, context, 0.0)
    verify = target.seconds(c, 0, context, 0.0, tokens_per_seq=k + 1)
    draft_model, draft_layout = _draft_case(model, layout, spec)
    draft = EngineStep(draft_model, cluster, draft_layout, workload, a).seconds(c, 0, context, 0.0)
    extra = _extra_bytes(model, layout, workload, spec, a)
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
