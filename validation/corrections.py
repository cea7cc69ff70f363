"""What the measurements imply: the estimator's parts with the requested changes applied.

A prototype for whoever changes ``explorer/memory`` (this module changes nothing there): it
takes the estimator's breakdown for a stored configuration and applies the change requests
(CR-1 to CR-9, written out in ``validation/README.md``) to show they explain the measured
peaks. Torch-free. Run ``python -m validation.corrections`` for the table.

Phases of a plain PyTorch step (pp 1, one micro-batch, ``zero_grad(set_to_none=True)``):
- backward start: states without gradients + saved activations + loss-backward temporaries
  (+ FSDP2's gathered [norm, LM head] unit); no gradient exists yet in the first micro-batch,
  a full set in later ones when gradients accumulate (CR-3);
- optimizer step: states + all gradients + AdamW foreach temporaries; no activations (CR-8).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from explorer.memory import training_memory
from explorer.memory.training import StageMemory
from explorer.presets import load_gpu
from explorer.validation_data import (
    GPU_ID,
    Measurement,
    comparison_assumptions,
    load_results,
    relative_error,
)

LOSS_BACKWARD_BYTES_PER_LOGIT = 8.0
"""F.cross_entropy on fp32 logits: the nll_loss gradient and the log_softmax gradient, fp32."""
LOSS_PARALLEL_BACKWARD_BYTES_PER_LOGIT = 12.0
"""DTensor loss_parallel (TP > 1): one fp32 temporary more than the plain loss (measured)."""


@dataclass(frozen=True, slots=True)
class Phases:
    """Corrected bytes per GPU at the two candidate peaks of one step."""

    backward_start: float
    optimizer_step: float

    @property
    def peak_bytes(self) -> float:
        return max(self.backward_start, self.optimizer_step)


def _stage(m: Measurement) -> StageMemory:
    memory = training_memory(
        m.model, load_gpu(GPU_ID), m.layout, m.workload, comparison_assumptions(m)
    )
    return memory.stages[memory.peak_stage]


def _microbatches(m: Measurement) -> int:
    return m.workload.global_batch_size // (m.layout.micro_batch_size * m.layout.dp)


def _tokens(m: Measurement) -> float:
    return m.workload.seq_len * m.layout.micro_batch_size


def unfused_swiglu_bytes(m: Measurement, act_bytes: float) -> float:
    """CR-5: eager SwiGLU also saves silu(w1 x): one FFN-wide tensor per MLP and token."""
    model, tokens, tp = m.model, _tokens(m), m.layout.tp
    routed = tokens * model.num_experts_per_tok  # balanced routing, imbalance 1
    total = 0.0
    for index in range(model.num_hidden_layers):
        if model.is_moe_layer(index):
            total += routed * model.moe_intermediate_size + tokens * model.shared_ffn_size / tp
        else:
            total += tokens * model.intermediate_size / tp
    return total * act_bytes


def gathered_sp_inputs_bytes(m: Measurement, act_bytes: float) -> float:
    """CR-6: DTensor SP saves the all-gathered inputs of QKV, up/gate and LM head projections."""
    if not m.layout.sp:
        return 0.0
    model, tp = m.model, m.layout.tp
    extra = _tokens(m) * model.hidden_size * (1 - 1 / tp) * act_bytes
    per_layer = 0 if m.layout.recompute == "full" else 2 * model.num_hidden_layers
    return (per_layer + 1) * extra  # + 1: the LM head input


def _model_states(m: Measurement, stage: StageMemory) -> tuple[float, float]:
    """(states without gradients, gradients) per GPU with CR-1 and CR-2."""
    b = stage.breakdown
    fsdp_mixed = m.fsdp and m.workload.precision == "bf16-mixed"
    params = 0.0 if fsdp_mixed else b.parameters  # CR-1: FSDP2 keeps no bf16 shard
    grads = b.gradients
    if m.layout.tp > 1 and not m.fsdp:  # CR-2: DTensor's embedding gradient is whole
        vocab = m.model.vocab_size * m.model.hidden_size
        grads += vocab * (1 - 1 / m.layout.tp) * (grads / stage.num_params)
    return params + b.master_weights + b.optimizer_states, grads


def corrected_phases(m: Measurement) -> Phases:
    """The estimator's parts with CR-1 to CR-9 applied, at the two candidate peaks."""
    stage = _stage(m)
    act_bytes = 4.0 if m.workload.precision == "fp32" else 2.0
    states, grads = _model_states(m, stage)
    parts = stage.activation_parts
    acts = parts.total_bytes - parts.recompute_working  # CR-7: no recompute yet
    if m.layout.recompute != "full":
        acts += unfused_swiglu_bytes(m, act_bytes)
    acts += gathered_sp_inputs_bytes(m, act_bytes)
    logits = _tokens(m) * m.model.vocab_size / m.layout.tp
    per_logit = LOSS_BACKWARD_BYTES_PER_LOGIT
    if m.layout.tp > 1:
        per_logit = LOSS_PARALLEL_BACKWARD_BYTES_PER_LOGIT
    head_unit = 0.0
    if m.fsdp:  # CR-9: only the [norm, LM head] unit is gathered at the backward start
        head_unit = m.model.vocab_size * m.model.hidden_size / m.layout.tp * act_bytes
    backward_start = states + acts + per_logit * logits + head_unit  # CR-3, CR-4
    if _microbatches(m) > 1:  # CR-3: earlier micro-batches' gradients are held
        backward_start += grads
    adam_state_bytes = stage.breakdown.optimizer_states / 2  # CR-8: one state-sized temporary
    return Phases(backward_start, states + grads + adam_state_bytes)


def main() -> int:
    """Print measured, estimated and corrected peaks for every stored configuration."""
    from explorer.validation_data import compare

    print(f"{'id':44} {'measured':>9} {'estimate':>9} {'err':>7} {'corrected':>9} {'err':>7}")
    for m in load_results():
        c, fixed = compare(m), corrected_phases(m)
        gib = 2**30
        print(
            f"{m.id:44} {c.measured_peak_bytes / gib:9.3f} {c.estimated_peak_bytes / gib:9.3f} "
            f"{c.peak_error:+7.1%} {fixed.peak_bytes / gib:9.3f} "
            f"{relative_error(fixed.peak_bytes, c.measured_peak_bytes):+7.1%}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
