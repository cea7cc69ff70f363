"""The four kinds of input (model, hardware, layout, workload) as frozen dataclasses.

Field docstrings give units and neutral values. Invariants live in ``__post_init__`` and raise
``ValueError`` naming the field and the value, so the boundary (pydantic ``TypeAdapter``, the
CLI, the app) can show them to a person as they are.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, TypeVar

from explorer.limits import MAX_GPUS, MAX_LAYERS, check_at_most
from explorer.pipeline_layout import parse_pipeline_layout

Precision = Literal["fp32", "bf16-mixed", "bf16-pure", "fp8-mixed", "nvfp4-mixed"]
Recompute = Literal["none", "selective", "full"]
ScheduleName = Literal["gpipe", "1f1b", "interleaved", "zb-h1", "dualpipe", "zb-v", "dualpipev"]
ZeroStage = Literal[0, 1, 2, 3]
FfnKind = Literal["swiglu", "gelu", "relu2"]
NormKind = Literal["rmsnorm", "layernorm"]
MeshAxis = Literal["tp", "cp", "ep", "dp", "pp"]
GradDType = Literal["fp32", "bf16"]
WeightDType = Literal["bf16", "fp8", "int8", "int4", "nvfp4", "mxfp4"]
KvDType = Literal["bf16", "fp8"]
RecomputeModule = Literal[
    "core_attn", "moe_act", "layernorm", "mla_up_proj", "mlp", "moe", "shared_experts"
]
"""Megatron-Core ``--recompute-modules`` (TransformerConfig.recompute_modules)."""
RecomputeMethod = Literal["uniform", "block"]
"""Megatron-Core ``--recompute-method`` for full recompute."""
OffloadModule = Literal[
    "attn_norm", "qkv_linear", "core_attn", "attn_proj", "mlp_norm", "expert_fc1", "moe_act"
]
"""Megatron-Core ``--offload-modules`` (fine-grained activation offloading): each offloads its
input activation to host memory in the forward and reloads it before its backward."""
Fp8Recipe = Literal["delayed", "current", "blockwise", "mxfp8"]


class _HashOnce:
    """Base of the frozen specs that sit in many cache keys (the ``lru_cache`` keys of
    explorer.compute, the search's caches): ``hash_once`` keeps the dataclass's own hash, the
    same value, in this slot after its first use. Equality still compares every field. The
    slot is no dataclass field (``fields``, ``asdict``, ``repr`` and pickling leave it out), so
    a copy, a ``replace`` or an unpickled object hashes afresh."""

    __slots__ = ("_hash_once",)


_Hashed = TypeVar("_Hashed", bound=_HashOnce)


def hash_once(cls: type[_Hashed]) -> type[_Hashed]:
    """Wrap a frozen dataclass's generated ``__hash__`` (applied above ``@dataclass``): computed
    once per object, then read from its ``_HashOnce`` slot (a ModelSpec's hash walks its ~60
    fields, about 1.4 us; one DeepSeek-V3 search on 2,048 GPUs hashes one 6,645 times)."""
    compute = cls.__hash__

    def __hash__(self: _Hashed) -> int:
        try:
            return self._hash_once  # type: ignore[attr-defined]
        except AttributeError:
            value: int = compute(self)
            object.__setattr__(self, "_hash_once", value)
            return value

    cls.__hash__ = __hash__  # type: ignore[assignment, method-assign]
    return cls


MESH_ORDER: tuple[MeshAxis, ...] = ("tp", "cp", "ep", "dp", "pp")
"""Default placement of process groups on ranks, innermost (fastest-varying) first."""

PRECISIONS: tuple[Precision, ...] = (
    "fp32", "bf16-mixed", "bf16-pure", "fp8-mixed", "nvfp4-mixed",
)  # fmt: skip
RECOMPUTES: tuple[Recompute, ...] = ("none", "selective", "full")
SCHEDULES: tuple[ScheduleName, ...] = (
    "gpipe", "1f1b", "interleaved", "zb-h1", "dualpipe", "zb-v", "dualpipev",
)  # fmt: skip
V_SHAPED: tuple[ScheduleName, ...] = ("zb-v", "dualpipev")
"""Schedules that place two chunks per rank in a V: chunks r and 2P-1-r on rank r."""
RECOMPUTE_MODULES: tuple[RecomputeModule, ...] = (
    "core_attn", "moe_act", "layernorm", "mla_up_proj", "mlp", "moe", "shared_experts"
)  # fmt: skip
OFFLOAD_MODULES: tuple[OffloadModule, ...] = (
    "attn_norm", "qkv_linear", "core_attn", "attn_proj", "mlp_norm", "expert_fc1", "moe_act"
)  # fmt: skip


def _positive(obj: object, *names: str) -> None:
    for name in names:
        value = getattr(obj, name)
        if value is None:
            continue
        if not value > 0:
            raise ValueError(f"{name} must be positive, got {value!r}")


def _bounded(obj: object, *names: str) -> None:
    """Every named field that is set is finite and at most its limit (explorer.limits)."""
    for name in names:
        value = getattr(obj, name)
        if value is not None:
            check_at_most(name, value)


def _non_negative(obj: object, *names: str) -> None:
    for name in names:
        value = getattr(obj, name)
        if value < 0:
            raise ValueError(f"{name} must be zero or more, got {value!r}")


_MODEL_SIZES = (
    "num_hidden_layers", "hidden_size", "num_attention_heads", "num_key_value_heads", "head_dim",
    "intermediate_size", "vocab_size", "max_position_embeddings", "n_routed_experts",
    "n_shared_experts", "num_experts_per_tok", "moe_intermediate_size",
    "shared_expert_intermediate_size", "first_k_dense_replace", "moe_layer_freq", "n_group",
    "topk_group", "q_lora_rank", "kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim",
    "v_head_dim", "num_nextn_predict_layers",
)  # fmt: skip
"""ModelSpec fields with an upper bound (explorer.limits)."""


@hash_once
@dataclass(frozen=True, slots=True, kw_only=True)
class ModelSpec(_HashOnce):
    """A decoder-only transformer, dense or mixture-of-experts, in Hugging Face field names."""

    name: str = "custom"
    """Display name."""
    num_hidden_layers: int
    """Transformer blocks (L), not counting multi-token-prediction modules."""
    hidden_size: int
    """Model width h."""
    num_attention_heads: int
    """Query heads a."""
    num_key_value_heads: int | None = None
    """K/V heads: equal to the query heads for MHA, fewer for GQA, 1 for MQA. None means MHA."""
    head_dim: int | None = None
    """Per-head width when it differs from hidden_size / heads (Qwen3). None means h / a."""
    intermediate_size: int
    """FFN width of a dense MLP."""
    ffn_kind: FfnKind = "swiglu"
    """swiglu: gated, 3 matrices (gate, up, down); gelu / relu2: 2 matrices (up, down)."""
    vocab_size: int
    """Vocabulary V (padded size as in the checkpoint)."""
    tie_word_embeddings: bool = False
    """The LM head shares the input embedding matrix."""
    norm_kind: NormKind = "rmsnorm"
    """rmsnorm has a weight per channel; layernorm has weight and bias."""
    attention_bias: bool = False
    """Biases on the q, k and v projections (Qwen2); the output projection is left bias-free."""
    attention_out_bias: bool = False
    """A bias on the attention output projection (GPT-2)."""
    mlp_bias: bool = False
    """Biases on the MLP matrices (GPT-2)."""
    qk_norm: bool = False
    """RMSNorm on each head's q and k (Qwen3)."""
    max_position_embeddings: int = 4096
    """Context length the checkpoint was trained for (tokens)."""
    learned_position_embeddings: bool = False
    """A learned position table of max_position_embeddings x h (GPT-2); False means RoPE."""
    # Mixture of experts. n_routed_experts = 0 means a dense model.
    n_routed_experts: int = 0
    """Routed experts per MoE layer; 0 means dense."""
    n_shared_experts: int = 0
    """Always-active shared experts per MoE layer (DeepSeek), 0 means none."""
    num_experts_per_tok: int = 0
    """Routed experts each token visits (top-k)."""
    moe_intermediate_size: int = 0
    """FFN width of one routed expert."""
    shared_expert_intermediate_size: int | None = None
    """Total FFN width of the shared experts; None means n_shared x moe_intermediate_size."""
    first_k_dense_replace: int = 0
    """Leading layers that keep a dense MLP (DeepSeek-V3: 3)."""
    moe_layer_freq: int = 1
    """Every n-th layer after the dense ones is MoE; 1 means all of them."""
    router_bias: bool = False
    """A per-expert score-correction bias in the router (DeepSeek-V3's aux-loss-free balancing)."""
    n_group: int = 1
    """Groups the routed experts are split into for group-limited routing (DeepSeek-V3: 8, one
    per node of its EP64 layout); 1 means no grouping."""
    topk_group: int | None = None
    """Groups (nodes) one token's experts may come from (DeepSeek-V3: 4); None means any."""
    # Multi-head latent attention (DeepSeek-V2/V3). kv_lora_rank = None means ordinary attention.
    q_lora_rank: int | None = None
    """Rank of the query down-projection; None means queries are projected directly."""
    kv_lora_rank: int | None = None
    """Rank of the shared K/V latent; None means no MLA."""
    qk_rope_head_dim: int = 0
    """Per-head width of the rotary part of q and k (MLA)."""
    qk_nope_head_dim: int = 0
    """Per-head width of the non-rotary part of q and k (MLA)."""
    v_head_dim: int = 0
    """Per-head width of v (MLA)."""
    num_nextn_predict_layers: int = 0
    """Multi-token-prediction modules (DeepSeek-V3: 1); they share embedding and LM head."""
    # Block variants of newer architectures (explorer.hf_config; neutral values change nothing).
    post_norms: bool = False
    """Norms after attention and after the MLP as well as before (Gemma 2/3: four per block)."""
    layernorm_bias: bool = True
    """LayerNorm carries a bias (MPT with no_bias: False); ignored for RMSNorm."""
    embedding_norm: bool = False
    """A norm right after the token embedding (BLOOM's word_embeddings_layernorm)."""
    lm_head_bias: bool = False
    """A bias on the LM head (Phi-3.5-MoE)."""
    alibi: bool = False
    """ALiBi position biases (BLOOM, MPT): no parameters, no position table."""
    sliding_window: int | None = None
    """Tokens a windowed attention layer sees (Mistral, Gemma 2/3, Phi-3); None: no window."""
    window_layers: tuple[int, ...] | None = None
    """Blocks (0-based) that use sliding_window; None means every block when a window is set."""
    chunked_attention: bool = False
    """The window is a chunk (Llama 4): a query sees the keys of its own sliding_window-token
    chunk only, instead of the sliding_window tokens before it."""
    attention_sinks: bool = False
    """A learned sink logit per head and block (GPT-OSS): num_attention_heads parameters."""
    index_topk: int | None = None
    """DeepSeek Sparse Attention (V3.2): keys each query attends to, picked by the lightning
    indexer; None means dense attention."""
    index_n_heads: int = 0
    """Lightning-indexer heads (DeepSeek-V3.2: 64); 0 means no indexer."""
    index_head_dim: int = 0
    """Lightning-indexer head width (DeepSeek-V3.2: 128)."""
    shared_expert_gate: bool = False
    """A 1-output sigmoid gate on the shared expert (Qwen3-Next): hidden_size weights per MoE
    block."""
    attn_output_gate: bool = False
    """A sigmoid gate on the attention output, projected with q (Qwen3-Next: q_proj doubles)."""
    linear_attention_layers: tuple[int, ...] = ()
    """Blocks (0-based) with Gated DeltaNet linear attention instead of softmax attention
    (Qwen3-Next); empty means none."""
    linear_num_key_heads: int = 0
    """Linear-attention q/k heads."""
    linear_key_head_dim: int = 0
    """Linear-attention q/k head width."""
    linear_num_value_heads: int = 0
    """Linear-attention v heads (each keeps a key_head_dim x value_head_dim state)."""
    linear_value_head_dim: int = 0
    """Linear-attention v head width."""
    linear_conv_kernel_dim: int = 0
    """Width of the causal depthwise convolution over q, k and v (Qwen3-Next: 4)."""
    # Nemotron-H: every block is one sub-module ('M' Mamba2, '*' attention, '-' MLP) with one
    # pre-norm (transformers NemotronHBlock). Empty tuples keep attention + MLP in every block.
    mamba_layers: tuple[int, ...] = ()
    """Blocks (0-based) that are a Mamba2 mixer alone (no attention, no MLP, no KV cache)."""
    attention_only_layers: tuple[int, ...] = ()
    """Blocks (0-based) that are attention alone (Nemotron-H '*': no MLP)."""
    ffn_only_layers: tuple[int, ...] = ()
    """Blocks (0-based) that are an MLP alone (Nemotron-H '-': no attention, no KV cache)."""
    mamba_num_heads: int = 0
    """Mamba2 heads; d_inner = mamba_num_heads x mamba_head_dim."""
    mamba_head_dim: int = 0
    """Mamba2 head width P."""
    ssm_state_size: int = 0
    """Mamba2 state width N (each head keeps a P x N state)."""
    mamba_n_groups: int = 1
    """Groups sharing one B and one C projection (Mamba2's n_groups)."""
    mamba_conv_kernel: int = 4
    """Width of the causal depthwise convolution over x, B and C."""
    mamba_conv_bias: bool = True
    """A bias on that convolution."""
    mamba_proj_bias: bool = False
    """Biases on in_proj and out_proj."""
    mamba_chunk_size: int = 128
    """Chunk length Q of the SSD algorithm (sets its intra-chunk FLOPs)."""

    def __post_init__(self) -> None:
        _positive(
            self,
            "num_hidden_layers",
            "hidden_size",
            "num_attention_heads",
            "num_key_value_heads",
            "head_dim",
            "intermediate_size",
            "vocab_size",
            "max_position_embeddings",
            "moe_layer_freq",
            "n_group",
            "topk_group",
            "q_lora_rank",
            "kv_lora_rank",
        )
        _non_negative(
            self,
            "n_routed_experts",
            "n_shared_experts",
            "num_experts_per_tok",
            "moe_intermediate_size",
            "first_k_dense_replace",
            "qk_rope_head_dim",
            "qk_nope_head_dim",
            "v_head_dim",
            "num_nextn_predict_layers",
        )
        _bounded(self, *_MODEL_SIZES)
        if self.num_attention_heads % self.kv_heads:
            raise ValueError(
                f"num_attention_heads ({self.num_attention_heads}) must be a multiple of "
                f"num_key_value_heads ({self.kv_heads})"
            )
        no_head_dim = self.head_dim is None and self.kv_lora_rank is None
        if no_head_dim and self.hidden_size % self.num_attention_heads:
            raise ValueError(
                f"hidden_size ({self.hidden_size}) is not divisible by num_attention_heads "
                f"({self.num_attention_heads}); give head_dim explicitly"
            )
        if self.n_routed_experts:
            if not 0 < self.num_experts_per_tok <= self.n_routed_experts:
                raise ValueError(
                    f"num_experts_per_tok must be between 1 and n_routed_experts "
                    f"({self.n_routed_experts}), got {self.num_experts_per_tok}"
                )
            if self.moe_intermediate_size <= 0:
                raise ValueError("moe_intermediate_size must be positive for an MoE model")
            if self.first_k_dense_replace > self.num_hidden_layers:
                raise ValueError(
                    f"first_k_dense_replace ({self.first_k_dense_replace}) exceeds "
                    f"num_hidden_layers ({self.num_hidden_layers})"
                )
        if self.kv_lora_rank is not None and not (self.qk_rope_head_dim and self.v_head_dim):
            raise ValueError("an MLA model needs qk_rope_head_dim and v_head_dim")
        if self.mamba_layers:
            _positive(
                self, "mamba_num_heads", "mamba_head_dim", "ssm_state_size", "mamba_n_groups",
                "mamba_conv_kernel", "mamba_chunk_size",
            )  # fmt: skip
            if self.mamba_num_heads % self.mamba_n_groups:
                raise ValueError(
                    f"mamba_num_heads ({self.mamba_num_heads}) must be a multiple of "
                    f"mamba_n_groups ({self.mamba_n_groups})"
                )

    @property
    def kv_heads(self) -> int:
        """K/V heads (MHA when the config leaves them out)."""
        return self.num_key_value_heads or self.num_attention_heads

    @property
    def head_size(self) -> int:
        """Per-head width of q and k for ordinary attention."""
        return self.head_dim or self.hidden_size // self.num_attention_heads

    @property
    def is_moe(self) -> bool:
        return self.n_routed_experts > 0

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank is not None

    @property
    def shared_ffn_size(self) -> int:
        """Total FFN width of the shared experts (0 without them)."""
        if self.shared_expert_intermediate_size is not None:
            return self.shared_expert_intermediate_size
        return self.n_shared_experts * self.moe_intermediate_size

    def is_moe_layer(self, index: int) -> bool:
        """Whether block ``index`` (0-based) has an MoE MLP (DeepSeek/Hugging Face rule)."""
        return (
            self.is_moe
            and index >= self.first_k_dense_replace
            and (index - self.first_k_dense_replace) % self.moe_layer_freq == 0
        )

    @property
    def num_moe_layers(self) -> int:
        """Blocks ``is_moe_layer`` counts, in closed form (a hot path of the search's rules):
        every ``moe_layer_freq``-th block from ``first_k_dense_replace`` on."""
        if not self.is_moe or self.num_hidden_layers <= self.first_k_dense_replace:
            return 0
        return -(-(self.num_hidden_layers - self.first_k_dense_replace) // self.moe_layer_freq)

    def holds_kv(self, index: int) -> bool:
        """Whether block ``index`` keeps a KV cache: not a Mamba2 or MLP-only block (Nemotron-H),
        nor a Gated DeltaNet linear-attention block (Qwen3-Next), which keep a fixed state."""
        return (
            index not in self.mamba_layers
            and index not in self.ffn_only_layers
            and index not in self.linear_attention_layers
        )

    @property
    def single_module_blocks(self) -> bool:
        """Whether blocks hold one sub-module each (Nemotron-H: Mamba2, attention or MLP)."""
        return bool(self.mamba_layers or self.attention_only_layers or self.ffn_only_layers)

    @property
    def mamba_inner_size(self) -> int:
        """Mamba2 d_inner: heads x head width (transformers NemotronHMamba2Mixer)."""
        return self.mamba_num_heads * self.mamba_head_dim

    def attention_window(self, index: int) -> int | None:
        """Tokens block ``index`` attends to (its sliding window), None for full attention."""
        if self.sliding_window is None:
            return None
        if self.window_layers is None or index in self.window_layers:
            return self.sliding_window
        return None


GemmDType = Literal["bf16", "fp8", "tf32", "fp4"]
"""GEMM input formats with a tensor-core peak in GpuSpec."""


@dataclass(frozen=True, slots=True, kw_only=True)
class GemmPoint:
    """One measured GEMM: C (m x n) = A (m x k) B (k x n), its input format and the achieved
    share of that format's dense peak (the GPU preset's, or a user's calibration)."""

    m: int
    n: int
    k: int
    dtype: GemmDType
    efficiency: float
    """Achieved FLOP/s over the format's dense tensor-core peak (0, 1]."""
    source: str = ""
    """Where the measurement comes from."""
    recipe: str = ""
    """The FP8 scaling recipe the GEMM ran with where it is not the format's default kernel
    (``blockwise``: DeepGEMM's 1x128 / 128x128 block-scaled kernel); a GEMM under that recipe
    follows these points where the GPU has any (explorer.compute.gemm.gemm_efficiency). Empty:
    the format's default GEMM (cuBLAS per-tensor scaled for FP8)."""

    def __post_init__(self) -> None:
        _positive(self, "m", "n", "k")
        if not 0 < self.efficiency <= 1:
            raise ValueError(f"efficiency must be in (0, 1], got {self.efficiency!r}")


@hash_once
@dataclass(frozen=True, slots=True, kw_only=True)
class AttentionCurve(_HashOnce):
    """An attention kernel's achieved share of the dense BF16 peak by sequence length (head
    dimension ``head_dim``), forward (without and with a causal mask) and backward."""

    name: str
    """Kernel and GPU the figures were measured with (``fa3-h100``)."""
    seq_lens: tuple[int, ...]
    """Sequence lengths of the measurements, increasing."""
    forward: tuple[float, ...]
    """Forward, no mask: achieved FLOP/s over the BF16 dense peak, one per length."""
    forward_causal: tuple[float, ...]
    """Forward with a causal mask (FLOPs counted halved), one per length."""
    backward: tuple[float, ...]
    """Backward, no mask, one per length."""
    head_dim: int = 128
    source: str = ""
    head_dims: tuple[AttentionCurve, ...] = ()
    """The same kernel's tables at other head dimensions (explorer.compute.attention
    interpolates between them by head dimension)."""

    def __post_init__(self) -> None:
        n = len(self.seq_lens)
        if n == 0 or list(self.seq_lens) != sorted(set(self.seq_lens)):
            raise ValueError(f"seq_lens must be increasing and not empty, got {self.seq_lens!r}")
        for name in ("forward", "forward_causal", "backward"):
            values = getattr(self, name)
            if len(values) != n or not all(0 < v <= 1 for v in values):
                raise ValueError(f"{name} needs {n} shares in (0, 1], got {values!r}")


@hash_once
@dataclass(frozen=True, slots=True, kw_only=True)
class KernelFigures(_HashOnce):
    """Published kernel figures of one GPU: what ``explorer.compute`` turns into the achieved
    FLOP/s of GEMMs and attention (None fields fall back to the compute model's defaults)."""

    num_sms: int
    """Streaming multiprocessors (compute units on AMD) that GEMM output tiles spread over."""
    tile_m: int = 128
    """Output tile rows of the large-GEMM kernels (cuBLAS / CUTLASS / DeepGEMM)."""
    tile_n: int = 256
    """Output tile columns."""
    k_overhead: float = 128.0
    """Time each wave of output tiles spends outside its main loop (prologue, epilogue), in k
    elements of a tile_m x tile_n tile's main loop (BF16 / TF32); it adds to memory-bound
    GEMMs too. An assumption: two 64-deep k-blocks (pipeline fill and write-back); the
    measured large-GEMM shares reach 78-87% at k = 2,048-13,312 (ml-engineering MAMF table)."""
    fp8_k_overhead: float = 600.0
    """The same for FP8 GEMMs, which on Hopper also promote partial sums to FP32 once per
    k-block (Blackwell presets set the BF16 figure: no promotion).
    Source: DeepGEMM README H800 dense table at M = 4096: K = 512 / 1,536 / 2,048 / 7,168 run at
    0.43 / 0.73 / 0.75 / 0.96 of K = 16,384's rate, i.e. k / (k + 570-670)."""
    kernel_fixed_s: float = 0.0
    """Time each BF16 / TF32 GEMM kernel spends beside its waves, s: from its start to the
    first wave's main loop and after the last one's (block scheduling, pipeline fill, the
    final write-back and drain), whatever the shape. It sets the fall-off of small GEMMs
    (TP-split weights, MLA's low-rank projections, decode). 0 where no shape sweep is
    published (the per-wave ``k_overhead`` alone). Hopper presets: from OpenXLA's measured H100
    table (validation/gemm_shapes_h100.csv, tests/test_gemm_shapes.py)."""
    gemms: tuple[GemmPoint, ...] = ()
    """Measured GEMMs the model is anchored on (its losses at a point are divided out)."""
    training_shape_share: float = 1.0
    """BF16 GEMMs at training shapes in the framework's dispatch over what the anchors (the
    best shape of a search) give at those shapes: a multiplier on the training GEMMs'
    efficiency (explorer.compute.passes). 1: the anchors describe training shapes. Blackwell
    and Hopper presets set it from Transformer Engine's published per-layer GEMM times (B300,
    H200 NVL: their comment)."""
    fp8_training_shape_share: float = 1.0
    """The same for FP8 GEMMs."""
    fp4_training_shape_share: float | None = None
    """The same for FP4 (NVFP4) GEMMs; None: the FP8 figure."""
    attention: AttentionCurve | None = None
    """The attention kernel's figures; None means the GEMMs' efficiency."""
    te_attention: AttentionCurve | None = None
    """Transformer Engine's fused attention on this GPU where it is not ``attention``'s kernel:
    the table Megatron-Core's attention follows (``compute.framework`` "megatron"; on Hopper TE
    prefers cuDNN's FusedAttention to FlashAttention, presets/kernels/attention.toml
    cudnn-h100). None: ``attention`` for every stack."""
    fp8_recipe: Fp8Recipe = "delayed"
    """The FP8 scaling recipe frameworks use by default on this GPU."""
    source: str = ""

    def __post_init__(self) -> None:
        _positive(self, "num_sms", "tile_m", "tile_n")
        _non_negative(self, "k_overhead", "fp8_k_overhead", "kernel_fixed_s")
        for name in (
            "training_shape_share",
            "fp8_training_shape_share",
            "fp4_training_shape_share",
        ):
            value = getattr(self, name)
            if value is not None and not 0 < value <= 1:
                raise ValueError(f"{name} must be in (0, 1], got {value!r}")


@hash_once
@dataclass(frozen=True, slots=True, kw_only=True)
class GpuSpec(_HashOnce):
    """One accelerator: memory, dense peaks and links, from vendor data sheets."""

    name: str
    """Display name."""
    memory_bytes: int
    """HBM capacity in bytes (vendor figure, decimal GB x 1e9)."""
    bf16_flops_per_s: float
    """Dense BF16 tensor-core peak, FLOP/s (not the 2:4-sparse headline)."""
    fp8_flops_per_s: float | None = None
    """Dense FP8 peak, FLOP/s; None when the GPU has no FP8 tensor cores."""
    tf32_flops_per_s: float | None = None
    """Dense TF32 peak, FLOP/s (what fp32 training runs at); None means bf16 / 2."""
    fp4_flops_per_s: float | None = None
    """Dense FP4 (NVFP4 / MXFP4) tensor-core peak, FLOP/s; None when the GPU has no FP4
    tensor cores (before Blackwell)."""
    hbm_bytes_per_s: float
    """HBM bandwidth, bytes/s."""
    scale_up_bytes_per_s: float
    """NVLink / Infinity Fabric bandwidth per GPU, one direction, bytes/s."""
    scale_up_domain_size: int = 8
    """GPUs joined by the scale-up links (8 for an HGX board, 72 for NVL72)."""
    scale_up_fabric: str = "nvlink4"
    """Scale-up link model, ``presets/fabrics/<id>.toml``: achievable bus bandwidth by message
    size and whether NVLink SHARP exists (nvlink3, nvlink4, nvlink5, infinity-fabric)."""
    host_bytes_per_s: float = 64e9
    """GPU-to-host-memory bandwidth, one direction, bytes/s (activation and optimizer offload):
    PCIe Gen5 x16 is 64 GB/s (PCI-SIG), NVLink-C2C on Grace Hopper / Blackwell 450 GB/s."""
    source: str = ""
    """Where the figures come from."""
    tdp_w: float | None = None
    """Maximum board power (TDP), watts, from the vendor datasheet; None when not published."""
    power_source: str = ""
    """Where tdp_w comes from."""
    price_per_gpu_hour: float | None = None
    """A published on-demand list price, US dollars per GPU-hour; None when none is published."""
    price_source: str = ""
    """The price's page and the date it was read."""
    kernels: KernelFigures | None = None
    """Published kernel figures (SMs, measured GEMMs, attention); None: generic defaults."""

    def __post_init__(self) -> None:
        _positive(
            self,
            "memory_bytes",
            "bf16_flops_per_s",
            "fp8_flops_per_s",
            "tf32_flops_per_s",
            "fp4_flops_per_s",
            "hbm_bytes_per_s",
            "scale_up_bytes_per_s",
            "scale_up_domain_size",
            "host_bytes_per_s",
        )
        _bounded(
            self,
            "memory_bytes",
            "bf16_flops_per_s",
            "fp8_flops_per_s",
            "tf32_flops_per_s",
            "hbm_bytes_per_s",
            "scale_up_bytes_per_s",
            "scale_up_domain_size",
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class MeasuredBusbw:
    """Bus bandwidth of one collective measured at several message sizes (nccl-tests busbw:
    algbw x 2(n-1)/n for all-reduce, x (n-1)/n for the gathers, scatters and all-to-all)."""

    kind: Literal["all-reduce", "all-gather", "reduce-scatter", "all-to-all", "point-to-point"]
    """Collective measured."""
    group_size: int
    """Ranks in the measured group."""
    crosses_domains: bool
    """Whether the measured group spanned scale-up domains (nodes or racks)."""
    sizes_bytes: tuple[float, ...]
    """Message sizes, bytes, increasing (nccl-tests' size column: the full buffer)."""
    busbw_bytes_per_s: tuple[float, ...]
    """Bus bandwidth at each size, bytes/s."""

    def __post_init__(self) -> None:
        _positive(self, "group_size")
        if not self.sizes_bytes or len(self.sizes_bytes) != len(self.busbw_bytes_per_s):
            raise ValueError("sizes_bytes and busbw_bytes_per_s must be equally long, not empty")
        if any(b <= a for a, b in zip(self.sizes_bytes, self.sizes_bytes[1:], strict=False)):
            raise ValueError(f"sizes_bytes must increase, got {self.sizes_bytes!r}")
        if min(self.sizes_bytes) <= 0 or min(self.busbw_bytes_per_s) <= 0:
            raise ValueError("measured sizes and bus bandwidths must be positive")


@hash_once
@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterSpec(_HashOnce):
    """GPUs in nodes: a fast scale-up domain and a slower scale-out fabric."""

    gpu: GpuSpec
    """The accelerator in every slot."""
    gpus_per_node: int = 8
    """GPUs in one server."""
    num_nodes: int = 1
    """Servers in the cluster."""
    scale_up_domain_size: int | None = None
    """GPUs that share the fast links; None means one node (an NVL72 rack sets 72)."""
    scale_up_bytes_per_s: float | None = None
    """Fast-link bandwidth per GPU, one direction, bytes/s; None means the GPU's figure."""
    scale_out_bytes_per_s: float = 50e9
    """Inter-node bandwidth per GPU, one direction, bytes/s (400 Gb/s NIC per GPU = 50 GB/s)."""
    intra_node_latency_s: float = 3e-6
    """Latency of one message on the fast links, seconds."""
    inter_node_latency_s: float = 10e-6
    """Latency of one message across the fabric, seconds."""
    oversubscription: float = 1.0
    """Fabric oversubscription ratio; 1 means non-blocking, 2 halves cross-node bandwidth."""
    scale_out_fabric: str = "infiniband-ndr"
    """Scale-out link model, ``presets/fabrics/<id>.toml`` (infiniband-hdr, infiniband-ndr,
    roce-400g): NCCL's achievable share of the NIC and its latencies."""
    nvls: bool | None = None
    """NVLink SHARP (NVLS) all-reduce inside the scale-up domain; None means whatever the
    scale-up fabric offers (NVSwitch gen 3 and later), False turns it off."""
    sharp: bool = False
    """InfiniBand SHARP in-network all-reduce across domains (NCCL CollNet); needs a fabric
    that offers it (InfiniBand, not RoCE)."""
    measured_busbw: tuple[MeasuredBusbw, ...] = ()
    """Measured bus bandwidth by message size (``probe``); where one matches a collective's
    kind, placement and group size it replaces the fabric model."""
    name: str = "custom"
    """Display name."""
    segment_allocation: bool = False
    """Jobs get their nodes in equal segments, each inside one scale-up domain (Slurm
    topology/block with ``--segment``): a segment is the job's node count where that fits in
    one domain, else the largest divisor of it that does (``explorer.comm.topology``). False:
    ranks fill domains in order. Source: Megatron-Bridge scripts/performance/utils/executors.py
    (4-GPU nodes, i.e. GB200: --segment = nodes up to 18, else the largest divisor <= 18);
    Slurm topology.conf(5), topology/block (BlockSizes, --segment)."""

    def __post_init__(self) -> None:
        _positive(
            self,
            "gpus_per_node",
            "num_nodes",
            "scale_up_domain_size",
            "scale_up_bytes_per_s",
            "scale_out_bytes_per_s",
        )
        _non_negative(self, "intra_node_latency_s", "inter_node_latency_s")
        if not self.oversubscription >= 1:
            raise ValueError(f"oversubscription must be at least 1, got {self.oversubscription}")
        _bounded(
            self,
            "gpus_per_node",
            "num_nodes",
            "world_size",
            "scale_up_domain_size",
            "scale_up_bytes_per_s",
            "scale_out_bytes_per_s",
            "intra_node_latency_s",
            "inter_node_latency_s",
            "oversubscription",
        )

    @property
    def world_size(self) -> int:
        return self.gpus_per_node * self.num_nodes

    @property
    def domain_size(self) -> int:
        """GPUs reachable over the fast links from any GPU."""
        return self.scale_up_domain_size or self.gpus_per_node

    @property
    def fast_bytes_per_s(self) -> float:
        return self.scale_up_bytes_per_s or self.gpu.scale_up_bytes_per_s

    @property
    def fabric_bytes_per_s(self) -> float:
        """Effective cross-domain bandwidth per GPU after oversubscription."""
        return self.scale_out_bytes_per_s / self.oversubscription


_RECIPE_DEFAULTS = (("core_attn",), False, "uniform", None, 1, None, None, None, (), 0, 0.0, None)
"""Layout's memory-recipe fields at their defaults, in ``Layout.__post_init__``'s order."""


def _check_recipes(layout: Layout) -> None:
    """The memory-recipe fields of ``layout``: one sentence naming the field when one is wrong."""
    for name, allowed in (
        ("recompute_modules", RECOMPUTE_MODULES),
        ("activation_offload", OFFLOAD_MODULES),
    ):
        values = getattr(layout, name)
        wrong = [v for v in values if v not in allowed]
        if wrong or len(set(values)) != len(values):
            raise ValueError(f"{name} must list distinct values of {allowed}, got {values}")
    if not layout.recompute_modules:
        raise ValueError("recompute_modules must list at least one module")
    needs = (  # (field, is set, the recompute it needs)
        ("recompute_modules", layout.recompute_modules != ("core_attn",), "selective"),
        ("recompute_ops", layout.recompute_ops, "selective"),
        ("recompute_method", layout.recompute_method != "uniform", "full"),
        ("recompute_num_layers", layout.recompute_num_layers is not None, "full"),
        ("recompute_every", layout.recompute_every != 1, "full"),
    )
    for name, is_set, recompute in needs:
        if is_set and layout.recompute != recompute:
            raise ValueError(f"{name} needs recompute = {recompute!r}, not {layout.recompute!r}")
    if layout.recompute_ops and layout.recompute_modules != ("core_attn",):
        raise ValueError("recompute_ops (torchtitan op-level SAC) excludes recompute_modules")
    if layout.recompute_every != 1 and layout.recompute_method != "uniform":
        raise ValueError("recompute_every (torchtitan) excludes recompute_method = 'block'")
    if layout.offload_layers < 0:
        raise ValueError(f"offload_layers must be zero or more, got {layout.offload_layers}")
    if not 0 <= layout.optimizer_offload_fraction <= 1:
        raise ValueError(
            f"optimizer_offload_fraction must be in [0, 1], got {layout.optimizer_offload_fraction}"
        )
    if layout.dp_shard is not None and layout.dp % layout.dp_shard:
        raise ValueError(f"dp_shard ({layout.dp_shard}) must divide dp ({layout.dp})")
    ends = (layout.first_stage_layers, layout.last_stage_layers)
    if layout.pipeline_layout is not None and (
        layout.stage_layers or any(e is not None for e in ends)
    ):
        raise ValueError("pipeline_layout excludes stage_layers and first/last_stage_layers")
    if layout.pipeline_layout is not None:
        chunks = parse_pipeline_layout(layout.pipeline_layout, layout.pp)
        if len(chunks) != layout.pp * layout.virtual_stages:
            raise ValueError(
                f"pipeline_layout has {len(chunks) // layout.pp} chunks per pipeline rank; "
                f"set virtual_stages = {len(chunks) // layout.pp} (interleaved schedule)"
            )
    if layout.stage_layers is not None and any(e is not None for e in ends):
        raise ValueError("stage_layers excludes first_stage_layers and last_stage_layers")
    for name, value in zip(("first_stage_layers", "last_stage_layers"), ends, strict=True):
        if value is not None and (value < 0 or layout.pp == 1):
            raise ValueError(f"{name} needs pp > 1 and zero or more blocks, got {value}")


@hash_once
@dataclass(frozen=True, slots=True, kw_only=True)
class Layout(_HashOnce):
    """How a training job is split: parallel degrees, sharding, recompute, micro-batching."""

    dp: int = 1
    """Data-parallel degree (replicas of the dense weights, before ZeRO sharding); 1 is off."""
    tp: int = 1
    """Tensor-parallel degree (splits heads and FFN width); 1 is off."""
    pp: int = 1
    """Pipeline stages; 1 is off."""
    cp: int = 1
    """Context-parallel degree (splits the sequence); 1 is off."""
    ep: int = 1
    """Expert-parallel degree (splits the routed experts); folded into dp x cp x tp ranks."""
    etp: int = 1
    """Expert tensor-parallel degree (splits each expert's FFN width); 1 is off."""
    zero: ZeroStage = 0
    """ZeRO stage over the data-parallel ranks: 0 replicated (DDP), 1 optimizer, 2 +gradients,
    3 +parameters (FSDP full shard)."""
    sequence_parallel: bool = True
    """Megatron sequence parallelism with TP (shards norm/dropout activations); ignored at tp 1."""
    micro_batch_size: int = 1
    """Sequences per micro-batch on one data-parallel rank."""
    recompute: Recompute = "none"
    """Activation recomputation: none, selective (attention core), full (layer inputs only)."""
    schedule: ScheduleName = "1f1b"
    """Pipeline schedule."""
    virtual_stages: int = 1
    """Model chunks per pipeline rank (interleaved schedule); 1 is off."""
    stage_layers: tuple[int, ...] | None = None
    """Transformer blocks on each pipeline stage; None means a balanced split."""
    mesh_order: tuple[MeshAxis, ...] = MESH_ORDER
    """Placement of groups on ranks, innermost first."""
    # Memory recipes as the frameworks spell them (explorer.memory.recipes checks them).
    recompute_modules: tuple[RecomputeModule, ...] = ("core_attn",)
    """Selective recompute: the submodules recomputed (Megatron-Core --recompute-modules; its
    default core_attn is the attention core of Korthikanti et al. 2022 sec. 5)."""
    recompute_ops: bool = False
    """Selective recompute as torchtitan's op-level SAC (selective_ac_option = "op"): each block
    keeps its input and the outputs of the ops on torchtitan's save list (every second matmul,
    attention, TP reduce-scatters) and rebuilds the rest."""
    recompute_method: RecomputeMethod = "uniform"
    """Full recompute: uniform checkpoints every block (in units of recompute_num_layers);
    block checkpoints only the first recompute_num_layers blocks of each model chunk."""
    recompute_num_layers: int | None = None
    """Full recompute: blocks per checkpointed unit (uniform) or checkpointed blocks per model
    chunk (block); None means 1 (uniform) or all of them (block)."""
    recompute_every: int = 1
    """Full recompute of every n-th block of a rank only (torchtitan selective_ac_option = n);
    1 means every block."""
    first_stage_layers: int | None = None
    """Blocks on the first pipeline rank (Megatron --decoder-first-pipeline-num-layers); None
    means an even share."""
    last_stage_layers: int | None = None
    """Blocks on the last pipeline rank (Megatron --decoder-last-pipeline-num-layers); None
    means an even share."""
    pipeline_layout: str | None = None
    """Megatron --pipeline-model-parallel-layout, e.g. "Et*3|(tt|)*29,m|L": one "|"-separated
    entry per model chunk (pp x virtual), E embedding, t block, m MTP module, L loss."""
    activation_offload: tuple[OffloadModule, ...] = ()
    """Modules whose input activation is offloaded to host memory (Megatron-Core
    --fine-grained-activation-offloading --offload-modules); () means none."""
    offload_layers: int = 0
    """Blocks per pipeline rank whose saved activations all live in host memory between their
    forward and backward (Megatron --cpu-offloading --cpu-offloading-num-layers, Transformer
    Engine's CPU offload); 0 means none."""
    optimizer_offload_fraction: float = 0.0
    """Share of the master weights and optimizer states kept and updated in host memory
    (Megatron --optimizer-cpu-offload --optimizer-offload-fraction; 1 is ZeRO-Offload); 0 off."""
    reshard_after_forward: bool = True
    """ZeRO-3 / FSDP2: free the gathered weights after each block's forward (True) or keep them
    until its backward (FSDP2 reshard_after_forward=False)."""
    dp_shard: int | None = None
    """HSDP: data-parallel ranks of one ZeRO shard group (torchtitan data_parallel_shard_degree;
    replicas = dp / dp_shard); None means all dp ranks."""

    def __post_init__(self) -> None:
        _positive(self, "dp", "tp", "pp", "cp", "ep", "etp", "micro_batch_size", "virtual_stages")
        _bounded(self, "dp", "tp", "pp", "cp", "ep", "etp", "micro_batch_size", "virtual_stages")
        if self.world_size > MAX_GPUS:
            raise ValueError(
                f"DP x TP x PP x CP must be at most {MAX_GPUS:,} GPUs (this tool's limit), "
                f"got {self.world_size:,}"
            )
        _positive(self, "recompute_num_layers", "recompute_every", "dp_shard")
        if self.zero not in (0, 1, 2, 3):
            raise ValueError(f"zero must be 0, 1, 2 or 3, got {self.zero!r}")
        if self.stage_layers is not None:
            if len(self.stage_layers) != self.pp:
                raise ValueError(
                    f"stage_layers has {len(self.stage_layers)} entries for pp = {self.pp}"
                )
            if any(not 0 <= n <= MAX_LAYERS for n in self.stage_layers):
                raise ValueError(
                    f"stage_layers must be between 0 and {MAX_LAYERS:,}, got {self.stage_layers}"
                )
        if self.mesh_order != MESH_ORDER and sorted(self.mesh_order) != sorted(MESH_ORDER):
            raise ValueError(f"mesh_order must be a permutation of {MESH_ORDER}")
        if self.virtual_stages > 1 and self.schedule != "interleaved":
            raise ValueError(
                f"virtual_stages = {self.virtual_stages} needs the interleaved schedule, "
                f"not {self.schedule}"
            )
        recipes = (self.recompute_modules, self.recompute_ops, self.recompute_method,
                   self.recompute_num_layers, self.recompute_every, self.first_stage_layers,
                   self.last_stage_layers, self.pipeline_layout, self.activation_offload,
                   self.offload_layers, self.optimizer_offload_fraction, self.dp_shard)  # fmt: skip
        if recipes != _RECIPE_DEFAULTS:  # the defaults pass every check (the search's layouts)
            _check_recipes(self)

    @property
    def world_size(self) -> int:
        """GPUs this layout occupies (EP and ETP fold into dp x cp x tp)."""
        return self.dp * self.tp * self.pp * self.cp

    @property
    def sp(self) -> bool:
        """Whether sequence parallelism is in effect."""
        return self.sequence_parallel and self.tp > 1


@hash_once
@dataclass(frozen=True, slots=True, kw_only=True)
class TrainingWorkload(_HashOnce):
    """What one training step processes, and in which number formats."""

    seq_len: int = 4096
    """Tokens per sequence."""
    global_batch_size: int = 512
    """Sequences per optimizer step, across all data-parallel ranks."""
    precision: Precision = "bf16-mixed"
    """Named precision policy (see explorer.precision)."""
    grad_dtype: GradDType | None = None
    """Gradient accumulation buffer dtype; None means the precision policy's default."""
    bf16_layers_at_start: int = 0
    """Transformer blocks at the start of the model whose linear layers stay in BF16 under an
    FP8 or NVFP4 policy (Megatron-Core first_last_layers_bf16 with num_layers_at_start_in_bf16;
    NVIDIA's 12B NVFP4 run kept its first two, arXiv:2509.25149). 0: none (Megatron-Bridge's
    performance recipes)."""
    bf16_layers_at_end: int = 0
    """The same at the end (num_layers_at_end_in_bf16): the NVFP4 paper keeps the final blocks,
    under ~15% of them, in BF16; torchtitan's NVFP4 recommendation the final ~15%
    (components/quantization/nvfp4.md)."""

    def __post_init__(self) -> None:
        _positive(self, "seq_len", "global_batch_size")
        _bounded(self, "seq_len", "global_batch_size")
        _non_negative(self, "bf16_layers_at_start", "bf16_layers_at_end")
        for name in ("bf16_layers_at_start", "bf16_layers_at_end"):
            if getattr(self, name) > MAX_LAYERS:
                raise ValueError(f"{name} must be at most {MAX_LAYERS}, got {getattr(self, name)}")

    @property
    def tokens_per_step(self) -> int:
        return self.seq_len * self.global_batch_size


@dataclass(frozen=True, slots=True, kw_only=True)
class ServingWorkload:
    """A serving load: request shape, concurrency and number formats."""

    prompt_len: int = 2048
    """Prompt tokens per request."""
    output_len: int = 512
    """Generated tokens per request."""
    concurrency: int = 32
    """Requests decoded together on one replica."""
    weights_dtype: WeightDType = "bf16"
    """Storage format of the weights."""
    kv_dtype: KvDType = "bf16"
    """Storage format of the KV cache."""

    def __post_init__(self) -> None:
        _positive(self, "prompt_len", "output_len", "concurrency")
        _bounded(self, "prompt_len", "output_len", "concurrency")


@hash_once
@dataclass(frozen=True, slots=True, kw_only=True)
class PrecisionPolicy(_HashOnce):
    """Bytes per element of every training state under a named precision recipe."""

    name: Precision
    param_bytes: float
    """Working (model) weights used by forward and backward."""
    grad_bytes: float
    """Gradient accumulation buffer (main grads)."""
    master_bytes: float
    """Master copy of the weights kept by the optimizer; 0 when the weights are the master."""
    optimizer_bytes: float
    """Adam first plus second moment."""
    activation_bytes: float
    """Saved activations."""
    compute: Literal["tf32", "bf16", "fp8", "fp4"]
    """Tensor-core format of the GEMMs (picks the peak FLOP/s)."""
    source: str = field(default="")
    """Where the recipe comes from."""
    gemm_input_bytes: float | None = None
    """Bytes per element of a low-precision GEMM's saved input as the recipe stores it (what
    the memory model uses where its assumptions leave ``fp8_linear_input_bytes`` unset);
    None: the activation dtype."""
    gemm_weight_copy_bytes: float = 0.0
    """Bytes per GEMM weight of the quantized weight copies the recipe caches across
    micro-batches beside the working weights (the memory model's ``fp8_weight_copy_bytes``
    where its assumptions leave the storage unset)."""
