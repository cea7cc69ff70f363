"""What each training framework keeps in memory, behaviour by behaviour, with sources.

``TrainingAssumptions.framework`` picks one entry of ``FRAMEWORKS``; its switches of the same
names override single behaviours (None follows the framework). The PyTorch entries were
measured on torch 2.13 (validation/README.md, change requests CR-1 to CR-9); the Megatron
entries follow Megatron-LM / Megatron-Core's source and Korthikanti et al. 2022.
``TrainingAssumptions.activation_recipe`` picks one entry of ``ACTIVATION_RECIPES`` the same way.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache
from types import MappingProxyType

from explorer.memory.assumptions import ActivationRecipe, Framework, TrainingAssumptions


@dataclass(frozen=True, slots=True, kw_only=True)
class FrameworkBehaviour:
    """The memory behaviours of one framework (field docs: ``TrainingAssumptions``)."""

    keep_bf16_shard: bool
    """ZeRO-3 with master weights keeps a 16-bit weight shard beside the fp32 master (CR-1)."""
    persistent_grad_buffer: bool
    """Gradients exist from the start of the first backward (a buffer allocated once, CR-3)."""
    fused_swiglu: bool
    """SwiGLU saves 3 FFN-wide tensors per token, not 4 (CR-5)."""
    sp_saves_gathered_inputs: bool
    """Sequence parallel saves the gathered inputs of QKV, up/gate and LM head (CR-6)."""
    tp_full_embedding_grad: bool
    """TP ranks hold the whole V x h embedding gradient (CR-2)."""
    loss_backward_bytes_per_logit: float | None
    """Cross-entropy backward temporaries per local logit (CR-4); None: the logits in the
    activation dtype when it is narrower than the fp32 loss (Megatron)."""
    loss_parallel_extra_bytes_per_logit: float
    """More temporary bytes per local logit when the loss runs vocabulary-parallel (TP > 1)."""
    optimizer_step_temporaries: float
    """Adam-state-sized temporaries per local parameter during the optimizer step (CR-8)."""
    moe_probs_in_experts: bool
    """Routing probabilities weight the experts' activation; the combine saves no expert outputs."""
    pipeline_keeps_unsharded: bool = False
    """ZeRO-3 under pipeline parallelism keeps every weight gathered and every gradient
    unsharded until the last micro-batch's backward (torch.distributed.pipelining)."""
    pipeline_recv_buffers: bool = False
    """Pipeline stages allocate a receive buffer per micro-batch and direction once and keep
    them (torch.distributed.pipelining)."""
    pipeline_keeps_outputs: bool = False
    """The last pipeline stage keeps every micro-batch's output (the logits) until the next
    step (torch.distributed.pipelining before ``step(return_outputs=False)``)."""
    pipeline_keeps_stage_outputs: bool = False
    """Every pipeline stage but the last keeps each micro-batch's output (the activation it
    sends on) to the end of the schedule's step, not only until its backward
    (torch.distributed.pipelining; Megatron-Core frees the data once sent)."""


MEGATRON = FrameworkBehaviour(
    keep_bf16_shard=True,  # ZeRO paper sec. 5.1 (2 psi / N_d); Megatron-FSDP's model-weight buffer
    persistent_grad_buffer=True,  # Megatron-Core distributed/param_and_grad_buffer.py (main_grad)
    fused_swiglu=True,  # Megatron-Core fusions/fused_bias_swiglu.py saves its input only
    sp_saves_gathered_inputs=False,  # Korthikanti et al. 2022 sec. 4.2.2: re-gathered in backward
    tp_full_embedding_grad=False,  # Megatron-Core tensor_parallel VocabParallelEmbedding
    loss_backward_bytes_per_logit=None,  # tensor_parallel/cross_entropy.py: gradient in place
    loss_parallel_extra_bytes_per_logit=0.0,
    optimizer_step_temporaries=0.0,  # Apex / Transformer Engine FusedAdam: multi-tensor, in place
    moe_probs_in_experts=True,  # Megatron-Core moe/experts.py TEGroupedMLP: weighted_bias_swiglu
)
"""Megatron-LM / Megatron-Core (the default)."""

