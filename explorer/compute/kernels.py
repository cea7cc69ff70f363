"""The GEMMs of one transformer block on one GPU, and their seconds per micro-batch by pass.

Shapes per GPU (Megatron-Core's layout, sequence parallelism gathering the TP group's tokens
before the column-parallel GEMMs): T = b s / cp tokens. Attention: the input projections
(Q, K, V, or MLA's low-rank ones, as one GEMM of their total width) T x width/tp x h and the
output projection T x h x (heads x v_dim)/tp. Dense MLP: T x (2 or 1) f/tp x h and
T x h x f/tp. MoE: the router on the GPU's T/tp tokens (T/tp x E x h, BF16), shared experts as
a dense MLP, and the routed experts as grouped GEMMs over the E/ep local experts, each with
m = T/tp x top-k x ep etp / E tokens (Megatron-Core's all-to-all dispatcher, even routing).
Backward: the input gradient runs T x k x n, the weight gradient n x k x T (k = T, per expert
for grouped GEMMs). Efficiency: explorer.compute.gemm. Layers that stay in BF16 under an FP8
policy: the router and the LM head (DeepSeek-V3 report, arXiv:2412.19437, sec. 3.3.1;
Transformer Engine runs only its own linear layers in FP8); the same under NVFP4 (NVIDIA,
arXiv:2509.25149: only the linear layers' GEMMs in NVFP4, embeddings and the output head in
BF16).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from explorer.compute.casts import cast_weight
from explorer.compute.gemm import gemm_efficiency, peak_flops_per_s
from explorer.compute.moe import grouped_gemm_bandwidth
from explorer.flops import attention_projection_weights
from explorer.frozen import fast_init
from explorer.precision import LOW_PRECISION_COMPUTE
from explorer.specs import GemmDType, GpuSpec, Layout, ModelSpec


@dataclass(frozen=True, slots=True)
class Gemm:
    """One GEMM of a block per GPU and micro-batch: ``groups`` x (m x n x k)."""

    m: float
    n: float
    k: float
    groups: int = 1
    bf16: bool = False
    """Stays in BF16 under an FP8 or NVFP4 policy."""
    expert: bool = False
    """A routed expert's (grouped) GEMM."""
    input_copies: int = 1
    """Copies of each input row (top-k for the dispatched tokens): its FP8 cast runs once,
    before the dispatch (DeepSeek-V3 report sec. 3.3: FP8 dispatch)."""
    calls: int = 1
    """Separate GEMM calls the host issues per pass (a grouped GEMM run as one call per local
    expert: Transformer Engine GroupedLinear); each lasts at least ``call_s`` of
    ``gemm_times``."""
    norm_input: bool = False
    """Its input is a norm's output that Transformer Engine fuses into the linear (Megatron-Core's
    TELayerNormColumnParallelLinear: a block's attention input projection and a dense MLP's up
    projection, megatron/core/models/gpt/gpt_layer_specs.py): under delayed or current scaling
    its cast needs no separate BF16 read (explorer.compute.casts.cast_weight)."""

    @property
    def flops(self) -> float:
        return 2.0 * self.m * self.n * self.k * self.groups


@fast_init
@dataclass(frozen=True, slots=True)
class GemmTimes:
    """Seconds of a set of GEMMs per micro-batch: forward, input gradient, weight gradient;
    their forward FLOPs; and the elements FP8 casts read per pass (inputs, output grads), in
    explorer.compute.casts.cast_bytes' units: an input the cast reads in BF16 too counts
    ``cast_weight`` times (casts.cast_weight)."""

    forward_s: float = 0.0
    dgrad_s: float = 0.0
    wgrad_s: float = 0.0
    flops: float = 0.0
    cast_forward: float = 0.0
    cast_backward: float = 0.0
    launches: float = 0.0

    def __add__(self, other: GemmTimes) -> GemmTimes:
        return GemmTimes(
            self.forward_s + other.forward_s,
            self.dgrad_s + other.dgrad_s,
            self.wgrad_s + other.wgrad_s,
            self.flops + other.flops,
            self.cast_forward + other.cast_forward,
            self.cast_backward + other.cast_backward,
            self.launches + other.launches,
        )


def attention_gemms(model: ModelSpec, tokens: float, tp: int) -> list[Gemm]:
    """Input and output projections of one block's attention (ledger: module docstring)."""
    h = model.hidden_size
    out_width = model.num_attention_heads * (model.v_head_dim if model.is_mla else model.head_size)
    in_width = attention_projection_weights(model) / h - out_width
    fused = not model.is_mla  # MLA's down projections follow a separate TENorm
    return [Gemm(tokens, in_width / tp, h, norm_input=fused), Gemm(tokens, h, out_width / tp)]


def mlp_gemms(
    model: ModelSpec, tokens: float, width: float, tp: int, norm_input: bool = False
) -> list[Gemm]:
    """Up (gate and up, fused, for SwiGLU) and down projections of an MLP of ``width``;
    ``norm_input``: the up projection's input is a fused norm's (a dense block's MLP; an MoE
    block's shared experts follow a separate TENorm: Gemm.norm_input)."""
    up = (2 if model.ffn_kind == "swiglu" else 1) * width
    h = model.hidden_size
    return [Gemm(tokens, up / tp, h, norm_input=norm_input), Gemm(tokens, h, width / tp)]


