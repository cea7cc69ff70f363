"""A Hugging Face ``config.json`` to a ModelSpec, validated at the boundary.

Supported architectures (the first entry of ``architectures`` that we know, else ``model_type``):
Llama, Mistral, Mixtral, Qwen2, Qwen2-MoE, Qwen3, Qwen3-MoE, DeepSeek-V3 (and models that reuse
it, such as Kimi K2) and GPT-2; Gemma 2 and 3, Phi-3 / Phi-4, Phi-3.5-MoE, Nemotron-4, BLOOM,
MPT, DeepSeek-V2 and V3.2, GLM-4.5, Llama 4, gpt-oss, Qwen3-Next and Nemotron-H (``ARCHITECTURES``
below; the sources are in each class). Fields that set the model's size (widths, layers,
heads, vocabulary, expert and latent widths) must be present; other fields take transformers'
defaults for the architecture. Unknown keys are ignored: configs carry many fields we do not use.

Source: the ``configuration_*.py`` and ``modeling_*.py`` files of huggingface/transformers
(models/llama, mistral, mixtral, qwen2, qwen2_moe, qwen3, qwen3_moe, deepseek_v3, gpt2).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Annotated, Any, ClassVar

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError

from explorer.files import UserFileError, read_user_file
from explorer.limits import LIMITS, MAX_CONFIG_BYTES, LimitError, check_json_text, shown
from explorer.specs import ModelSpec


class ConfigError(ValueError):
    """A config.json that cannot describe a model; the message is one sentence for a person."""


Size = Annotated[int, Field(strict=True, gt=0)]
Count = Annotated[int, Field(strict=True, ge=0)]
Flag = Annotated[bool, Field(strict=True)]
Text = Annotated[str, Field(strict=True)]

GELU_ACTIVATIONS = frozenset(
    {"gelu", "gelu_new", "gelu_fast", "gelu_pytorch_tanh", "gelu_python", "gelu_accurate"}
)
"""GPT-2 activations that keep the 2-matrix GELU MLP (transformers' ACT2FN names)."""


class _Config(BaseModel):
    """One architecture's fields; ``spec_fields`` maps them to ModelSpec keyword arguments."""

    # defer_build: a class's validator is built on its first use, not at import (each costs
    # milliseconds; a run reads one architecture). pydantic docs, "ConfigDict.defer_build".
    model_config = ConfigDict(extra="ignore", frozen=True, defer_build=True)

    def spec_fields(self) -> dict[str, Any]:
        raise NotImplementedError


class _Decoder(_Config):
    """Fields shared by the Llama-style decoders: gated MLP, RMSNorm, RoPE."""

    hidden_size: Size
    num_hidden_layers: Size
    num_attention_heads: Size
    num_key_value_heads: Size | None = None
    head_dim: Size | None = None
    intermediate_size: Size
    vocab_size: Size
    max_position_embeddings: Size = 4096
    tie_word_embeddings: Flag = False

    def spec_fields(self) -> dict[str, Any]:
        # The MLP is gated (gate, up, down) whatever hidden_act names, so it is "swiglu" here.
        return self._copy(*_Decoder.model_fields) | {"ffn_kind": "swiglu", "norm_kind": "rmsnorm"}

    def _copy(self, *names: str) -> dict[str, Any]:
        """Fields whose name is the same in the config and in ModelSpec."""
        return {name: getattr(self, name) for name in names}


class _Llama(_Decoder):
    """LlamaForCausalLM: ``attention_bias`` covers q, k, v and o; ``mlp_bias`` all three."""

    max_position_embeddings: Size = 2048
    attention_bias: Flag = False
    mlp_bias: Flag = False

    def spec_fields(self) -> dict[str, Any]:
        biases = {"attention_out_bias": self.attention_bias, "mlp_bias": self.mlp_bias}
        return super().spec_fields() | {"attention_bias": self.attention_bias} | biases


class _Mistral(_Decoder):
    """MistralForCausalLM: no biases; sliding windows do not change the weights."""

    max_position_embeddings: Size = 4096 * 32


class _Mixtral(_Mistral):
    """MixtralForCausalLM: every layer is MoE and intermediate_size is one expert's width."""

    num_local_experts: Size
    num_experts_per_tok: Size = 2

    def spec_fields(self) -> dict[str, Any]:
        return super().spec_fields() | {
            "n_routed_experts": self.num_local_experts,
            "num_experts_per_tok": self.num_experts_per_tok,
            "moe_intermediate_size": self.intermediate_size,
        }


class _Qwen2(_Decoder):
    """Qwen2ForCausalLM: q, k and v always carry biases (the config does not say so)."""

    max_position_embeddings: Size = 32768

    def spec_fields(self) -> dict[str, Any]:
        return super().spec_fields() | {"attention_bias": True}


class _QwenMoe(_Config):
    """The MoE fields Qwen2-MoE and Qwen3-MoE share (no first_k_dense_replace in their configs)."""

    num_experts: Count
    num_experts_per_tok: Size = 8
    moe_intermediate_size: Size
    decoder_sparse_step: Size = 1
    mlp_only_layers: tuple[Annotated[int, Field(strict=True)], ...] = ()

    def moe_fields(self, num_layers: int) -> dict[str, Any]:
        if not self.num_experts:
            return {}
        layout = _sparse_layout(num_layers, self.decoder_sparse_step, self.mlp_only_layers)
        if layout is None:
            return {}
        first_dense, frequency = layout
        return {
            "n_routed_experts": self.num_experts,
            "num_experts_per_tok": self.num_experts_per_tok,
            "moe_intermediate_size": self.moe_intermediate_size,
            "first_k_dense_replace": first_dense,
            "moe_layer_freq": frequency,
        }


class _Qwen2Moe(_Qwen2, _QwenMoe):
    """Qwen2MoeForCausalLM: one shared expert of shared_expert_intermediate_size.

    The shared expert's 1-output gate (hidden_size weights per layer) is left out.
    """

    num_experts_per_tok: Size = 4
    shared_expert_intermediate_size: Count

    def spec_fields(self) -> dict[str, Any]:
        moe = self.moe_fields(self.num_hidden_layers)
        if moe and self.shared_expert_intermediate_size:
            moe |= {
                "n_shared_experts": 1,
                "shared_expert_intermediate_size": self.shared_expert_intermediate_size,
            }
        return super().spec_fields() | moe


class _Qwen3(_Decoder):
    """Qwen3ForCausalLM: RMSNorm on q and k per head; head_dim defaults to 128, not h / a."""

    max_position_embeddings: Size = 32768
    head_dim: Size | None = 128
    attention_bias: Flag = False

    def spec_fields(self) -> dict[str, Any]:
        bias = {"attention_bias": self.attention_bias, "attention_out_bias": self.attention_bias}
        return super().spec_fields() | bias | {"qk_norm": True}


class _Qwen3Moe(_Qwen3, _QwenMoe):
    """Qwen3MoeForCausalLM: Qwen3 attention, routed experts, no shared expert."""

    def spec_fields(self) -> dict[str, Any]:
        return super().spec_fields() | self.moe_fields(self.num_hidden_layers)


class _DeepseekV3(_Decoder):
    """DeepseekV3ForCausalLM: multi-head latent attention and fine-grained experts."""

    head_dim: Any = None  # derived from the MLA widths; some exports write qk_rope_head_dim here
    attention_bias: Flag = False
    q_lora_rank: Size | None  # required, may be null (no query compression)
    kv_lora_rank: Size
    qk_rope_head_dim: Size
    qk_nope_head_dim: Count
    v_head_dim: Size
    n_routed_experts: Size
    n_shared_experts: Count | None  # required, may be null (none)
    num_experts_per_tok: Size
    moe_intermediate_size: Size
    first_k_dense_replace: Count = 0
    moe_layer_freq: Size = 1
    num_nextn_predict_layers: Count = 0
    topk_method: Text = "greedy"
    n_group: Size | None = None
    topk_group: Size | None = None

    def spec_fields(self) -> dict[str, Any]:
        return super().spec_fields() | self._mla() | self._moe()

    def _mla(self) -> dict[str, Any]:
        mla = ("q_lora_rank", "kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim")
        bias = {"attention_bias": self.attention_bias, "attention_out_bias": self.attention_bias}
        return self._copy(*mla) | bias | {"head_dim": None}

    def _moe(self) -> dict[str, Any]:
        moe = ("n_routed_experts", "num_experts_per_tok", "moe_intermediate_size")
        layers = ("first_k_dense_replace", "moe_layer_freq", "num_nextn_predict_layers")
        return self._copy(*moe, *layers) | {
            "n_shared_experts": self.n_shared_experts or 0,
            # DeepSeek-V3 report, section 2.1.2: aux-loss-free balancing adds a bias per expert.
            "router_bias": self.topk_method == "noaux_tc",
            # Section 2.1.2 again: node-limited routing sends a token to at most topk_group of
            # the n_group expert groups (one group per node in the published layout).
            "n_group": self.n_group or 1,
            "topk_group": self.topk_group if (self.n_group or 1) > 1 else None,
        }


class _Gpt2(_Config):
    """GPT2LMHeadModel: LayerNorm with bias, learned positions, 4h GELU MLP, biases, tied head."""

    n_embd: Size
    n_layer: Size
    n_head: Size
    vocab_size: Size
    n_positions: Size = 1024
    n_inner: Size | None = None
    activation_function: Text = "gelu_new"
    tie_word_embeddings: Flag = True

    def spec_fields(self) -> dict[str, Any]:
        if self.activation_function not in GELU_ACTIVATIONS:
            raise ConfigError(
                f"activation_function {_short(self.activation_function)} is not supported for "
                f"GPT2LMHeadModel; use one of {', '.join(sorted(GELU_ACTIVATIONS))}."
            )
        return {
            "hidden_size": self.n_embd,
            "num_hidden_layers": self.n_layer,
            "num_attention_heads": self.n_head,
            "intermediate_size": self.n_inner or 4 * self.n_embd,
            "vocab_size": self.vocab_size,
            "max_position_embeddings": self.n_positions,
            "tie_word_embeddings": self.tie_word_embeddings,
            "ffn_kind": "gelu",
            "norm_kind": "layernorm",
            "attention_bias": True,
            "attention_out_bias": True,
            "mlp_bias": True,
            "learned_position_embeddings": True,
        }


# ------------------------------------------------------------------ newer architectures


_LAYER_TYPES = frozenset({"full_attention", "sliding_attention"})
"""``layer_types`` entries this tool models (transformers' names)."""


def _window_layers(
    layer_types: tuple[str, ...] | None, num_layers: int, default: tuple[int, ...] | None
) -> tuple[int, ...] | None:
    """Blocks with a sliding window from ``layer_types`` when the config lists them."""
    if layer_types is None:
        return default
    unknown = sorted(set(layer_types) - _LAYER_TYPES)
    if unknown:
        raise ConfigError(
            f"config.json field 'layer_types' has {_short(unknown[0])}, which this tool does "
            "not model; supported: full_attention, sliding_attention."
        )
    if len(layer_types) != num_layers:
        raise ConfigError(
            f"config.json field 'layer_types' lists {len(layer_types)} layers for "
            f"num_hidden_layers = {num_layers}."
        )
    return tuple(i for i, kind in enumerate(layer_types) if kind == "sliding_attention")


class _Windowed(_Config):
    """The sliding-window fields shared by Mistral-style, Gemma and Phi-3 configs."""

    sliding_window: Size | None = None
    layer_types: tuple[Text, ...] | None = None

    def window_fields(self, num_layers: int, default: tuple[int, ...] | None) -> dict[str, Any]:
        if self.sliding_window is None:
            return {}
        layers = _window_layers(self.layer_types, num_layers, default)
        return {"sliding_window": self.sliding_window, "window_layers": layers}


class _Gemma2(_Decoder, _Windowed):
    """Gemma2ForCausalLM: head_dim apart from h / a, four RMSNorms per block, tied head,
    sliding window on even blocks (transformers: ``is_sliding = not layer_idx % 2``).

    Soft-capping of attention logits and of the final logits is elementwise: it changes
    neither the weights nor the matmul FLOPs, so it is read and not modelled.
    Source: Gemma 2 report (arXiv:2408.00118) sec. 2, Table 1.
    """

    head_dim: Size | None = 256
    max_position_embeddings: Size = 8192
    tie_word_embeddings: Flag = True
    sliding_window: Size | None = 4096
    attention_bias: Flag = False

    def default_windows(self) -> tuple[int, ...]:
        return tuple(range(0, self.num_hidden_layers, 2))

    def spec_fields(self) -> dict[str, Any]:
        windows = self.window_fields(self.num_hidden_layers, self.default_windows())
        bias = {"attention_bias": self.attention_bias, "attention_out_bias": self.attention_bias}
        return super().spec_fields() | bias | {"post_norms": True} | windows


class _Gemma3(_Gemma2):
    """Gemma3ForCausalLM (text): Gemma 2 plus q/k RMSNorms; five local blocks per global one.

    Source: Gemma 3 report (arXiv:2503.19786) sec. 2 (5:1 local:global, window 1024, QK-norm);
    transformers Gemma3TextConfig: block i is sliding unless (i + 1) % sliding_window_pattern == 0.
    """

    max_position_embeddings: Size = 131072
    sliding_window_pattern: Size = 6

    def default_windows(self) -> tuple[int, ...]:
        pattern = self.sliding_window_pattern
        return tuple(i for i in range(self.num_hidden_layers) if (i + 1) % pattern)

    def spec_fields(self) -> dict[str, Any]:
        return super().spec_fields() | {"qk_norm": True}


class _Multimodal(_Config):
    """A model whose language model sits in ``text_config`` (read by ``TEXT``); the vision
    encoder and projector are left out of every count."""

    TEXT: ClassVar[type[_Config]]
    ARCHITECTURE: ClassVar[str]
    text_config: dict[str, Any]

    def spec_fields(self) -> dict[str, Any]:
        try:
            return self.TEXT.model_validate(self.text_config).spec_fields()
        except ValidationError as error:
            raise ConfigError(_describe(error, f"{self.ARCHITECTURE} (text_config)")) from None


class _Gemma3Multimodal(_Multimodal):
    """Gemma3ForConditionalGeneration: the SigLIP vision tower and projector (about 0.4B) are
    left out of every count."""

    TEXT = _Gemma3
    ARCHITECTURE = "Gemma3ForConditionalGeneration"


class _Phi3(_Decoder, _Windowed):
    """Phi3ForCausalLM (Phi-3, Phi-3.5-mini, Phi-4): fused qkv and gate_up projections hold the
    same weights as Llama's separate ones; the window (when set) covers every block."""

    def spec_fields(self) -> dict[str, Any]:
        return super().spec_fields() | self.window_fields(self.num_hidden_layers, None)


class _PhiMoe(_Phi3):
    """PhimoeForCausalLM (Phi-3.5-MoE): LayerNorm with bias, biases on q, k, v, o and the LM
    head, every block MoE with num_local_experts experts of intermediate_size."""

    num_local_experts: Size
    num_experts_per_tok: Size = 2
    attention_bias: Flag = True
    lm_head_bias: Flag = True

    def spec_fields(self) -> dict[str, Any]:
        return super().spec_fields() | {
            "norm_kind": "layernorm",
            "attention_bias": self.attention_bias,
            "attention_out_bias": self.attention_bias,
            "lm_head_bias": self.lm_head_bias,
            "n_routed_experts": self.num_local_experts,
            "num_experts_per_tok": self.num_experts_per_tok,
            "moe_intermediate_size": self.intermediate_size,
        }


class _QwenWindow(_Windowed):
    """Qwen2 / Qwen3 ``use_sliding_window``: blocks from max_window_layers on are windowed
    (transformers Qwen2Config and Qwen3Config: sliding when use_sliding_window and
    i >= max_window_layers, unless layer_types lists the blocks)."""

    use_sliding_window: Flag = False
    max_window_layers: Count = 28

    def qwen_window_fields(self, num_layers: int) -> dict[str, Any]:
        if not self.use_sliding_window:
            return {}
        default = tuple(range(self.max_window_layers, num_layers))
        return self.window_fields(num_layers, default)


class _Qwen2Windowed(_Qwen2, _QwenWindow):
    """Qwen2ForCausalLM (Qwen2, Qwen2.5) with its sliding window where configured."""

    def spec_fields(self) -> dict[str, Any]:
        return super().spec_fields() | self.qwen_window_fields(self.num_hidden_layers)


class _Qwen3Windowed(_Qwen3, _QwenWindow):
    """Qwen3ForCausalLM with its sliding window where configured (released Qwen3 configs set
    use_sliding_window false)."""

    def spec_fields(self) -> dict[str, Any]:
        return super().spec_fields() | self.qwen_window_fields(self.num_hidden_layers)


class _Qwen3MoeWindowed(_Qwen3Moe, _QwenWindow):
    """Qwen3MoeForCausalLM with its sliding window where configured."""

    def spec_fields(self) -> dict[str, Any]:
        return super().spec_fields() | self.qwen_window_fields(self.num_hidden_layers)


class _MistralWindowed(_Mistral, _Windowed):
    """MistralForCausalLM with its sliding window on every block (Mistral 7B v0.1: 4096)."""

    def spec_fields(self) -> dict[str, Any]:
        return super().spec_fields() | self.window_fields(self.num_hidden_layers, None)


class _Nemotron(_Decoder):
    """NemotronForCausalLM (Nemotron-4, Minitron): squared-ReLU MLP of two matrices (no gate),
    LayerNorm1P (weight and bias), GQA, untied head.

    Source: Nemotron-4 15B report (arXiv:2402.16819) sec. 2: squared ReLU, no bias, GQA;
    transformers models/nemotron.
    """

    attention_bias: Flag = False
    mlp_bias: Flag = False
    hidden_act: Text = "relu2"

    def spec_fields(self) -> dict[str, Any]:
        if self.hidden_act != "relu2":
            raise ConfigError(
                f"config.json field 'hidden_act' is {_short(self.hidden_act)}; this tool models "
                "NemotronForCausalLM with relu2 only."
            )
        return super().spec_fields() | {
            "ffn_kind": "relu2",
            "norm_kind": "layernorm",
            "attention_bias": self.attention_bias,
            "attention_out_bias": self.attention_bias,
            "mlp_bias": self.mlp_bias,
        }


class _Bloom(_Config):
    """BloomForCausalLM: ALiBi (no position table), LayerNorm after the embedding, fused qkv
    with biases, 4h GELU MLP with biases, tied head.

    Source: BLOOM paper (arXiv:2211.05100) sec. 3.2.3-3.2.4, Table 3; transformers models/bloom
    (``n_embed`` is read as hidden_size).
    """

    hidden_size: Size | None = None
    n_embed: Size | None = None
    n_layer: Size
    n_head: Size
    vocab_size: Size
    tie_word_embeddings: Flag = True

    def spec_fields(self) -> dict[str, Any]:
        width = self.hidden_size or self.n_embed
        if width is None:
            raise ConfigError(
                "config.json has no field 'hidden_size' (or 'n_embed'), which "
                "BloomForCausalLM needs."
            )
        return {
            "hidden_size": width,
            "num_hidden_layers": self.n_layer,
            "num_attention_heads": self.n_head,
            "intermediate_size": 4 * width,
            "vocab_size": self.vocab_size,
            "tie_word_embeddings": self.tie_word_embeddings,
            "ffn_kind": "gelu",
            "norm_kind": "layernorm",
            "attention_bias": True,
            "attention_out_bias": True,
            "mlp_bias": True,
            "embedding_norm": True,
            "alibi": True,
            "max_position_embeddings": 2048,  # BLOOM paper Table 3: sequence length 2048
        }


class _MptAttention(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, defer_build=True)
    alibi: Flag = False
    attn_type: Text = "multihead_attention"


class _Mpt(_Config):
    """MptForCausalLM: LayerNorm (without bias when no_bias), no biases, ALiBi, a GELU MLP of
    expansion_ratio x d_model, tied head. Source: MosaicML MPT-7B model card; transformers
    models/mpt."""

    d_model: Size
    n_layers: Size
    n_heads: Size
    expansion_ratio: Size = 4
    vocab_size: Size
    max_seq_len: Size = 2048
    no_bias: Flag = True
    attn_config: _MptAttention = _MptAttention()

    def spec_fields(self) -> dict[str, Any]:
        if self.attn_config.attn_type != "multihead_attention":
            raise ConfigError(
                f"config.json field 'attn_config.attn_type' is "
                f"{_short(self.attn_config.attn_type)}; this tool models multihead_attention."
            )
        bias = not self.no_bias
        return {
            "hidden_size": self.d_model,
            "num_hidden_layers": self.n_layers,
            "num_attention_heads": self.n_heads,
            "intermediate_size": self.expansion_ratio * self.d_model,
            "vocab_size": self.vocab_size,
            "max_position_embeddings": self.max_seq_len,
            "tie_word_embeddings": True,
            "ffn_kind": "gelu",
            "norm_kind": "layernorm",
            "layernorm_bias": bias,
            "attention_bias": bias,
            "attention_out_bias": bias,
            "mlp_bias": bias,
            "alibi": self.attn_config.alibi,
            "learned_position_embeddings": not self.attn_config.alibi,
        }


class _DeepseekV2(_DeepseekV3):
    """DeepseekV2ForCausalLM: MLA and fine-grained experts as V3, softmax routing without the
    score-correction bias, no multi-token prediction. Source: DeepSeek-V2 report
    (arXiv:2405.04434) sec. 2.1-2.2."""

    q_lora_rank: Size | None = None
    n_shared_experts: Count | None = None
    num_experts_per_tok: Size = 6


class _Glm4Moe(_Decoder):
    """Glm4MoeForCausalLM (GLM-4.5, GLM-4.5-Air): GQA attention with q, k, v biases, DeepSeek-V3
    style experts (shared expert, score-correction bias, leading dense blocks) and one
    multi-token-prediction layer. Source: GLM-4.5 report (arXiv:2508.06471) sec. 2.1, Table 1;
    transformers models/glm4_moe."""

    attention_bias: Flag = False
    use_qk_norm: Flag = False
    n_routed_experts: Size
    n_shared_experts: Count = 1
    num_experts_per_tok: Size
    moe_intermediate_size: Size
    first_k_dense_replace: Count = 1
    num_nextn_predict_layers: Count = 0

    def spec_fields(self) -> dict[str, Any]:
        return super().spec_fields() | {
            "attention_bias": self.attention_bias,
            "qk_norm": self.use_qk_norm,
            "n_routed_experts": self.n_routed_experts,
            "n_shared_experts": self.n_shared_experts,
            "num_experts_per_tok": self.num_experts_per_tok,
            "moe_intermediate_size": self.moe_intermediate_size,
            "first_k_dense_replace": self.first_k_dense_replace,
            "num_nextn_predict_layers": self.num_nextn_predict_layers,
            "router_bias": True,  # e_score_correction_bias, as DeepSeek-V3's noaux_tc
        }


class _Llama4Text(_Decoder):
    """Llama4ForCausalLM (text): MoE blocks with one shared expert and top-k routed experts of
    intermediate_size, dense blocks of intermediate_size_mlp between them
    (interleave_moe_layer_step), and chunked attention on the RoPE blocks (three of every four;
    the fourth is a global NoPE block). q/k norms are weight-free L2 norms.

    Source: transformers Llama4TextConfig (moe_layers, no_rope_layers defaults) and
    Llama4TextMoe; Meta, "The Llama 4 herd" (ai.meta.com/blog/llama-4-multimodal-intelligence).
    """

    intermediate_size_mlp: Size
    num_local_experts: Size
    num_experts_per_tok: Size = 1
    interleave_moe_layer_step: Size = 1
    moe_layers: tuple[Annotated[int, Field(strict=True)], ...] | None = None
    attention_chunk_size: Size | None = 8192
    no_rope_layers: tuple[Annotated[int, Field(strict=True)], ...] | None = None
    no_rope_layer_interval: Size = 4
    attention_bias: Flag = False

    def _moe_layout(self) -> tuple[int, int]:
        step, layers = self.interleave_moe_layer_step, self.num_hidden_layers
        expected = tuple(range(step - 1, layers, step))
        if self.moe_layers is not None and tuple(self.moe_layers) != expected:
            raise ConfigError(
                f"config.json field 'moe_layers' {_short(list(self.moe_layers))} is not every "
                f"{step}-th layer; this tool models that pattern only."
            )
        return step - 1, step

    def _chunked_layers(self) -> tuple[int, ...]:
        rope = self.no_rope_layers
        if not rope:  # transformers: an empty list means the default pattern too
            interval = self.no_rope_layer_interval
            rope = tuple(int((i + 1) % interval != 0) for i in range(self.num_hidden_layers))
        return tuple(i for i, uses_rope in enumerate(rope) if uses_rope)

    def spec_fields(self) -> dict[str, Any]:
        first_dense, frequency = self._moe_layout()
        fields = super().spec_fields() | {
            "intermediate_size": self.intermediate_size_mlp,
            "attention_bias": self.attention_bias,
            "attention_out_bias": self.attention_bias,
            "n_routed_experts": self.num_local_experts,
            "num_experts_per_tok": self.num_experts_per_tok,
            "moe_intermediate_size": self.intermediate_size,
            "n_shared_experts": 1,
            "first_k_dense_replace": first_dense,
            "moe_layer_freq": frequency,
        }
        if self.attention_chunk_size is None:
            return fields
        return fields | {
            "sliding_window": self.attention_chunk_size,
            "window_layers": self._chunked_layers(),
            "chunked_attention": True,
        }


class _Llama4(_Multimodal):
    """Llama4ForConditionalGeneration: the language model in ``text_config``."""

    TEXT = _Llama4Text
    ARCHITECTURE = "Llama4ForConditionalGeneration"


class _GptOss(_Decoder, _Windowed):
    """GptOssForCausalLM: every block MoE (num_local_experts experts of intermediate_size, with
    biases, top experts_per_token, a router with bias), attention with biases and a learned
    sink per head, a 128-token sliding window on alternate blocks (even ones by default).

    The published checkpoints store the expert weights in MXFP4 (4-bit values, one 8-bit scale
    per 32): serve them with --weights-dtype int4 as the nearest format this tool has.
    Source: OpenAI, gpt-oss-120b & gpt-oss-20b model card (arXiv:2508.10925) sec. 2.1;
    transformers GptOssConfig.
    """

    num_local_experts: Size
    num_experts_per_tok: Size | None = None
    experts_per_token: Size | None = None
    attention_bias: Flag = True
    sliding_window: Size | None = 128

    def spec_fields(self) -> dict[str, Any]:
        top_k = self.num_experts_per_tok or self.experts_per_token or 4
        default = tuple(range(0, self.num_hidden_layers, 2))
        return (
            super().spec_fields()
            | {
                "attention_bias": self.attention_bias,
                "attention_out_bias": self.attention_bias,
                "attention_sinks": True,
                "mlp_bias": True,  # expert gate_up and down biases (no dense MLP exists)
                "n_routed_experts": self.num_local_experts,
                "num_experts_per_tok": top_k,
                "moe_intermediate_size": self.intermediate_size,
                "router_bias": True,
            }
            | self.window_fields(self.num_hidden_layers, default)
        )


class _DeepseekV32(_DeepseekV3):
    """DeepseekV32ForCausalLM: DeepSeek-V3 plus DeepSeek Sparse Attention: a lightning indexer
    per block picks index_topk keys for each query. Source: DeepSeek-V3.2-Exp report sec. 2.1."""

    index_topk: Size
    index_n_heads: Size
    index_head_dim: Size

    def spec_fields(self) -> dict[str, Any]:
        return super().spec_fields() | self._copy("index_topk", "index_n_heads", "index_head_dim")


class _Qwen3Next(_Qwen3Moe):
    """Qwen3NextForCausalLM: three Gated DeltaNet (linear attention) blocks to each gated
    softmax-attention block (full_attention_interval), and high-sparsity MoE with a shared
    expert (with its 1-output gate) in every block.

    Source: Qwen3-Next-80B-A3B model card (hybrid layout 12 x (3 x (Gated DeltaNet -> MoE) ->
    1 x (Gated Attention -> MoE))); transformers Qwen3NextConfig (layer_types default).
    """

    shared_expert_intermediate_size: Count = 0
    attn_output_gate: Flag = True
    full_attention_interval: Size = 4
    linear_num_key_heads: Size
    linear_key_head_dim: Size
    linear_num_value_heads: Size
    linear_value_head_dim: Size
    linear_conv_kernel_dim: Size = 4

    def _linear_layers(self) -> tuple[int, ...]:
        n, kinds = self.num_hidden_layers, self.layer_types
        if kinds is None:
            return tuple(i for i in range(n) if (i + 1) % self.full_attention_interval)
        unknown = sorted(set(kinds) - {"linear_attention", "full_attention"})
        if unknown or len(kinds) != n:
            raise ConfigError(
                f"config.json field 'layer_types' must list {n} of linear_attention and "
                f"full_attention, got {_short(list(kinds))}."
            )
        return tuple(i for i, kind in enumerate(kinds) if kind == "linear_attention")

    layer_types: tuple[Text, ...] | None = None

    def spec_fields(self) -> dict[str, Any]:
        linear = (
            "linear_num_key_heads", "linear_key_head_dim", "linear_num_value_heads",
            "linear_value_head_dim", "linear_conv_kernel_dim", "attn_output_gate",
        )  # fmt: skip
        fields = super().spec_fields() | self._copy(*linear)
        fields["linear_attention_layers"] = self._linear_layers()
        if fields.get("n_routed_experts") and self.shared_expert_intermediate_size:
            fields |= {
                "n_shared_experts": 1,
                "shared_expert_intermediate_size": self.shared_expert_intermediate_size,
                "shared_expert_gate": True,
            }
        return fields


_NEMOTRON_H_KINDS: Mapping[str, str] = MappingProxyType(
    {
        "mamba": "M", "linear_attention": "M", "attention": "*", "full_attention": "*",
        "mlp": "-", "moe": "E",
    }
)  # fmt: skip
"""layers_block_type names -> hybrid_override_pattern characters (transformers NemotronHConfig,
old and new names)."""

MambaSize = Annotated[int, Field(strict=True, gt=0, le=1 << 17)]
"""A Mamba2 width; at most 131,072 (this tool's limit, the same as hidden_size's)."""


class _NemotronH(_Config):
    """NemotronHForCausalLM (Nemotron-H 4B/8B/47B/56B): a hybrid of single-module blocks, one
    character per block in hybrid_override_pattern: 'M' a Mamba2 mixer, '*' GQA attention
    without RoPE, '-' a squared-ReLU MLP of two matrices; each block has one RMSNorm before
    its module; untied LM head.

    Source: Nemotron-H report (arXiv:2504.03624) sec. 2.1 (layer pattern, Mamba-2 layers,
    squared-ReLU FFN); transformers models/nemotron_h (NemotronHConfig, NemotronHBlock,
    NemotronHMamba2Mixer).
    """

    hidden_size: Size
    vocab_size: Size
    num_attention_heads: Size
    num_key_value_heads: Size | None = None
    head_dim: Size | None = None
    attention_head_dim: Size | None = None  # the name in nvidia's own config.json files
    intermediate_size: Size
    max_position_embeddings: Size = 4096
    tie_word_embeddings: Flag = False
    attention_bias: Flag = False
    mlp_bias: Flag = False
    use_bias: Flag = False  # in_proj and out_proj of the Mamba2 mixer
    mlp_hidden_act: Text = "relu2"
    num_hidden_layers: Size | None = None
    hybrid_override_pattern: Text | None = None
    layers_block_type: tuple[Text, ...] | None = None
    mamba_num_heads: MambaSize
    mamba_head_dim: MambaSize
    ssm_state_size: MambaSize
    n_groups: MambaSize = Field(
        default=8, validation_alias=AliasChoices("n_groups", "mamba_n_groups")
    )
    conv_kernel: MambaSize = Field(
        default=4, validation_alias=AliasChoices("conv_kernel", "mamba_d_conv")
    )
    use_conv_bias: Flag = Field(
        default=True, validation_alias=AliasChoices("use_conv_bias", "mamba_conv_bias")
    )
    chunk_size: MambaSize = Field(
        default=128, validation_alias=AliasChoices("chunk_size", "mamba_chunk_size")
    )

    def _pattern(self) -> str:
        if self.hybrid_override_pattern is not None:
            pattern, field = self.hybrid_override_pattern, "hybrid_override_pattern"
        elif self.layers_block_type is not None:
            unknown = sorted(set(self.layers_block_type) - set(_NEMOTRON_H_KINDS))
            if unknown:
                raise ConfigError(
                    f"config.json field 'layers_block_type' has {_short(unknown[0])}; each entry "
                    f"must be one of {', '.join(_NEMOTRON_H_KINDS)}."
                )
            pattern = "".join(_NEMOTRON_H_KINDS[k] for k in self.layers_block_type)
            field = "layers_block_type"
        else:
            raise ConfigError(
                "config.json has no field 'hybrid_override_pattern' (or 'layers_block_type'), "
                "which NemotronHForCausalLM needs."
            )
        bad = sorted(set(pattern) - set("M*-E"))
        if not pattern or bad:
            raise ConfigError(
                f"config.json field '{field}' must be a non-empty string of 'M' (Mamba2), '*' "
                f"(attention) and '-' (MLP), got {_short(pattern)}."
            )
        if "E" in pattern:
            raise ConfigError(
                f"config.json field '{field}' has MoE blocks ('E', Nemotron 3); this tool "
                "models Nemotron-H with Mamba2, attention and MLP blocks only."
            )
        if "*" not in pattern:  # serving sizes its KV pool on the attention blocks
            raise ConfigError(
                f"config.json field '{field}' has no attention block ('*'); this tool models "
                "Nemotron-H hybrids with at least one."
            )
        if self.num_hidden_layers is not None and self.num_hidden_layers != len(pattern):
            raise ConfigError(
                f"config.json field 'num_hidden_layers' is {shown(self.num_hidden_layers)} but "
                f"'{field}' describes {shown(len(pattern))} blocks."
            )
        return pattern

    def spec_fields(self) -> dict[str, Any]:
        if self.mlp_hidden_act != "relu2":
            raise ConfigError(
                f"config.json field 'mlp_hidden_act' is {_short(self.mlp_hidden_act)}; this "
                "tool models NemotronHForCausalLM with relu2 only."
            )
        if self.mamba_num_heads % self.n_groups:
            raise ConfigError(
                f"config.json field 'mamba_num_heads' ({shown(self.mamba_num_heads)}) must be a "
                f"multiple of 'n_groups' ({shown(self.n_groups)})."
            )
        pattern = self._pattern()
        blocks = {kind: tuple(i for i, c in enumerate(pattern) if c == kind) for kind in "M*-"}
        return {
            "num_hidden_layers": len(pattern),
            "hidden_size": self.hidden_size,
            "num_attention_heads": self.num_attention_heads,
            "num_key_value_heads": self.num_key_value_heads,
            "head_dim": self.head_dim or self.attention_head_dim,
            "intermediate_size": self.intermediate_size,
            "vocab_size": self.vocab_size,
            "max_position_embeddings": self.max_position_embeddings,
            "tie_word_embeddings": self.tie_word_embeddings,
            "ffn_kind": "relu2",
            "norm_kind": "rmsnorm",
            "attention_bias": self.attention_bias,
            "attention_out_bias": self.attention_bias,
            "mlp_bias": self.mlp_bias,
            "mamba_layers": blocks["M"],
            "attention_only_layers": blocks["*"],
            "ffn_only_layers": blocks["-"],
            "mamba_num_heads": self.mamba_num_heads,
            "mamba_head_dim": self.mamba_head_dim,
            "ssm_state_size": self.ssm_state_size,
            "mamba_n_groups": self.n_groups,
            "mamba_conv_kernel": self.conv_kernel,
            "mamba_conv_bias": self.use_conv_bias,
            "mamba_proj_bias": self.use_bias,
            "mamba_chunk_size": self.chunk_size,
        }


ARCHITECTURES: Mapping[str, type[_Config]] = MappingProxyType(
    {
        "LlamaForCausalLM": _Llama,
        "MistralForCausalLM": _MistralWindowed,
        "MixtralForCausalLM": _Mixtral,
        "Qwen2ForCausalLM": _Qwen2Windowed,
        "Qwen2MoeForCausalLM": _Qwen2Moe,
        "Qwen3ForCausalLM": _Qwen3Windowed,
        "Qwen3MoeForCausalLM": _Qwen3MoeWindowed,
        "DeepseekV3ForCausalLM": _DeepseekV3,
        "GPT2LMHeadModel": _Gpt2,
        "Gemma2ForCausalLM": _Gemma2,
        "Gemma3ForCausalLM": _Gemma3,
        "Gemma3ForConditionalGeneration": _Gemma3Multimodal,
        "Phi3ForCausalLM": _Phi3,
        "PhimoeForCausalLM": _PhiMoe,
        "NemotronForCausalLM": _Nemotron,
        "BloomForCausalLM": _Bloom,
        "MptForCausalLM": _Mpt,
        "MPTForCausalLM": _Mpt,  # the spelling of mosaicml/mpt-7b's config.json
        "DeepseekV2ForCausalLM": _DeepseekV2,
        "Glm4MoeForCausalLM": _Glm4Moe,
        "Llama4ForCausalLM": _Llama4Text,
        "Llama4ForConditionalGeneration": _Llama4,
        "GptOssForCausalLM": _GptOss,
        "DeepseekV32ForCausalLM": _DeepseekV32,
        "Qwen3NextForCausalLM": _Qwen3Next,
        "NemotronHForCausalLM": _NemotronH,
    }
)
"""Supported ``architectures`` names and the fields each reads."""

MODEL_TYPES: Mapping[str, str] = MappingProxyType(
    {
        "llama": "LlamaForCausalLM",
        "mistral": "MistralForCausalLM",
        "mixtral": "MixtralForCausalLM",
        "qwen2": "Qwen2ForCausalLM",
        "qwen2_moe": "Qwen2MoeForCausalLM",
        "qwen3": "Qwen3ForCausalLM",
        "qwen3_moe": "Qwen3MoeForCausalLM",
        "deepseek_v3": "DeepseekV3ForCausalLM",
        "kimi_k2": "DeepseekV3ForCausalLM",
        "gpt2": "GPT2LMHeadModel",
        "gemma2": "Gemma2ForCausalLM",
        "gemma3_text": "Gemma3ForCausalLM",
        "gemma3": "Gemma3ForConditionalGeneration",
        "phi3": "Phi3ForCausalLM",
        "phimoe": "PhimoeForCausalLM",
        "nemotron": "NemotronForCausalLM",
        "bloom": "BloomForCausalLM",
        "mpt": "MptForCausalLM",
        "deepseek_v2": "DeepseekV2ForCausalLM",
        "glm4_moe": "Glm4MoeForCausalLM",
        "llama4_text": "Llama4ForCausalLM",
        "llama4": "Llama4ForConditionalGeneration",
        "gpt_oss": "GptOssForCausalLM",
        "deepseek_v32": "DeepseekV32ForCausalLM",
        "qwen3_next": "Qwen3NextForCausalLM",
        "nemotron_h": "NemotronHForCausalLM",
    }
)
"""``model_type`` values used when a config has no ``architectures`` list."""


def _sparse_layout(
    num_layers: int, step: int, dense_layers: tuple[int, ...]
) -> tuple[int, int] | None:
    """(first_k_dense_replace, moe_layer_freq) of a Qwen MoE layout, or None if no layer is MoE.

    Source: transformers Qwen3MoeDecoderLayer: layer i is MoE when it is not in mlp_only_layers
    and (i + 1) % decoder_sparse_step == 0. ModelSpec can hold that when mlp_only_layers removes
    only the first k of those layers.
    """
    removed = {i for i in dense_layers if 0 <= i < num_layers and (i + 1) % step == 0}
    slots = sorted((i + 1) // step - 1 for i in removed)  # which MoE layers became dense
    if slots != list(range(len(slots))):
        raise ConfigError(
            f"mlp_only_layers {_short(list(dense_layers))} leaves MoE layers in a pattern this "
            "tool cannot represent; only the first MoE layers may be made dense."
        )
    first_moe = (len(slots) + 1) * step - 1
    return (first_moe, step) if first_moe < num_layers else None


def _short(value: object, limit: int = 60) -> str:
    if isinstance(value, int) and not isinstance(value, bool):
        return shown(value)  # repr of a huge integer can itself fail
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _kind(value: object) -> str:
    """The JSON name of a value's type, for messages."""
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}
    if value is None:
        return "null"
    return names.get(type(value), "a number" if isinstance(value, int | float) else "a value")


_MESSAGES: Mapping[str, str] = MappingProxyType(
    {
        "greater_than": "must be positive",
        "greater_than_equal": "must be zero or more",
        "int_type": "must be a whole number",
        "bool_type": "must be true or false",
        "string_type": "must be a string",
        "tuple_type": "must be a list",
    }
)


def _describe(error: ValidationError, architecture: str) -> str:
    """One sentence for the first problem pydantic found."""
    first = error.errors()[0]
    field = ".".join(str(part) for part in first["loc"])
    if first["type"] == "missing":
        return f"config.json has no field '{field}', which {architecture} needs."
    rule = _MESSAGES.get(first["type"], f"is invalid ({first['msg']})")
    return f"config.json field '{field}' {rule}, got {_short(first.get('input'))}."


CLOSEST: Mapping[str, str] = MappingProxyType(
    {
        "gemma": "Gemma2ForCausalLM",
        "gemma3n": "Gemma3ForCausalLM",
        "phi": "Phi3ForCausalLM",
        "phi4": "Phi3ForCausalLM",
        "glm4": "LlamaForCausalLM",
        "qwen3_5": "Qwen3NextForCausalLM",
        "qwen3_5_moe": "Qwen3NextForCausalLM",
        "falcon": "BloomForCausalLM",
    }
)
"""Unsupported model_type values and the supported architecture nearest to them (the name
``_closest`` offers when no spelling is near)."""


def _closest(name: str) -> str:
    """'' or ' (closest supported: X)' for an unknown architecture or model_type."""
    import difflib

    key = str(name).lower()
    if isinstance(name, str) and key in CLOSEST:
        return f" (closest supported: {CLOSEST[key]}; its counts would not be exact)"
    candidates = {
        **{k.lower(): v for k, v in MODEL_TYPES.items()},
        **{a.lower(): a for a in ARCHITECTURES},
    }
    near = difflib.get_close_matches(key, list(candidates), n=1, cutoff=0.6)
    return f" (closest supported: {candidates[near[0]]})" if near else ""


def _architecture(config: Mapping[str, Any]) -> str:
    """The supported architecture a config names, from ``architectures`` or ``model_type``."""
    supported = ", ".join(ARCHITECTURES)
    names = config.get("architectures")
    if names is not None and not (
        isinstance(names, list) and all(isinstance(n, str) for n in names)
    ):
        raise ConfigError("config.json field 'architectures' must be a list of strings.")
    for name in names or ():
        if name in ARCHITECTURES:
            return name
    if names:
        raise ConfigError(
            f"unknown architecture {_short(names[0])}{_closest(names[0])}; supported: {supported}."
        )
    model_type = config.get("model_type")
    if isinstance(model_type, str) and model_type in MODEL_TYPES:
        return MODEL_TYPES[model_type]
    if model_type is not None:
        raise ConfigError(
            f"unknown model_type {_short(model_type)}{_closest(model_type)}; "
            f"supported: {supported}."
        )
    raise ConfigError(
        "config.json names no architecture (no 'architectures' or 'model_type' field); "
        f"supported: {supported}."
    )


_LIMITED: Mapping[str, str] = MappingProxyType(
    {
        **{name: name for name in LIMITS if name in ModelSpec.__dataclass_fields__},
        "num_local_experts": "n_routed_experts",  # Mixtral
        "num_experts": "n_routed_experts",  # Qwen MoE
        "decoder_sparse_step": "moe_layer_freq",  # Qwen MoE
        "n_layer": "num_hidden_layers",  # GPT-2
        "n_embd": "hidden_size",
        "n_head": "num_attention_heads",
        "n_inner": "intermediate_size",
        "n_positions": "max_position_embeddings",
    }
)
"""config.json field -> the ModelSpec field whose limit (explorer.limits) it is held to."""


def _within_limits(config: Mapping[str, Any]) -> None:
    """ConfigError naming the config's own field when a size is beyond this tool's limits."""
    for key, field in _LIMITED.items():
        value = config.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > LIMITS[field]:
            raise ConfigError(
                f"config.json field '{key}' must be at most {shown(LIMITS[field])} (this tool's "
                f"limit), got {shown(value)}."
            )


def model_from_config(config: Mapping[str, Any], name: str = "uploaded model") -> ModelSpec:
    """The ModelSpec a parsed config.json describes; ConfigError (one sentence) if it cannot."""
    if not isinstance(config, Mapping):
        raise ConfigError(f"config.json must be a JSON object, got {_kind(config)}.")
    architecture = _architecture(config)
    _within_limits(config)
    try:
        parsed = ARCHITECTURES[architecture].model_validate(dict(config))
    except ValidationError as error:
        raise ConfigError(_describe(error, architecture)) from None
    try:
        return ModelSpec(name=name, **parsed.spec_fields())
    except ConfigError:
        raise
    except LimitError as error:
        raise ConfigError(f"config.json field {error}.") from None
    except ValueError as error:
        raise ConfigError(f"config.json describes an impossible model: {error}.") from None


def model_from_json_text(text: str | bytes, name: str = "uploaded model") -> ModelSpec:
    """The ModelSpec in the text of a config.json (an upload) of at most MAX_CONFIG_BYTES."""
    try:
        config = json.loads(check_json_text(text, "config.json", MAX_CONFIG_BYTES))
    except LimitError as error:
        raise ConfigError(f"{error}.") from None
    except UnicodeDecodeError:
        raise ConfigError("config.json is not UTF-8 text.") from None
    except json.JSONDecodeError as error:
        raise ConfigError(
            f"config.json is not valid JSON ({error.msg} at line {error.lineno}, "
            f"column {error.colno})."
        ) from None
    except RecursionError:
        raise ConfigError("config.json is nested too deeply to read.") from None
    except ValueError:  # Python refuses integers of more than 4,300 digits
        raise ConfigError("config.json holds a number with too many digits to read.") from None
    return model_from_config(config, name)


def read_config_bytes(path: Path) -> bytes:
    """The bytes of a config.json on disk: a regular file of at most MAX_CONFIG_BYTES, checked
    before opening (explorer.files); ConfigError (one sentence) otherwise."""
    try:
        return read_user_file(
            path, "a config.json", MAX_CONFIG_BYTES, hint="; give the path of its config.json"
        )
    except UserFileError as error:
        raise ConfigError(str(error)) from None


def load_config_file(path: str | Path) -> ModelSpec:
    """The ModelSpec in a config.json on disk, named after its folder (``Llama-3.1-8B``)."""
    path = Path(path)
    data = read_config_bytes(path)
    name = path.parent.name if path.name == "config.json" and path.parent.name else path.stem
    return model_from_json_text(data, name or "uploaded model")
