"""Memory-bound kernels of a transformer block: elements read and written per token.

Norms, residual adds, activation functions, dropout, MoE token permutation and (without
FlashAttention) the softmax over the s x s scores are bandwidth-bound: their time is the bytes
they move over HBM bandwidth, not FLOPs. Widths are per GPU: TP splits heads and FFN width;
norms, residuals and dropout act on the whole hidden state unless sequence parallelism splits
it (Korthikanti et al. 2022, arXiv:2205.05198, sec. 4.2.2, whose activation ledger of
Table 2 names the same tensors). The backward pass moves about twice the forward's bytes
(it reads the saved inputs and writes gradients).

Three ledgers (explorer.compute.framework names which a stack runs): ``fused`` counts every
norm, residual add and activation as one kernel that reads its inputs and writes its output
once (Megatron-Core with Transformer Engine), RoPE as the one kernel over q and k that
Megatron-Core calls before the attention core (``fused_rope``);
``eager`` counts the ops PyTorch eager autograd launches for torchtitan's Llama code, fp32
intermediates included, with their backward formulas; ``compiled`` counts what Inductor
leaves when it fuses each block's pointwise chains and reductions (torch.compile per block).
Elements are 2-byte activation elements; an fp32 intermediate counts as two.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from explorer.compute.framework import MemoryBoundLedger
from explorer.compute.work import StageWork
from explorer.frozen import fast_init
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
    backward: float
    """Elements the backward's memory-bound kernels move (twice ``blocks`` in the fused and
    compiled ledgers; the autograd formulas' own in the eager one)."""
    forward_launches: float
    """Memory-bound kernels of the blocks' forward per micro-batch (explorer.compute.framework
    times their CPU issue)."""
    backward_launches: float
    """Memory-bound kernels of the blocks' backward per micro-batch."""


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


FUSED_LAUNCHES = 7
"""Fused ledger: memory-bound kernels of a block's forward besides its GEMMs (two norms, two
residual adds, the activation, RoPE and the attention core; twice as many backward)."""


@fast_init
@dataclass(frozen=True, slots=True)
class Ledger:
    """One block's memory-bound work per token per GPU: 2-byte elements and kernels."""

    forward: float
    backward: float
    forward_launches: float
    backward_launches: float

    def __add__(self, other: Ledger) -> Ledger:
        return Ledger(
            self.forward + other.forward,
            self.backward + other.backward,
            self.forward_launches + other.forward_launches,
            self.backward_launches + other.backward_launches,
        )

    def __mul__(self, times: float) -> Ledger:
        return Ledger(
            self.forward * times,
            self.backward * times,
            self.forward_launches * times,
            self.backward_launches * times,
        )


def eager_rmsnorm(width: float) -> Ledger:
    """torchtitan's eager RMSNorm over ``width`` elements per token (bf16 in and out).

    Forward, 8 kernels, in bytes per element: x.float() reads 2 writes 4; pow(2) 4 + 4;
    mean(-1) reads 4; + eps and rsqrt act on one value per token; x * rsqrt 4 + 4;
    type_as 4 + 2; * weight 2 + 2: 36 bytes (18 elements). Backward, 13 kernels (autograd
    formulas of torch/csrc/autograd/FunctionsManual.cpp): * weight 4 and its weight gradient
    (grad * output, then a sum over tokens) 8; type_as 6; x * rsqrt's two gradients 8 and
    12 + 4 (a mul, then a sum over the row); mean's expand-and-divide 4; pow's 2 x ** 1,
    times 2, times grad 28; the two fp32 gradients of x added 12; the cast back 6: 92 bytes
    (46 elements). Source: torchtitan 9dec370 torchtitan/models/norms.py RMSNorm (norm_type
    "rmsnorm", train_configs/llama3_8b.toml); the same ops as at::rms_norm's composite.
    """
    return Ledger(18 * width, 46 * width, 8, 13)


def one_norm(width: float) -> Ledger:
    """One norm kernel (TE, Inductor, torchtitan's fused_rmsnorm Triton kernel, or PyTorch's
    native LayerNorm): reads and writes the hidden state (2 elements per channel); backward
    twice that."""
    return Ledger(2 * width, 4 * width, 1, 2)


