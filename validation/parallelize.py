"""Tensor parallel, activation checkpointing and FSDP2 applied as torchtitan applies them.

Source: pytorch/torchtitan ``torchtitan/models/llama3/infra/parallelize.py`` (``apply_tp``,
``apply_ac``, ``apply_fsdp``); PyTorch docs "Tensor Parallelism - torch.distributed.tensor.
parallel" and "torch.distributed.fsdp.fully_shard".
"""

from __future__ import annotations

import torch
from torch import nn
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.distributed.tensor import DTensor, Replicate, Shard, distribute_module
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    ParallelStyle,
    PrepareModuleInput,
    RowwiseParallel,
    SequenceParallel,
    parallelize_module,
)

from validation.models import Transformer


def _root_plan(sequence_parallel: bool, loss_parallel: bool) -> dict[str, ParallelStyle]:
    """Embedding split by vocabulary, LM head by vocabulary (logits stay sharded for the loss)."""
    seq = Shard(1) if sequence_parallel else Replicate()
    plan: dict[str, ParallelStyle] = {
        "tok_embeddings": RowwiseParallel(input_layouts=Replicate(), output_layouts=seq),
        "output": ColwiseParallel(
            input_layouts=seq,
            output_layouts=Shard(-1) if loss_parallel else Replicate(),
            use_local_output=not loss_parallel,
        ),
    }
    if sequence_parallel:
        plan["norm"] = SequenceParallel()
    return plan


def _block_plan(sequence_parallel: bool) -> dict[str, ParallelStyle]:
    """Megatron's split (arXiv:1909.08053): q, k, v, w1, w3 by columns; wo, w2 by rows."""
    seq = Shard(1) if sequence_parallel else Replicate()
    plan: dict[str, ParallelStyle] = {
        "attention.wq": ColwiseParallel(),
        "attention.wk": ColwiseParallel(),
        "attention.wv": ColwiseParallel(),
        "attention.wo": RowwiseParallel(output_layouts=seq),
        "feed_forward.w1": ColwiseParallel(),
        "feed_forward.w2": RowwiseParallel(output_layouts=seq),
        "feed_forward.w3": ColwiseParallel(),
    }
    if sequence_parallel:  # norms on sequence shards (Korthikanti et al. 2022, arXiv:2205.05198)
        plan["attention_norm"] = SequenceParallel()
        plan["ffn_norm"] = SequenceParallel()
        plan["attention"] = PrepareModuleInput(
            input_layouts=(Shard(1), None, None), desired_input_layouts=(Replicate(), None, None)
        )
        plan["feed_forward"] = PrepareModuleInput(
            input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)
        )
    return plan


def _replicate_norms(module: nn.Module, tp_mesh: DeviceMesh) -> None:
    """Without sequence parallelism: norm weights as replicated DTensors on local activations.

    Every parameter must be a DTensor for the foreach optimizer, so the norms get the
    ``distribute_module`` default (replicate), with local tensors in and out.
    """
    for name, child in module.named_children():
        if name.endswith("norm"):
            distribute_module(
                child,
                tp_mesh,
                input_fn=lambda _mod, inputs, mesh: tuple(  # type: ignore[arg-type]
                    DTensor.from_local(x, mesh, [Replicate()]) for x in inputs
                ),
                output_fn=lambda _mod, output, _mesh: output.to_local(),
            )


def apply_tp(
    model: Transformer, tp_mesh: DeviceMesh, sequence_parallel: bool, loss_parallel: bool
) -> None:
    """Split a dense model over ``tp_mesh`` (MoE blocks are not tensor-parallel here)."""
    if model.spec.is_moe or model.spec.qk_norm or model.output is None:
        raise NotImplementedError("tensor parallel is built for untied dense models, no qk norm")
    parallelize_module(model, tp_mesh, _root_plan(sequence_parallel, loss_parallel))
    for block in model.layers:
        parallelize_module(block, tp_mesh, _block_plan(sequence_parallel))
        if not sequence_parallel:
            _replicate_norms(block, tp_mesh)
    if not sequence_parallel:
        _replicate_norms(model, tp_mesh)


def apply_ac(model: Transformer) -> None:
    """Full activation checkpointing: each block keeps only its input and recomputes."""
    for index, block in enumerate(model.layers):
        model.layers[index] = checkpoint_wrapper(block, preserve_rng_state=False)


def apply_selective_ac(model: Transformer) -> None:
    """Selective recompute: each block checkpoints its attention core only (``AttentionCore``).

    Source: Korthikanti et al. 2022 (arXiv:2205.05198) sec. 5, as Megatron-LM's
    ``--recompute-granularity selective`` (the core attention of every layer). Not torchtitan's
    selective AC, which saves or recomputes per operator or per layer.
    """
    for block in model.layers:
        attention = block.get_submodule("attention")
        core = attention.get_submodule("core")
        attention.core = checkpoint_wrapper(core, preserve_rng_state=False)


def apply_fsdp(model: Transformer, dp_mesh: DeviceMesh, mixed: bool) -> None:
    """FSDP2 units as torchtitan's ``apply_fsdp`` (policy "default", no pipeline).

    The embedding and every block reshard after forward; the final norm and LM head stay
    gathered (FSDP would prefetch them straight back for the backward); the root holds the rest.
    """
    policy = MixedPrecisionPolicy()
    if mixed:
        policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    fully_shard(model.tok_embeddings, mesh=dp_mesh, mp_policy=policy, reshard_after_forward=True)
    for block in model.layers:
        fully_shard(block, mesh=dp_mesh, mp_policy=policy, reshard_after_forward=True)
    if model.output is not None:
        fully_shard(
            [model.norm, model.output], mesh=dp_mesh, mp_policy=policy, reshard_after_forward=False
        )
    fully_shard(model, mesh=dp_mesh, mp_policy=policy)
