"""Parameter counts per component (total and active per token) and FLOPs per token.

Counting convention for FLOPs (stated once, used everywhere): a matrix multiply of an
``m x k`` by a ``k x n`` matrix costs ``2 m k n`` FLOPs; only matrix multiplies are counted
(norms, activations, softmax, residual adds, optimizer left out); the embedding lookup costs
nothing; the backward pass costs twice the forward; causal attention computes half of the
``s x s`` score matrix when ``causal=True`` (Megatron-LM ``num_floating_point_operations``),
the whole of it when ``causal=False`` (Korthikanti et al. 2022, arXiv:2205.05198, sec. 6).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from explorer.specs import ModelSpec


@dataclass(frozen=True, slots=True)
class LayerParams:
    """Parameters of one transformer block, by component."""

    attention: int = 0
    mlp: int = 0
    routed_experts: int = 0
    shared_experts: int = 0
    router: int = 0
    norms: int = 0

    @property
    def total(self) -> int:
        return sum(getattr(self, f.name) for f in fields(self))

    @property
    def dense(self) -> int:
        """Parameters every token uses and every data-parallel rank replicates (not experts)."""
        return self.total - self.routed_experts


@dataclass(frozen=True, slots=True)
class ParamCounts:
    """Whole-model parameters by component; ``total`` is their sum."""

    embeddings: int
    position_embeddings: int
    attention: int
    mlp: int
    routed_experts: int
    shared_experts: int
    router: int
    norms: int
    lm_head: int
    mtp: int

    @property
    def total(self) -> int:
        """Every parameter including multi-token-prediction modules."""
        return sum(getattr(self, f.name) for f in fields(self))

    @property
    def total_without_mtp(self) -> int:
        """The count model cards quote (DeepSeek-V3: 671B leaves out the 14B MTP module)."""
        return self.total - self.mtp

    def as_dict(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def norm_params(model: ModelSpec, width: int) -> int:
    """Parameters of one norm over ``width`` channels: RMSNorm a weight, LayerNorm weight+bias."""
    with_bias = model.norm_kind == "layernorm" and model.layernorm_bias
    return width * (2 if with_bias else 1)


def mlp_params(model: ModelSpec, ffn_width: int) -> int:
    """Parameters of one MLP of FFN width ``ffn_width``: 3 matrices gated, 2 otherwise (+biases)."""
    matrices = 3 if model.ffn_kind == "swiglu" else 2
    biases = (ffn_width * (matrices - 1) + model.hidden_size) if model.mlp_bias else 0
    return matrices * model.hidden_size * ffn_width + biases


def attention_params(model: ModelSpec) -> int:
    """Parameters of one attention block (projections, their biases, q/k norms)."""
    if model.is_mla:
        return mla_params(model)
    h, d = model.hidden_size, model.head_size
    q_width, kv_width = model.num_attention_heads * d, model.kv_heads * d
    weights = h * q_width + 2 * h * kv_width + q_width * h
    weights += h * q_width * model.attn_output_gate  # Qwen3-Next: q_proj also makes the gate
    biases = (q_width + 2 * kv_width) * model.attention_bias + h * model.attention_out_bias
    qk_norms = 2 * d if model.qk_norm else 0  # Qwen3: one RMSNorm of head_dim each for q and k
    sinks = model.num_attention_heads if model.attention_sinks else 0  # GPT-OSS: one per head
    return weights + biases + qk_norms + sinks


def mla_params(model: ModelSpec) -> int:
    """Parameters of multi-head latent attention. Source: DeepSeek-V2 report (arXiv:2405.04434)
    sec. 2.1.2, Eq. 9-19, as laid out in DeepSeek-V3's modeling code."""
    h, a = model.hidden_size, model.num_attention_heads
    qk_head = model.qk_nope_head_dim + model.qk_rope_head_dim
    rank = model.kv_lora_rank or 0
    if model.q_lora_rank:
        q = h * model.q_lora_rank + model.q_lora_rank + model.q_lora_rank * a * qk_head
    else:
        q = h * a * qk_head
    kv_down = h * (rank + model.qk_rope_head_dim) + rank  # latent + shared rope key, norm
    kv_up = rank * a * (model.qk_nope_head_dim + model.v_head_dim)
    out = a * model.v_head_dim * h
    return q + kv_down + kv_up + out + indexer_params(model)


