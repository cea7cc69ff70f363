"""A serving layout and what it puts on one GPU of each pipeline stage: weights (in the
serving dtype, with quantisation scales) and KV cache bytes per token (heads per GPU, paged
blocks). The engine's memory assumptions live here too, as the weights depend on them;
explorer.memory.serving re-exports every name and adds the memory categories and the fit.

Conventions: a serving replica is ``tp x pp x ep`` GPUs. Attention, dense MLPs, shared experts
and the (vocab-parallel) embeddings are split ``tp`` ways and replicated over ``ep`` attention
data-parallel groups, each of which holds only its own sequences' KV cache (vLLM's and
SGLang's "DP attention" with expert parallelism; DeepSeek-V3 report sec. 3.4). Routed experts
are spread over the ``tp x ep`` GPUs of a stage: ``ep`` ways by expert, each expert's FFN width
``tp`` ways. Pipeline stages split the blocks; the heaviest stage decides the fit.

Weights: linear layers in the serving dtype (with its quantisation scales); embeddings, LM head,
norms and router stay bf16, as quantised checkpoints keep them. The multi-token-prediction
module (DeepSeek-V3) is not loaded: it serves only speculative decoding.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from explorer.counting import attention_params, layer_params, norm_params
from explorer.partition import balanced_chunk_sizes
from explorer.specs import KvDType, ModelSpec, WeightDType
from explorer.units import BYTES_PER_DTYPE, GiB, MiB


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryAssumptions:
    """Adjustable memory assumptions of a serving engine; defaults follow vLLM V1."""

    gpu_memory_utilization: float = 0.9
    """Fraction of GPU memory the engine may use; the rest is headroom. Source: vLLM engine
    argument ``gpu_memory_utilization`` (default 0.9, so 10% stays free)."""
    kv_free_memory_fraction: float | None = None
    """TensorRT-LLM's rule instead of ``gpu_memory_utilization``: the KV cache takes this share
    of the memory left free once weights, workspaces and runtime are allocated, the rest stays
    free. Source: TensorRT-LLM ``KvCacheConfig.free_gpu_memory_fraction`` (default 0.9;
    docs/source/performance/perf-overview.md: "the default setting of 0.90"). None: vLLM's."""
    kv_block_tokens: int = 16
    """Tokens per paged KV block; each sequence rounds up to whole blocks. Source: vLLM
    ``block_size`` default 16 (Kwon et al. 2023, PagedAttention, arXiv:2309.06180)."""
    prefill_chunk_tokens: int = 8192
    """Tokens per chunked-prefill step (the activation workspace is sized for it). Source: vLLM
    V1 ``max_num_batched_tokens``, 8192 by default for its server on GPUs of 70 GiB or more."""
    cuda_context_bytes: float = 0.5 * GiB
    """CUDA context, cuBLAS and attention-kernel workspaces per GPU. Source: vLLM's profiler logs
    0.3 to 0.5 GiB of "non_torch_memory" on one GPU."""
    cuda_graph_bytes: float = 1.0 * GiB
    """Captured CUDA graphs for decode batch sizes. Source: vLLM logs "Graph capturing finished
    ... took 0.21 GiB" (Llama 3.2 1B) up to 1.4 GiB (Llama 4 Maverick)."""
    nccl_bytes_per_group: float = 128 * MiB
    """Communicator buffers per process group a GPU belongs to (TP, PP, EP). Source: NCCL
    ``NCCL_BUFFSIZE`` 4 MiB per channel and peer x 16 channels (typical of 8-GPU NVLink nodes)
    x 2 ring neighbours, as in explorer.memory.assumptions for training."""
    int4_group_size: int = 128
    """Weights per quantisation group for int4; each group stores one bf16 scale. Source: GPTQ
    (arXiv:2210.17323) and AWQ (arXiv:2306.00978) checkpoints, group size 128 (AWQ's 4-bit
    zero points, +0.4%, are left out)."""

    def __post_init__(self) -> None:
        if not 0 < self.gpu_memory_utilization <= 1:
            raise ValueError(
                f"gpu_memory_utilization must be in (0, 1], got {self.gpu_memory_utilization}"
            )
        fraction = self.kv_free_memory_fraction
        if fraction is not None and not 0 < fraction <= 1:
            raise ValueError(f"kv_free_memory_fraction must be in (0, 1], got {fraction}")
        for name in ("kv_block_tokens", "prefill_chunk_tokens", "int4_group_size"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")


@dataclass(frozen=True, slots=True, kw_only=True)
class ServingLayout:
    """How a model is served: replicas of one ``tp x pp x ep`` engine."""

    tp: int = 1
    """Tensor-parallel degree: heads, FFN width, vocabulary and each expert's width; 1 is off."""
    pp: int = 1
    """Pipeline stages (blocks split in order); 1 is off."""
    ep: int = 1
    """Expert-parallel degree = attention data-parallel groups in a replica; 1 is off."""
    replicas: int = 1
    """Independent engines, each serving its own requests."""
    redundant_experts: int = 0
    """Extra routed-expert copies per MoE block over the EP ranks (EPLB), so that EP degrees
    that do not divide the experts hold n_routed + redundant; 0 is none. Source: DeepSeek-V3
    report sec. 3.4; SGLang's large-scale EP blog (256 + 32 = 288 slots, EP 72)."""

    def __post_init__(self) -> None:
        for name in ("tp", "pp", "ep", "replicas"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if self.redundant_experts < 0:
            raise ValueError(f"redundant_experts must be at least 0, got {self.redundant_experts}")

    @property
    def gpus_per_replica(self) -> int:
        return self.tp * self.pp * self.ep

    @property
    def world_size(self) -> int:
        return self.replicas * self.gpus_per_replica

    @property
    def label(self) -> str:
        extra = f"+{self.redundant_experts}" if self.redundant_experts else ""
        return f"TP{self.tp} PP{self.pp} EP{self.ep}{extra} x{self.replicas}"


@dataclass(frozen=True, slots=True)
class StageShape:
    """What one GPU of a pipeline stage holds and reads per decode step (bytes)."""

    stage: int
    layers: tuple[int, ...]
    """Block indices on this stage."""
    num_moe_layers: int
    weights_bytes: float
    """Resident weights per GPU."""
    read_bytes: float
    """Weights every decode step reads, routed experts and the embedding table left out."""
    expert_bytes: float
    """One routed expert's slice on this GPU, one layer."""
    kv_bytes_per_token: float
    """KV cache per token on this GPU for this stage's blocks."""
    has_lm_head: bool
    state_bytes_per_sequence: float = 0.0
    """Fixed per-sequence state on this GPU for this stage's Mamba2 blocks (Nemotron-H), heads
    split over TP (vLLM MambaMixer2 shards its heads across tensor-parallel ranks)."""


def weight_bytes_per_param(dtype: WeightDType, assumptions: MemoryAssumptions) -> float:
    """Bytes per linear-layer weight in ``dtype``, quantisation scales included.

    Source: fp8 128x128 blocks with one fp32 scale (DeepSeek-V3 report, arXiv:2412.19437,
    sec. 3.3.2); int8 one bf16 scale per output channel of ~8192 inputs (SmoothQuant,
    arXiv:2211.10438); int4 one bf16 scale per group (``int4_group_size``); NVFP4 one FP8
    (E4M3) scale per 16 values (NVIDIA's NVFP4 format, per-tensor fp32 scale left out); MXFP4
    one E8M0 (1-byte) scale per 32 values (OCP Microscaling Formats v1.0 spec, sec. 5).
    """
    scale_bytes = {
        "bf16": 0.0,
        "fp8": 4.0 / (128 * 128),
        "int8": 2.0 / 8192,
        "int4": 2.0 / assumptions.int4_group_size,
        "nvfp4": 1.0 / 16,
        "mxfp4": 1.0 / 32,
    }[dtype]
    values = 0.5 if dtype in ("nvfp4", "mxfp4") else BYTES_PER_DTYPE[dtype]  # E2M1: 4 bits
    return values + scale_bytes


def kv_bytes_per_token_per_layer(model: ModelSpec, kv_dtype: KvDType) -> float:
    """KV cache bytes per token and block, whole model width (no parallelism).

    Source: MHA/GQA/MQA 2 x kv_heads x head_dim (K and V); MLA one latent of kv_lora_rank plus
    the shared rope key of qk_rope_head_dim (DeepSeek-V2 report, arXiv:2405.04434, Table 1);
    DeepSeek-V3.2 adds its indexer's key (``indexer_key_bytes_per_token``).
    """
    if model.is_mla:
        elements = (model.kv_lora_rank or 0) + model.qk_rope_head_dim
    else:
        elements = 2 * model.kv_heads * model.head_size
    return elements * BYTES_PER_DTYPE[kv_dtype] + indexer_key_bytes_per_token(model)


INDEXER_SCALE_BLOCK = 128
"""Indexer key values sharing one fp32 scale. Source: DeepSeek-V3.2-Exp inference/model.py
(Indexer: k_cache float8_e4m3fn, k_scale_cache of index_head_dim // block_size fp32,
block_size 128); lightllm Deepseek3_2MemoryManager (index_quant_block_size)."""


def indexer_key_bytes_per_token(model: ModelSpec) -> float:
    """DeepSeek-V3.2's lightning-indexer key cache per token and block: one key of
    index_head_dim in FP8 plus an fp32 scale per 128 values, whatever the KV dtype (DeepSeek-
    V3.2: 128 + 4 = 132 bytes); 0 without an indexer. Source: DeepSeek-V3.2-Exp report sec.
    2.1 (the indexer keeps its own keys, k^I_s, in FP8) and ``INDEXER_SCALE_BLOCK``."""
    if not model.index_topk or not model.index_head_dim:
        return 0.0
    scales = -(-model.index_head_dim // INDEXER_SCALE_BLOCK)
    return model.index_head_dim * BYTES_PER_DTYPE["fp8"] + scales * BYTES_PER_DTYPE["fp32"]


def kv_bytes_per_token(model: ModelSpec, kv_dtype: KvDType) -> float:
    """KV cache bytes per token for the whole model (all blocks that keep one, one copy)."""
    kv_blocks = sum(model.holds_kv(i) for i in range(model.num_hidden_layers))
    return kv_blocks * kv_bytes_per_token_per_layer(model, kv_dtype)


def mamba_state_bytes_per_layer(model: ModelSpec, kv_dtype: KvDType) -> float:
    """Fixed per-sequence state of one Mamba2 block, whole width: the SSM state of H x P x N
    in fp32 and the last kernel - 1 inputs of the convolution over d_inner + 2 G N channels
    in the cache dtype. Source: transformers NemotronHConfig (mamba_ssm_cache_dtype float32)
    and NemotronHMamba2Mixer (ssm state heads x head_dim x state); vLLM's Mamba2 state cache
    (conv state of kernel - 1 columns)."""
    ssm = model.mamba_num_heads * model.mamba_head_dim * model.ssm_state_size
    conv_channels = model.mamba_inner_size + 2 * model.mamba_n_groups * model.ssm_state_size
    conv = conv_channels * max(0, model.mamba_conv_kernel - 1)
    return ssm * BYTES_PER_DTYPE["fp32"] + conv * BYTES_PER_DTYPE[kv_dtype]


def kv_cache_bytes_per_sequence(
    model: ModelSpec,
    kv_dtype: KvDType,
    context_tokens: int,
    layers: tuple[int, ...] | None = None,
) -> float:
    """KV cache bytes of one sequence of ``context_tokens`` over ``layers`` (None: all blocks),
    whole model width, windows applied.

    A sliding-window block keeps only its last ``sliding_window`` tokens (Mistral 7B,
    arXiv:2310.06825, sec. 2 "rolling buffer cache"); a chunked block (Llama 4) at most one
    chunk; full-attention blocks keep every token. A Gated DeltaNet block (Qwen3-Next) keeps no
    KV but a fixed state: a d_k x d_v fp32 matrix per value head and the last kernel - 1
    inputs of its convolution (vLLM's Mamba-style state cache). A Nemotron-H Mamba2 block keeps
    mamba_state_bytes_per_layer and an MLP-only block nothing.
    """
    per_layer = kv_bytes_per_token_per_layer(model, kv_dtype)
    blocks = range(model.num_hidden_layers) if layers is None else layers
    linear = [i for i in blocks if i in model.linear_attention_layers]
    kept = (
        min(context_tokens, model.attention_window(i) or context_tokens)
        for i in blocks
        if i not in model.linear_attention_layers and model.holds_kv(i)
    )
    mamba = sum(i in model.mamba_layers for i in blocks)  # Nemotron-H: a fixed state, no KV
    mamba_state = mamba * mamba_state_bytes_per_layer(model, kv_dtype) if mamba else 0.0
    key_dim = model.linear_num_key_heads * model.linear_key_head_dim
    value_dim = model.linear_num_value_heads * model.linear_value_head_dim
    state = value_dim * model.linear_key_head_dim * BYTES_PER_DTYPE["fp32"]
    conv = (2 * key_dim + value_dim) * max(0, model.linear_conv_kernel_dim - 1)
    linear_state = len(linear) * (state + conv * BYTES_PER_DTYPE[kv_dtype])
    return per_layer * sum(kept) + linear_state + mamba_state


def kv_heads_per_gpu(model: ModelSpec, tp: int) -> int:
    """K/V heads one TP rank holds: kv_heads / tp, at least 1 (replicated when tp > kv_heads).

    Source: vLLM ``QKVParallelLinear`` (num_kv_head_replicas = tp / kv_heads when tp > kv_heads).
    """
    return max(1, math.ceil(model.kv_heads / tp))


def kv_fraction_per_gpu(model: ModelSpec, tp: int) -> float:
    """Fraction of one block's KV cache a TP rank holds; MLA's latent is replicated (1.0)."""
    if model.is_mla:
        return 1.0  # one latent shared by all heads: every TP rank keeps all of it
    return kv_heads_per_gpu(model, tp) / model.kv_heads


def paged_tokens(tokens: int, block_tokens: int) -> int:
    """Tokens a sequence occupies in the paged cache: rounded up to whole blocks (vLLM)."""
    return -(-tokens // block_tokens) * block_tokens


def stage_layers(num_layers: int, pp: int) -> tuple[tuple[int, ...], ...]:
    """Block indices per pipeline stage, split as training splits them (explorer.partition:
    one fewer layer on the end stages when the layers do not divide)."""
    bounds = [0]
    for size in balanced_chunk_sizes(num_layers, pp):
        bounds.append(bounds[-1] + size)
    return tuple(tuple(range(bounds[s], bounds[s + 1])) for s in range(pp))


def attention_params_per_gpu(model: ModelSpec, tp: int) -> float:
    """Attention weights one TP rank holds: heads split; K/V heads replicated past kv_heads;
    MLA's down-projections replicated (vLLM ``ReplicatedLinear`` for q_a and kv_a)."""
    total = attention_params(model)
    if model.is_mla:
        h, q_rank = model.hidden_size, model.q_lora_rank or 0
        down = h * q_rank + h * ((model.kv_lora_rank or 0) + model.qk_rope_head_dim)
        return (total - down) / tp + down
    kv_weights = 2 * model.hidden_size * model.kv_heads * model.head_size
    return (total - kv_weights) / tp + kv_weights * kv_heads_per_gpu(model, tp) / model.kv_heads


def _layer_bytes(
    model: ModelSpec, index: int, layout: ServingLayout, bytes_per_param: float
) -> tuple[float, float]:
    """(bytes read every step, routed-expert bytes) of block ``index`` on one GPU; redundant
    experts add their copies' weights ((E + r) / E of the routed experts, spread over EP)."""
    tp, ep = layout.tp, layout.ep
    lp = layer_params(model, index)
    if index in model.mamba_layers or index in model.ffn_only_layers:
        mixer = lp.attention / tp  # Nemotron-H: the Mamba2 mixer split over TP, or none
    else:
        mixer = attention_params_per_gpu(model, tp)
    linear = mixer + (lp.mlp + lp.shared_experts) / tp
    bf16 = (lp.norms + lp.router) * BYTES_PER_DTYPE["bf16"]  # norms and router stay bf16
    copies = 1.0 + layout.redundant_experts / model.n_routed_experts if model.is_moe else 1.0
    experts = lp.routed_experts * copies / (tp * ep) * bytes_per_param
    return linear * bytes_per_param + bf16, experts


def _vocab_bytes(model: ModelSpec, tp: int, stage: int, pp: int) -> tuple[float, float]:
    """(embedding table, LM head + final norm) bytes on one GPU of ``stage``: bf16, split by TP."""
    table = model.vocab_size * model.hidden_size / tp * BYTES_PER_DTYPE["bf16"]
    first, last = stage == 0, stage == pp - 1
    embedding = table if first and not (model.tie_word_embeddings and last) else 0.0
    head = (table + norm_params(model, model.hidden_size) * 2.0) if last else 0.0
    return embedding, head


@lru_cache(maxsize=4096)
def stage_shapes(
    model: ModelSpec,
    layout: ServingLayout,
    weights_dtype: WeightDType,
    kv_dtype: KvDType,
    assumptions: MemoryAssumptions,
) -> tuple[StageShape, ...]:
    """Per-GPU weights and KV bytes of every pipeline stage of ``layout`` (cached)."""
    bpp = weight_bytes_per_param(weights_dtype, assumptions)
    kv_layer = kv_bytes_per_token_per_layer(model, kv_dtype) * kv_fraction_per_gpu(model, layout.tp)
    expert = 0.0
    if model.is_moe:
        one_layer = layer_params(model, model.first_k_dense_replace).routed_experts
        expert = one_layer / model.n_routed_experts / layout.tp * bpp
    shapes = []
    for stage, layers in enumerate(stage_layers(model.num_hidden_layers, layout.pp)):
        per_layer = [_layer_bytes(model, i, layout, bpp) for i in layers]
        read = sum(r for r, _ in per_layer)
        experts = sum(e for _, e in per_layer)
        embedding, head = _vocab_bytes(model, layout.tp, stage, layout.pp)
        shapes.append(
            StageShape(
                stage=stage,
                layers=layers,
                num_moe_layers=sum(model.is_moe_layer(i) for i in layers),
                weights_bytes=read + experts + embedding + head,
                read_bytes=read + head,
                expert_bytes=expert,
                kv_bytes_per_token=kv_layer * sum(model.holds_kv(i) for i in layers),
                has_lm_head=stage == layout.pp - 1,
                state_bytes_per_sequence=sum(i in model.mamba_layers for i in layers)
                * (
                    mamba_state_bytes_per_layer(model, kv_dtype) / layout.tp
                    if model.mamba_layers
                    else 0.0
                ),
            )
        )
    return tuple(shapes)


def block_weights_bytes(
    model: ModelSpec,
    index: int,
    layout: ServingLayout,
    weights_dtype: WeightDType,
    assumptions: MemoryAssumptions,
) -> float:
    """Weights of block ``index`` on one GPU (its routed experts' share included): what an
    extra copy of one block costs (DeepSeek-V3's MTP module is one block sharing the
    embedding and the LM head with the main model, report sec. 2.2)."""
    read, experts = _layer_bytes(
        model, index, layout, weight_bytes_per_param(weights_dtype, assumptions)
    )
    return read + experts
