"""What a pipeline stage computes per token and holds, before any parallel split.

Source: per-block FLOPs of explorer.flops and parameters of explorer.counting; the embedding
sits on the first stage, the final norm, LM head and multi-token-prediction modules on the
last (explorer.partition).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache

from explorer.counting import layer_params, mtp_module_params
from explorer.flops import block_forward_flops, mlp_weights
from explorer.specs import ModelSpec, _HashOnce, hash_once


@hash_once
@dataclass(frozen=True, slots=True, kw_only=True)
class StageWork(_HashOnce):
    """What one pipeline stage (or model chunk) computes per token and holds, whole model
    width (before TP, CP and EP splits)."""

    num_layers: int
    """Transformer blocks."""
    num_moe_layers: int
    """Blocks with an MoE MLP."""
    linear_flops: float
    """Forward FLOPs per token of dense matrix multiplies in the blocks (attention
    projections, dense MLPs, shared experts, routers)."""
    expert_flops: float
    """Forward FLOPs per token of the routed experts (top-k)."""
    attention_core_flops: float
    """Forward FLOPs per token of Q K^T and P V."""
    head_flops: float
    """Forward FLOPs per token of the LM head and multi-token-prediction modules."""
    dense_params: float
    """Parameters every data-parallel rank of the stage replicates (all but routed experts)."""
    expert_params: float
    """Routed-expert parameters."""
    bf16_layers: int = 0
    """Of the blocks, those whose linear layers stay in BF16 under an FP8 / NVFP4 policy."""
    bf16_moe_layers: int = 0
    """Of those, the MoE blocks."""
    num_mamba_layers: int = 0
    """Of the blocks, Nemotron-H's Mamba2 blocks (explorer.compute.elementwise's own ledger)."""
    num_attention_only_layers: int = 0
    """Of the blocks, Nemotron-H's attention-only blocks."""
    num_ffn_only_layers: int = 0
    """Of the blocks, Nemotron-H's MLP-only blocks."""

    @property
    def block_flops(self) -> float:
        """Forward FLOPs per token of the blocks (what full recompute repeats)."""
        return self.linear_flops + self.expert_flops + self.attention_core_flops

    @property
    def forward_flops(self) -> float:
        """Forward FLOPs per token of the whole stage."""
        return self.block_flops + self.head_flops

    def __add__(self, other: StageWork) -> StageWork:
        return StageWork(
            **{name: getattr(self, name) + getattr(other, name) for name in _WORK_FIELDS}
        )


_WORK_FIELDS = (
    "num_layers",
    "num_moe_layers",
    "linear_flops",
    "expert_flops",
    "attention_core_flops",
    "head_flops",
    "dense_params",
    "expert_params",
    "bf16_layers",
    "bf16_moe_layers",
    "num_mamba_layers",
    "num_attention_only_layers",
    "num_ffn_only_layers",
)


@lru_cache(maxsize=65536)
def _block_work(model: ModelSpec, index: int, seq_len: int, causal: bool) -> StageWork:
    """One block's work, cached per (model, block kind, sequence)."""
    flops = block_forward_flops(model, index, seq_len, causal)
    routed = 0.0
    if model.is_moe_layer(index):
        routed = 2.0 * model.num_experts_per_tok * mlp_weights(model, model.moe_intermediate_size)
    params = layer_params(model, index)
    return StageWork(
        num_layers=1,
        num_moe_layers=int(model.is_moe_layer(index)),
        linear_flops=flops.attention_projections + flops.mlp - routed + flops.router,
        expert_flops=routed,
        attention_core_flops=flops.attention_core,
        head_flops=0.0,
        dense_params=params.dense,
        expert_params=params.routed_experts,
        num_mamba_layers=int(index in model.mamba_layers),
        num_attention_only_layers=int(index in model.attention_only_layers),
        num_ffn_only_layers=int(index in model.ffn_only_layers),
    )


def _ends_work(model: ModelSpec, seq_len: int, causal: bool, first: bool, last: bool) -> StageWork:
    """Embedding (first stage) and LM head, final norm and MTP modules (last stage)."""
    h, vocab = model.hidden_size, model.vocab_size
    params = float(
        vocab * h + model.max_position_embeddings * h * model.learned_position_embeddings
    )
    params = params if first else 0.0
    head = 0.0
    if last:
        tied_here = model.tie_word_embeddings and first  # one matrix serves both ends
        params += (0 if tied_here else vocab * h) + h  # LM head (a copy when tied), final norm
        params += model.num_nextn_predict_layers * mtp_module_params(model)
        mtp_block = block_forward_flops(model, model.num_hidden_layers, seq_len, causal).total
        head = 2.0 * h * vocab
        head += model.num_nextn_predict_layers * (mtp_block + 4.0 * h * h + 2.0 * h * vocab)
    return StageWork(
        num_layers=0,
        num_moe_layers=0,
        linear_flops=0.0,
        expert_flops=0.0,
        attention_core_flops=0.0,
        head_flops=head,
        dense_params=params,
        expert_params=0.0,
    )


@lru_cache(maxsize=8192)
def stage_work(
    model: ModelSpec,
    layers: tuple[int, ...],
    seq_len: int,
    first: bool,
    last: bool,
    causal: bool = True,
    bf16_ends: tuple[int, int] = (0, 0),
) -> StageWork:
    """Work of a stage holding blocks ``layers`` (plus embedding / head), per token; of them,
    the first ``bf16_ends[0]`` and last ``bf16_ends[1]`` blocks of the model count as BF16
    blocks (``TrainingWorkload.bf16_layers_at_start`` / ``_at_end``).

    Source: per-block FLOPs of explorer.flops and parameters of explorer.counting.
    """
    total = _ends_work(model, seq_len, causal, first, last)
    for index in layers:
        total = total + _block_work(model, index, seq_len, causal)
    start, end = bf16_ends
    kept = [i for i in layers if i < start or i >= model.num_hidden_layers - end]
    if not kept:
        return total
    moe = sum(model.is_moe_layer(i) for i in kept)
    return replace(total, bf16_layers=len(kept), bf16_moe_layers=moe)
