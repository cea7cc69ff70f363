"""Ready-to-paste launch settings for a layout: Megatron-LM arguments and a torchtitan config.

Flag names follow Megatron-LM's ``megatron/training/arguments.py`` and torchtitan's job config
(``torchtitan/config/job_config.py``). Where a framework has no setting for part of the layout, a
``# explorer: key=value`` comment names the tool's value and says what the framework does instead,
so that ``explorer.importers`` reads the settings back to the same scenario (tests/test_import.py
checks the round trip over the presets and the search's layouts).
"""

from __future__ import annotations

from explorer.partition import chunk_sizes, v_chunk_sizes
from explorer.precision import precision_policy
from explorer.specs import V_SHAPED, Layout, TrainingWorkload

_TORCHTITAN_SCHEDULES = {
    "gpipe": "GPipe",
    "1f1b": "1F1B",
    "interleaved": "Interleaved1F1B",
    "zb-h1": "InterleavedZeroBubble",  # torch.distributed.pipelining's zero-bubble schedule
    "dualpipe": "DualPipeV",  # plain DualPipe is not in torch: a comment names the tool's
    "zb-v": "ZBVZeroBubble",  # torch.distributed.pipelining ScheduleZBVZeroBubble
    "dualpipev": "DualPipeV",  # torch.distributed.pipelining ScheduleDualPipeV
}
"""The tool's schedule -> torch.distributed.pipelining's name (get_schedule_class keys)."""


def megatron_arguments(
    layout: Layout, workload: TrainingWorkload, num_layers: int, mtp_layers: int = 0
) -> list[str]:
    """Megatron-LM command-line arguments for the layout and workload, one flag per entry
    (``#`` entries are comments); ``mtp_layers`` the model's multi-token-prediction modules,
    which a layout string written for uneven ``stage_layers`` places on the last stage."""
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
    args += _megatron_pipeline(layout, num_layers, mtp_layers)
    args += _megatron_sharding(layout)
    args += _megatron_recompute(layout, num_layers)
    args += _megatron_precision(workload)
    return args


def _megatron_pipeline(layout: Layout, num_layers: int, mtp_layers: int = 0) -> list[str]:
    pp, v = layout.pp, layout.virtual_stages
    out = []
    uneven = layout.stage_layers is not None and pp > 1 and len(set(layout.stage_layers)) > 1
    ends = layout.first_stage_layers is not None or layout.last_stage_layers is not None
    if uneven:
        out += _megatron_uneven(layout, mtp_layers)
    elif v > 1 and num_layers % (pp * v) == 0 and not ends:
        out.append(f"--num-layers-per-virtual-pipeline-stage {num_layers // (pp * v)}")
    elif v > 1:
        out.append(f"--num-virtual-stages-per-pipeline-rank {v}")
    if layout.first_stage_layers is not None:
        out.append(f"--decoder-first-pipeline-num-layers {layout.first_stage_layers}")
    if layout.last_stage_layers is not None:
        out.append(f"--decoder-last-pipeline-num-layers {layout.last_stage_layers}")
    if layout.pipeline_layout is not None:  # the string replaces every other stage flag
        out = [f'--pipeline-model-parallel-layout "{layout.pipeline_layout}"']
    if layout.schedule in ("gpipe", "zb-h1", "dualpipe", "zb-v", "dualpipev") and pp > 1:
        out.append(
            f"# explorer: schedule={layout.schedule}: not a Megatron-LM flag; Megatron runs 1F1B"
        )
    return out


def _megatron_uneven(layout: Layout, mtp_layers: int = 0) -> list[str]:
    """First/last stage layer counts when the middle ranks are even, else the layout string;
    a comment names the blocks per rank (Layout.stage_layers) so that they read back as such."""
    layers = layout.stage_layers or ()
    v = layout.virtual_stages
    counts = ",".join(map(str, layers))
    comment = f"# explorer: stage_layers={counts}: the blocks per rank these flags spell"
    if len(set(layers[1:-1])) <= 1 and all(n % v == 0 for n in layers):
        out = [
            f"--decoder-first-pipeline-num-layers {layers[0]}",
            f"--decoder-last-pipeline-num-layers {layers[-1]}",
        ]
        out += [f"--num-virtual-stages-per-pipeline-rank {v}"] if v > 1 else []
        return [*out, comment]
    text = pipeline_layout_string(layers, v, mtp_layers)
    return [f'--pipeline-model-parallel-layout "{text}"', comment]


