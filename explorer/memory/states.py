"""Model states on one GPU: parameters held per stage and their ZeRO-sharded bytes.

Splits (Megatron-Core): TP splits attention heads, FFN width, shared experts and the vocabulary
of embedding and LM head, and replicates norms, the router and MLA's down-projections; EP
splits the routed experts and ETP each expert's FFN width. Dense weights are replicated over
DP x CP ranks, experts over the expert-data-parallel group DP x CP x TP / (EP x ETP); ZeRO
shards over those groups (Rajbhandari et al. 2020, arXiv:1910.02054, sec. 5).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from explorer.counting import layer_params, mla_params, norm_params
from explorer.frozen import fast_init
from explorer.memory.tensors import LayerKind
from explorer.mesh.dims import MeshDims
from explorer.partition import StagePlan
from explorer.specs import Layout, ModelSpec, PrecisionPolicy


@fast_init
@dataclass(frozen=True, slots=True)
class HeldParams:
    """Parameters one GPU holds, by the data-parallel group replicating them."""

    dense: float = 0.0
    """Replicated over DP x CP (attention, dense MLP, shared experts, norms, router, vocab)."""
    expert: float = 0.0
    """Replicated over the expert-data-parallel group (routed experts)."""

    @property
    def total(self) -> float:
        return self.dense + self.expert

    def __add__(self, other: HeldParams) -> HeldParams:
        return HeldParams(self.dense + other.dense, self.expert + other.expert)

    def __mul__(self, factor: float) -> HeldParams:
        return HeldParams(self.dense * factor, self.expert * factor)


@fast_init
@dataclass(frozen=True, slots=True)
class ModelStates:
    """Bytes of the four model states on one GPU; ``total_bytes`` is their sum."""

    parameters: float
    gradients: float
    master_weights: float
    optimizer_states: float

    @property
    def total_bytes(self) -> float:
        return self.parameters + self.gradients + self.master_weights + self.optimizer_states

    def __add__(self, other: ModelStates) -> ModelStates:
        return ModelStates(
            self.parameters + other.parameters,
            self.gradients + other.gradients,
            self.master_weights + other.master_weights,
            self.optimizer_states + other.optimizer_states,
        )


@lru_cache(maxsize=4096)  # pure; asked many times per search for few inputs
def model_state_bytes(
    num_params: float,
    policy: PrecisionPolicy,
    zero: int,
    num_shards: int,
    *,
    keep_param_shard: bool = True,
) -> ModelStates:
    """Bytes per GPU of weights, gradients, master weights and Adam states under ZeRO.

    Source: Rajbhandari et al. 2020 (arXiv:1910.02054) sec. 5.1 and Figure 1: ZeRO-1 shards
    optimizer states (with the master copy, part of K), ZeRO-2 adds gradients, ZeRO-3 weights.
    ``keep_param_shard`` False: ZeRO-3 with master weights keeps no 16-bit shard, only the
    fp32 master (FSDP2; measured: validation/results.json llama8b-fsdp8-bf16-mixed-s4096-b1).
    """
    n = num_shards
    no_shard = zero >= 3 and policy.master_bytes > 0 and not keep_param_shard
    return ModelStates(
        parameters=0.0 if no_shard else num_params * policy.param_bytes / (n if zero >= 3 else 1),
        gradients=num_params * policy.grad_bytes / (n if zero >= 2 else 1),
        master_weights=num_params * policy.master_bytes / (n if zero >= 1 else 1),
        optimizer_states=num_params * policy.optimizer_bytes / (n if zero >= 1 else 1),
    )


def expert_shards(layout: Layout) -> int:
    """Ranks holding the same routed experts: DP x CP x TP / (EP x ETP).

    Source: Megatron-Core parallel_state (expert-data-parallel group of the folded mesh).
    """
    return MeshDims.of(layout).edp


def shard_groups(layout: Layout) -> tuple[int, int]:
    """Ranks sharding the dense weights and the routed experts under ZeRO: DP x CP and the
    expert-data-parallel group, each divided by the HSDP replicas (dp / dp_shard).

    Source: torchtitan ParallelDims (dp_replicate x dp_shard; FSDP2 shards over dp_shard x cp);
    Megatron-Core --num-distributed-optimizer-instances (the same split of the DP group).
    """
    experts = expert_shards(layout)
    if layout.dp_shard is None:
        return layout.dp * layout.cp, experts
    replicas = layout.dp // layout.dp_shard
    return layout.dp_shard * layout.cp, max(experts // replicas, 1)


def offloaded_states(states: ModelStates, fraction: float) -> ModelStates:
    """Model states left on the GPU when ``fraction`` of the master weights and optimizer
    states live (and are updated) in host memory.

    Source: Megatron-Core HybridDeviceOptimizer (--optimizer-cpu-offload,
    --optimizer-offload-fraction); ZeRO-Offload (Ren et al. 2021, arXiv:2101.06840, sec. 4.1:
    fp32 master weights and Adam states on the CPU).
    """
    if not fraction:
        return states
    kept = 1.0 - fraction
    return ModelStates(
        states.parameters,
        states.gradients,
        states.master_weights * kept,
        states.optimizer_states * kept,
    )


def attention_params_per_gpu(model: ModelSpec, tp: int) -> float:
    """Attention parameters on one TP rank: heads split, q/k norms (and MLA down-proj) not.

    Source: Shoeybi et al. 2019 (arXiv:1909.08053) sec. 3 (heads split column-wise); Megatron-Core
    MultiLatentAttention (q and kv down-projections duplicated over TP).
    """
    h = model.hidden_size
    if model.is_mla:
        rank, q_rank = model.kv_lora_rank or 0, model.q_lora_rank or 0
        replicated = h * q_rank + q_rank + h * (rank + model.qk_rope_head_dim) + rank
        return replicated + (mla_params(model) - replicated) / tp
    d = model.head_size
    q_width = model.num_attention_heads * d / tp
    kv_width = max(model.kv_heads / tp, 1.0) * d  # fewer KV heads than TP: replicas
    weights = 2 * h * q_width + 2 * h * kv_width
    biases = (q_width + 2 * kv_width) * model.attention_bias + h * model.attention_out_bias
    return weights + biases + (2 * d if model.qk_norm else 0)


def _first_layer_of(model: ModelSpec, kind: LayerKind) -> int:
    """Index of the first block of ``kind`` (the last index + 1 for the MTP block's layout)."""
    for i in range(model.num_hidden_layers + 1):
        if model.is_moe_layer(i) == (kind == "moe"):
            return i
    return model.num_hidden_layers


def single_module_block_params_per_gpu(model: ModelSpec, index: int, tp: int) -> float:
    """Parameters of Nemotron-H block ``index`` on one GPU: a Mamba2 mixer or an MLP split over
    TP (Megatron-Core MambaMixer shards d_inner and heads column-wise), attention as above, the
    pre-norm replicated."""
    lp = layer_params(model, index)
    if index in model.mamba_layers or index in model.ffn_only_layers:
        return (lp.attention + lp.mlp) / tp + lp.norms
    return attention_params_per_gpu(model, tp) + lp.norms


@lru_cache(maxsize=1024)
def block_params_per_gpu(
    model: ModelSpec, kind: LayerKind, tp: int, ep: int, etp: int
) -> HeldParams:
    """Parameters of one block of ``kind`` on one GPU, by replication group (Nemotron-H: its
    largest block, the unit ZeRO-3 gathers and buffers are sized on)."""
    if model.single_module_blocks:
        blocks = range(model.num_hidden_layers)
        return HeldParams(
            dense=max(single_module_block_params_per_gpu(model, i, tp) for i in blocks)
        )
    lp = layer_params(model, _first_layer_of(model, kind))
    dense = attention_params_per_gpu(model, tp) + lp.norms + lp.router
    dense += (lp.mlp + lp.shared_experts) / tp
    if not lp.routed_experts:
        return HeldParams(dense=dense)
    experts = model.n_routed_experts
    on_busiest_gpu = -(-experts // ep)  # ceil: uneven EP leaves some GPUs one expert more
    return HeldParams(dense=dense, expert=lp.routed_experts / experts * on_busiest_gpu / etp)


def embedding_params_per_gpu(model: ModelSpec, tp: int) -> float:
    """Input embedding on one GPU: vocabulary split over TP, learned positions replicated.

    Source: Shoeybi et al. 2019 sec. 3 (vocab-parallel embedding).
    """
    positions = model.max_position_embeddings * model.hidden_size
    return model.vocab_size * model.hidden_size / tp + positions * model.learned_position_embeddings


def head_params_per_gpu(model: ModelSpec, tp: int, has_embedding: bool) -> float:
    """Final norm and LM head on the last stage's GPUs (vocab split over TP).

    Tied embeddings: a stage without the embedding keeps a copy for the head, as Megatron-LM
    does (word embeddings on the first and last stage, their gradients all-reduced).
    """
    head = model.vocab_size * model.hidden_size / tp
    shared = model.tie_word_embeddings and has_embedding
    return norm_params(model, model.hidden_size) + (0.0 if shared else head)


def mtp_params_per_gpu(model: ModelSpec, layout: Layout, has_embedding: bool) -> HeldParams:
    """Multi-token-prediction modules on the last stage: projection, norms, one block each.

    Source: DeepSeek-V3 report (arXiv:2412.19437) sec. 2.2; Megatron-Core builds an embedding
    on the MTP stage too (GPTModel: pre_process or mtp_process).
    """
    n = model.num_nextn_predict_layers
    if not n:
        return HeldParams()
    kind: LayerKind = "moe" if model.is_moe_layer(model.num_hidden_layers) else "dense"
    block = block_params_per_gpu(model, kind, layout.tp, layout.ep, layout.etp)
    own = 2 * model.hidden_size**2 / layout.tp + 3 * norm_params(model, model.hidden_size)
    needs_embedding = not has_embedding and not model.tie_word_embeddings
    embedding = model.vocab_size * model.hidden_size / layout.tp if needs_embedding else 0.0
    return block * n + HeldParams(dense=own * n + embedding)


def stage_units(model: ModelSpec, layout: Layout, plan: StagePlan) -> tuple[HeldParams, ...]:
    """The separately gathered units on a stage's GPU (ZeRO-3): block kinds, embedding, head."""
    units = []
    for kind, count in (("dense", plan.num_dense_layers), ("moe", plan.num_moe_layers)):
        if count:
            units.append(block_params_per_gpu(model, kind, layout.tp, layout.ep, layout.etp))
    if plan.has_embedding:
        units.append(HeldParams(dense=embedding_params_per_gpu(model, layout.tp)))
    if plan.has_head:
        units.append(HeldParams(dense=head_params_per_gpu(model, layout.tp, plan.has_embedding)))
    if plan.holds_mtp:
        units.append(mtp_params_per_gpu(model, layout, plan.has_embedding))
    return tuple(units)


def stage_params(model: ModelSpec, layout: Layout, plan: StagePlan) -> HeldParams:
    """Parameters one GPU of the stage holds, by replication group (before ZeRO-3)."""
    tp, ep, etp = layout.tp, layout.ep, layout.etp
    if model.single_module_blocks:  # Nemotron-H: each block by its own kind
        held = HeldParams(
            dense=sum(single_module_block_params_per_gpu(model, i, tp) for i in plan.layers)
        )
    else:
        held = block_params_per_gpu(model, "dense", tp, ep, etp) * plan.num_dense_layers
        held += block_params_per_gpu(model, "moe", tp, ep, etp) * plan.num_moe_layers
    if plan.has_embedding:
        held += HeldParams(dense=embedding_params_per_gpu(model, tp))
    if plan.has_head:
        held += HeldParams(dense=head_params_per_gpu(model, tp, plan.has_embedding))
    if plan.holds_mtp:
        held += mtp_params_per_gpu(model, layout, plan.has_embedding)
    return held


@lru_cache(maxsize=4096)  # pure; asked many times per search for few inputs
def stage_model_states(
    held: HeldParams,
    policy: PrecisionPolicy,
    zero: int,
    dense_shards: int,
    moe_shards: int,
    *,
    keep_param_shard: bool = True,
) -> ModelStates:
    """Model-state bytes of a stage's GPU: dense and expert weights, each sharded by its group."""
    keep = keep_param_shard
    dense = model_state_bytes(held.dense, policy, zero, dense_shards, keep_param_shard=keep)
    return dense + model_state_bytes(held.expert, policy, zero, moe_shards, keep_param_shard=keep)


def full_embedding_grad_bytes(
    model: ModelSpec, layout: Layout, policy: PrecisionPolicy, plan: StagePlan
) -> float:
    """Bytes of the embedding gradient beyond the GPU's vocabulary shard when TP keeps it whole.

    V h (1 - 1/t) x gradient bytes, held until the step unless ZeRO-2/3 reduce-scatters it
    (measured: validation/results.json llama8b-tp2/tp4/tp8-bf16-pure-s4096-b1; none in
    llama8b-fsdp8-tp2-bf16-mixed-s4096-b1).
    """
    if not plan.has_embedding or layout.tp == 1 or layout.zero >= 2:
        return 0.0
    return model.vocab_size * model.hidden_size * (1 - 1 / layout.tp) * policy.grad_bytes