def residual(width: float) -> Ledger:
    """A residual add: reads two, writes one; backward adds the two gradient paths into the
    input's gradient (autograd accumulation: reads two, writes one)."""
    return Ledger(3 * width, 3 * width, 1, 1)


def eager_rope(width: float) -> Ledger:
    """torchtitan's eager complex RoPE on one of q and k: xq.float() reads 1 writes 2 elements
    per channel, the complex multiply by freqs_cis 2 + 2, type_as 2 + 1 (10; 3 kernels);
    backward the conjugate multiply and the two casts, the same 10. Source: torchtitan
    9dec370 models/llama/model.py apply_rotary_emb (view_as_complex, view_as_real are
    views)."""
    return Ledger(10 * width, 10 * width, 3, 3)


def repeat_kv(kv_width: float, q_width: float) -> Ledger:
    """GQA's repeat_kv of k or v: expand + reshape copies kv to the q heads (read kv, write q);
    backward sums the repeats back. Source: torchtitan 9dec370 model.py repeat_kv (F.sdpa
    takes equal heads there). The SDPA output's transpose(1, 2).contiguous() is free: the
    flash kernel already writes (b, s, h, d)."""
    return Ledger(kv_width + q_width, q_width + kv_width, 1, 1)


def eager_activation(model: ModelSpec, width: float) -> Ledger:
    """Eager SwiGLU silu(w1 x) * (w3 x): silu reads and writes f (2), the product reads 2 f
    and writes f (3); backward two products (3 each) and silu_backward (3). GELU: one kernel,
    2 forward, 3 backward (gelu_backward reads the gradient and the input). Source:
    torchtitan 9dec370 model.py FeedForward; derivatives.yaml (mul, silu, gelu)."""
    if model.ffn_kind == "swiglu":
        return Ledger(5 * width, 9 * width, 2, 3)
    return Ledger(2 * width, 3 * width, 1, 1)


def eager_bias_grads(model: ModelSpec, layout: Layout) -> Ledger:
    """The bias gradients of a block's biased linears under eager autograd: F.linear's bias
    enters addmm broadcast (fused into the GEMM in forward, nothing charged), and its
    backward sums the output gradient over the tokens, one reduction kernel per linear that
    reads the output width per token (the per-channel write is negligible). Widths per GPU:
    the q, k and v projections (column-parallel) and the FFN up projection(s) over tp, the
    attention output and FFN down projections (row-parallel, bias added after the reduction)
    on the whole hidden state (h / tp under sequence parallelism). Source:
    tools/autograd/derivatives.yaml (addmm: the self gradient, summed to the bias's shape
    by ExpandBackward's sum_to); Megatron-Core with Transformer Engine fuses it into the
    weight-gradient GEMM (cuBLASLt's BGRADB epilogue) and the fused ledger charges none."""
    width = model.hidden_size / (layout.tp if layout.sp else 1)
    q, k = _attention_widths(model, layout.tp)
    up = model.intermediate_size / layout.tp * (2 if model.ffn_kind == "swiglu" else 1)
    parts = (
        (model.attention_bias, q + 2 * k),
        (model.attention_out_bias, width),
        (model.mlp_bias, up + width),
    )
    read = sum(w for on, w in parts if on)
    kernels = sum((1 if on else 0) for on, _ in parts) + model.mlp_bias
    return Ledger(0.0, read, 0, kernels)


def triton_flash_attention_glue(model: ModelSpec, layout: Layout) -> Ledger:
    """What the Triton FlashAttention of 2022 (llm-foundry's attn_impl triton) and the fused
    QKV projection around it move besides the kernel, per token per GPU, all in backward:
    the fp32 dq accumulator is zeroed (init_to_zero pre-hook: write 2 elements per q channel)
    and copied into dq (dq.copy_(dq_accum): read 2, write 1), _bwd_preprocess_do_o_dot reads
    o and do (2), and the backward of qkv.chunk(3) concatenates dq, dk and dv into the fused
    projection's gradient (read and write q + 2 k); four kernels. The forward's rearranges are
    views (the kernel takes the chunks' strides). Source: llmfoundry/models/layers/
    flash_attn_triton.py _flash_attn_backward and attention.py triton_flash_attn_fn
    (llm-foundry ef350d9e6, 2023-07); the chunk's backward is a cat (derivatives.yaml)."""
    q, k = _attention_widths(model, layout.tp)
    return Ledger(0.0, 2 * q + 3 * q + 2 * q + 2 * (q + 2 * k), 0, 4)


