"""Activation bytes held on one GPU of a pipeline stage: blocks in flight, embedding, LM head
and loss, multi-token prediction, and the block recomputation rebuilds during its backward.

Per-block tensors: ``activations.py``. Which of these parts coexist at each moment of the
step (backward start, one block's backward, optimizer step): ``phases.py``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache

from explorer.frozen import fast_init
from explorer.memory.activations import (
    block_activation_bytes,
    block_tensors,
    input_tokens,
    rebuilt_activation_bytes,
)
from explorer.memory.assumptions import TrainingAssumptions
from explorer.memory.frameworks import activation_storage
from explorer.memory.recompute import (
    RecomputePolicy,
    as_policy,
    checkpoint_counts,
    offloaded_layer_counts,
    offloaded_tensors,
    rebuilt_bytes,
    selective_tensors,
    unit_blocks,
)
from explorer.memory.tensors import (
    ActivationShape,
    LayerKind,
    SavedTensor,
    linear_input_bytes,
    saved,
)
from explorer.partition import StagePlan
from explorer.specs import ModelSpec, Recompute


def stage_block_model(model: ModelSpec, layers: tuple[int, ...]) -> ModelSpec:
    """The model as the blocks ``layers`` alone (re-indexed 0..n-1), for Nemotron-H's
    single-module blocks: ``activations._single_module_block`` weighs each kind by its share of
    the model's blocks, so on this model it is the mean of the stage's own Mamba2, attention
    and MLP blocks, and n of them are exactly their bytes. Other models are returned as they
    are. Source: the hybrid pattern (transformers NemotronHConfig hybrid_override_pattern) split
    by the pipeline partition (explorer.partition)."""
    if not model.single_module_blocks or not layers:
        return model
    position = {index: k for k, index in enumerate(layers)}

    def kept(blocks: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(sorted(position[i] for i in blocks if i in position))

    return replace(
        model,
        num_hidden_layers=len(layers),
        first_k_dense_replace=min(model.first_k_dense_replace, len(layers)),
        mamba_layers=kept(model.mamba_layers),
        attention_only_layers=kept(model.attention_only_layers),
        ffn_only_layers=kept(model.ffn_only_layers),
    )


def head_tensors(
    model: ModelSpec, x: ActivationShape, a: TrainingAssumptions
) -> tuple[SavedTensor, ...]:
    """Final norm, LM head and loss tensors of one micro-batch on the last stage, bytes.

    Source: Korthikanti et al. 2022 sec. 4.3: 4 s b h / t (1 + V / h) with SP; logits upcast
    to fp32 by Megatron-LM's vocab_parallel_cross_entropy (PyTorch: fp32 log-probs, measured).
    Recomputed norms drop the LM head input; the head stays bf16 (DeepSeek-V3 sec. 3.3.1).
    """
    h, act = model.hidden_size, x.dtype_bytes
    logits = x.tokens * model.vocab_size / x.tp
    head_in = saved("LM head input", input_tokens(x, a) * h, act, "output projection")
    rebuilt = activation_storage(a).recompute_norms_and_mla_up_projection
    return (
        saved("final norm input", x.sp_tokens * h, act, "final norm"),
        *(() if rebuilt else (head_in,)),
        saved("logits (fp32)", logits, a.loss_logits_bytes, "cross-entropy"),
    )


def embedding_activation_bytes(x: ActivationShape, a: TrainingAssumptions, hidden: int) -> float:
    """Bytes the embedding saves per micro-batch: its dropout mask when dropout is on.

    The embedding output itself is the first block's input, counted there (its norm saves it).
    Source: Korthikanti et al. 2022 sec. 4.3 (s b h p / t for the embedding dropout).
    """
    return x.sp_tokens * hidden * a.dropout_mask_bytes if a.dropout else 0.0


def mtp_activation_bytes(
    model: ModelSpec,
    x: ActivationShape,
    a: TrainingAssumptions,
    recompute: Recompute | RecomputePolicy,
) -> float:
    """Bytes the multi-token-prediction modules save per micro-batch on the last stage.

    Per module: two input norms and the 2h -> h projection input (4 T_sp h), one block, and its
    own final norm, head and fp32 logits. Source: DeepSeek-V3 report (arXiv:2412.19437) sec. 2.2;
    the recipe rebuilds the projection input (sec. 3.2.3) or caches it in FP8 (sec. 3.3.3).
    """
    if not model.num_nextn_predict_layers:
        return 0.0
    kind: LayerKind = "moe" if model.is_moe_layer(model.num_hidden_layers) else "dense"
    storage, sp_h = activation_storage(a), x.sp_tokens * model.hidden_size
    projection = (
        0.0  # the concatenated norm outputs, rebuilt
        if storage.recompute_norms_and_mla_up_projection
        else linear_input_bytes(x.dtype_bytes, storage.fp8_activation_cache)
    )
    inputs = 2 * sp_h * x.dtype_bytes + 2 * sp_h * projection  # norm inputs + projection input
    block = block_activation_bytes(model, kind, x, a, recompute)
    head = sum(t.bytes for t in head_tensors(model, x, a))
    return model.num_nextn_predict_layers * (inputs + block + head)


def recompute_working_bytes(
    model: ModelSpec,
    plan: StagePlan,
    x: ActivationShape,
    a: TrainingAssumptions,
    r: Recompute | RecomputePolicy,
) -> float:
    """Bytes one block rebuilds or reloads during its backward (largest block kind).

    Full: the whole block's tensors (a uniform unit of n blocks: n of them); selective: what
    the recipe drops, the larger sub-layer's (Megatron modules) or the whole block's
    (torchtitan op SAC); plus what the activation recipe rebuilds (``rebuilt_activation_bytes``)
    and one block's offloaded tensors, back on the GPU for its backward. Source: Chen et al.
    2016 (arXiv:1604.06174) sec. 3; Korthikanti et al. 2022 sec. 5.
    """
    p = as_policy(r)
    dense, moe, _ = checkpoint_counts(model, p, plan.layers, plan.chunk_blocks)
    model = stage_block_model(model, plan.layers)  # Nemotron-H: the stage's own blocks
    full = p.granularity == "full"
    kinds: list[LayerKind] = ["moe"] if plan.num_moe_layers else []
    kinds += ["dense"] if plan.num_dense_layers else []
    on_gpu = replace(p, offload=frozenset()) if p.granularity != "full" else RecomputePolicy()

    def working(k: LayerKind) -> float:
        every = block_tensors(model, k, x, a)
        checkpointed = (moe if k == "moe" else dense) > 0
        if full and checkpointed:
            rebuilt = unit_blocks(p) * sum(t.bytes for t in every)
        elif p.granularity == "selective":
            after = selective_tensors(model, k, x, a, on_gpu, every)
            rebuilt = rebuilt_bytes(every, after, whole_block=p.ops)
        else:
            rebuilt = 0.0
        on_device = selective_tensors(model, k, x, a, on_gpu, every)
        offloaded = on_device if p.offload_layers else offloaded_tensors(on_device, p)
        reload = 0.0 if full and checkpointed else sum(t.bytes for t in offloaded)
        return rebuilt + reload + rebuilt_activation_bytes(model, k, x, a)

    return max((working(k) for k in kinds), default=0.0)


@fast_init
@dataclass(frozen=True, slots=True)
class StageActivations:
    """Activation bytes on one GPU of a pipeline stage, by part; ``total_bytes`` is their sum."""

    blocks: float
    """Transformer blocks x micro-batches in flight."""
    embedding: float
    head: float
    """Final norm, LM head and fp32 logits x micro-batches waiting for their loss backward."""
    mtp: float
    recompute_working: float
    """Recomputation: one block's tensors rebuilt during its backward (full: all of them)."""

    @property
    def total_bytes(self) -> float:
        return self.blocks + self.embedding + self.head + self.mtp + self.recompute_working


