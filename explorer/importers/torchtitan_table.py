"""Every torchtitan job-config key the importer knows: the field it sets, or why the tool cannot
express it (``torchtitan/config/job_config.py`` names; ``section.key``).

As in ``megatron_table``: ``Field`` entries are read by ``explorer.importers.torchtitan``,
``Unsupported`` ones become one sentence each when set to anything but their neutral value, and
``Ignored`` ones (and whole ``IGNORED_SECTIONS``) have no effect on memory or step time.
"""

from __future__ import annotations

from types import MappingProxyType

from explorer.importers.megatron_table import IGNORED, Field, Ignored, Unsupported
from explorer.specs import ScheduleName

FLAVORS = MappingProxyType(
    {
        ("llama3", "8B"): "llama-3.1-8b",
        ("llama3", "70B"): "llama-3.1-70b",
        ("llama3", "405B"): "llama-3.1-405b",
        ("deepseek_v3", "671B"): "deepseek-v3",
        ("qwen3", "32B"): "qwen3-32b",
        ("qwen3", "235B-A22B"): "qwen3-235b-a22b",
    }
)
"""(model.name, model.flavor) -> model preset (torchtitan's llama3 flavors are Llama 3.1's
shapes: torchtitan/models/llama3/__init__.py)."""

SCHEDULES: MappingProxyType[str, tuple[ScheduleName, int | None]] = MappingProxyType(
    {
        "gpipe": ("gpipe", 1),
        "1f1b": ("1f1b", 1),
        "interleaved1f1b": ("interleaved", None),
        "loopedbfs": ("interleaved", None),
        "interleavedzerobubble": ("zb-h1", None),
        "zbvzerobubble": ("zb-v", 2),
        "dualpipev": ("dualpipev", 2),
    }
)
"""torch.distributed.pipelining schedule (lower case, ``Schedule`` prefix dropped) -> the tool's
schedule and its stages per rank (None: from the layers per stage, else 2)."""

IGNORED_SECTIONS = frozenset(
    {
        "job", "profiling", "metrics", "optimizer", "lr_scheduler", "checkpoint", "comm",
        "validation", "compile", "fault_tolerance", "experimental", "memory_estimation",
        "quantize", "mx",
    }
)  # fmt: skip
"""Sections without effect on memory or step time (``quantize`` and ``mx`` only configure the
converters named in ``model.converters``)."""

TABLE: MappingProxyType[str, Field | Unsupported | Ignored] = MappingProxyType(
    {
        "model.name": Field("model"),
        "model.flavor": Field("model"),
        "model.converters": Field("precision"),
        "model.tokenizer_path": IGNORED,
        "model.hf_assets_path": IGNORED,
        "model.print_after_conversion": IGNORED,
        "parallelism.data_parallel_replicate_degree": Field("dp"),
        "parallelism.data_parallel_shard_degree": Field("dp_shard"),
        "parallelism.fsdp_reshard_after_forward": Field("reshard_after_forward"),
        "parallelism.tensor_parallel_degree": Field("tp"),
        "parallelism.pipeline_parallel_degree": Field("pp"),
        "parallelism.context_parallel_degree": Field("cp"),
        "parallelism.expert_parallel_degree": Field("ep"),
        "parallelism.expert_tensor_parallel_degree": Field("etp"),
        "parallelism.pipeline_parallel_schedule": Field("schedule"),
        "parallelism.pipeline_parallel_microbatch_size": Field("mbs"),
        "parallelism.pipeline_parallel_layers_per_stage": Field("virtual"),
        "parallelism.pipeline_parallel_first_stage_less_layers": Field("virtual"),
        "parallelism.pipeline_parallel_last_stage_less_layers": Field("virtual"),
        "parallelism.module_fqns_per_model_part": Field("stage_layers"),
        "parallelism.pipeline_parallel_split_points": Unsupported(
            "explicit split points are not read; the tool splits transformer blocks evenly",
            neutral=(None, []),
        ),
        "parallelism.pipeline_parallel_schedule_csv": Unsupported(
            "a schedule from a CSV file is not read"
        ),
        "parallelism.context_parallel_rotate_method": Unsupported(
            "the tool times context parallelism as a ring of KV exchanges",
            neutral=(None, "allgather"),
        ),
        "parallelism.enable_async_tensor_parallel": IGNORED,
        "parallelism.disable_loss_parallel": IGNORED,
        "parallelism.enable_compiled_autograd": IGNORED,
        "training.local_batch_size": Field("mbs"),
        "training.batch_size": Field("mbs"),  # the older name of local_batch_size
        "training.global_batch_size": Field("global_batch_size"),
        "training.seq_len": Field("seq_len"),
        "training.mixed_precision_param": Field("precision"),
        "training.mixed_precision_reduce": Field("grad_dtype"),
        "training.enable_cpu_offload": Unsupported(
            "FSDP offload of parameters, gradients and optimizer states to the CPU is not modelled"
        ),
        **{
            f"training.{k}": IGNORED
            for k in (
                "dataset",
                "dataset_path",
                "max_norm",
                "steps",
                "compile",
                "gc_freq",
                "gc_debug",
                "seed",
                "deterministic",
                "warmup_steps",
            )
        },
        "activation_checkpoint.mode": Field("recompute"),
        "activation_checkpoint.selective_ac_option": Field("recompute_ops"),  # or recompute_every
        "activation_checkpoint.per_op_sac_force_recompute_mm_shapes_by_fqns": IGNORED,
        "activation_checkpoint.memory_budget": Unsupported(
            "a memory-budget checkpointing policy is not modelled"
        ),
        "activation_checkpoint.early_stop": IGNORED,
        "float8.enable_fsdp_float8_all_gather": Unsupported(
            "FP8 all-gather of FSDP weights is not modelled; the tool gathers bf16 weights"
        ),
        "float8.recipe_name": Field("precision"),
        "float8.precompute_float8_dynamic_scale_for_fsdp": IGNORED,
        "float8.force_recompute_fp8_weight_in_bwd": IGNORED,
        "float8.filter_fqns": IGNORED,
        "float8.emulate": IGNORED,
        "float8.moe_fqns_prototype": IGNORED,
    }
)
"""torchtitan key -> what the importer does with it."""
