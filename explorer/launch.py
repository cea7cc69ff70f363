"""Ready-to-paste launch settings for a layout: Megatron-LM arguments and a torchtitan config.

Flag names follow Megatron-LM's ``megatron/training/arguments.py`` and torchtitan's job config
(``[parallelism]``, ``[training]``, ``[activation_checkpoint]`` sections of its train_configs).
Where a framework lacks a feature the layout uses, a comment line says so instead of guessing.
"""

from __future__ import annotations

from explorer.specs import Layout, TrainingWorkload

_TORCHTITAN_SCHEDULES = {
    "gpipe": "GPipe",
    "1f1b": "1F1B",
    "interleaved": "Interleaved1F1B",
    "zb-h1": "InterleavedZeroBubble",  # torch.distributed.pipelining's zero-bubble schedule
    "dualpipe": "DualPipeV",  # the V-shaped variant; plain DualPipe is not in torch
}


def megatron_arguments(layout: Layout, workload: TrainingWorkload, num_layers: int) -> list[str]:
    """Megatron-LM command-line arguments for the layout and workload, one flag per entry."""
    args = [
        f"--tensor-model-parallel-size {layout.tp}",
        f"--pipeline-model-parallel-size {layout.pp}",
        f"--context-parallel-size {layout.cp}",
        f"--expert-model-parallel-size {layout.ep}",
        f"--expert-tensor-parallel-size {layout.etp}",
        f"--micro-batch-size {layout.micro_batch_size}",
        f"--global-batch-size {workload.global_batch_size}",
        f"--seq-length {workload.seq_len}",
    ]
    args += ["--sequence-parallel"] if layout.sp else []
    args += _megatron_pipeline(layout, num_layers)
    args += _megatron_sharding(layout)
    args += _megatron_recompute(layout)
    args += _megatron_precision(workload)
    return args


def _megatron_pipeline(layout: Layout, num_layers: int) -> list[str]:
    out = []
    if layout.virtual_stages > 1:
        per_chunk = num_layers // (layout.pp * layout.virtual_stages)
        out.append(f"--num-layers-per-virtual-pipeline-stage {max(per_chunk, 1)}")
    if layout.stage_layers is not None and layout.pp > 1:
        out.append(f"--decoder-first-pipeline-num-layers {layout.stage_layers[0]}")
        out.append(f"--decoder-last-pipeline-num-layers {layout.stage_layers[-1]}")
    if layout.first_stage_layers is not None:
        out.append(f"--decoder-first-pipeline-num-layers {layout.first_stage_layers}")
    if layout.last_stage_layers is not None:
        out.append(f"--decoder-last-pipeline-num-layers {layout.last_stage_layers}")
    if layout.pipeline_layout is not None:
        out = [f'--pipeline-model-parallel-layout "{layout.pipeline_layout}"']
    if layout.schedule in ("gpipe", "zb-h1", "dualpipe"):
        out.append(f"# schedule {layout.schedule}: not a Megatron-LM flag; it runs 1F1B")
    return out


def _megatron_sharding(layout: Layout) -> list[str]:
    if layout.zero == 0:
        return []
    if layout.zero == 1:
        return ["--use-distributed-optimizer"]
    strategy = {2: "optim_grads", 3: "optim_grads_params"}[layout.zero]
    return [  # Megatron-FSDP's required flags (Megatron-LM megatron_fsdp README)
        "--use-distributed-optimizer",
        "--use-megatron-fsdp",
        f"--data-parallel-sharding-strategy {strategy}",
        "--no-gradient-accumulation-fusion",
        "--ckpt-format fsdp_dtensor",
    ]


def _megatron_recompute(layout: Layout) -> list[str]:
    return _megatron_checkpointing(layout) + _megatron_offload(layout)


def _megatron_checkpointing(layout: Layout) -> list[str]:
    if layout.recompute == "none":
        return []
    if layout.recompute == "selective":
        if layout.recompute_ops:
            return ["# torchtitan op-level SAC has no Megatron flag; selective core_attn is close"]
        modules = " ".join(layout.recompute_modules)
        return ["--recompute-granularity selective", f"--recompute-modules {modules}"]
    if layout.recompute_every != 1:
        return [f"# recompute every {layout.recompute_every}th block: torchtitan's, not Megatron's"]
    layers = layout.recompute_num_layers or 1
    return [
        "--recompute-granularity full",
        f"--recompute-method {layout.recompute_method}",
        f"--recompute-num-layers {layers}",
    ]