def fused_rope(model: ModelSpec, layout: Layout) -> Ledger:
    """RoPE under the fused ledger: one kernel on q and one on k, each reading and writing the
    rotated channels (2 (q + k) elements), the same again backward (the gradient rotated back);
    its launches are already among FUSED_LAUNCHES. Megatron-Core applies it between the QKV
    projection and the attention core, as TE's fused RoPE kernel (apply_rope_fusion) or PyTorch
    ops: megatron/core/models/common/embeddings/rope_utils.py apply_rotary_pos_emb
    (fused_apply_rotary_pos_emb, TE's FusedRoPEFunc: tex.fused_rope_forward / _backward, one
    output the size of the input). None with learned positions or ALiBi."""
    if model.learned_position_embeddings or model.alibi:
        return Ledger(0.0, 0.0, 0, 0)
    q, k = _attention_widths(model, layout.tp)
    return Ledger(2 * (q + k), 2 * (q + k), 0, 0)


def fused_activation(model: ModelSpec, width: float) -> Ledger:
    """One activation kernel: SwiGLU reads 2 f, writes f; GELU reads and writes f; backward
    twice."""
    per_width = 3 if model.ffn_kind == "swiglu" else 2
    return Ledger(per_width * width, 2 * per_width * width, 1, 2)


def _attention_widths(model: ModelSpec, tp: int) -> tuple[float, float]:
    """(q, k) widths per GPU that RoPE rotates: all head channels, or MLA's rope dimensions
    (the shared k_pe is whole on every TP rank)."""
    if model.is_mla:
        return model.num_attention_heads * model.qk_rope_head_dim / tp, model.qk_rope_head_dim
    d = model.head_size
    return model.num_attention_heads * d / tp, model.kv_heads * d / tp


def _mlp_width(model: ModelSpec, tp: int, moe: bool) -> float:
    if not moe:
        return model.intermediate_size / tp
    k = model.num_experts_per_tok
    return (k * model.moe_intermediate_size + model.shared_ffn_size) / tp


@lru_cache(maxsize=4096)  # pure; asked many times per search for few inputs
def block_ledger(
    model: ModelSpec,
    layout: Layout,
    moe: bool,
    ledger: MemoryBoundLedger,
    dropout: bool,
    fused_norm: bool = False,
    triton_attention: bool = False,
) -> Ledger:
    """One block's norms, residuals, RoPE, GQA repeat and activation under ``ledger``
    (the attention core's softmax apart, as ``attention_elements_per_layer``), and with
    ``triton_attention`` the Triton FlashAttention's glue (triton_flash_attention_glue).

    ``fused``: the ledger of ``hidden_elements_per_layer`` and ``mlp_elements_per_layer``
    and ``fused_rope``; ``eager``: the
    per-op functions above, norms of LayerNorm models (or all, with ``fused_norm``: torchtitan's
    norm_type fused_rmsnorm Triton kernel) as one kernel;
    ``compiled``: each norm, residual, RoPE, repeat and activation as one kernel (Inductor
    fuses pointwise chains and reductions: Ansel et al. 2024, PyTorch 2, ASPLOS, sec. 5),
    backward twice the forward. MoE blocks add the token permutation (4 k h / tp, backward
    twice) under every ledger.
    """
    if ledger == "fused":
        hidden = hidden_elements_per_layer(model, layout, dropout)
        mlp = mlp_elements_per_layer(model, layout, moe)
        forward = hidden + mlp
        found = Ledger(forward, 2 * forward, FUSED_LAUNCHES, 2 * FUSED_LAUNCHES)
        return found + fused_rope(model, layout)
    width = model.hidden_size / (layout.tp if layout.sp else 1)
    q, k = _attention_widths(model, layout.tp)
    f = _mlp_width(model, layout.tp, moe)
    masks = 2 * DROPOUT_MASK_ELEMENTS * width if dropout else 0.0
    permute = 4 * model.num_experts_per_tok * model.hidden_size / layout.tp if moe else 0.0
    extra = Ledger(masks + permute, 2 * (masks + permute), 2 * moe, 4 * moe)
    gqa = not model.is_mla and model.kv_heads < model.num_attention_heads
    if ledger == "eager":
        one_kernel = fused_norm or model.norm_kind == "layernorm"
        norm = one_norm if one_kernel else eager_rmsnorm
        found = norm(width) * 2 + residual(width) * 2 + eager_activation(model, f)
        if not model.learned_position_embeddings:  # learned positions: no RoPE in the block
            found = found + eager_rope(q) + eager_rope(k)
        if model.qk_norm:
            found = found + norm(q) + norm(k)
        if not model.is_moe:  # MoE blocks' biased experts are not counted (none here)
            found = found + eager_bias_grads(model, layout)
    else:
        found = one_norm(width) * 2 + residual(width) * 2 + fused_activation(model, f)
        if not model.learned_position_embeddings:
            found = found + Ledger(2 * (q + k), 4 * (q + k), 1, 2)  # RoPE on q and k
        if model.qk_norm:
            found = found + one_norm(q) + one_norm(k)
    if gqa:
        found = found + repeat_kv(k, q) * 2
    if triton_attention:
        found = found + triton_flash_attention_glue(model, layout)
    return found + extra