NO_ACTIVATIONS = StageActivations(0.0, 0.0, 0.0, 0.0, 0.0)
"""What the optimizer step holds: every activation is freed by then."""


def _blocks_bytes(
    model: ModelSpec,
    plan: StagePlan,
    x: ActivationShape,
    a: TrainingAssumptions,
    p: RecomputePolicy,
) -> float:
    """One micro-batch's block activations on the stage (all its chunks), bytes: the inputs of
    the checkpointed units, and every other block as the recipe keeps it."""
    dense, moe, units = checkpoint_counts(model, p, plan.layers, plan.chunk_blocks)
    model = stage_block_model(model, plan.layers)  # Nemotron-H: the stage's own blocks
    kept = RecomputePolicy("none", offload=p.offload) if p.granularity == "full" else p
    dense, moe = plan.num_dense_layers - dense, plan.num_moe_layers - moe
    off_dense, off_moe = offloaded_layer_counts(p, dense, moe)
    blocks = units * block_activation_bytes(model, "dense", x, a, "full")
    if dense - off_dense:
        blocks += (dense - off_dense) * block_activation_bytes(model, "dense", x, a, kept)
    if moe - off_moe:
        blocks += (moe - off_moe) * block_activation_bytes(model, "moe", x, a, kept)
    return blocks