def _megatron_offload(layout: Layout) -> list[str]:
    out = []
    if layout.activation_offload:
        out.append("--fine-grained-activation-offloading")
        out.append(f"--offload-modules {' '.join(layout.activation_offload)}")
    if layout.offload_layers:
        out.append("--cpu-offloading")
        out.append(f"--cpu-offloading-num-layers {layout.offload_layers}")
    if layout.optimizer_offload_fraction:
        out.append("--optimizer-cpu-offload")
        out.append(f"--optimizer-offload-fraction {layout.optimizer_offload_fraction:g}")
    if layout.dp_shard is not None and layout.dp_shard != layout.dp:
        out.append(f"--num-distributed-optimizer-instances {layout.dp // layout.dp_shard}")
    return out


def _megatron_precision(workload: TrainingWorkload) -> list[str]:
    flags = {
        "fp32": [],
        "bf16-mixed": ["--bf16"],
        "bf16-pure": ["--bf16", "# bf16-pure: Megatron always keeps fp32 master weights"],
        "fp8-mixed": ["--bf16", "--fp8-format hybrid"],
    }[workload.precision]
    if workload.grad_dtype != "bf16" and workload.precision != "fp32":
        flags = [*flags, "--accumulate-allreduce-grads-in-fp32"]
    return flags


def torchtitan_config(layout: Layout, workload: TrainingWorkload) -> str:
    """The ``[parallelism]``, ``[training]`` and ``[activation_checkpoint]`` TOML sections."""
    shard = (layout.dp_shard or layout.dp) * layout.cp if layout.zero >= 2 else 1
    replicate = layout.dp // (layout.dp_shard or layout.dp) if layout.zero >= 2 else layout.dp
    lines = [
        "[parallelism]",
        f"data_parallel_replicate_degree = {replicate}",
        f"data_parallel_shard_degree = {shard}",
        f"tensor_parallel_degree = {layout.tp}",
        f"pipeline_parallel_degree = {layout.pp}",
        f"context_parallel_degree = {layout.cp}",
        f"expert_parallel_degree = {layout.ep}",
    ]
    if layout.pp > 1:
        lines.append(f'pipeline_parallel_schedule = "{_TORCHTITAN_SCHEDULES[layout.schedule]}"')
        lines.append(f"pipeline_parallel_microbatch_size = {layout.micro_batch_size}")
    if layout.zero == 2 or not layout.reshard_after_forward:
        lines.append('fsdp_reshard_after_forward = "never"  # keep params gathered: ZeRO-2-like')
    if layout.zero == 1:
        lines.append("# ZeRO-1 has no torchtitan equivalent; FSDP (shard degree) is ZeRO-3")
    lines += _torchtitan_training(layout, workload)
    return "\n".join(lines) + "\n"


def _torchtitan_training(layout: Layout, workload: TrainingWorkload) -> list[str]:
    local_batch = workload.global_batch_size // max(layout.dp, 1)
    mixed = {"fp32": "float32", "fp8-mixed": "bfloat16"}.get(workload.precision, "bfloat16")
    return [
        "",
        "[training]",
        f"local_batch_size = {local_batch}",
        f"global_batch_size = {workload.global_batch_size}",
        f"seq_len = {workload.seq_len}",
        f'mixed_precision_param = "{mixed}"',
        "",
        "[activation_checkpoint]",
        *_torchtitan_checkpointing(layout),
    ]


def _torchtitan_checkpointing(layout: Layout) -> list[str]:
    """torchtitan's activation_checkpoint section: full, layer SAC every n, or op SAC."""
    if layout.recompute == "full" and layout.recompute_every > 1:
        return ['mode = "selective"', f'selective_ac_option = "{layout.recompute_every}"']
    if layout.recompute == "selective":
        lines = ['mode = "selective"', 'selective_ac_option = "op"']
        if not layout.recompute_ops:
            lines.append("# Megatron's recompute modules are not torchtitan's; op SAC is close")
        return lines
    return [f'mode = "{layout.recompute}"']
