"""FLOPs per token for forward and training, and the MFU / HFU definitions.

Convention (stated in every result that uses it): only matrix multiplies count, 2 FLOPs per
multiply-add; backward = 2 x forward (input and weight gradients); the embedding lookup is
free; causal attention computes half of the ``s x s`` scores (Megatron-LM's
``num_floating_point_operations``) unless ``causal=False`` (Korthikanti et al. 2022,
arXiv:2205.05198, sec. 6, which counts all of them). Published TFLOP/s figures differ by
about 7% between the two conventions.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, fields

from explorer.specs import ModelSpec, Recompute


@dataclass(frozen=True, slots=True)
class FlopsPerToken:
    """Forward FLOPs for one token, by part; ``total`` is their sum."""

    attention_projections: float
    attention_core: float
    mlp: float
    router: float
    logits: float
    mtp: float

    @property
    def total(self) -> float:
        return sum(getattr(self, f.name) for f in fields(self))

    @property
    def layers(self) -> float:
        """FLOPs of the transformer blocks only (what full recompute repeats)."""
        return self.attention_projections + self.attention_core + self.mlp + self.router


def attention_projection_weights(model: ModelSpec) -> int:
    """Weights in the attention matrix multiplies of one block (no biases, no norms)."""
    h, a = model.hidden_size, model.num_attention_heads
    if not model.is_mla:
        d = model.head_size
        gate = h * a * d * model.attn_output_gate  # Qwen3-Next: q_proj also makes the gate
        return 2 * h * a * d + 2 * h * model.kv_heads * d + gate
    qk_head = model.qk_nope_head_dim + model.qk_rope_head_dim
    rank = model.kv_lora_rank or 0
    q_lora = model.q_lora_rank
    q = h * q_lora + q_lora * a * qk_head if q_lora else h * a * qk_head
    kv = h * (rank + model.qk_rope_head_dim) + rank * a * (
        model.qk_nope_head_dim + model.v_head_dim
    )
    heads, d = model.index_n_heads, model.index_head_dim  # DeepSeek-V3.2's lightning indexer
    indexer = (q_lora or h) * heads * d + h * d + h * heads if heads else 0
    return q + kv + a * model.v_head_dim * h + indexer


def attention_core_flops_per_token(model: ModelSpec, seq_len: int, causal: bool = True) -> float:
    """Forward FLOPs of scores (Q K^T) and their product with V, one token, one block.

    Source: Korthikanti et al. 2022 (arXiv:2205.05198) sec. 6: 2 s (a d_qk) + 2 s (a d_v);
    Megatron-LM halves it for causal masks (each query sees s/2 keys on average).
    """
    a = model.num_attention_heads
    if model.is_mla:
        d_qk, d_v = model.qk_nope_head_dim + model.qk_rope_head_dim, model.v_head_dim
    else:
        d_qk = d_v = model.head_size
    flops = 2.0 * seq_len * a * (d_qk + d_v)
    return flops / 2 if causal else flops


def keys_per_query(seq_len: int, window: int | None, causal: bool = True) -> float:
    """Keys one query attends to on average over a sequence of ``seq_len`` tokens.

    Causal: query i (1-based) sees min(i, window) keys, so the mean is
    (w (w + 1) / 2 + (s - w) w) / s with w = min(window, s); the full-attention convention of
    this module counts s / 2 (Megatron-LM). Non-causal: min(window, s) (Korthikanti et al. count
    all s). Source: Beltagy et al. 2020 (Longformer, arXiv:2004.05150) sec. 3.1: a window of w
    costs O(s w) instead of O(s^2); Mistral 7B (arXiv:2310.06825) sec. 2.
    """
    if window is None or window >= seq_len:
        return seq_len / 2 if causal else float(seq_len)
    if not causal:
        return float(window)
    return (window * (window + 1) / 2 + (seq_len - window) * window) / seq_len


def keys_per_query_chunked(seq_len: int, chunk: int, causal: bool = True) -> float:
    """Keys one query attends to on average when attention stays inside ``chunk``-token chunks.

    Causal: query j of a chunk (1-based) sees j keys, so a full chunk averages (c + 1) / 2 and
    the last, partial chunk of r tokens (r + 1) / 2. Non-causal: the chunk's length.
    Source: Llama 4 (transformers Llama4TextAttention, attention_chunk_size on RoPE layers).
    """
    full, rest = divmod(seq_len, chunk)
    if causal:
        return (full * chunk * (chunk + 1) / 2 + rest * (rest + 1) / 2) / seq_len
    return (full * chunk * chunk + rest * rest) / seq_len


def mlp_weights(model: ModelSpec, ffn_width: int) -> int:
    """Weights in one MLP's matrix multiplies (3 gated, 2 otherwise)."""
    return (3 if model.ffn_kind == "swiglu" else 2) * model.hidden_size * ffn_width


