"""The draft of speculative decoding: what it is, the tokens a verify step yields, the draft
model and layout it runs on, and the memory it adds (explorer.serving.speculative has the
model's sources; the planner, the frontier and the scheduler take a ``Speculation``)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from explorer.memory.serving import (
    ServingLayout,
    kv_bytes_per_token_per_layer,
    kv_fraction_per_gpu,
    paged_tokens,
    stage_shapes,
    weight_bytes_per_param,
)
from explorer.memory.serving_layout import block_weights_bytes
from explorer.serving.assumptions import ServingAssumptions
from explorer.specs import ModelSpec, ServingWorkload

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


def mtp_model(model: ModelSpec) -> ModelSpec:
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


def draft_case(
    model: ModelSpec, layout: ServingLayout, spec: Speculation
) -> tuple[ModelSpec, ServingLayout]:
    """The draft's model and layout: the MTP module on the target's layout (one stage), or
    the draft model TP-sharded like the target and replicated over its attention groups."""
    if spec.kind == "mtp":
        return mtp_model(model), replace(layout, pp=1, replicas=1)
    assert spec.draft_model is not None
    return spec.draft_model, ServingLayout(tp=layout.tp, ep=layout.ep)


def extra_bytes(
    model: ModelSpec,
    layout: ServingLayout,
    workload: ServingWorkload,
    spec: Speculation,
    a: ServingAssumptions,
) -> float:
    """The draft's weights and its KV cache for the sequences of one attention group, bytes
    on the busiest GPU."""
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
    draft, draft_layout = draft_case(model, layout, spec)
    shapes = stage_shapes(draft, draft_layout, workload.weights_dtype, workload.kv_dtype, a.memory)
    return shapes[0].weights_bytes + seqs * tokens * shapes[0].kv_bytes_per_token


def check_speculation(model: ModelSpec, spec: Speculation) -> None:
    """Raise ValueError (one sentence) when ``model`` cannot run ``spec`` (MTP without a
    multi-token-prediction module)."""
    if spec.kind == "mtp" and model.num_nextn_predict_layers == 0:
        raise ValueError(
            f"{model.name} has no multi-token-prediction module; speculate with a draft model"
        )
