"""Transformer blocks on pipeline stages: which layers, embeddings and heads each rank holds.

Rules (each a small function below):
- A balanced split gives every model chunk ceil(L / C) blocks and takes the remainder off the
  ends first (first chunk, last chunk, second, second to last, ...), because the first stage
  also runs the embedding and the last the LM head and loss. Llama 3 405B: 126 blocks on 16
  stages = 7 + 14 x 8 + 7 (Dubey et al. 2024, arXiv:2407.21783, sec. 3.3.2).
- Interleaved 1F1B: P x V chunks; chunk c runs on rank c mod P (Narayanan et al. 2021,
  arXiv:2104.04473, sec. 2.2.2; Megatron-LM's virtual pipeline ranks).
- DualPipe: P stages, rank r holds stages r and P-1-r, so two copies of parameters
  (DeepSeek-V3 report, arXiv:2412.19437, sec. 3.2.1 and Table 2).
- The embedding sits on the rank holding the first chunk; the final norm, LM head and the
  multi-token-prediction modules on the rank holding the last (Megatron-Core GPTModel:
  pre_process / post_process / mtp_process).
- Uneven pipelines: explicit blocks per rank (``Layout.stage_layers``), Megatron's first and
  last stage counts (the other ranks split the rest evenly: Megatron-LM
  --decoder-first/last-pipeline-num-layers), or Megatron's layout string, which also places
  the embedding, the loss and the MTP modules (``explorer.pipeline_layout``).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from explorer.pipeline_layout import check_against_model, parse_pipeline_layout
from explorer.schedules import group_size
from explorer.specs import V_SHAPED, Layout, ModelSpec, ScheduleName


@dataclass(frozen=True, slots=True)
class StagePlan:
    """What one pipeline rank holds."""

    stage: int
    """Pipeline rank, 0-based."""
    layers: tuple[int, ...]
    """Indices (0-based) of the transformer blocks on this rank, all chunks together."""
    num_moe_layers: int
    """How many of ``layers`` have an MoE MLP."""
    has_embedding: bool
    """Holds the input embedding (first chunk)."""
    has_head: bool
    """Holds the final norm, LM head, loss and MTP modules (last chunk)."""
    copies: int = 1
    """Model chunks of one stage's size per stage-equivalent: 2 under DualPipe, else 1."""
    has_mtp: bool | None = None
    """Holds the multi-token-prediction modules; None means with the head."""
    chunk_blocks: tuple[int, ...] = ()
    """Blocks of each model chunk on this rank, in route order (empty: one chunk)."""

    @property
    def num_dense_layers(self) -> int:
        return len(self.layers) - self.num_moe_layers

    @property
    def holds_mtp(self) -> bool:
        """Whether the MTP modules (when the model has them) are on this rank."""
        return self.has_head if self.has_mtp is None else self.has_mtp

    @property
    def contents(self) -> tuple[int, int, bool, bool, int, bool]:
        """What the memory model reads of a rank: dense and MoE blocks, embedding, head,
        copies, MTP (not which blocks, nor the rank's index)."""
        return (self.num_dense_layers, self.num_moe_layers, self.has_embedding, self.has_head,
                self.copies, self.holds_mtp)  # fmt: skip