def pipeline_layout_string(stage_layers: tuple[int, ...], virtual: int, mtp_layers: int = 0) -> str:
    """Megatron-Core's ``--pipeline-model-parallel-layout`` for layers per rank: stage
    c x PP + r holds rank r's chunk c (earlier chunks take the remainder), the embedding on the
    first stage, the MTP modules and the loss on the last (Megatron-Core GPTModel)."""
    stages = []
    for chunk in range(virtual):
        for total in stage_layers:
            share, extra = divmod(total, virtual)
            stages.append("t" * (share + (chunk < extra)))
    stages[0] = "E" + stages[0]
    stages[-1] = stages[-1] + "m" * mtp_layers + "L"
    return "|".join(stages)


def _megatron_sharding(layout: Layout) -> list[str]:
    if layout.zero == 0:
        return []
    # Megatron-Core DistributedDataParallelConfig.num_distributed_optimizer_instances: the
    # states sharded within dp / instances ranks, replicated across the instances (HSDP)
    hsdp = layout.dp_shard is not None and layout.dp_shard != layout.dp
    instances = [f"--num-distributed-optimizer-instances {layout.dp // (layout.dp_shard or 1)}"]
    if layout.zero == 1:
        return ["--use-distributed-optimizer", *(instances if hsdp else [])]
    strategy = {2: "optim_grads", 3: "optim_grads_params"}[layout.zero]
    out = [  # Megatron-FSDP's required flags (Megatron-LM megatron_fsdp README)
        "--use-distributed-optimizer",
        "--use-megatron-fsdp",
        f"--data-parallel-sharding-strategy {strategy}",
        "--no-gradient-accumulation-fusion",
        "--ckpt-format fsdp_dtensor",
        *(instances if hsdp else []),
    ]
    if layout.zero == 3 and not layout.reshard_after_forward:
        out.append(
            "# explorer: reshard_after_forward=off: Megatron-FSDP has no flag for it; it frees "
            "the gathered weights after each forward"
        )
    return out


def _megatron_recompute(layout: Layout, num_layers: int) -> list[str]:
    return _megatron_checkpointing(layout, num_layers) + _megatron_offload(layout)


def _megatron_checkpointing(layout: Layout, num_layers: int) -> list[str]:
    if layout.recompute == "none":
        return []
    if layout.recompute == "selective":
        modules = " ".join(layout.recompute_modules)
        out = ["--recompute-granularity selective", f"--recompute-modules {modules}"]
        if layout.recompute_ops:
            out.append(
                "# explorer: recompute_ops=on: torchtitan's op-level SAC has no Megatron flag; "
                "Megatron recomputes the attention core"
            )
        return out
    layers = layout.recompute_num_layers
    if layout.recompute_method == "block" and layers is None:
        layers = max_chunk_blocks(layout, num_layers)  # every block of each chunk
    out = [
        "--recompute-granularity full",
        f"--recompute-method {layout.recompute_method}",
        f"--recompute-num-layers {layers or 1}",
    ]
    if layout.recompute_every != 1:
        out.append(
            f"# explorer: recompute_every={layout.recompute_every}: torchtitan checkpoints "
            f"every {layout.recompute_every}th block; Megatron recomputes every block"
        )
    return out


def max_chunk_blocks(layout: Layout, num_layers: int) -> int:
    """The most transformer blocks one model chunk holds (``explorer.partition``), the count
    Megatron's block recompute method takes for "every block of a chunk"."""
    from explorer.partition import chunk_sizes, end_stage_layers
    from explorer.pipeline_layout import parse_pipeline_layout

    if layout.pipeline_layout is not None:
        return max(c.blocks for c in parse_pipeline_layout(layout.pipeline_layout, layout.pp))
    ends = (layout.first_stage_layers, layout.last_stage_layers)
    per_rank = layout.stage_layers or end_stage_layers(num_layers, layout.pp, *ends)
    return max(chunk_sizes(num_layers, layout.pp, layout.virtual_stages, per_rank))


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
        out.append(f"--optimizer-offload-fraction {layout.optimizer_offload_fraction!r}")
    return out


