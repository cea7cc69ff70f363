"""Every sidebar input's definition (its tooltip), and why an input does nothing for the
current layout and model (then it is drawn disabled with that reason).

Plain data and functions, no streamlit, so the rules are tested with plain values. Keys are
the URL keys of ``explorer.scenario.codec.QUERY_KEYS``; assumption keys are the override keys
of ``explorer.ui.assumptions`` (``memory.zero3_prefetch_layers``).
"""

from __future__ import annotations

from collections.abc import Mapping

from explorer.scenario import LayoutInputs

HELP: Mapping[str, str] = {
    "model": "The architecture: a preset (a published config.json; all of them with their "
    "sizes in the Model page's gallery), a generic dense model of a chosen size, or your own "
    "config.json.",
    "workload": "Training estimates memory, step time and layouts; serving plans replicas, "
    "latency and throughput for a request load.",
    "seq": "Tokens per sequence (the training context length) in every micro-batch.",
    "mbs": "Sequences one data-parallel rank runs per forward and backward pass (the "
    "micro-batch). Activations grow with it.",
    "gbs": "Sequences per optimizer step over all data-parallel ranks; with DP and the "
    "micro-batch it sets the micro-batches per step, global / (DP x micro-batch).",
    "gpu": "The accelerator: memory, peak FLOP/s, HBM and link bandwidths from its preset "
    "(vendor figures, each with its source).",
    "gpus_per_node": "GPUs on one node's fast links (NVLink / Infinity Fabric domain).",
    "nodes": "Nodes in the cluster; GPUs = nodes x GPUs per node.",
    "dp": "Data parallel: replicas of the model, each on its own share of the global batch; "
    "gradients are reduced across them every step.",
    "tp": "Tensor parallel: each layer's matrices split across this many GPUs (Megatron), "
    "with an all-reduce (or reduce-scatter/all-gather with SP) per layer; keep it within a node.",
    "pp": "Pipeline parallel: the layers split into this many stages on different GPUs, "
    "micro-batches flowing through them on the chosen schedule.",
    "cp": "Context parallel: each sequence split into this many chunks, ring attention "
    "exchanging keys and values; for long sequences.",
    "ep": "Expert parallel: a MoE layer's experts spread over this many GPUs (inside "
    "DP x CP x TP), tokens sent to them by all-to-all.",
    "recompute": "Activation recomputation: none keeps everything; selective recomputes the "
    "chosen submodules (the attention core by default); full keeps only each block's input "
    "and reruns its forward in the backward.",
    "schedule": "The order in which stages run forwards and backwards of the micro-batches; "
    "it sets the bubble and the activations each stage holds (the Pipeline page draws it).",
    "virtual": "Model chunks per pipeline stage for interleaved 1F1B (Megatron's virtual "
    "pipeline size): a smaller bubble for more point-to-point traffic.",
    "prompt": "Input tokens per request (prefill).",
    "output": "Generated tokens per request (decode).",
    "concurrency": "Requests decoding at once on one replica; KV-cache memory grows with it.",
    "weights": "Storage format of the served weights (bytes per parameter and the kernels "
    "that read them).",
    "kv": "Storage format of the KV cache (bytes per cached element).",
    "oversub": "How many times more traffic the scale-out fabric's leaves carry than its "
    "spine links can (1 is a non-blocking fat tree).",
}
"""One definition per input, by URL key."""

_MOE_KNOBS = frozenset(
    {
        "memory.moe_capacity_factor",
        "memory.moe_imbalance",
        "memory.router_logits_bytes",
        "memory.moe_probs_in_experts",
        "memory.moe_swiglu_recompute",
        "comm.ep_overlap",
        "comm.dualpipe_ep_overlap",
        "comm.ep_domain_dedup",
        "comm.fp8_dispatch",
        "compute.comm_sm_share",
    }
)
"""Assumptions about experts and their all-to-alls: inert for a dense model."""
_EP_KNOBS = frozenset(
    {
        "comm.ep_overlap",
        "comm.dualpipe_ep_overlap",
        "comm.ep_domain_dedup",
        "comm.fp8_dispatch",
        "compute.comm_sm_share",
    }
)
"""Assumptions about the expert-parallel all-to-alls: inert at EP = 1."""
_DUALPIPE_KNOBS = frozenset({"comm.dualpipe_ep_overlap", "compute.comm_sm_share"})
"""Assumptions about DualPipe's overlapped all-to-alls (explorer.compute.passes)."""