def indexer_params(model: ModelSpec) -> int:
    """Parameters of DeepSeek-V3.2's lightning indexer in one block (0 without one).

    Source: DeepSeek-V3.2-Exp report (github.com/deepseek-ai/DeepSeek-V3.2-Exp) sec. 2.1 and its
    inference model.py Indexer: wq_b (q_lora_rank -> heads x head_dim), wk (h -> head_dim),
    k_norm (LayerNorm, weight and bias), weights_proj (h -> heads).
    """
    heads, d, h = model.index_n_heads, model.index_head_dim, model.hidden_size
    if not heads:
        return 0
    return (model.q_lora_rank or h) * heads * d + h * d + 2 * d + h * heads


def linear_attention_params(model: ModelSpec) -> int:
    """Parameters of one Gated DeltaNet block (Qwen3-Next's linear attention).

    Source: transformers Qwen3NextGatedDeltaNet: in_proj_qkvz (h -> 2 key_dim + 2 value_dim),
    in_proj_ba (h -> 2 v_heads), a depthwise conv1d over q, k, v without bias, dt_bias and A_log
    (one per v head), a gated RMSNorm of value_head_dim, out_proj (value_dim -> h);
    Yang et al. 2024, Gated Delta Networks (arXiv:2412.06464).
    """
    h, v_heads = model.hidden_size, model.linear_num_value_heads
    key_dim = model.linear_num_key_heads * model.linear_key_head_dim
    value_dim = v_heads * model.linear_value_head_dim
    projections = h * (2 * key_dim + 2 * value_dim) + h * 2 * v_heads + value_dim * h
    conv = (2 * key_dim + value_dim) * model.linear_conv_kernel_dim
    return projections + conv + 2 * v_heads + model.linear_value_head_dim


def mamba_params(model: ModelSpec) -> int:
    """Parameters of one Mamba2 mixer (Nemotron-H 'M' block, its pre-norm left out).

    Source: transformers NemotronHMamba2Mixer: in_proj (h -> 2 d_inner + 2 G N + H), a
    depthwise conv1d over d_inner + 2 G N channels (kernel K, bias with use_conv_bias),
    dt_bias, A_log and D (one per head), a gated RMSNorm over d_inner, out_proj (d_inner -> h);
    Dao & Gu 2024, Mamba-2 (arXiv:2405.21060) sec. 7.1 (parallel projections of x, z, B, C, dt).
    """
    h, heads, inner = model.hidden_size, model.mamba_num_heads, model.mamba_inner_size
    bc = 2 * model.mamba_n_groups * model.ssm_state_size
    in_width = 2 * inner + bc + heads
    conv_channels = inner + bc
    conv = conv_channels * (model.mamba_conv_kernel + model.mamba_conv_bias)
    biases = (in_width + h) * model.mamba_proj_bias
    return h * in_width + conv + 3 * heads + inner + inner * h + biases


def layer_params(model: ModelSpec, index: int) -> LayerParams:
    """Parameters of transformer block ``index`` (0-based), by component."""
    one_norm = norm_params(model, model.hidden_size)
    if index in model.mamba_layers:  # the mixer is counted as the block's "attention"
        return LayerParams(attention=mamba_params(model), norms=one_norm)
    if index in model.attention_only_layers:
        return LayerParams(attention=attention_params(model), norms=one_norm)
    if index in model.ffn_only_layers:
        return LayerParams(mlp=mlp_params(model, model.intermediate_size), norms=one_norm)
    linear = index in model.linear_attention_layers
    common = {
        "attention": linear_attention_params(model) if linear else attention_params(model),
        # Gemma 2/3 norm the outputs of attention and MLP as well as their inputs.
        "norms": (4 if model.post_norms else 2) * norm_params(model, model.hidden_size),
    }
    if not model.is_moe_layer(index):
        return LayerParams(mlp=mlp_params(model, model.intermediate_size), **common)
    return LayerParams(
        routed_experts=model.n_routed_experts * mlp_params(model, model.moe_intermediate_size),
        shared_experts=mlp_params(model, model.shared_ffn_size) if model.shared_ffn_size else 0,
        router=model.n_routed_experts * (model.hidden_size + model.router_bias)
        + model.hidden_size * model.shared_expert_gate,
        **common,
    )