_BF16_MOMENTS = [  # the tool's fp8-mixed keeps bf16 Adam moments (DeepSeek-V3 sec. 3.3.3)
    "--use-precision-aware-optimizer",
    "--exp-avg-dtype bf16",
    "--exp-avg-sq-dtype bf16",
]


def _megatron_precision(workload: TrainingWorkload) -> list[str]:
    flags = {
        "fp32": [],
        "bf16-mixed": ["--bf16"],
        "bf16-pure": [
            "--bf16",
            "# explorer: precision=bf16-pure: Megatron keeps fp32 master weights anyway",
        ],
        "fp8-mixed": ["--bf16", "--fp8-format hybrid", *_BF16_MOMENTS],
        # Megatron-Core TransformerConfig fp4 / fp4_recipe (Transformer Engine NVFP4BlockScaling)
        "nvfp4-mixed": ["--bf16", "--fp4-format e2m1", "--fp4-recipe nvfp4"],
    }[workload.precision]
    if workload.precision == "fp32":
        return flags
    if workload.bf16_layers_at_start or workload.bf16_layers_at_end:
        flags = [*flags, "--first-last-layers-bf16",
                 f"--num-layers-at-start-in-bf16 {workload.bf16_layers_at_start}",
                 f"--num-layers-at-end-in-bf16 {workload.bf16_layers_at_end}"]  # fmt: skip
    if grad_dtype(workload) == "bf16":
        return [*flags, "--grad-reduce-in-bf16"]
    return [*flags, "--accumulate-allreduce-grads-in-fp32"]


def grad_dtype(workload: TrainingWorkload) -> str:
    """The gradient buffer's dtype the estimate counts: as given, else the precision's."""
    if workload.grad_dtype is not None:
        return workload.grad_dtype
    return "bf16" if precision_policy(workload.precision).grad_bytes == 2 else "fp32"


def torchtitan_config(
    layout: Layout, workload: TrainingWorkload, num_layers: int | None = None
) -> str:
    """The ``[parallelism]``, ``[training]``, ``[activation_checkpoint]`` (and for FP8
    ``[model]``) TOML sections; ``num_layers`` sets the layers per virtual stage."""
    fsdp = layout.zero >= 2
    shard = (layout.dp_shard or layout.dp) if fsdp else 1  # HSDP: shard within, replicate across
    lines = [
        "[parallelism]",
        f"data_parallel_replicate_degree = {layout.dp // shard}",
        f"data_parallel_shard_degree = {shard}",
        f"tensor_parallel_degree = {layout.tp}",
        f"pipeline_parallel_degree = {layout.pp}",
        f"context_parallel_degree = {layout.cp}",
        f"expert_parallel_degree = {layout.ep}",
        f"expert_tensor_parallel_degree = {layout.etp}",
    ]
    lines += _torchtitan_sharding(layout)
    lines += _torchtitan_pipeline(layout, num_layers)
    lines += _torchtitan_training(layout, workload)
    return "\n".join(lines) + "\n"


def _torchtitan_sharding(layout: Layout) -> list[str]:
    """FSDP2's resharding for ZeRO-3 (kept gathered: ``reshard_after_forward`` False); a
    comment where torchtitan shards otherwise (it has no ZeRO-1 or ZeRO-2, and it applies FSDP
    over context-parallel ranks whatever the shard degree), with the HSDP shard group that
    the comment's ZeRO stage then applies to."""
    shard = [f"# explorer: dp_shard={layout.dp_shard}"] if layout.dp_shard is not None else []
    if layout.zero == 3:
        if not layout.reshard_after_forward:
            return ['fsdp_reshard_after_forward = "never"  # keep params gathered to backward']
        return ['fsdp_reshard_after_forward = "always"  # ZeRO-3 (default keeps them under PP)']
    if layout.zero == 2:
        return [
            'fsdp_reshard_after_forward = "never"  # keep params gathered: ZeRO-2-like',
            "# explorer: zero=2: torchtitan's FSDP2 shards the parameters too (ZeRO-3)",
            *shard,
        ]
    if layout.zero == 1 or layout.cp > 1:
        return [
            f"# explorer: zero={layout.zero}: torchtitan has no ZeRO-{layout.zero} here "
            f"(no ZeRO-1; FSDP over context-parallel ranks)",
            *(shard if layout.zero else []),
        ]
    return []


