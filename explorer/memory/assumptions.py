"""Assumptions of the training memory model a user may want to change, with their sources.

Every number here is shown in the app, the report and the CLI JSON. Defaults describe a modern
Megatron-Core style run (FlashAttention, no dropout, fp32 main gradients); ``GPT_STYLE`` is the
setting of Korthikanti et al. 2022 (arXiv:2205.05198), against which the activation model is
tested. ``framework`` names whose implementation runs the step; the switches after it override
single behaviours of that framework (None follows it; ``frameworks.py`` says what each means).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Literal

from explorer.specs import _HashOnce, hash_once
from explorer.units import MiB

Framework = Literal["megatron", "pytorch"]
"""Training framework whose memory behaviour is modelled (see ``explorer.memory.frameworks``)."""

MoeDispatcher = Literal["alltoall", "deepep"]
"""How MoE tokens reach their experts: NCCL all-to-all, or DeepEP's kernels and buffers."""

ActivationRecipe = Literal["standard", "deepseek-v3"]
"""How saved activations are stored: every tensor in the activation dtype, or the DeepSeek-V3
report's recomputation and FP8 caching (see ``explorer.memory.frameworks.ACTIVATION_RECIPES``)."""

_GRAPH_MODULES = ("attn", "mlp", "moe", "moe_router", "moe_preprocess")
"""Per-layer CUDA-graph scopes (``explorer.memory.buffers.CUDA_GRAPH_MODULES``)."""

_NON_NEGATIVE = (
    "zero3_prefetch_layers",
    "grad_bucket_bytes",
    "nccl_buffer_bytes",
    "nccl_channels",
    "nccl_p2p_channels_per_peer",
    "cuda_context_bytes",
    "library_workspace_bytes",
)