def linear_attention_weights(model: ModelSpec) -> int:
    """Weights in the matrix multiplies of one Gated DeltaNet block (the convolution, a
    depthwise filter, is left out like other elementwise work)."""
    h, v_heads = model.hidden_size, model.linear_num_value_heads
    key_dim = model.linear_num_key_heads * model.linear_key_head_dim
    value_dim = v_heads * model.linear_value_head_dim
    return h * (2 * key_dim + 2 * value_dim) + h * 2 * v_heads + value_dim * h


def linear_attention_core_flops_per_token(model: ModelSpec) -> float:
    """Forward FLOPs of the gated delta rule for one token, one block (recurrent form).

    Source: Yang et al. 2024 (arXiv:2412.06464) eq. 10: per value head a d_k x d_v state S;
    S k, the rank-one correction, the v k^T write and the read S q cost 2 d_k d_v each. No
    dependence on the sequence length.
    """
    return (
        8.0
        * model.linear_num_value_heads
        * model.linear_key_head_dim
        * (model.linear_value_head_dim)
    )


def mamba_weights(model: ModelSpec) -> int:
    """Weights in the matrix multiplies of one Mamba2 mixer: in_proj and out_proj (the
    depthwise convolution is left out like other elementwise work)."""
    inner = model.mamba_inner_size
    bc = 2 * model.mamba_n_groups * model.ssm_state_size
    return model.hidden_size * (2 * inner + bc + model.mamba_num_heads) + inner * model.hidden_size


def mamba_core_flops_per_token(model: ModelSpec, seq_len: int, causal: bool = True) -> float:
    """Forward FLOPs of the SSD scan for one token, one Mamba2 block (chunked algorithm).

    Source: Dao & Gu 2024, Mamba-2 (arXiv:2405.21060) sec. 6 (SSD algorithm, chunks of length
    Q): per token, the intra-chunk C B^T costs 2 q N per group and its product with X 2 q P per
    head, where q is the keys a query sees inside its chunk (causal: (Q + 1) / 2, the chunked-
    attention count); the chunk state B^T X and its read C h cost 2 N P each per head. The
    inter-chunk recurrence (N P per chunk) is left out. Linear in the sequence length.
    """
    n, p = model.ssm_state_size, model.mamba_head_dim
    q = keys_per_query_chunked(seq_len, min(model.mamba_chunk_size, seq_len), causal)
    intra = 2.0 * q * (n * model.mamba_n_groups + p * model.mamba_num_heads)
    return intra + 4.0 * n * p * model.mamba_num_heads