def offloaded_bytes(
    model: ModelSpec,
    plan: StagePlan,
    x: ActivationShape,
    a: TrainingAssumptions,
    p: RecomputePolicy,
) -> float:
    """Bytes one micro-batch's blocks on the stage move to host memory (and back), per GPU.

    Checkpointed blocks offload nothing (they keep their input only). Source: Megatron-Core
    fine-grained activation offloading (each module's input, D2H in the forward, H2D before
    its backward); Transformer Engine CPU offload (every saved tensor of offload_layers blocks).
    """
    if not (p.offload or p.offload_layers):
        return 0.0
    dense, moe, _ = checkpoint_counts(model, p, plan.layers, plan.chunk_blocks)
    model = stage_block_model(model, plan.layers)  # Nemotron-H: the stage's own blocks
    kept = RecomputePolicy("none", offload=p.offload) if p.granularity == "full" else p
    on_gpu = replace(kept, offload=frozenset())
    dense, moe = plan.num_dense_layers - dense, plan.num_moe_layers - moe
    whole = dict(zip(("dense", "moe"), offloaded_layer_counts(p, dense, moe), strict=True))
    counts: tuple[tuple[LayerKind, int], ...] = (("dense", dense), ("moe", moe))
    total = 0.0
    for kind, count in counts:
        if count:
            tensors = selective_tensors(model, kind, x, a, on_gpu, block_tensors(model, kind, x, a))
            part = sum(t.bytes for t in offloaded_tensors(tensors, p))
            total += (count - whole[kind]) * part + whole[kind] * sum(t.bytes for t in tensors)
    return total


@dataclass(frozen=True, slots=True)
class ActivationLedger:
    """One micro-batch's activation bytes on one GPU of a stage, by part, before they are
    multiplied by the micro-batches in flight (``in_flight``)."""

    blocks: float
    """The stage's blocks (all its chunks) for one micro-batch."""
    embedding: float
    head: float
    mtp: float
    recompute_working: float

    def in_flight(self, inflight: float, loss_inflight: float, copies: int) -> StageActivations:
        """Activations with ``inflight`` micro-batches saved (``loss_inflight`` waiting for
        their loss backward; DualPipe counts one of its ``copies`` chunks per stage)."""
        return StageActivations(
            blocks=inflight * self.blocks / copies,
            embedding=inflight * self.embedding,
            head=loss_inflight * self.head,
            mtp=loss_inflight * self.mtp,
            recompute_working=self.recompute_working,
        )


@lru_cache(maxsize=2048)
def activation_ledger(
    model: ModelSpec,
    plan: StagePlan,
    x: ActivationShape,
    a: TrainingAssumptions,
    r: Recompute | RecomputePolicy,
) -> ActivationLedger:
    """One micro-batch's activation bytes of ``plan``'s stage, by part, with the working set
    (cached: layouts that differ only in what the activations do not read, as DP, ZeRO and
    the schedule's in-flight count, share it; a cold DeepSeek-V3 pipeline across types asks
    1,221 times for 277 ledgers, 49.2 ms of its ~1.04 s, 2026-12-04)."""
    head = mtp = embedding = 0.0
    p = as_policy(r)
    if plan.has_head:
        head = sum(t.bytes for t in head_tensors(model, x, a))
    if plan.holds_mtp:
        mtp = mtp_activation_bytes(model, x, a, p)
    if plan.has_embedding:
        embedding = embedding_activation_bytes(x, a, model.hidden_size)
    return ActivationLedger(
        blocks=_blocks_bytes(model, plan, x, a, p),
        embedding=embedding,
        head=head,
        mtp=mtp,
        recompute_working=recompute_working_bytes(model, plan, x, a, r),
    )