def active_layer_params(model: ModelSpec, index: int) -> LayerParams:
    """Parameters block ``index`` applies to one token (top-k of the routed experts)."""
    full = layer_params(model, index)
    if not model.is_moe_layer(index):
        return full
    per_expert = full.routed_experts // model.n_routed_experts
    return LayerParams(
        attention=full.attention,
        routed_experts=model.num_experts_per_tok * per_expert,
        shared_experts=full.shared_experts,
        router=full.router,
        norms=full.norms,
    )


def mtp_module_params(model: ModelSpec) -> int:
    """Parameters of one multi-token-prediction module, sharing embedding and LM head.

    Source: DeepSeek-V3 report (arXiv:2412.19437) sec. 2.2: a projection from 2h to h, two
    RMSNorms on its inputs, one transformer block (an MoE block in V3), the output norm.
    """
    block = layer_params(model, model.num_hidden_layers).total  # laid out like the last block
    norms = 3 * norm_params(model, model.hidden_size)
    return 2 * model.hidden_size * model.hidden_size + norms + block


def _sum_layers(model: ModelSpec, active: bool) -> LayerParams:
    per_layer = active_layer_params if active else layer_params
    layers = [per_layer(model, i) for i in range(model.num_hidden_layers)]
    return LayerParams(
        **{f.name: sum(getattr(lp, f.name) for lp in layers) for f in fields(LayerParams)}
    )


def _counts(model: ModelSpec, active: bool) -> ParamCounts:
    h = model.hidden_size
    layers = _sum_layers(model, active)
    mtp = model.num_nextn_predict_layers * mtp_module_params(model)
    if active and model.num_nextn_predict_layers:
        mtp = model.num_nextn_predict_layers * _active_mtp_params(model)
    return ParamCounts(
        embeddings=model.vocab_size * h,
        position_embeddings=model.max_position_embeddings * h * model.learned_position_embeddings,
        attention=layers.attention,
        mlp=layers.mlp,
        routed_experts=layers.routed_experts,
        shared_experts=layers.shared_experts,
        router=layers.router,
        # + the final norm, + BLOOM's norm after the embedding
        norms=layers.norms + norm_params(model, h) * (1 + model.embedding_norm),
        lm_head=(0 if model.tie_word_embeddings else model.vocab_size * h)
        + model.vocab_size * model.lm_head_bias,
        mtp=mtp,
    )


def _active_mtp_params(model: ModelSpec) -> int:
    full = mtp_module_params(model)
    block = layer_params(model, model.num_hidden_layers)
    active_block = active_layer_params(model, model.num_hidden_layers)
    return full - block.total + active_block.total


def active_params_as_published(model: ModelSpec, exclude_embedding: bool = False) -> int:
    """Active parameters per token as a model card counts them: without multi-token prediction,
    and without the input embedding when the publisher leaves it out (GPT-OSS, GLM-4.5: a
    lookup, not a matmul; their cards count the LM head but not the embedding table)."""
    counts = active_param_counts(model)
    return counts.total_without_mtp - (counts.embeddings if exclude_embedding else 0)


def param_counts(model: ModelSpec) -> ParamCounts:
    """Every parameter of the model, by component."""
    return _counts(model, active=False)


def active_param_counts(model: ModelSpec) -> ParamCounts:
    """Parameters one token passes through (MoE: top-k routed experts), by component."""
    return _counts(model, active=True)