PYTORCH = FrameworkBehaviour(
    keep_bf16_shard=False,  # measured: llama8b-fsdp8-bf16-mixed-s4096-b1 (16 B / param / dp)
    persistent_grad_buffer=False,  # measured: small-bf16-pure-s1024-b1 (no gradient at the peak)
    fused_swiglu=False,  # measured: llama8b-bf16-pure-s4096-b1 (20.5 h per token and layer)
    sp_saves_gathered_inputs=True,  # measured: llama8b-tp4-bf16-pure-s4096-b1 (26.5 h / t)
    tp_full_embedding_grad=True,  # measured: llama8b-tp2/tp4/tp8-bf16-pure-s4096-b1
    loss_backward_bytes_per_logit=8.0,  # measured: llama8b-bf16-pure-s4096-b1 (nll, log_softmax)
    loss_parallel_extra_bytes_per_logit=4.0,  # measured: llama8b-tp4-bf16-pure-s4096-b1
    optimizer_step_temporaries=1.0,  # measured: small-fp32-s1024-b1 (_foreach_sqrt(exp_avg_sq))
    moe_probs_in_experts=False,  # torchtitan MoE: routed_output x top_scores after the experts
    # torch/distributed/pipelining/stage.py backward_maybe_with_nosync: FSDP modules run
    # set_reshard_after_backward(False) and set_requires_gradient_sync(False) but on the last
    # backward; torchtitan's apply_fsdp sets reshard_after_forward=False under PP as well
    pipeline_keeps_unsharded=True,
    # stage.py _prepare_forward_infra / _prepare_backward_infra: one activation and one
    # gradient receive buffer per micro-batch, made once (NeMo AutoModel docs, pipelining
    # recv_buffer_pool: "one full-size recv buffer per microbatch and per direction")
    pipeline_recv_buffers=True,
    # stage.py forward_one_chunk kept every stage's outputs in output_chunks until the next
    # step until pytorch/pytorch PR 153383 (2025-05-13: "output_chunks is only used for last
    # stage"); since then fwd_cache and the pending send Work objects keep "microbatches *
    # stages_per_rank activations" to the step's end (pytorch/pytorch PR 193903, 2026-08).
    # Megatron-Core: schedules.py deallocate_output_tensor once the output is sent.
    pipeline_keeps_stage_outputs=True,
)
"""PyTorch as torchtitan runs it: FSDP2, DTensor TP/SP with loss_parallel, foreach AdamW."""

FRAMEWORKS: MappingProxyType[Framework, FrameworkBehaviour] = MappingProxyType(
    {"megatron": MEGATRON, "pytorch": PYTORCH}
)
"""Every framework's behaviours, by ``TrainingAssumptions.framework``."""

_OVERRIDES = (
    "keep_bf16_shard",
    "persistent_grad_buffer",
    "fused_swiglu",
    "sp_saves_gathered_inputs",
    "tp_full_embedding_grad",
    "loss_backward_bytes_per_logit",
    "optimizer_step_temporaries",
    "moe_probs_in_experts",
    "pipeline_keeps_unsharded",
    "pipeline_recv_buffers",
    "pipeline_keeps_outputs",
    "pipeline_keeps_stage_outputs",
)


@lru_cache(maxsize=256)
def framework_behaviour(a: TrainingAssumptions) -> FrameworkBehaviour:
    """The behaviours in force: the framework's, with every switch that is not None applied."""
    changes = {name: getattr(a, name) for name in _OVERRIDES if getattr(a, name) is not None}
    base = FRAMEWORKS[a.framework]
    return replace(base, **changes) if changes else base


def loss_temporary_bytes_per_logit(
    b: FrameworkBehaviour, act_bytes: float, loss_logits_bytes: float, tp: int
) -> float:
    """Bytes per local logit alive beside the saved fp32 logits at the loss backward.

    Megatron (None): the logits in the activation dtype beside their fp32 copy, later the
    logit gradient in that dtype (Megatron-LM vocab_parallel_cross_entropy); PyTorch: the
    nll_loss and log_softmax gradients in fp32, one more with loss_parallel (measured).
    """
    if b.loss_backward_bytes_per_logit is None:
        base = act_bytes if act_bytes < loss_logits_bytes else 0.0
    else:
        base = b.loss_backward_bytes_per_logit
    return base + (b.loss_parallel_extra_bytes_per_logit if tp > 1 else 0.0)