def expert_gemms(
    model: ModelSpec, layout: Layout, tokens: float, fp8_dispatch: bool = True
) -> list[Gemm]:
    """The router and the routed experts' grouped GEMMs of one MoE block (``tokens``: T).

    The up projection's low-precision input cast runs once per token before an FP8 dispatch
    (``fp8_dispatch``: DeepSeek-V3 report sec. 3.3.4), else on every one of the top-k copies
    the dispatch delivers in BF16 (Transformer Engine's GroupedLinear quantizes its input).
    """
    local = tokens / layout.tp  # each TP rank routes its sequence-parallel share
    experts, k = model.n_routed_experts, model.num_experts_per_tok
    per_expert = local * k * layout.ep * layout.etp / experts
    groups = max(1, experts // layout.ep)
    width, h = model.moe_intermediate_size / layout.etp, model.hidden_size
    up = (2 if model.ffn_kind == "swiglu" else 1) * width
    copies = k if fp8_dispatch else 1  # rows per token each cast covers
    return [
        Gemm(local, experts, h, bf16=True),
        Gemm(per_expert, up, h, groups, expert=True, input_copies=copies, calls=groups),
        Gemm(per_expert, h, width, groups, expert=True, calls=groups),
    ]


def block_gemms(
    model: ModelSpec, layout: Layout, seq_len: int, moe: bool, fp8_dispatch: bool = True
) -> list[Gemm]:
    """Every GEMM of one dense or MoE block per GPU and micro-batch (``fp8_dispatch``: see
    expert_gemms)."""
    tokens = layout.micro_batch_size * seq_len / layout.cp
    found = attention_gemms(model, tokens, layout.tp)
    if not moe:
        return found + mlp_gemms(model, tokens, model.intermediate_size, layout.tp, True)
    if model.shared_ffn_size:
        found += mlp_gemms(model, tokens, model.shared_ffn_size, layout.tp)
    return found + expert_gemms(model, layout, tokens, fp8_dispatch)


@lru_cache(maxsize=4096)  # pure; asked many times per search for few inputs
def _one(
    g: Gemm,
    fmt: GemmDType,
    gpu: GpuSpec,
    bandwidth: float,
    scale: float,
    cap: float,
    call_s: float = 0.0,
    recipe: str = "",
) -> GemmTimes:
    """Forward, input-gradient and weight-gradient seconds of one (grouped) GEMM; a GEMM
    issued as ``g.calls`` separate calls lasts at least ``g.calls x call_s`` per pass."""
    peak = peak_flops_per_s(gpu, fmt)
    floor = g.calls * call_s if g.expert else 0.0

    def seconds(m: float, n: float, k: float, groups: int) -> float:
        # grouped: every group's tiles share the waves; m (tokens per expert) pads per group;
        # its roofline is the grouped kernel's (explorer.compute.moe.grouped_gemm_bandwidth)
        bw = bandwidth
        if g.expert:
            bw = grouped_gemm_bandwidth(m, n, k, groups, fmt, bandwidth, single_launch=not call_s)
        eff = min(cap, scale * gemm_efficiency(m, n * groups, k, fmt, gpu, bw, recipe))
        return max(floor, 2.0 * m * n * k * groups / (peak * eff))

    casts = 1.0 if fmt in LOW_PRECISION_COMPUTE else 0.0
    read_in = cast_weight(recipe, g.norm_input)  # the BF16 read where no fused norm did it
    read_grad = cast_weight(recipe, False)  # output gradients: never a fused norm's
    return GemmTimes(
        forward_s=seconds(g.m, g.n, g.k, g.groups),
        dgrad_s=seconds(g.m, g.k, g.n, g.groups),
        wgrad_s=seconds(g.n, g.k, g.m, g.groups),
        flops=g.flops,
        cast_forward=casts * read_in * g.m * g.k * g.groups / g.input_copies,
        cast_backward=casts * read_grad * g.m * g.n * g.groups,
        launches=3,
    )


@lru_cache(maxsize=16384)
def gemm_times(
    gemms: tuple[Gemm, ...],
    fmt: GemmDType,
    gpu: GpuSpec,
    bandwidth: float,
    scale: float = 1.0,
    cap: float = 1.0,
    call_s: float = 0.0,
    low_precision_scale: float = 1.0,
    recipe: str = "",
) -> tuple[GemmTimes, GemmTimes]:
    """(dense GEMMs, routed-expert GEMMs) seconds of a block per micro-batch; BF16 layers run
    in BF16 whatever ``fmt``. Efficiencies are multiplied by ``scale`` (the FP8 / FP4 ones also
    by ``low_precision_scale``: the recipe's block scaling) and held at most at ``cap``; an
    expert GEMM issued as separate per-expert calls lasts at least ``call_s`` per call and pass
    (``ComputeAssumptions.grouped_gemm_call_s``); the FP8 / FP4 GEMMs follow the GPU's points
    measured under ``recipe`` where it has any (gemm_efficiency). Source: module docstring."""
    dense, expert = GemmTimes(), GemmTimes()
    low_scale = scale * low_precision_scale if fmt in LOW_PRECISION_COMPUTE else scale
    for g in gemms:
        low = g.bf16 and fmt in LOW_PRECISION_COMPUTE
        t_fmt: GemmDType = "bf16" if low else fmt
        t_recipe = recipe if t_fmt in LOW_PRECISION_COMPUTE else ""
        t = _one(g, t_fmt, gpu, bandwidth, scale if low else low_scale, cap, call_s, t_recipe)
        if g.expert:
            expert = expert + t
        else:
            dense = dense + t
    return dense, expert