def _torchtitan_pipeline(layout: Layout, num_layers: int | None) -> list[str]:
    if layout.pp == 1:
        return []
    v = layout.virtual_stages
    schedule = "1f1b" if layout.schedule == "interleaved" and v == 1 else layout.schedule
    lines = [
        f'pipeline_parallel_schedule = "{_TORCHTITAN_SCHEDULES[schedule]}"',
        f"pipeline_parallel_microbatch_size = {layout.micro_batch_size}",
        "pipeline_parallel_first_stage_less_layers = 0  # the tool splits blocks evenly",
        "pipeline_parallel_last_stage_less_layers = 0",
    ]
    if schedule == "dualpipe":
        lines.append(
            "# explorer: schedule=dualpipe: torch has no bidirectional DualPipe; DualPipeV "
            "(a V, one parameter copy) runs instead"
        )
    lines += _torchtitan_stage_layers(layout, schedule, num_layers)
    if schedule == "interleaved" and v != 2:
        if num_layers is not None and num_layers % (layout.pp * v) == 0:
            lines.append(f"pipeline_parallel_layers_per_stage = {num_layers // (layout.pp * v)}")
        else:
            lines.append(f"# explorer: virtual={v}: set pipeline_parallel_layers_per_stage")
    return lines


def rank_layers(layout: Layout, num_layers: int) -> tuple[int, ...]:
    """Transformer blocks on each pipeline rank as the estimate splits them
    (``explorer.partition``: balanced, ``stage_layers``, first/last stage counts or the layout
    string; DualPipe ranks hold two stages)."""
    from explorer.partition import end_stage_layers
    from explorer.pipeline_layout import parse_pipeline_layout

    pp = layout.pp
    if layout.pipeline_layout is not None:
        blocks = [c.blocks for c in parse_pipeline_layout(layout.pipeline_layout, pp)]
        return tuple(sum(blocks[r::pp]) for r in range(pp))
    ends = (layout.first_stage_layers, layout.last_stage_layers)
    per_rank = layout.stage_layers or end_stage_layers(num_layers, pp, *ends)
    sizes = chunk_sizes(num_layers, pp, layout.virtual_stages, per_rank)
    if layout.schedule == "dualpipe":
        return tuple(sizes[r] + sizes[pp - 1 - r] for r in range(pp))
    if layout.schedule in V_SHAPED and pp > 1:  # rank r holds chunks r and 2P-1-r
        v_sizes = v_chunk_sizes(num_layers, pp, per_rank)
        return tuple(v_sizes[r] + v_sizes[2 * pp - 1 - r] for r in range(pp))
    return tuple(sum(sizes[r::pp]) for r in range(pp))


def _torchtitan_stage_layers(layout: Layout, schedule: str, num_layers: int | None) -> list[str]:
    """``module_fqns_per_model_part`` (one stage per rank) or a comment where torchtitan's own
    split (even, no embedding weight) would put other layer counts on the ranks."""
    from explorer.importers.torchtitan_pipeline import dealt_layers

    if schedule == "dualpipe":
        return []  # DualPipeV's ranks hold half the model's copy each; the estimate's DualPipe two
    if num_layers is None:
        if layout.stage_layers is None:
            return []
        counts = ",".join(map(str, layout.stage_layers))
        return [f"# explorer: stage_layers={counts}: set module_fqns_per_model_part"]
    want = rank_layers(layout, num_layers)
    if schedule in ("gpipe", "1f1b"):
        if dealt_layers(layout.pp, num_layers, 0, 0) == list(want):
            return []
        return [f"module_fqns_per_model_part = {_module_parts(want)}"]
    per_rank = layout.virtual_stages if schedule == "interleaved" else 2
    dealt = dealt_layers(layout.pp * per_rank, num_layers, 0, 0)
    pp = layout.pp
    have = tuple(sum(dealt[r::pp]) for r in range(pp))
    if schedule in V_SHAPED:  # torchtitan's "v" style: stages r and 2P-1-r on rank r
        have = tuple(dealt[r] + dealt[2 * pp - 1 - r] for r in range(pp))
    if have == want:
        return []
    counts = ",".join(map(str, want))
    return [f"# explorer: stage_layers={counts}: set module_fqns_per_model_part to match"]