@hash_once
@dataclass(frozen=True, slots=True, kw_only=True)
class TrainingAssumptions(_HashOnce):
    """Switches and sizes behind the training memory estimate (bytes unless named otherwise)."""

    flash_attention: bool = True
    """FlashAttention keeps q, k, v, its output and the softmax log-sum-exp, never the s x s
    scores. Source: Dao et al. 2022 (arXiv:2205.14135) sec. 3.1. False gives the classic core:
    softmax output (and dropout mask and output) of a x s x s per sequence, Korthikanti et al.
    2022 (arXiv:2205.05198) sec. 4.1."""
    dropout: bool = False
    """Dropout on attention probabilities, after attention and after the MLP (1-byte masks).
    Off for modern LLMs (Llama 3, DeepSeek-V3 configs have no dropout); on for the GPT setting
    of Korthikanti et al. 2022 sec. 4.1."""
    dropout_mask_bytes: float = 1.0
    """Bytes per element of a dropout mask. Source: Korthikanti et al. 2022 sec. 4.1 (1 byte)."""
    moe_capacity_factor: float | None = None
    """Expert capacity as a multiple of the mean tokens per expert; None means dropless routing
    (Megatron-Core's default). Source: Fedus et al. 2021, Switch Transformer (arXiv:2101.03961),
    sec. 2.2."""
    moe_imbalance: float = 1.25
    """Dropless routing: tokens the busiest GPU's experts receive, as a multiple of the mean.
    An assumption (1 means perfect balance): 1.25 is the capacity factor Switch Transformer uses
    as its margin for uneven routing (arXiv:2101.03961, sec. 2.2, Table 1)."""
    router_logits_bytes: float = 4.0
    """Bytes per router logit and routing probability: gating kept in fp32. Source: DeepSeek-V3
    report (arXiv:2412.19437) sec. 3.3.1 (MoE gating in higher precision)."""
    loss_logits_bytes: float = 4.0
    """Bytes per logit kept for the cross-entropy backward: fp32, as Megatron-LM's
    vocab_parallel_cross_entropy upcasts the logits; Korthikanti et al. 2022 sec. 4.3 (4sbv/t)."""
    zero3_prefetch_layers: int = 1
    """ZeRO-3 / FSDP: layers gathered ahead of the one computing. Source: PyTorch FSDP
    BackwardPrefetch.BACKWARD_PRE and FSDP2's default prefetch of one module."""
    grad_bucket_bytes: float = 25 * MiB
    """ZeRO 0-2: one gradient communication bucket outside the gradient buffer. Source: PyTorch
    DistributedDataParallel bucket_cap_mb = 25. Megatron-Core's buckets (max(40M, 1M x DP)
    elements) are views of its contiguous gradient buffer, so 0 models Megatron; DeepSpeed's
    reduce_bucket_size is 5e8 elements."""
    nccl_buffer_bytes: float = 4 * MiB
    """NCCL buffer per channel and peer. Source: NCCL environment variables, NCCL_BUFFSIZE
    (default 4 MiB, the Simple protocol; LL and LL128 buffers are left out)."""
    nccl_channels: int = 16
    """Channels of a ring collective. An assumption: NCCL picks 2-32 by topology
    (NCCL_MIN_NCHANNELS / NCCL_MAX_NCHANNELS); 16 is typical of 8-GPU NVLink nodes."""
    nccl_p2p_channels_per_peer: int = 2
    """Channels per peer of point-to-point transfers (pipeline send/recv, MoE all-to-all).
    Source: NCCL environment variables, NCCL_NCHANNELS_PER_NET_PEER (default 2)."""
    cuda_context_bytes: float = 512 * MiB
    """CUDA context with PyTorch, per GPU: an assumption, not measured here. Typical for CUDA 12
    with lazy module loading (CUDA_MODULE_LOADING=LAZY, the default since CUDA 11.7); measure it
    with nvidia-smi after torch.cuda.init()."""
    library_workspace_bytes: float = 256 * MiB
    """cuBLAS/cuBLASLt, cuDNN and attention-kernel workspaces, all streams together: an
    assumption. cuBLASLt recommends 32 MiB per handle on Hopper (cuBLAS docs, cublasSetWorkspace;
    PyTorch PR 120925); training runs several streams."""
    headroom_fraction: float = 0.05
    """Share of GPU memory kept free for allocator fragmentation and spikes. An assumption; PyTorch
    reports the gap as reserved minus allocated (torch.cuda.memory_stats)."""
    heavy_stage_ratio: float = 1.2
    """A stage needing more than this multiple of the stage mean is reported as heavy."""
    framework: Framework = "megatron"
    """Whose implementation runs the step. megatron: Megatron-LM / Megatron-Core (contiguous fp32
    main-gradient buffer of its DistributedDataParallel, distributed optimizer, fused SwiGLU and
    vocab-parallel cross-entropy, fused Adam). pytorch: plain PyTorch as torchtitan runs it
    (FSDP2 fully_shard, DTensor tensor/sequence parallel with loss_parallel, eager SwiGLU,
    torch.optim.AdamW(foreach=True), zero_grad(set_to_none=True)), as measured in
    validation/results.json. Source: explorer.memory.frameworks (one entry per behaviour)."""
    keep_bf16_shard: bool | None = None
    """ZeRO-3 with master weights: keep a persistent 16-bit shard of the weights (2 B / parameter
    / shards) beside the fp32 master shard. None follows the framework (megatron yes, as DeepSpeed
    ZeRO-3 and the ZeRO paper; pytorch no: FSDP2 gathers from the fp32 shard). Source:
    Rajbhandari et al. 2020 (arXiv:1910.02054) sec. 5.1; measured: validation/results.json
    llama8b-fsdp8-bf16-mixed-s4096-b1 (16 B / parameter / dp)."""
    persistent_grad_buffer: bool | None = None
    """Gradients live in a buffer allocated once, so they exist already at the start of the first
    backward. None follows the framework (megatron yes: the contiguous main-grad buffer; pytorch
    no: zero_grad(set_to_none=True) frees them, so one micro-batch per step peaks without
    gradients). Source: Megatron-Core distributed/param_and_grad_buffer.py; measured:
    validation/results.json small-bf16-pure-s1024-b1."""
    fused_swiglu: bool | None = None
    """SwiGLU as one fused kernel that saves gate and up only (3 FFN-wide tensors per token with
    the down-projection input) instead of eager PyTorch's 4 (gate, up, silu(gate), product). None
    follows the framework (megatron yes: Megatron-Core fused bias_swiglu; pytorch no). Source:
    measured: validation/results.json llama8b-bf16-pure-s4096-b1 (20.5 h, not 17 h, per token)."""
    sp_saves_gathered_inputs: bool | None = None
    """Sequence parallel saves the all-gathered (whole-sequence) inputs of the QKV, MLP up/gate
    and LM-head projections instead of the shard it re-gathers in backward. None follows the
    framework (megatron no: Korthikanti et al. 2022 sec. 4.2.2; pytorch yes: DTensor SP).
    Source: measured: validation/results.json llama8b-tp4-bf16-pure-s4096-b1 (26.5 h / t)."""
    tp_full_embedding_grad: bool | None = None
    """Tensor parallel holds the whole V x h input-embedding gradient on every TP rank until the
    step (unless ZeRO-2/3 shards gradients). None follows the framework (megatron no:
    VocabParallelEmbedding; pytorch yes: DTensor has no vocabulary-sharded embedding backward).
    Source: measured: validation/results.json llama8b-tp2/tp4/tp8-bf16-pure-s4096-b1."""
    loss_backward_bytes_per_logit: float | None = None
    """Temporary bytes per local logit during the cross-entropy backward, beyond the saved fp32
    logits (``loss_logits_bytes``), at TP 1; with TP the framework's loss_parallel extra is
    added (pytorch 4). None follows the framework (megatron: the logits in the activation dtype
    beside their fp32 copy, 2 in bf16, 0 in fp32; pytorch: 8 for F.cross_entropy). Source:
    measured: validation/results.json llama8b-bf16-pure-s4096-b1 (4096 x 128256 x 8 B) and
    llama8b-tp4-bf16-pure-s4096-b1 (12 B)."""
    optimizer_step_temporaries: float | None = None
    """Temporary tensors the size of one Adam state per local parameter during the optimizer step.
    None follows the framework (megatron 0: fused multi-tensor Adam updates in place; pytorch 1:
    AdamW(foreach=True) allocates _foreach_sqrt(exp_avg_sq)). Source: measured:
    validation/results.json small-fp32-s1024-b1 (+4 B per parameter during the step)."""
    moe_probs_in_experts: bool | None = None
    """MoE routing probabilities multiply the experts' activation (weighted SwiGLU) instead of their
    outputs, so the combine keeps no expert outputs for the probabilities' gradient. None follows
    the framework (megatron yes: Megatron-Core TEGroupedMLP calls weighted_bias_swiglu_impl with
    the permuted probabilities, whose WeightedSwiGLUFunction saves its input and the probabilities
    only, and MoEAlltoAllTokenDispatcher unpermutes without probabilities; pytorch no: torchtitan's
    DeepSeek-V3 multiplies the expert outputs by the scores, score_before_experts=False)."""
    pipeline_keeps_unsharded: bool | None = None
    """ZeRO-3 with pipeline parallelism keeps every weight of the stage gathered and every
    gradient unsharded until the last micro-batch's backward. None follows the framework
    (megatron no; pytorch yes: torch.distributed.pipelining stage.py backward_maybe_with_nosync
    sets reshard_after_backward and requires_gradient_sync False before the last backward, and
    torchtitan's apply_fsdp does not reshard after forward under PP)."""
    pipeline_recv_buffers: bool | None = None
    """Pipeline parallelism keeps one activation and one gradient receive buffer per
    micro-batch and model chunk for the whole run. None follows the framework (megatron no:
    p2p_communication allocates each receive; pytorch yes: torch.distributed.pipelining
    stage.py _prepare_forward_infra and _prepare_backward_infra make them once)."""
    pipeline_keeps_outputs: bool | None = None
    """The last pipeline stage keeps each micro-batch's output, the logits in the activation
    dtype, until the next step begins. None follows the framework (megatron no: forward_step
    keeps only the loss; pytorch no, as torch.distributed.pipelining runs since
    ``step(return_outputs=False)``, pytorch/pytorch PR 165822, which torchtitan PR 1922 of
    2025-10-22 passes "to release the memory earlier"; before it, stage.py forward_one_chunk
    appended every output to ``output_chunks``, cleared only by the next step's
    ``clear_runtime_states``: set it for such runs)."""
    pipeline_keeps_stage_outputs: bool | None = None
    """Every pipeline stage but the last keeps each micro-batch's output (the activation it
    sends, at the stage boundary) until the schedule's step ends. None follows the framework
    (megatron no: schedules.py deallocate_output_tensor frees the data once it is sent;
    pytorch yes: torch.distributed.pipelining stage.py kept every stage's outputs in
    ``output_chunks`` until pytorch/pytorch PR 153383 of 2025-05-13, and since then
    ``fwd_cache`` and the pending send Work objects keep them to the step's end, PR 193903)."""
    pipeline_schedule_microbatches: int | None = None
    """Micro-batches one run of the pipeline schedule takes when gradient accumulation repeats
    the schedule (NeMo AutoModel: local batch / micro-batch, GA runs per step); sizes the
    receive buffers above. None: the step's micro-batches in one schedule."""
    fp8_linear_input_bytes: float | None = None
    """Transformer Engine FP8 recipes: bytes per element of each FP8 GEMM's saved input (QKV
    and MLA down-projection inputs, the attention output, the MLP and expert inputs of fc1 and
    fc2), quantized as the forward cast it: 1 for per-tensor scaling (delayed or current),
    1 + 1/32 for MXFP8 (an E8M0 scale per 32 elements), 1 + 4/128 for 1 x 128 blockwise. None
    keeps them in the activation dtype (torchao float8 saves its high-precision inputs).
    Source: Transformer Engine pytorch/module/linear.py and layernorm_linear.py (the quantized
    input, or layer-norm output, is what the backward's wgrad GEMM reads)."""
    fp8_weight_copy_bytes: float = 0.0
    """Transformer Engine FP8 recipes: bytes per GEMM weight of the cached FP8 copies (row-wise
    for the forward, column-wise / transposed for dgrad: 2 with per-tensor scaling, 2 x
    (1 + 1/32) with MXFP8), kept across micro-batches and steps; 0 means none (bf16 GEMMs, or
    weight caching off). Source: Transformer Engine TransformerEngineBaseModule
    get_weight_workspace (cache_name, is_first_microbatch); Megatron-Core TELinear passes
    is_first_microbatch unless --disable-parameter-transpose-cache."""
    activation_recipe: ActivationRecipe = "standard"
    """Preset of the three switches below. standard: every saved tensor in the activation dtype,
    nothing recomputed but what ``Layout.recompute`` says. deepseek-v3: all three on, as the
    DeepSeek-V3 report (arXiv:2412.19437) sec. 3.2.3 and 3.3.3 describe. A switch that is not
    None overrides the recipe (``explorer.memory.frameworks.activation_storage``)."""
    recompute_norms_and_mla_up_projection: bool | None = None
    """Drop every RMSNorm output and the MLA up-projection outputs (q, k, v) from the saved set;
    the backward rebuilds them from the saved norm inputs and latents (one block at a time, counted
    as recompute working memory). None follows the recipe. Source: DeepSeek-V3 report sec. 3.2.3,
    Recomputation of RMSNorm and MLA Up-Projection."""
    fp8_activation_cache: bool | None = None
    """Cache the inputs of FP8 linear layers in FP8 (E4M3, 1 byte, plus one fp32 scale per 1 x 128
    tile: 1 + 4/128 bytes per element) and the attention-output projection's input in E5M6 (12 bits,
    1.5 + 4/128 bytes); other tensors keep the activation dtype (list: ``activations.py``). None
    follows the recipe. Source: DeepSeek-V3 report sec. 3.3.3, Low-Precision Activation; 1 x 128
    tiles: sec. 3.3.2, Fine-Grained Quantization."""
    moe_swiglu_recompute: bool | None = None
    """MoE experts (routed and shared) cache their SwiGLU input (gate and up) in FP8 and recompute
    its output in the backward instead of saving it. None follows the recipe. Source: DeepSeek-V3
    report sec. 3.3.3, Low-Precision Activation (2); comparable Megatron-Core options:
    --activation-func-fp8-input-store with --recompute-modules moe_act."""

    optimizer_state_bytes: float | None = None
    """Bytes per parameter of the optimizer's states (Adam's two moments together); None follows
    the precision policy (``explorer.precision``). torch.optim.AdamW keeps its moments in the
    parameter's dtype: 8 over fp32 parameters (torchtitan's FSDP2 shards, torchao float8
    included, which casts only the matmul inputs: torchao float8 README), 4 over bf16 ones.
    Source: PyTorch torch/optim/adam.py _init_group (exp_avg = zeros_like(p))."""
    fsdp_accumulated_grad_bytes: float | None = None
    """ZeRO-3 (FSDP2) gradients accumulated unsharded over micro-batches without a
    reduce-scatter (under pipelining): bytes per element; None follows the precision's gradient
    bytes. FSDP2 upcasts the unsharded gradient to MixedPrecisionPolicy.reduce_dtype when it
    differs from param_dtype, so 4 for reduce_dtype fp32 (torchtitan, NeMo AutoModel). Source:
    torch/distributed/fsdp/_fully_shard/_fsdp_param.py FSDPParam.to_accumulated_grad_if_needed.
    Also sizes ZeRO-2's unsharded accumulation (``zero2_accumulates_unsharded``)."""
    zero2_accumulates_unsharded: bool = False
    """ZeRO-2 accumulates each micro-batch's gradients unsharded on every rank (in
    ``fsdp_accumulated_grad_bytes``, else the gradient bytes) and reduce-scatters them once a
    step, after the last micro-batch's backward: the memory side of
    CommAssumptions.zero2_grad_sync_per_step (explorer.estimate.EstimateAssumptions turns on
    both when either is on). In the backward phases the sharded gradients do not exist yet (the
    reduce-scatter makes them); the unsharded ones of the chunks that have begun their backward
    do (``explorer.memory.accumulation``). False: PyTorch FSDP SHARD_GRAD_OP / DeepSpeed ZeRO-2,
    which reduce-scatter every micro-batch into sharded gradients. Source: Llama 3 paper
    (arXiv:2407.21783) sec. 3.3.2, Numerical stability: FP32 gradient accumulation over the
    micro-batches in the backward, then an FP32 reduce-scatter across data parallel workers;
    FSDP2 does so without gradient sync (FSDPParam.to_accumulated_grad_if_needed upcasts the
    unsharded gradient to reduce_dtype; torch.distributed.pipelining stage.py
    backward_maybe_with_nosync syncs only at the last backward)."""
    sdpa_repeats_kv: bool = False
    """Attention repeats K and V to the query heads before SDPA (GQA without native support),
    so torch's context-parallel ring attention exchanges, gathers and accumulates them at the
    query width (``explorer.memory.ring_attention``; the saved tensors keep K and V at the KV
    width, as validation/models.py measures with enable_gqa). Source: torchtitan 9dec370
    models/llama/model.py Attention.forward (repeat_kv, then F.scaled_dot_product_attention),
    as explorer/compute/elementwise.py repeat_kv counts its traffic."""
    fsdp_torchtitan_units: bool = False
    """ZeRO-3 units as torchtitan's apply_fsdp wraps them: one per block, and the root module
    holding the embedding, final norm and output together, the last block kept gathered after
    its forward (without pipelining): at the loss backward the embedding is gathered with the
    LM head and the last block is still gathered. Source: torchtitan
    models/llama3/parallelize_llama.py apply_fsdp (9dec370, e7c0cae: reshard_after_forward =
    layer_id < last; fully_shard(model) last). False: the LM head's unit alone (as
    validation/parallelize.py wraps [norm, output])."""
    fsdp_version: Literal["fsdp2", "fsdp1"] = "fsdp2"
    """Which PyTorch FSDP runs ZeRO-3 under the "pytorch" framework: fsdp2 (fully_shard, as
    torchtitan and NeMo AutoModel) or fsdp1 (FullyShardedDataParallel, as Composer / LLM
    Foundry).
    The caching allocator's side-stream pools (``explorer.memory.allocator``) follow FSDP2's
    streams; FSDP1 allocates its gathers on its unshard stream and frees with record_stream
    (torch/distributed/fsdp/_runtime_utils.py), which is not modelled: no allocator term."""
    fsdp_ignores_unsharded_experts: bool = False
    """FSDP leaves the routed experts out when their expert-data-parallel group is one rank
    (EP over every DP rank): no gathered copy and no unsharded gradient; their gradients build
    up in place in the parameter dtype. Source: NeMo AutoModel
    nemo_automodel/components/moe/parallelizer.py apply_fsdp (ignored_params = the experts'
    parameters unless ep_shard is enabled)."""

    moe_dispatcher: MoeDispatcher = "alltoall"
    """MoE token dispatch: alltoall (NCCL point-to-point buffers per EP peer) or deepep (DeepEP's
    NVLink buffer and, across nodes, its NVSHMEM RDMA buffer, ``explorer.memory.buffers``;
    Megatron-Core --moe-token-dispatcher-type flex with DeepEP, NeMo AutoModel
    enable_deepep)."""
    deepep_num_sms: int = 20
    """SMs DeepEP's kernels use; its buffers have one channel per two SMs (rounded down).
    Source: DeepEP
    Buffer.num_sms default 20; Megatron-Core moe_deepep_num_sms default 20."""
    cuda_graph_modules: tuple[str, ...] = ()
    """Per-layer CUDA-graph capture scopes (attn, mlp, moe, moe_router, moe_preprocess); each
    keeps static edge tensors per layer and captured micro-batch
    (``explorer.memory.buffers.cuda_graph_bytes``). Empty: no per-layer graphs (a
    full-iteration graph keeps only its data inputs: none counted). Source: Megatron-Core
    --cuda-graph-impl transformer_engine / local with --cuda-graph-modules."""

    offload_overlap: float = 1.0
    """Activation offload: share of a pass's compute that the host copies run beside (a side
    stream); the rest of a longer copy is exposed. An assumption: 1 means a copy is hidden
    whenever it is shorter than the pass. Source: Megatron-Core fine-grained activation
    offloading (asynchronous D2H / H2D on its own stream)."""

    def __post_init__(self) -> None:
        if not 0 <= self.offload_overlap <= 1:
            raise ValueError(f"offload_overlap must be in [0, 1], got {self.offload_overlap}")
        for name in ("dropout_mask_bytes", "moe_imbalance", "router_logits_bytes"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)!r}")
        per_schedule = self.pipeline_schedule_microbatches
        if per_schedule is not None and not per_schedule >= 1:
            raise ValueError(
                f"pipeline_schedule_microbatches must be 1 or more, got {per_schedule!r}"
            )
        if self.moe_dispatcher not in ("alltoall", "deepep"):
            raise ValueError(
                f"moe_dispatcher must be 'alltoall' or 'deepep', got {self.moe_dispatcher!r}"
            )
        if self.deepep_num_sms < 2:
            raise ValueError(f"deepep_num_sms must be 2 or more, got {self.deepep_num_sms}")
        unknown = [m for m in self.cuda_graph_modules if m not in _GRAPH_MODULES]
        if unknown:
            raise ValueError(
                f"cuda_graph_modules has {unknown[0]!r}; choose from {', '.join(_GRAPH_MODULES)}"
            )
        capacity = self.moe_capacity_factor
        if capacity is not None and not capacity > 0:
            raise ValueError(f"moe_capacity_factor must be positive, got {capacity!r}")
        if not 0 <= self.headroom_fraction < 1:
            raise ValueError(f"headroom_fraction must be in [0, 1), got {self.headroom_fraction}")
        for name in _NON_NEGATIVE:
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be zero or more, got {getattr(self, name)!r}")
        if self.fsdp_version not in ("fsdp2", "fsdp1"):
            raise ValueError(f"fsdp_version must be 'fsdp2' or 'fsdp1', got {self.fsdp_version!r}")
        if self.framework not in ("megatron", "pytorch"):
            raise ValueError(f"framework must be 'megatron' or 'pytorch', got {self.framework!r}")
        if self.activation_recipe not in ("standard", "deepseek-v3"):
            raise ValueError(
                "activation_recipe must be 'standard' or 'deepseek-v3', "
                f"got {self.activation_recipe!r}"
            )
        if self.fp8_weight_copy_bytes < 0:
            raise ValueError(
                f"fp8_weight_copy_bytes must be zero or more, got {self.fp8_weight_copy_bytes}"
            )
        for name in (
            "loss_backward_bytes_per_logit",
            "optimizer_step_temporaries",
            "fp8_linear_input_bytes",
            "optimizer_state_bytes",
            "fsdp_accumulated_grad_bytes",
        ):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise ValueError(f"{name} must be zero or more (or None), got {value!r}")

    def as_dict(self) -> dict[str, object]:
        """Every assumption by name (for JSON and the report)."""
        return asdict(self)


DEFAULT_TRAINING_ASSUMPTIONS = TrainingAssumptions()
"""Modern LLM training with Megatron-Core: FlashAttention, no dropout, dropless MoE."""

PYTORCH_ASSUMPTIONS = TrainingAssumptions(framework="pytorch")
"""Modern LLM training with plain PyTorch (torchtitan: FSDP2, DTensor TP, eager SwiGLU)."""

GPT_STYLE = TrainingAssumptions(flash_attention=False, dropout=True)
"""The setting of Korthikanti et al. 2022 Table 2: classic attention core and dropout masks."""

DEEPSEEK_V3_ASSUMPTIONS = TrainingAssumptions(activation_recipe="deepseek-v3")
"""Megatron-Core with the DeepSeek-V3 report's activation recipe (sec. 3.2.3 and 3.3.3)."""
