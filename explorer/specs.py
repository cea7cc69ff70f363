"""The four kinds of input (model, hardware, layout, workload) as frozen dataclasses.

Field docstrings give units and neutral values. Invariants live in ``__post_init__`` and raise
``ValueError`` naming the field and the value, so the boundary (pydantic ``TypeAdapter``, the
CLI, the app) can show them to a person as they are.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Precision = Literal["fp32", "bf16-mixed", "bf16-pure", "fp8-mixed"]
Recompute = Literal["none", "selective", "full"]
ScheduleName = Literal["gpipe", "1f1b", "interleaved", "zb-h1", "dualpipe", "zb-v", "dualpipev"]
ZeroStage = Literal[0, 1, 2, 3]
FfnKind = Literal["swiglu", "gelu", "relu2"]
NormKind = Literal["rmsnorm", "layernorm"]
MeshAxis = Literal["tp", "cp", "ep", "dp", "pp"]
GradDType = Literal["fp32", "bf16"]
WeightDType = Literal["bf16", "fp8", "int8", "int4"]
KvDType = Literal["bf16", "fp8"]

MESH_ORDER: tuple[MeshAxis, ...] = ("tp", "cp", "ep", "dp", "pp")
"""Default placement of process groups on ranks, innermost (fastest-varying) first."""

PRECISIONS: tuple[Precision, ...] = ("fp32", "bf16-mixed", "bf16-pure", "fp8-mixed")
RECOMPUTES: tuple[Recompute, ...] = ("none", "selective", "full")
SCHEDULES: tuple[ScheduleName, ...] = (
    "gpipe", "1f1b", "interleaved", "zb-h1", "dualpipe", "zb-v", "dualpipev",
)  # fmt: skip
V_SHAPED: tuple[ScheduleName, ...] = ("zb-v", "dualpipev")
"""Schedules that place two chunks per rank in a V: chunks r and 2P-1-r on rank r."""


def _positive(obj: object, *names: str) -> None:
    for name in names:
        value = getattr(obj, name)
        if value is None:
            continue
        if not value > 0:
            raise ValueError(f"{name} must be positive, got {value!r}")


def _non_negative(obj: object, *names: str) -> None:
    for name in names:
        value = getattr(obj, name)
        if value < 0:
            raise ValueError(f"{name} must be zero or more, got {value!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelSpec:
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
        return sum(self.is_moe_layer(i) for i in range(self.num_hidden_layers))


@dataclass(frozen=True, slots=True, kw_only=True)
class GpuSpec:
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
    hbm_bytes_per_s: float
    """HBM bandwidth, bytes/s."""
    scale_up_bytes_per_s: float
    """NVLink / Infinity Fabric bandwidth per GPU, one direction, bytes/s."""
    scale_up_domain_size: int = 8
    """GPUs joined by the scale-up links (8 for an HGX board, 72 for NVL72)."""
    source: str = ""
    """Where the figures come from."""

    def __post_init__(self) -> None:
        _positive(
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
class ClusterSpec:
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
    name: str = "custom"
    """Display name."""

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
        if self.oversubscription < 1:
            raise ValueError(f"oversubscription must be at least 1, got {self.oversubscription}")

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


@dataclass(frozen=True, slots=True, kw_only=True)
class Layout:
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

    def __post_init__(self) -> None:
        _positive(self, "dp", "tp", "pp", "cp", "ep", "etp", "micro_batch_size", "virtual_stages")
        if self.zero not in (0, 1, 2, 3):
            raise ValueError(f"zero must be 0, 1, 2 or 3, got {self.zero!r}")
        if self.stage_layers is not None:
            if len(self.stage_layers) != self.pp:
                raise ValueError(
                    f"stage_layers has {len(self.stage_layers)} entries for pp = {self.pp}"
                )
            if any(n < 0 for n in self.stage_layers):
                raise ValueError(f"stage_layers must be zero or more, got {self.stage_layers}")
        if sorted(self.mesh_order) != sorted(MESH_ORDER):
            raise ValueError(f"mesh_order must be a permutation of {MESH_ORDER}")
        if self.virtual_stages > 1 and self.schedule != "interleaved":
            raise ValueError(
                f"virtual_stages = {self.virtual_stages} needs the interleaved schedule, "
                f"not {self.schedule}"
            )

    @property
    def world_size(self) -> int:
        """GPUs this layout occupies (EP and ETP fold into dp x cp x tp)."""
        return self.dp * self.tp * self.pp * self.cp

    @property
    def sp(self) -> bool:
        """Whether sequence parallelism is in effect."""
        return self.sequence_parallel and self.tp > 1


@dataclass(frozen=True, slots=True, kw_only=True)
class TrainingWorkload:
    """What one training step processes, and in which number formats."""

    seq_len: int = 4096
    """Tokens per sequence."""
    global_batch_size: int = 512
    """Sequences per optimizer step, across all data-parallel ranks."""
    precision: Precision = "bf16-mixed"
    """Named precision policy (see explorer.precision)."""
    grad_dtype: GradDType | None = None
    """Gradient accumulation buffer dtype; None means the precision policy's default."""

    def __post_init__(self) -> None:
        _positive(self, "seq_len", "global_batch_size")

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


@dataclass(frozen=True, slots=True, kw_only=True)
class PrecisionPolicy:
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
    compute: Literal["tf32", "bf16", "fp8"]
    """Tensor-core format of the GEMMs (picks the peak FLOP/s)."""
    source: str = field(default="")
    """Where the recipe comes from."""
