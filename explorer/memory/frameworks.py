"""What each training framework keeps in memory, behaviour by behaviour, with sources.

``TrainingAssumptions.framework`` picks one entry of ``FRAMEWORKS``; its switches of the same
names override single behaviours (None follows the framework). The PyTorch entries were
measured on torch 2.13 (validation/README.md, change requests CR-1 to CR-9); the Megatron
entries follow Megatron-LM / Megatron-Core's source and Korthikanti et al. 2022.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache
from types import MappingProxyType

from explorer.memory.assumptions import Framework, TrainingAssumptions


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


MEGATRON = FrameworkBehaviour(
    keep_bf16_shard=True,  # ZeRO paper sec. 5.1 (2 psi / N_d); Megatron-FSDP's model-weight buffer
    persistent_grad_buffer=True,  # Megatron-Core distributed/param_and_grad_buffer.py (main_grad)
    fused_swiglu=True,  # Megatron-Core fusions/fused_bias_swiglu.py saves its input only
    sp_saves_gathered_inputs=False,  # Korthikanti et al. 2022 sec. 4.2.2: re-gathered in backward
    tp_full_embedding_grad=False,  # Megatron-Core tensor_parallel VocabParallelEmbedding
    loss_backward_bytes_per_logit=None,  # tensor_parallel/cross_entropy.py: gradient in place
    loss_parallel_extra_bytes_per_logit=0.0,
    optimizer_step_temporaries=0.0,  # Apex / Transformer Engine FusedAdam: multi-tensor, in place
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
        "tp_full_embedding_grad",
        "whole embedding gradient per TP rank",
        "vocab-split embedding grad",
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
