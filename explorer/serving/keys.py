"""Keys a serving step's attention actually reads per block: sliding windows, chunks, top-k.

The latency model (explorer.serving.latency) charges attention as a stage's per-key FLOPs and
KV bytes per token times the keys in context. These shares scale that charge to what each
block reads: a sliding-window block min(context, window) keys (Mistral 7B, arXiv:2310.06825,
sec. 2), a chunked block (Llama 4) the keys of its own chunk, DeepSeek-V3.2's sparse
attention its top-k keys plus the lightning indexer's pass over every key (DeepSeek-V3.2-Exp
report sec. 2.1). Blocks without a KV cache (Mamba2, MLP-only, Gated DeltaNet) read no keys.
Without windows or top-k every share is exactly 1 (the figures are unchanged).
"""

from __future__ import annotations

from explorer.flops import (
    attention_core_flops_per_token,
    indexer_flops_per_key,
    keys_per_query,
    keys_per_query_chunked,
)
from explorer.memory.serving_layout import (
    indexer_key_bytes_per_token,
    kv_bytes_per_token_per_layer,
)
from explorer.serving.mla import absorbed_attention_flops_per_key
from explorer.specs import KvDType, ModelSpec


def _plain(model: ModelSpec, layers: tuple[int, ...], keys: float) -> bool:
    """Whether every block reads all ``keys`` (no window, no top-k) or there is nothing to read."""
    held = any(model.holds_kv(i) for i in layers)
    return not held or keys <= 0 or (model.sliding_window is None and model.index_topk is None)


def decode_keys(model: ModelSpec, index: int, context: float) -> float:
    """Keys block ``index`` reads for a decode token at a mean ``context`` of the batch: as
    ``explorer.flops.decode_keys_read`` (context, min(context, w) under a sliding window, at
    most index_topk), for fractional mean contexts too. A chunked block reads its position
    inside the current chunk; the batch's sequences sit at spread positions, so past one chunk
    the mean is (c + 1) / 2 (positions uniform over the chunk: a named assumption; one
    sequence alone reads (context - 1) mod c + 1)."""
    if not model.holds_kv(index):
        return 0.0
    keys, window = context, model.attention_window(index)
    if window is not None:
        chunked = context if context <= window else (window + 1) / 2
        keys = chunked if model.chunked_attention else min(context, window)
    return min(keys, model.index_topk) if model.index_topk is not None else keys


def prefill_keys(model: ModelSpec, index: int, keys: float) -> float:
    """Keys block ``index`` reads per prompt token when full causal attention would read
    ``keys`` on average: the prompt is taken as 2 x keys tokens from position 0 (exact for a
    whole prompt without prefix-cache hits; chunks past the window read up to a quarter more
    than this), each query i reading min(i, w) keys (``keys_per_query``), the keys of its own
    chunk (``keys_per_query_chunked``) or at most index_topk."""
    if not model.holds_kv(index):
        return 0.0
    span, out = 2.0 * keys, keys
    window = model.attention_window(index)
    if window is not None and window < span:
        if model.chunked_attention:
            out = keys_per_query_chunked(span, window)  # type: ignore[arg-type]
        else:
            out = keys_per_query(span, window)  # type: ignore[arg-type]
    if model.index_topk is not None and model.index_topk < span:
        out = min(out, keys_per_query(span, model.index_topk))  # type: ignore[arg-type]
    return out


def attention_flops_share(
    model: ModelSpec, layers: tuple[int, ...], keys: float, prefill: bool
) -> float:
    """Factor on a stage's attention FLOPs (its per-key FLOPs x ``keys``) for the keys each
    block reads: sum over KV blocks of (core per key x keys read + indexer per key x keys) over
    the same with every key read. Decode of MLA counts the absorbed core
    (explorer.serving.mla), to which the indexer's 2 H_I d_I per key is added."""
    if _plain(model, layers, keys):
        return 1.0
    held = [i for i in layers if model.holds_kv(i)]
    absorbed = model.is_mla and not prefill
    core = (
        absorbed_attention_flops_per_key(model)
        if absorbed
        else attention_core_flops_per_token(model, 1, causal=False)
    )
    indexer = indexer_flops_per_key(model)
    base = core if absorbed else core + indexer  # what the stage's per-key figure holds
    read = prefill_keys if prefill else decode_keys
    used = sum(core * read(model, i, keys) + indexer * keys for i in held)
    return used / (len(held) * base * keys)


def decode_kv_share(
    model: ModelSpec, layers: tuple[int, ...], kv_dtype: KvDType, context: float
) -> float:
    """Share of a stage's full-context KV bytes (context x bytes per token) one decode token
    reads: each KV block its keys read (``decode_keys``) of the cache proper and, for
    DeepSeek-V3.2, the indexer's keys of every token (``indexer_key_bytes_per_token``)."""
    if _plain(model, layers, context):
        return 1.0
    held = [i for i in layers if model.holds_kv(i)]
    index = indexer_key_bytes_per_token(model)
    cache = kv_bytes_per_token_per_layer(model, kv_dtype) - index
    used = sum(cache * decode_keys(model, i, context) + index * context for i in held)
    return used / (len(held) * (cache + index) * context)