FP32 = 2.0
"""An fp32 element counted in 2-byte activation elements."""


def mamba_scan_ledger(model: ModelSpec, layout: Layout) -> Ledger:
    """A Mamba2 mixer's memory-bound kernels per token per GPU (all but in_proj and out_proj).

    Widths per GPU (Megatron-Core MambaMixer shards heads and groups over TP): d_inner
    I = H P, groups x state G N, heads H; chunk Q. Forward, 7 kernels, in 2-byte elements:
    causal_conv1d with SiLU over x, B, C reads and writes I + 2 G N each (2 (I + 2 G N));
    _chunk_cumsum_fwd reads dt and writes dt and dA_cumsum in fp32 (5 H); _chunk_state_fwd
    reads x, B, dt and dA_cumsum (I + G N + 4 H) and writes each chunk's H x P x N state in fp32
    (2 I N / Q); _state_passing_fwd reads them and writes bf16 states (3 I N / Q);
    _bmm_chunk_fwd reads C and B (2 G N) and writes C B^T, G x Q x Q per chunk in fp32 (2 G Q);
    _chunk_scan_fwd reads C B^T, x, dt, dA_cumsum, C and the states and writes y
    (2 G Q + I + 4 H + G N + I N / Q + I); the gated RMSNorm reads y and z, writes I (3 I).
    Backward: twice the forward (the module's convention) plus what it recomputes (the
    convolution, dA_cumsum, C B^T, the chunk states and their passing: the first five forward
    kernels again). Source: Dao & Gu 2024, Mamba-2 (arXiv:2405.21060) sec. 6 (chunked SSD:
    intra-chunk C B^T, chunk states, state passing, output) and sec. 7 (the block: x, B, C
    through the short convolution, the extra normalisation gated by z);
    state-spaces/mamba ops/triton/ssd_combined.py (_mamba_chunk_scan_combined_fwd / _bwd,
    MambaSplitConv1dScanCombinedFn: states_in_fp32, CB in float32, conv recomputed)."""
    tp = layout.tp
    inner = model.mamba_inner_size / tp
    heads = model.mamba_num_heads / tp
    groups = model.mamba_n_groups / min(tp, model.mamba_n_groups)  # whole past G ranks
    q, n = model.mamba_chunk_size, model.ssm_state_size
    gn = groups * n
    states = inner * n / q  # chunk states per token
    conv = 2 * (inner + 2 * gn)
    cumsum = heads + 2 * FP32 * heads
    chunk_state = inner + gn + 2 * FP32 * heads + FP32 * states
    passing = FP32 * states + states
    bmm = 2 * gn + FP32 * groups * q
    scan = FP32 * groups * q + inner + 2 * FP32 * heads + gn + states + inner
    gated_norm = 3 * inner
    forward = conv + cumsum + chunk_state + passing + bmm + scan + gated_norm
    recomputed = conv + cumsum + chunk_state + passing + bmm
    return Ledger(forward, 2 * forward + recomputed, 7, 14 + 5)