_SWITCH_WORDS = (
    ("keep_bf16_shard", "ZeRO-3 keeps a 16-bit weight shard", "ZeRO-3 keeps fp32 shards only"),
    (
        "persistent_grad_buffer",
        "gradient buffer kept all step",
        "gradients set to None between steps",
    ),
    ("fused_swiglu", "fused SwiGLU (3 FFN tensors)", "eager SwiGLU (4 FFN tensors)"),
    ("sp_saves_gathered_inputs", "SP saves gathered inputs", "SP saves shards"),
    (
        "moe_probs_in_experts",
        "MoE probabilities weight the expert activation",
        "MoE combine keeps the expert outputs",
    ),
    (
        "tp_full_embedding_grad",
        "whole embedding gradient per TP rank",
        "vocab-split embedding grad",
    ),
    (
        "pipeline_keeps_unsharded",
        "ZeRO-3 under PP keeps weights gathered and gradients unsharded",
        "ZeRO-3 under PP reshards per micro-batch",
    ),
    (
        "pipeline_recv_buffers",
        "PP receive buffers kept per micro-batch",
        "PP receive buffers per transfer",
    ),
    (
        "pipeline_keeps_outputs",
        "PP last stage keeps every micro-batch's logits",
        "PP last stage frees each micro-batch's logits",
    ),
    (
        "pipeline_keeps_stage_outputs",
        "PP stages keep every micro-batch's output to the step's end",
        "PP stages free each output once sent",
    ),
)
"""(switch, words when on, words when off)."""


def behaviour_in_words(b: FrameworkBehaviour) -> str:
    """The behaviours in force, one clause each (for notes and the report)."""
    clauses = [on if getattr(b, name) else off for name, on, off in _SWITCH_WORDS]
    per_logit = b.loss_backward_bytes_per_logit
    loss = "the logits in the activation dtype" if per_logit is None else f"{per_logit:g} B"
    extra = b.loss_parallel_extra_bytes_per_logit
    clauses.append(f"cross-entropy temporaries {loss} per logit (+{extra:g} B with TP)")
    clauses.append(f"{b.optimizer_step_temporaries:g} Adam-state copies during the step")
    return "; ".join(clauses)


_STORAGE_SWITCHES = (
    "recompute_norms_and_mla_up_projection",
    "fp8_activation_cache",
    "moe_swiglu_recompute",
)
"""The activation-storage switches, in ``TrainingAssumptions`` and ``ActivationStorage``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ActivationStorage:
    """What the backward rebuilds and what is cached in FP8 (field docs: TrainingAssumptions)."""

    recompute_norms_and_mla_up_projection: bool
    fp8_activation_cache: bool
    moe_swiglu_recompute: bool

    @property
    def any(self) -> bool:
        """Whether any tensor is stored differently from the standard recipe."""
        return any(getattr(self, name) for name in _STORAGE_SWITCHES)


ACTIVATION_RECIPES: MappingProxyType[ActivationRecipe, ActivationStorage] = MappingProxyType(
    {
        "standard": ActivationStorage(
            recompute_norms_and_mla_up_projection=False,
            fp8_activation_cache=False,
            moe_swiglu_recompute=False,
        ),
        "deepseek-v3": ActivationStorage(
            recompute_norms_and_mla_up_projection=True,  # DeepSeek-V3 report sec. 3.2.3
            fp8_activation_cache=True,  # sec. 3.3.3, Low-Precision Activation (and (1): E5M6)
            moe_swiglu_recompute=True,  # sec. 3.3.3, Low-Precision Activation (2)
        ),
    }
)
"""Every activation recipe's switches, by ``TrainingAssumptions.activation_recipe``."""


@lru_cache(maxsize=256)
def activation_storage(a: TrainingAssumptions) -> ActivationStorage:
    """The storage in force: the recipe's, with every switch that is not None applied."""
    changes = {name: getattr(a, name) for name in _STORAGE_SWITCHES if getattr(a, name) is not None}
    base = ACTIVATION_RECIPES[a.activation_recipe]
    return replace(base, **changes) if changes else base


def storage_in_words(s: ActivationStorage) -> str:
    """The storage switches that are on, one clause each (for notes and the report)."""
    clauses = (
        (
            "RMSNorm and MLA up-projection outputs recomputed",
            s.recompute_norms_and_mla_up_projection,
        ),
        ("linear-layer inputs cached in FP8 (attention output in E5M6)", s.fp8_activation_cache),
        ("MoE SwiGLU input cached in FP8, output recomputed", s.moe_swiglu_recompute),
    )
    return "; ".join(words for words, on in clauses if on) or "every tensor in the activation dtype"


def storage_notes(a: TrainingAssumptions) -> tuple[str, ...]:
    """A note on the activation recipe in force; none for the standard one."""
    storage = activation_storage(a)
    if not storage.any:
        return ()
    return (f"activation recipe {a.activation_recipe}: {storage_in_words(storage)}",)