def inert_reason(
    name: str,
    layout: LayoutInputs,
    *,
    is_moe: bool | None = None,
    precision: str | None = None,
) -> str | None:
    """Why input ``name`` (a URL key or an assumption's override key) does nothing for this
    layout and model, in one sentence; None when it matters. ``is_moe`` / ``precision``
    None mean unknown (no rule that needs them applies)."""
    pp, tp, cp = layout.pp, layout.tp, layout.cp
    dense = is_moe is False
    if name == "ep" and dense and layout.ep == 1:
        return "Off in effect: the model has no experts to spread."
    if name == "schedule" and pp == 1:
        return "Off in effect at PP = 1: with one stage there is no pipeline to schedule."
    if name == "virtual" and layout.virtual_stages == 1:
        if pp == 1:
            return "Off in effect at PP = 1: with one stage there are no virtual stages."
        if layout.schedule != "interleaved":
            return (
                "Off for this schedule: only interleaved 1F1B runs several chunks per stage "
                "(ZB-V and DualPipeV place two per rank by design)."
            )
    if name == "sp" and tp == 1:
        return "Off in effect at TP = 1: raise TP to use it."
    if name in _MOE_KNOBS and dense:
        return "Off in effect: the model has no experts."
    if name in _EP_KNOBS and layout.ep == 1:
        return "Off in effect at EP = 1: no expert-parallel all-to-all."
    if name in _DUALPIPE_KNOBS and layout.schedule not in ("dualpipe", "dualpipev"):
        return "Off for this schedule: only DualPipe and DualPipeV overlap the all-to-alls."
    if name in ("memory.zero3_prefetch_layers", "memory.keep_bf16_shard") and layout.zero != 3:
        return "Off in effect: only ZeRO-3 gathers the weights."
    if name == "memory.pipeline_keeps_unsharded" and (layout.zero != 3 or pp == 1):
        return "Off in effect: it concerns ZeRO-3 with PP > 1."
    if name in ("memory.grad_bucket_bytes", "memory.fp8_weight_copy_bytes") and layout.zero == 3:
        return "Off in effect at ZeRO-3 (explorer.memory.temporaries: none kept then)."
    if name == "memory.sp_saves_gathered_inputs" and (tp == 1 or not layout.sequence_parallel):
        return "Off in effect: it concerns sequence parallelism with TP > 1."
    if name in ("memory.tp_full_embedding_grad", "comm.tp_overlap") and tp == 1:
        return "Off in effect at TP = 1: no tensor-parallel group."
    if name == "comm.tp_comm_overlap" and (tp == 1 or not layout.sequence_parallel):
        # explorer.comm.model_parallel fuses only sequence-parallel collectives with the GEMMs
        return "Off in effect: comm-GEMM overlap fuses the sequence-parallel collectives at TP > 1."
    if name in ("comm.cp_overlap", "comm.cp_comm") and cp == 1:
        return "Off in effect at CP = 1: no context-parallel exchange."
    if name in ("comm.pp_overlap", "pipeline_model") and pp == 1:
        return "Off in effect at PP = 1: no pipeline."
    offloads = layout.activation_offload or layout.offload_layers
    if name == "memory.offload_overlap" and not offloads:
        return "Off in effect: this layout offloads no activations."
    if name in ("compute.fp8_recipe", "compute.fp8_attention") and precision not in (
        None,
        "fp8-mixed",
    ):
        return "Off in effect: only the FP8 precision runs FP8 kernels."
    if name in ("rc_modules", "rc_ops") and layout.recompute != "selective":
        return "Off in effect: it sets what selective recompute reruns; Recompute is not selective."
    if name in ("rc_method", "rc_layers", "rc_every") and layout.recompute != "full":
        return "Off in effect: it sets how full recompute checkpoints; Recompute is not full."
    return None


def with_reason(text: str, reason: str | None) -> str:
    """A tooltip: the definition, then why the input is off when it is."""
    return f"{text} {reason}" if reason else text
