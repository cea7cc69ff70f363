"""Llama-style dense and mixture-of-experts models of any shape, from a ModelSpec, in plain PyTorch.

The layout follows torchtitan's Llama 3 model (pytorch/torchtitan, ``torchtitan/models/llama3``):
module names ``tok_embeddings``, ``layers.N.attention.{wq,wk,wv,wo}``,
``layers.N.feed_forward.{w1,w2,w3}``, ``norm``, ``output``, so its tensor-parallel plan applies
as written. Attention is ``F.scaled_dot_product_attention`` with native grouped-query support
(flash attention saves q, k, v, the output and the fp32 log-sum-exp, no s x s matrix). The MoE
block routes with a balanced capacity (every expert gets ``tokens x top-k / experts`` rows), the
load an estimator assumes; it is a memory model, not a trainable router.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from explorer.specs import ModelSpec


class _RMSNormFunction(torch.autograd.Function):
    """RMSNorm that saves only its input and the fp32 reciprocal RMS per row.

    Source: CUDA's fused kernel saves the same two tensors (``aten._fused_rms_norm`` and
    ``_fused_rms_norm_backward`` in PyTorch >= 2.8). On the CPU, ``F.rms_norm`` decomposes into
    ops that save an fp32 copy of the input, which a GPU run does not keep.
    """

    @staticmethod
    def forward(ctx, x, weight, eps):
        norm = torch.linalg.vector_norm(x, 2, dim=-1, keepdim=True, dtype=torch.float32)
        rstd = torch.rsqrt(norm.square() / x.shape[-1] + eps)
        ctx.save_for_backward(x, weight, rstd)
        return x * rstd.to(x.dtype) * weight

    @staticmethod
    def backward(ctx, grad):
        x, weight, rstd = ctx.saved_tensors
        r = rstd.to(x.dtype)
        xhat = x * r
        grad_weight = (grad * xhat).sum(dim=tuple(range(grad.ndim - 1)))
        grad_xhat = grad * weight
        dot = (grad_xhat * xhat).mean(-1, keepdim=True)
        grad_x = grad_xhat.sub_(xhat.mul_(dot)).mul_(r)
        return grad_x, grad_weight, None


class RMSNorm(nn.Module):
    """Root-mean-square norm with a learned scale (Zhang and Sennrich 2019, arXiv:1910.07467)."""

    def __init__(self, width: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _RMSNormFunction.apply(x, self.weight, self.eps)


def make_norm(model: ModelSpec, width: int) -> nn.Module:
    """The model's norm over ``width`` channels."""
    if model.norm_kind == "layernorm":
        return nn.LayerNorm(width)
    return RMSNorm(width)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """Rotary helper: (x1, x2) -> (-x2, x1) over the last dim (Hugging Face Llama)."""
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary position embedding of x (batch, seq, heads, head_dim). Source: arXiv:2104.09864."""
    seq = x.shape[1]
    cos = cos[:seq].to(x.dtype)[None, :, None, :]
    sin = sin[:seq].to(x.dtype)[None, :, None, :]
    return x * cos + rotate_half(x) * sin


class AttentionCore(nn.Module):
    """The attention core, softmax(q k^T / sqrt(d)) v, as one causal flash SDPA call.

    A module of its own (no parameters) so that selective recompute can checkpoint it alone:
    Korthikanti et al. 2022 (arXiv:2205.05198) sec. 5 recompute QK^T, softmax, dropout and
    attention over V, and keep q, k, v and the projections' inputs.
    """

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)


class Attention(nn.Module):
    """Grouped-query causal self-attention with rotary positions and optional q/k norms."""

    def __init__(self, model: ModelSpec) -> None:
        super().__init__()
        h, d = model.hidden_size, model.head_size
        self.head_dim = d
        self.wq = nn.Linear(h, model.num_attention_heads * d, bias=model.attention_bias)
        self.wk = nn.Linear(h, model.kv_heads * d, bias=model.attention_bias)
        self.wv = nn.Linear(h, model.kv_heads * d, bias=model.attention_bias)
        self.wo = nn.Linear(model.num_attention_heads * d, h, bias=model.attention_out_bias)
        self.q_norm = make_norm(model, d) if model.qk_norm else None
        self.k_norm = make_norm(model, d) if model.qk_norm else None
        self.core: nn.Module = AttentionCore()

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        batch, seq, _ = x.shape
        # -1 heads: under tensor parallelism each rank holds heads / tp of them.
        q = self.wq(x).view(batch, seq, -1, self.head_dim)
        k = self.wk(x).view(batch, seq, -1, self.head_dim)
        v = self.wv(x).view(batch, seq, -1, self.head_dim)
        if self.q_norm is not None and self.k_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        out = self.core(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))
        return self.wo(out.transpose(1, 2).reshape(batch, seq, -1))


class FeedForward(nn.Module):
    """Dense MLP: SwiGLU w2(silu(w1 x) * w3 x) (arXiv:2002.05202) or GELU w2(gelu(w1 x))."""

    def __init__(self, model: ModelSpec, ffn_width: int) -> None:
        super().__init__()
        if model.ffn_kind not in ("swiglu", "gelu"):
            raise NotImplementedError(f"ffn_kind {model.ffn_kind!r} is not built here")
        h, bias = model.hidden_size, model.mlp_bias
        self.w1 = nn.Linear(h, ffn_width, bias=bias)
        self.w2 = nn.Linear(ffn_width, h, bias=bias)
        self.w3 = nn.Linear(h, ffn_width, bias=False) if model.ffn_kind == "swiglu" else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.w3 is None:
            return self.w2(F.gelu(self.w1(x)))
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class MoE(nn.Module):
    """Top-k routed experts (a loop over experts) plus optional shared experts.

    Tokens are sorted by chosen expert and split evenly, which is exact routing when the load
    is perfectly balanced; shapes stay static, so fake tensors can run it.
    Source: Mixtral (arXiv:2401.04088) routing; DeepSeekMoE (arXiv:2401.06066) shared experts.
    """

    def __init__(self, model: ModelSpec) -> None:
        super().__init__()
        self.top_k = model.num_experts_per_tok
        self.router = nn.Linear(model.hidden_size, model.n_routed_experts, bias=False)
        self.experts = nn.ModuleList(
            FeedForward(model, model.moe_intermediate_size) for _ in range(model.n_routed_experts)
        )
        shared = model.shared_ffn_size
        self.shared_experts = FeedForward(model, shared) if shared else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, width = x.shape
        tokens = x.reshape(-1, width)
        weights, chosen = self.router(tokens).softmax(dim=-1).topk(self.top_k, dim=-1)
        order = chosen.flatten().argsort(stable=True)
        token_index = order // self.top_k
        rows = len(order) // len(self.experts)  # balanced load: equal rows per expert
        routed = tokens[token_index].split(rows)
        out = torch.cat([expert(chunk) for expert, chunk in zip(self.experts, routed, strict=True)])
        out = out * weights.flatten()[order].unsqueeze(-1)
        combined = torch.zeros_like(tokens).index_add(0, token_index, out)
        if self.shared_experts is not None:
            combined = combined + self.shared_experts(tokens)
        return combined.view(batch, seq, width)


class Block(nn.Module):
    """Pre-norm transformer block: x + attention(norm(x)), then + mlp(norm(.))."""

    def __init__(self, model: ModelSpec, index: int) -> None:
        super().__init__()
        self.attention_norm = make_norm(model, model.hidden_size)
        self.attention = Attention(model)
        self.ffn_norm = make_norm(model, model.hidden_size)
        moe = model.is_moe_layer(index)
        self.feed_forward = MoE(model) if moe else FeedForward(model, model.intermediate_size)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        x = x + self.attention(self.attention_norm(x), cos, sin)
        return x + self.feed_forward(self.ffn_norm(x))


class Transformer(nn.Module):
    """Decoder-only language model: embedding, blocks, final norm, LM head (logits)."""

    def __init__(self, model: ModelSpec, rope_len: int) -> None:
        super().__init__()
        if model.is_mla or model.learned_position_embeddings or model.num_nextn_predict_layers:
            raise NotImplementedError("MLA, learned positions and MTP are not built here")
        self.spec = model
        self.tok_embeddings = nn.Embedding(model.vocab_size, model.hidden_size)
        self.layers = nn.ModuleList(Block(model, i) for i in range(model.num_hidden_layers))
        self.norm = make_norm(model, model.hidden_size)
        self.output = None
        if not model.tie_word_embeddings:
            self.output = nn.Linear(model.hidden_size, model.vocab_size, bias=False)
        # torchtitan precomputes the rotary table for the training sequence length only.
        self.register_buffer("rope_cos", torch.empty(rope_len, model.head_size), persistent=False)
        self.register_buffer("rope_sin", torch.empty(rope_len, model.head_size), persistent=False)

    def reset_rope(self, theta: float = 500_000.0) -> None:
        """Fill the rotary tables (Llama 3 base 500000); call after ``to_empty``."""
        half = self.spec.head_size // 2
        cos, sin = self.get_buffer("rope_cos"), self.get_buffer("rope_sin")
        with torch.no_grad():
            inv_freq = theta ** (-torch.arange(half, dtype=torch.float32) / half)
            angles = torch.outer(torch.arange(cos.shape[0]).float(), inv_freq)
            cos.copy_(torch.cat((angles, angles), dim=-1).cos())
            sin.copy_(torch.cat((angles, angles), dim=-1).sin())

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.tok_embeddings(tokens)
        for layer in self.layers:
            x = layer(x, self.rope_cos, self.rope_sin)
        x = self.norm(x)
        if self.output is None:
            return F.linear(x, self.tok_embeddings.weight)
        return self.output(x)


def build_model(model: ModelSpec, rope_len: int, dtype: torch.dtype) -> Transformer:
    """The model on the meta device (no memory), in ``dtype``; materialise with ``to_empty``."""
    with torch.device("meta"):
        return Transformer(model, rope_len).to(dtype)


def num_parameters(module: nn.Module) -> int:
    """Parameters of the whole model (global shapes for sharded DTensor parameters)."""
    seen = {id(p): p for p in module.parameters()}
    return sum(math.prod(p.shape) for p in seen.values())