def balanced_chunk_sizes(num_layers: int, num_chunks: int) -> tuple[int, ...]:
    """Blocks per model chunk: ceil(L / C) each, the remainder taken off the ends first.

    Source: Llama 3 (arXiv:2407.21783) sec. 3.3.2: one fewer layer on the first and last stage.
    """
    if num_chunks > num_layers:
        raise ValueError(
            f"{num_chunks} pipeline chunks (pp x virtual stages) exceed the {num_layers} layers"
        )
    base = -(-num_layers // num_chunks)
    sizes = [base] * num_chunks
    pairs = zip(range(num_chunks), reversed(range(num_chunks)), strict=True)
    ends = [i for pair in pairs for i in pair]  # 0, C-1, 1, C-2, ...
    for index in ends[: base * num_chunks - num_layers]:
        sizes[index] -= 1
    return tuple(sizes)


def _even_split(total: int, parts: int) -> list[int]:
    """``total`` as ``parts`` integers that differ by at most one, larger first."""
    return [total // parts + (i < total % parts) for i in range(parts)]


def chunk_sizes(
    num_layers: int, pp: int, virtual: int = 1, stage_layers: tuple[int, ...] | None = None
) -> tuple[int, ...]:
    """Blocks per model chunk in route order: P x V chunks (interleaved), P otherwise.

    Explicit ``stage_layers`` give blocks per rank; with V > 1 each rank's share is split
    evenly over its chunks.
    """
    if stage_layers is None:
        return balanced_chunk_sizes(num_layers, pp * virtual)
    if sum(stage_layers) != num_layers:
        raise ValueError(
            f"stage_layers {stage_layers} sum to {sum(stage_layers)}, "
            f"the model has {num_layers} layers"
        )
    per_rank = [_even_split(n, virtual) for n in stage_layers]
    return tuple(per_rank[c % pp][c // pp] for c in range(pp * virtual))


def end_stage_layers(
    num_layers: int, pp: int, first: int | None, last: int | None
) -> tuple[int, ...] | None:
    """Blocks per rank when the first and/or last rank's count is given, the rest split evenly.

    Source: Megatron-LM --decoder-first-pipeline-num-layers / --decoder-last-pipeline-num-layers
    (the middle ranks share the remaining blocks evenly).
    """
    if first is None and last is None:
        return None
    fixed = (first or 0) + (last or 0)
    middle = pp - (first is not None) - (last is not None)
    rest = num_layers - fixed
    if rest < 0 or (middle == 0 and rest):
        raise ValueError(
            f"first_stage_layers and last_stage_layers ({first}, {last}) do not fit the "
            f"{num_layers} layers on {pp} pipeline ranks"
        )
    shares = iter(_even_split(rest, middle) if middle else [])
    return tuple(
        first if r == 0 and first is not None else last
        if r == pp - 1 and last is not None else next(shares)
        for r in range(pp)
    )  # fmt: skip


def layout_chunk_sizes(model: ModelSpec, layout: Layout) -> tuple[int, ...]:
    """Blocks per model chunk in route order for ``layout``: its layout string, its first and
    last stage counts, its blocks per rank, or a balanced split."""
    if layout.pipeline_layout is not None:
        chunks = parse_pipeline_layout(layout.pipeline_layout, layout.pp)
        check_against_model(chunks, model.num_hidden_layers, model.num_nextn_predict_layers)
        return tuple(c.blocks for c in chunks)
    stage_layers = layout.stage_layers or end_stage_layers(
        model.num_hidden_layers, layout.pp, layout.first_stage_layers, layout.last_stage_layers
    )
    return chunk_sizes(model.num_hidden_layers, layout.pp, layout.virtual_stages, stage_layers)


def v_chunk_sizes(
    num_layers: int, pp: int, stage_layers: tuple[int, ...] | None = None
) -> tuple[int, ...]:
    """Blocks per chunk of a V placement (ZB-V, DualPipeV) in route order: 2P chunks, chunk q
    on rank q, then rank 2P-1-q; explicit ``stage_layers`` (per rank) split evenly over a
    rank's two chunks. Source: Qi et al. 2024 (arXiv:2401.10241) sec. 6."""
    if stage_layers is None:
        return balanced_chunk_sizes(num_layers, 2 * pp)
    interleaved = chunk_sizes(num_layers, pp, 2, stage_layers)  # c = chunk x P + rank
    return interleaved[:pp] + tuple(interleaved[pp + r] for r in reversed(range(pp)))


def _ranks_of_chunks(
    pp: int, virtual: int, dualpipe: bool, vshape: bool = False
) -> tuple[tuple[int, ...], ...]:
    """Pipeline ranks holding each chunk (DualPipe: stage s on ranks s and P-1-s; V placement:
    chunk q on rank q, then 2P-1-q)."""
    if vshape:
        return tuple((q if q < pp else 2 * pp - 1 - q,) for q in range(2 * pp))
    if dualpipe:
        if pp % 2:
            raise ValueError(f"dualpipe needs an even number of stages, got pp = {pp}")
        return tuple((s, pp - 1 - s) for s in range(pp))
    return tuple((c % pp,) for c in range(pp * virtual))


def pipeline_plan(model: ModelSpec, layout: Layout) -> tuple[StagePlan, ...]:
    """What each pipeline rank holds: blocks, embedding, head, one entry per rank."""
    dualpipe = layout.schedule == "dualpipe" and layout.pp > 1
    if dualpipe and layout.pipeline_layout is not None:
        raise ValueError("pipeline_layout is Megatron's; it does not describe DualPipe's stages")
    vshape = layout.schedule in V_SHAPED and layout.pp > 1
    if vshape and layout.pipeline_layout is not None:
        raise ValueError("pipeline_layout is Megatron's; it does not describe a V placement")
    virtual = 2 if vshape else layout.virtual_stages
    key = (layout.stage_layers, layout.first_stage_layers, layout.last_stage_layers,
           layout.pipeline_layout)  # fmt: skip
    return _plan(model, layout.pp, virtual, dualpipe, key, vshape)


def _ends(model: ModelSpec, layout: Layout, count: int) -> tuple[int, int, int | None]:
    """Chunks holding the embedding, the loss and the MTP modules (None: with the loss)."""
    if layout.pipeline_layout is None:
        return 0, count - 1, None
    chunks = parse_pipeline_layout(layout.pipeline_layout, layout.pp)
    embedding = next(i for i, c in enumerate(chunks) if c.embedding)
    loss = next(i for i, c in enumerate(chunks) if c.loss)
    mtp = next((i for i, c in enumerate(chunks) if c.mtp), None)
    return embedding, loss, mtp


@lru_cache(maxsize=1024)
def _plan(
    model: ModelSpec,
    pp: int,
    virtual: int,
    dualpipe: bool,
    key: tuple[tuple[int, ...] | None, int | None, int | None, str | None],
    vshape: bool = False,
) -> tuple[StagePlan, ...]:
    layout = Layout(
        pp=pp, virtual_stages=virtual, schedule="interleaved" if virtual > 1 else "1f1b",
        stage_layers=key[0], first_stage_layers=key[1], last_stage_layers=key[2],
        pipeline_layout=key[3],
    )  # fmt: skip
    if vshape:  # explicit per-rank counts split over the rank's two chunks
        layers = model.num_hidden_layers
        rank_layers = key[0] or end_stage_layers(layers, pp, key[1], key[2])
        sizes = v_chunk_sizes(layers, pp, rank_layers)
    else:
        sizes = layout_chunk_sizes(model, layout)
    owners = _ranks_of_chunks(pp, virtual, dualpipe, vshape)
    held: list[list[int]] = [[] for _ in range(pp)]
    per_rank: list[list[int]] = [[] for _ in range(pp)]
    start = 0
    for size, ranks in zip(sizes, owners, strict=True):
        for rank in ranks:
            held[rank].extend(range(start, start + size))
            per_rank[rank].append(size)
        start += size
    embedding, loss, mtp = _ends(model, layout, len(sizes))
    first, last = set(owners[embedding]), set(owners[loss])
    mtp_ranks = None if mtp is None else set(owners[mtp])
    return tuple(
        StagePlan(
            stage=rank,
            layers=tuple(layers),
            num_moe_layers=sum(model.is_moe_layer(i) for i in layers),
            has_embedding=rank in first,
            has_head=rank in last,
            copies=2 if dualpipe else 1,
            has_mtp=None if mtp_ranks is None else rank in mtp_ranks,
            chunk_blocks=tuple(per_rank[rank]),
        )
        for rank, layers in enumerate(held)
    )


def inflight_microbatches(
    schedule: ScheduleName, pp: int, microbatches: int, virtual: int = 1
) -> tuple[float, ...]:
    """Peak micro-batches of activations held on each stage, in stage-equivalents.

    The closed forms of ``closed_form_inflight``, which equal explorer.schedules' simulator
    (``peak_inflight``) for every schedule, P, M and V: tests/test_partition.py checks them
    on a dense grid and on the search's shapes. They hold for any pass times, since a stage
    runs one action at a time, so its count depends only on its own order: it peaks at an F's
    start at (forwards begun) - (sets released). Without pipelining, micro-batches run one
    after another (gradient accumulation): 1 in flight.
    """
    if pp == 1:
        return (1.0,)
    return closed_form_inflight(schedule, pp, microbatches, virtual)


def closed_form_inflight(
    schedule: ScheduleName, pp: int, microbatches: int, virtual: int = 1
) -> tuple[float, ...]:
    """Peak micro-batches in flight per stage, stage-equivalents, from closed forms.

    Source: GPipe M (Huang et al. 2019, arXiv:1811.06965); 1F1B P - i (Narayanan et al. 2021,
    arXiv:2104.04473, sec. 2.2.1); interleaved: warm-up forwards plus one, in chunk sets,
    (2 (P-i-1) + (V-1) N + 1) / V with N the micro-batch group (explorer.schedules.group_size),
    i.e. P (1 + (P-1)/(P V)) on the first stage when N = P (Megatron-LM
    num_warmup_microbatches; Korthikanti et al. 2022 sec. 4.2.3); V = 1 runs 1F1B's order;
    ZB-H1 P on every stage, since deferred weight passes keep later stages' activations until
    W (Qi et al. 2024, arXiv:2401.10241, sec. 3.1: the peak over stages equals 1F1B's);
    DualPipe P + 1 (DeepSeek-V3 report Table 2); V placement (2 half-rank chunks): ZB-V
    min(P, M, (M + 1 + i) / 2), 2P chunk sets at most, 1F1B's P (Qi et al. 2024 sec. 6),
    DualPipeV P + 1/2, the 2P + 1 chunk sets of DualPipe's "PP + 1" for 2P chunk-stages
    (deepseek-ai/DualPipe README). Each capped by the sets a step runs (M V).
    """
    m, p, v = microbatches, pp, virtual
    if schedule == "gpipe":
        return (float(m),) * p
    if schedule == "interleaved" and v > 1:
        warmup = 2 * (p - 1) + (v - 1) * group_size(p, m)  # on stage 0; 2 fewer per stage
        return tuple(min(warmup - 2 * i + 1, m * v) / v for i in range(p))
    if schedule == "dualpipe":
        return (float(min(m, p + 1)),) * p
    if schedule == "zb-v":
        return tuple(min(p, m, (m + 1 + i) / 2) for i in range(p))
    if schedule == "dualpipev":
        return (min(m, p + 0.5),) * p  # M >= 2P always: 2P + 1 chunk sets of 2
    if schedule == "zb-h1":
        return (float(min(m, p)),) * p
    return tuple(float(min(m, p - i)) for i in range(p))  # 1f1b; interleaved with V = 1


def loss_inflight(schedule: ScheduleName, pp: int, microbatches: int) -> float:
    """Micro-batches whose logits wait for their backward on the last stage at once.

    1F1B-style schedules run each micro-batch's loss backward right after its forward on the
    last stage; GPipe runs all forwards first. Source: Huang et al. 2019 fig. 2c.
    """
    return float(microbatches) if schedule == "gpipe" and pp > 1 else 1.0