def _module_parts(stage_layers: tuple[int, ...]) -> str:
    """torchtitan's ``module_fqns_per_model_part`` for these layers per stage (llama3 and
    deepseek_v3 module names)."""
    parts, start = [], 0
    for stage, count in enumerate(stage_layers):
        names = [f"layers.{i}" for i in range(start, start + count)]
        start += count
        if stage == 0:
            names.insert(0, "tok_embeddings")
        if stage == len(stage_layers) - 1:
            names += ["norm", "output"]
        parts.append("[" + ", ".join(f'"{n}"' for n in names) + "]")
    return "[" + ", ".join(parts) + "]"


def _torchtitan_training(layout: Layout, workload: TrainingWorkload) -> list[str]:
    """Without PP the local batch is the micro-batch (torchtitan accumulates gradients up to the
    global batch); with PP it is a whole data-parallel share split into micro-batches."""
    local = layout.micro_batch_size
    if layout.pp > 1:
        local = workload.global_batch_size // max(layout.dp, 1)
    param = "float32" if workload.precision == "fp32" else "bfloat16"
    lines = [
        "",
        "[training]",
        f"local_batch_size = {local}",
        f"global_batch_size = {workload.global_batch_size}",
        f"seq_len = {workload.seq_len}",
        f'mixed_precision_param = "{param}"',
    ]
    if workload.precision == "bf16-pure":
        lines.append("# explorer: precision=bf16-pure: torchtitan keeps fp32 sharded params")
    if workload.grad_dtype is not None and workload.precision != "fp32":
        lines.append(
            f"# explorer: grad_dtype={workload.grad_dtype}: torchtitan keeps fp32 gradients"
        )
    if layout.tp > 1 and not layout.sequence_parallel:
        lines.append("# explorer: sequence_parallel=off: torchtitan's TP always shards norms")
    lines += ["", "[activation_checkpoint]", *_torchtitan_checkpointing(layout)]
    lines += _torchtitan_recipe_comments(layout)
    if workload.precision == "fp8-mixed":
        lines += ["", "[model]", 'converters = ["float8"]']
    if workload.precision == "nvfp4-mixed":  # torchtitan components/quantization/nvfp4.py
        lines += ["", "[model]", 'converters = ["nvfp4"]']
    return lines


def _torchtitan_recipe_comments(layout: Layout) -> list[str]:
    """``# explorer:`` comments for the recipe fields torchtitan has no setting for: Megatron's
    recompute modules and full-recompute method, activation and optimizer offload (torchtitan's
    enable_cpu_offload moves parameters, gradients and optimizer states together), and
    Megatron's pipeline split (torchtitan gets the blocks per rank)."""
    out = []
    if layout.recompute == "selective" and not layout.recompute_ops:
        out.append(f"# explorer: recompute_modules={','.join(layout.recompute_modules)}")
    if layout.recompute == "full" and layout.recompute_method != "uniform":
        out.append(f"# explorer: recompute_method={layout.recompute_method}")
    if layout.recompute == "full" and layout.recompute_num_layers is not None:
        out.append(f"# explorer: recompute_num_layers={layout.recompute_num_layers}")
    if layout.activation_offload:
        out.append(f"# explorer: activation_offload={','.join(layout.activation_offload)}")
    if layout.offload_layers:
        out.append(f"# explorer: offload_layers={layout.offload_layers}")
    if layout.optimizer_offload_fraction:
        out.append(f"# explorer: optimizer_offload_fraction={layout.optimizer_offload_fraction!r}")
    if layout.pp > 1:
        for name in ("first_stage_layers", "last_stage_layers", "pipeline_layout"):
            value = getattr(layout, name)
            if value is not None:
                out.append(f"# explorer: {name}={value}")
    return out


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