def single_module_ledger(
    model: ModelSpec,
    layout: Layout,
    kind: str,
    ledger: MemoryBoundLedger,
    dropout: bool,
    fused_norm: bool = False,
) -> Ledger:
    """One Nemotron-H block of one sub-module (``kind``: "mamba", "attention" or "mlp"): its
    pre-norm and residual add (half of a transformer block's: transformers NemotronHBlock, one
    norm and one residual per block), then the Mamba2 mixer's kernels (``mamba_scan_ledger``),
    the attention's RoPE and GQA repeat as ``block_ledger`` counts them, or the MLP's
    activation; one residual dropout mask."""
    width = model.hidden_size / (layout.tp if layout.sp else 1)
    one_kernel = ledger != "eager" or fused_norm or model.norm_kind == "layernorm"
    norm = one_norm if one_kernel else eager_rmsnorm
    found = norm(width) + residual(width)
    if dropout:
        found = found + Ledger(
            DROPOUT_MASK_ELEMENTS * width, 2 * DROPOUT_MASK_ELEMENTS * width, 0, 0
        )
    if kind == "mamba":
        return found + mamba_scan_ledger(model, layout)
    if kind == "mlp":
        f = model.intermediate_size / layout.tp
        act = eager_activation(model, f) if ledger == "eager" else fused_activation(model, f)
        return found + act
    if ledger == "fused":  # no GQA repeat under TE; RoPE on the hybrid's blocks not counted
        return found
    q, k = _attention_widths(model, layout.tp)
    if ledger == "eager" and not model.learned_position_embeddings:
        found = found + eager_rope(q) + eager_rope(k)
    elif ledger == "compiled" and not model.learned_position_embeddings:
        found = found + Ledger(2 * (q + k), 4 * (q + k), 1, 2)
    if not model.is_mla and model.kv_heads < model.num_attention_heads:
        found = found + repeat_kv(k, q) * 2
    return found


def stage_traffic(
    work: StageWork,
    model: ModelSpec,
    layout: Layout,
    seq_len: int,
    flash: bool,
    dropout: bool,
    ledger: MemoryBoundLedger = "fused",
    fused_norm: bool = False,
    triton_attention: bool = False,
) -> Traffic:
    """Forward and backward memory-bound elements per token per GPU of a stage's blocks, and
    their kernels per micro-batch.

    Source: the ledgers of this module's functions; the attention core's softmax moves the
    same under every ledger (backward twice).
    """
    glue = triton_attention and ledger != "fused"
    if model.single_module_blocks:  # Nemotron-H: each block by its own sub-module
        return _single_module_traffic(work, model, layout, seq_len, flash, dropout, ledger,
                                      fused_norm)  # fmt: skip
    dense = block_ledger(model, layout, False, ledger, dropout, fused_norm, glue)
    moe = dense
    if model.is_moe:
        moe = block_ledger(model, layout, True, ledger, dropout, fused_norm, glue)
    blocks = dense * (work.num_layers - work.num_moe_layers) + moe * work.num_moe_layers
    attention = attention_elements_per_layer(model, layout, seq_len, flash, dropout)
    attention *= work.num_layers
    return _traffic(blocks, attention)


def _traffic(blocks: Ledger, attention: float) -> Traffic:
    """A stage's traffic from its blocks' ledger and its attention core's elements (the
    core's backward moves twice its forward, as the blocks' fused ledger does)."""
    return Traffic(
        blocks=blocks.forward + attention,
        attention=attention,
        backward=blocks.backward + 2 * attention,
        forward_launches=blocks.forward_launches,
        backward_launches=blocks.backward_launches,
    )


def _single_module_traffic(
    work: StageWork,
    model: ModelSpec,
    layout: Layout,
    seq_len: int,
    flash: bool,
    dropout: bool,
    ledger: MemoryBoundLedger,
    fused_norm: bool,
) -> Traffic:
    """``stage_traffic`` of a Nemotron-H stage: its Mamba2, attention and MLP blocks each by
    ``single_module_ledger``, the softmax (without FlashAttention) on its attention blocks."""
    counts = (
        ("mamba", work.num_mamba_layers),
        ("attention", work.num_attention_only_layers),
        ("mlp", work.num_ffn_only_layers),
    )
    blocks = Ledger(0.0, 0.0, 0, 0)
    for kind, count in counts:
        if count:
            one = single_module_ledger(model, layout, kind, ledger, dropout, fused_norm)
            blocks = blocks + one * count
    attention = attention_elements_per_layer(model, layout, seq_len, flash, dropout)
    attention *= work.num_attention_only_layers
    return _traffic(blocks, attention)
