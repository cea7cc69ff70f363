"""Memory-bound kernels of a transformer block: elements read and written per token.

Norms, residual adds, activation functions, dropout, MoE token permutation and (without
FlashAttention) the softmax over the s x s scores are bandwidth-bound: their time is the bytes
they move over HBM bandwidth, not FLOPs. Widths are per GPU: TP splits heads and FFN width;
norms, residuals and dropout act on the whole hidden state unless sequence parallelism splits
it (Korthikanti et al. 2022, arXiv:2205.05198, sec. 4.2.2, whose activation ledger of
Table 2 names the same tensors). The backward pass moves about twice the forward's bytes
(it reads the saved inputs and writes gradients).
"""

from __future__ import annotations

from dataclasses import dataclass

from explorer.compute.work import StageWork
from explorer.specs import Layout, ModelSpec

DROPOUT_MASK_ELEMENTS = 0.5
"""A 1-byte dropout mask counted in 2-byte activation elements."""


@dataclass(frozen=True, slots=True)
class Traffic:
    """Elements per token per GPU that a stage's forward memory-bound kernels move."""

    blocks: float
    """All blocks of the stage (what full recompute repeats)."""
    attention: float
    """The attention core's share (softmax, dropout on probabilities; what selective
    recompute repeats); 0 with FlashAttention."""


def hidden_elements_per_layer(model: ModelSpec, layout: Layout, dropout: bool) -> float:
    """Norm, residual and dropout elements per token of one block, per GPU.

    Ledger: 2 norms read and write h (4 h); 2 residual adds read 2 h and write h (6 h); the
    hidden-state dropouts are fused into those adds (Megatron-LM bias_dropout_add_fused) and
    add their 1-byte masks; h / tp under sequence parallelism.
    """
    width = model.hidden_size / (layout.tp if layout.sp else 1)
    masks = 2 * DROPOUT_MASK_ELEMENTS if dropout else 0.0
    return (10 + masks) * width


def mlp_elements_per_layer(model: ModelSpec, layout: Layout, moe: bool) -> float:
    """Activation-function (and MoE permutation) elements per token of one block, per GPU.

    Ledger: GELU reads and writes the FFN width (2 f), SwiGLU reads 2 f and writes f (3 f);
    an MoE block does it on top-k experts plus shared ones and permutes tokens to and from
    the experts (read and write top-k x h, twice). Widths / tp.
    """
    per_width = 3 if model.ffn_kind == "swiglu" else 2
    if not moe:
        return per_width * model.intermediate_size / layout.tp
    k = model.num_experts_per_tok
    width = k * model.moe_intermediate_size + model.shared_ffn_size
    return (per_width * width + 4 * k * model.hidden_size) / layout.tp


def attention_elements_per_layer(
    model: ModelSpec, layout: Layout, seq_len: int, flash: bool, dropout: bool
) -> float:
    """Softmax (and probability dropout) elements per token of one block's attention, per GPU.

    Without FlashAttention: a fused scale-mask-softmax reads and writes a x s scores per token
    (2 a s), dropout on the probabilities 2.5 a s more; heads / tp. FlashAttention keeps them
    on chip (Dao et al. 2022, arXiv:2205.14135, sec. 3.1): 0.
    """
    if flash:
        return 0.0
    per_score = 2 + (2 + DROPOUT_MASK_ELEMENTS) * dropout
    return per_score * model.num_attention_heads * seq_len / layout.tp


def stage_traffic(
    work: StageWork, model: ModelSpec, layout: Layout, seq_len: int, flash: bool, dropout: bool
) -> Traffic:
    """Forward memory-bound elements per token per GPU of a stage's blocks.

    Source: the ledgers of this module's functions.
    """
    hidden = hidden_elements_per_layer(model, layout, dropout) * work.num_layers
    dense_mlp = mlp_elements_per_layer(model, layout, moe=False)
    moe_mlp = mlp_elements_per_layer(model, layout, moe=True) if model.is_moe else 0.0
    mlp = dense_mlp * (work.num_layers - work.num_moe_layers) + moe_mlp * work.num_moe_layers
    attention = attention_elements_per_layer(model, layout, seq_len, flash, dropout)
    attention *= work.num_layers
    return Traffic(blocks=hidden + mlp + attention, attention=attention)
