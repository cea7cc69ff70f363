"""A Hugging Face ``config.json`` to a ModelSpec, validated at the boundary.

Supported architectures (the first entry of ``architectures`` that we know, else ``model_type``):
Llama, Mistral, Mixtral, Qwen2, Qwen2-MoE, Qwen3, Qwen3-MoE, DeepSeek-V3 (and models that reuse
it, such as Kimi K2) and GPT-2. Fields that set the model's size (widths, layers, heads, vocabulary,
expert and latent widths) must be present; other fields take transformers' defaults for the
architecture. Unknown keys are ignored: configs carry many fields we do not use.

Source: the ``configuration_*.py`` and ``modeling_*.py`` files of huggingface/transformers
(models/llama, mistral, mixtral, qwen2, qwen2_moe, qwen3, qwen3_moe, deepseek_v3, gpt2).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

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

    model_config = ConfigDict(extra="ignore", frozen=True)

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


ARCHITECTURES: Mapping[str, type[_Config]] = MappingProxyType(
    {
        "LlamaForCausalLM": _Llama,
        "MistralForCausalLM": _Mistral,
        "MixtralForCausalLM": _Mixtral,
        "Qwen2ForCausalLM": _Qwen2,
        "Qwen2MoeForCausalLM": _Qwen2Moe,
        "Qwen3ForCausalLM": _Qwen3,
        "Qwen3MoeForCausalLM": _Qwen3Moe,
        "DeepseekV3ForCausalLM": _DeepseekV3,
        "GPT2LMHeadModel": _Gpt2,
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
        raise ConfigError(f"unknown architecture {_short(names[0])}; supported: {supported}.")
    model_type = config.get("model_type")
    if isinstance(model_type, str) and model_type in MODEL_TYPES:
        return MODEL_TYPES[model_type]
    if model_type is not None:
        raise ConfigError(f"unknown model_type {_short(model_type)}; supported: {supported}.")
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