def _single_module_flops(
    model: ModelSpec, index: int, seq_len: int, causal: bool
) -> FlopsPerToken | None:
    """A Nemotron-H block of one sub-module (Mamba2, attention alone, MLP alone), else None."""
    zero = FlopsPerToken(0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    if index in model.mamba_layers:
        return dataclasses.replace(
            zero,
            attention_projections=2.0 * mamba_weights(model),
            attention_core=mamba_core_flops_per_token(model, seq_len, causal),
        )
    if index in model.ffn_only_layers:
        return dataclasses.replace(zero, mlp=2.0 * mlp_weights(model, model.intermediate_size))
    if index in model.attention_only_layers:
        plain = dataclasses.replace(model, attention_only_layers=())
        return dataclasses.replace(block_forward_flops(plain, index, seq_len, causal), mlp=0.0)
    return None


def block_forward_flops(
    model: ModelSpec, index: int, seq_len: int, causal: bool = True
) -> FlopsPerToken:
    """Forward FLOPs for one token through block ``index`` (MoE: top-k plus shared experts)."""
    single = _single_module_flops(model, index, seq_len, causal)
    if single is not None:
        return single
    if model.is_moe_layer(index):
        ffn = model.num_experts_per_tok * mlp_weights(model, model.moe_intermediate_size)
        ffn += mlp_weights(model, model.shared_ffn_size) if model.shared_ffn_size else 0
        router = 2.0 * model.hidden_size * model.n_routed_experts
    else:
        ffn, router = mlp_weights(model, model.intermediate_size), 0.0
    if index in model.linear_attention_layers:
        return _linear_block_flops(model, index)
    core = attention_core_flops_per_token(model, seq_len, causal)
    window = model.attention_window(index)
    if window is not None and window < seq_len:  # sliding window or chunk: fewer keys
        keys = (
            keys_per_query_chunked(seq_len, window, causal)
            if model.chunked_attention
            else keys_per_query(seq_len, window, causal)
        )
        core *= keys / keys_per_query(seq_len, None, causal)
    if model.index_topk is not None:  # DeepSeek Sparse Attention: top-k keys per query
        core *= keys_per_query(seq_len, model.index_topk, causal) / keys_per_query(
            seq_len, None, causal
        )
        # the indexer scores every earlier key: 2 s H_I d_I (halved for causal masks)
        core += (
            2.0
            * keys_per_query(seq_len, None, causal)
            * model.index_n_heads
            * (model.index_head_dim)
        )
    return FlopsPerToken(
        attention_projections=2.0 * attention_projection_weights(model),
        attention_core=core,
        mlp=2.0 * ffn,
        router=router,
        logits=0.0,
        mtp=0.0,
    )


def _linear_block_flops(model: ModelSpec, index: int) -> FlopsPerToken:
    """A Gated DeltaNet block: its projections and recurrent core, and the block's MLP."""
    mlp = block_forward_flops(
        dataclasses.replace(model, linear_attention_layers=()), index, 1
    )  # the same MLP as a softmax block
    return dataclasses.replace(
        mlp,
        attention_projections=2.0 * linear_attention_weights(model),
        attention_core=linear_attention_core_flops_per_token(model),
    )


def forward_flops_per_token(model: ModelSpec, seq_len: int, causal: bool = True) -> FlopsPerToken:
    """Forward FLOPs for one token through the whole model, by part.

    The multi-token-prediction modules (DeepSeek-V3) add a projection 2h -> h, one block and
    another pass through the shared LM head each.
    """
    blocks = [
        block_forward_flops(model, i, seq_len, causal) for i in range(model.num_hidden_layers)
    ]
    logits = 2.0 * model.hidden_size * model.vocab_size
    mtp = 0.0
    if model.num_nextn_predict_layers:
        block = block_forward_flops(model, model.num_hidden_layers, seq_len, causal).total
        projection = 2.0 * 2 * model.hidden_size * model.hidden_size
        mtp = model.num_nextn_predict_layers * (block + projection + logits)
    return FlopsPerToken(
        attention_projections=sum(b.attention_projections for b in blocks),
        attention_core=sum(b.attention_core for b in blocks),
        mlp=sum(b.mlp for b in blocks),
        router=sum(b.router for b in blocks),
        logits=logits,
        mtp=mtp,
    )


def model_flops_per_token(model: ModelSpec, seq_len: int, causal: bool = True) -> float:
    """Training FLOPs per token that MFU counts: forward + backward (3 x forward).

    Source: Korthikanti et al. 2022 sec. 6 (72 B s L h^2 (1 + s/6h + V/12hL) for GPT layers);
    PaLM (Chowdhery et al. 2022, arXiv:2204.02311) appendix B defines MFU on these FLOPs.
    """
    return 3.0 * forward_flops_per_token(model, seq_len, causal).total


def hardware_flops_per_token(
    model: ModelSpec, seq_len: int, recompute: Recompute, causal: bool = True
) -> float:
    """Training FLOPs per token the GPUs execute, recomputation included (HFU counts these).

    Full recompute repeats every block's forward (Narayanan et al. 2021, arXiv:2104.04473,
    Eq. 3: 96 B s L h^2 (1 + s/6h + V/16hL)); selective repeats the attention core's forward
    (Korthikanti et al. 2022 sec. 5; their sec. 6 formula counts that term twice).
    """
    forward = forward_flops_per_token(model, seq_len, causal)
    extra = {"none": 0.0, "selective": forward.attention_core, "full": forward.layers}[recompute]
    return 3.0 * forward.total + extra


def utilisation(
    flops_per_token: float, tokens_per_s: float, num_gpus: int, peak_flops_per_s: float
) -> float:
    """Fraction of the cluster's peak achieved: MFU with model FLOPs, HFU with hardware FLOPs.

    Source: Chowdhery et al. 2022 (PaLM) appendix B.
    """
    return flops_per_token * tokens_per_s / (num_gpus * peak_flops_per_s)


def decode_keys_read(model: ModelSpec, index: int, context: int) -> float:
    """Keys the attention of block ``index`` reads for one decode token whose context (itself
    included) is ``context`` tokens: all of them under full attention, min(context, w) with a
    sliding window of w, its position inside the current chunk with chunked attention
    ((context - 1) mod c + 1), at most index_topk under DeepSeek Sparse Attention; 0 for a block
    that keeps no KV cache (Mamba2, MLP-only, Gated DeltaNet).

    Source: Mistral 7B (arXiv:2310.06825) sec. 2 (rolling buffer of w keys); transformers
    Llama4TextAttention (attention_chunk_size); DeepSeek-V3.2-Exp report sec. 2.1 (top-k
    selection of 2048 keys per query).
    """
    if context < 1:
        raise ValueError(f"context must be at least 1 token, got {context!r}")
    if not model.holds_kv(index):
        return 0.0
    keys = float(context)
    window = model.attention_window(index)
    if window is not None:
        keys = float((context - 1) % window + 1) if model.chunked_attention else min(keys, window)
    if model.index_topk is not None:
        keys = min(keys, float(model.index_topk))
    return keys


def decode_context(model: ModelSpec, layers: tuple[int, ...], context: int) -> float:
    """The mean keys a decode token reads per KV-holding block of ``layers`` (``context`` under
    full attention everywhere; less with sliding windows, chunks or top-k selection); 0 when no
    block of ``layers`` keeps a KV cache. A serving time model that charges attention as
    per-key FLOPs x context charges the windows it applies by using this instead of context.
    DeepSeek-V3.2's indexer still scores every key (``indexer_flops_per_key``)."""
    held = [i for i in layers if model.holds_kv(i)]
    if not held:
        return 0.0
    return sum(decode_keys_read(model, i, context) for i in held) / len(held)


def indexer_flops_per_key(model: ModelSpec) -> float:
    """Forward FLOPs of DeepSeek-V3.2's lightning indexer per query and key, one block: its
    index_n_heads dot products of index_head_dim (0 without an indexer). Source: DeepSeek-V3.2-Exp
    report sec. 2.1 (eq. 1: I_ts = sum_j w_tj ReLU(q_tj . k_s))."""
    return 2.0 * model.index_n_heads * model.index_head_dim if model.index_topk else 0.0
