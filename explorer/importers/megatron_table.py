"""Every Megatron-LM / Megatron-Bridge / NeMo setting the importer knows: the field it sets, or
why the tool cannot express it.

One entry per setting (Megatron's argparse destination; NeMo and Bridge spellings are aliases).
``Field`` entries are read by ``explorer.importers.megatron``; ``Unsupported`` ones become one
sentence each when set to anything but their neutral value; ``IGNORED`` ones have no effect on
memory or step time (optimizer hyperparameters, data, logging, checkpoints, kernels' fusions).
When the Layout gains a field, move its entry from ``Unsupported`` to ``Field`` and read it in
``megatron.py``.
Flag names: Megatron-LM ``megatron/training/arguments.py``; Bridge: ``ConfigContainer`` dumps in
Megatron-Bridge ``scripts/performance``; NeMo 1: NeMo-Framework-Launcher ``conf/training``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any


@dataclass(frozen=True, slots=True)
class Field:
    """Read into a scenario field."""

    field: str


@dataclass(frozen=True, slots=True)
class Unsupported:
    """Not expressible: ``reason`` completes the sentence "<setting> <value>: <reason>."."""

    reason: str
    neutral: tuple[Any, ...] = (None, False, 0, 0.0, "", "none", "null", "no_shard")


@dataclass(frozen=True, slots=True)
class Ignored:
    """No effect on memory or step time in the tool."""


IGNORED = Ignored()

ALIASES = MappingProxyType(
    {
        "encoder_seq_length": "seq_length",  # NeMo 1
        "sequence_length": "seq_length",  # Bridge dataset section
        "virtual_pipeline_model_parallel_size": "num_virtual_stages_per_pipeline_rank",
        "num_layers_in_first_pipeline_stage": "decoder_first_pipeline_num_layers",
        "num_layers_in_last_pipeline_stage": "decoder_last_pipeline_num_layers",
        "activations_checkpoint_granularity": "recompute_granularity",  # NeMo 1
        "activations_checkpoint_method": "recompute_method",
        "activations_checkpoint_num_layers": "recompute_num_layers",
        "num_moe_experts": "num_experts",  # Bridge / Megatron-Core config name
        "grad_reduce_in_fp32": "accumulate_allreduce_grads_in_fp32",  # Bridge ddp
        "use_custom_fsdp": "use_megatron_fsdp",  # the flag's older name
        "nproc_per_node": "gpus_per_node",  # torchrun
        "devices": "gpus_per_node",  # NeMo trainer
        "num_gpus_per_node": "gpus_per_node",  # Bridge perf scripts
        "nnodes": "num_nodes",  # torchrun
        "fp8_format": "fp8",  # Bridge and NeMo write the format under fp8
        "fp4_format": "fp4",  # Megatron-LM's --fp4-format sets TransformerConfig.fp4
    }
)
"""Other frameworks' names for a Megatron setting."""

TABLE: MappingProxyType[str, Field | Unsupported | Ignored] = MappingProxyType(
    {
        # degrees and batch
        "tensor_model_parallel_size": Field("tp"),
        "pipeline_model_parallel_size": Field("pp"),
        "context_parallel_size": Field("cp"),
        "expert_model_parallel_size": Field("ep"),
        "expert_tensor_parallel_size": Field("etp"),
        "micro_batch_size": Field("mbs"),
        "global_batch_size": Field("global_batch_size"),
        "seq_length": Field("seq_len"),
        "sequence_parallel": Field("sequence_parallel"),
        "num_nodes": Field("num_gpus"),
        "gpus_per_node": Field("num_gpus"),
        "rampup_batch_size": Unsupported("batch ramp-up is estimated at the final global batch"),
        # sharding
        "use_distributed_optimizer": Field("zero"),
        "use_megatron_fsdp": Field("zero"),
        "use_torch_fsdp2": Field("zero"),
        "data_parallel_sharding_strategy": Field("zero"),
        "name": Field("zero"),  # NeMo 1 model.optim.name: distributed_fused_adam is ZeRO-1
        "num_distributed_optimizer_instances": Field("dp_shard"),
        "outer_dp_sharding_strategy": Unsupported(
            "sharding the optimizer across the replicas of a hybrid-sharded (HSDP) run is not "
            "modelled; the tool replicates it across them",
            neutral=(None, "no_shard"),
        ),
        # pipeline
        "num_layers_per_virtual_pipeline_stage": Field("virtual"),
        "num_virtual_stages_per_pipeline_rank": Field("virtual"),
        "decoder_first_pipeline_num_layers": Field("first_stage_layers"),
        "decoder_last_pipeline_num_layers": Field("last_stage_layers"),
        "pipeline_model_parallel_layout": Field("pipeline_layout"),
        "account_for_embedding_in_pipeline_split": Unsupported(
            "the tool splits transformer blocks evenly and adds the embedding to the first "
            "stage; it does not count the embedding as a layer"
        ),
        "account_for_loss_in_pipeline_split": Unsupported(
            "the tool splits transformer blocks evenly and adds the LM head to the last stage; "
            "it does not count the loss as a layer"
        ),
        "microbatch_group_size_per_vp_stage": Unsupported(
            "the interleaved schedule is simulated with micro-batch groups of PP"
        ),
        "overlap_moe_expert_parallel_comm": Unsupported(
            "overlapping expert all-to-alls with another micro-batch (combined 1F1B) is not "
            "modelled; the tool's own all-to-all overlap assumptions apply"
        ),
        "delay_wgrad_compute": Unsupported("deferred weight-gradient compute is not modelled"),
        # recompute
        "recompute_granularity": Field("recompute"),
        "recompute_method": Field("recompute_method"),
        "recompute_num_layers": Field("recompute_num_layers"),
        "recompute_modules": Field("recompute_modules"),
        "recompute_activations": Field("recompute"),
        "moe_layer_recompute": Unsupported(
            "recompute of whole MoE layers is not read; recompute_modules moe is the tool's "
            "spelling of it"
        ),
        "num_microbatches_with_partial_activation_checkpoints": Unsupported(
            "recompute for only some micro-batches is not modelled"
        ),
        "distribute_saved_activations": Unsupported(
            "saved activations split over TP ranks are not modelled"
        ),
        # precision
        "bf16": Field("precision"),
        "fp16": Field("precision"),
        "fp8": Field("precision"),
        "fp8_hybrid": Field("precision"),
        "fp8_e4m3": Field("precision"),
        "precision": Field("precision"),  # NeMo trainer.precision
        "mixed_precision": Field("precision"),  # Bridge recipe name
        "fp8_recipe": Field("precision"),
        "fp4": Field("precision"),
        "fp4_recipe": Field("precision"),
        "accumulate_allreduce_grads_in_fp32": Field("grad_dtype"),
        "grad_reduce_in_bf16": Field("grad_dtype"),
        "main_grads_dtype": Field("grad_dtype"),
        "use_precision_aware_optimizer": Field("precision"),
        "exp_avg_dtype": Field("precision"),
        "exp_avg_sq_dtype": Field("precision"),
        "main_params_dtype": Field("precision"),
        "fp8_param_gather": Unsupported(
            "FP8 weight copies are not modelled; the tool keeps and gathers bf16 weights"
        ),
        "fp8_param": Unsupported(
            "FP8 weight copies are not modelled; the tool keeps and gathers bf16 weights"
        ),
        "first_last_layers_bf16": Field("precision"),
        "num_layers_at_start_in_bf16": Field("precision"),
        "num_layers_at_end_in_bf16": Field("precision"),
        # offload
        "cpu_offloading": Field("offload_layers"),
        "cpu_offloading_num_layers": Field("offload_layers"),
        "cpu_offloading_weights": Unsupported(
            "offloading weights to the CPU is not modelled; only the layers' activations are"
        ),
        "cpu_offloading_activations": Unsupported(
            "offloading only weights is not modelled; the tool offloads the layers' activations",
            neutral=(None, True),
        ),
        "fine_grained_activation_offloading": Field("activation_offload"),
        "offload_modules": Field("activation_offload"),
        "optimizer_cpu_offload": Field("optimizer_offload_fraction"),
        "optimizer_offload_fraction": Field("optimizer_offload_fraction"),
        # CUDA graphs, MoE dispatch: no layout field yet
        "enable_cuda_graph": Unsupported("CUDA-graph memory is not counted"),
        "external_cuda_graph": Unsupported("CUDA-graph memory is not counted"),
        "cuda_graph_impl": Unsupported("CUDA-graph memory is not counted"),
        "moe_token_dispatcher_type": Unsupported(
            "the tool times all-to-all token dispatch and counts no DeepEP or all-gather "
            "dispatcher buffers",
            neutral=(None, "alltoall"),
        ),
        "moe_enable_deepep": Unsupported("DeepEP and NVSHMEM buffers are not counted"),
        "moe_expert_capacity_factor": Unsupported(
            "token dropping at a capacity factor is not modelled; experts are sized dropless "
            "with the tool's imbalance reserve"
        ),
        "moe_pad_expert_input_to_capacity": Unsupported(
            "padding expert inputs to capacity is not modelled"
        ),
        "hierarchical_context_parallel_sizes": Unsupported(
            "hierarchical context parallelism is not modelled (CP is one ring)"
        ),
        "cp_comm_type": Unsupported(
            "the tool times context parallelism as a ring of KV exchanges (p2p)",
            neutral=(None, "p2p"),
        ),
    }
)
"""Setting -> what the importer does with it."""

MODEL_FLAGS = MappingProxyType(
    {
        "num_layers": "num_hidden_layers",
        "hidden_size": "hidden_size",
        "ffn_hidden_size": "intermediate_size",
        "num_attention_heads": "num_attention_heads",
        "num_query_groups": "num_key_value_heads",
        "num_experts": "n_routed_experts",
        "moe_ffn_hidden_size": "moe_intermediate_size",
        "moe_router_topk": "num_experts_per_tok",
        "q_lora_rank": "q_lora_rank",
        "kv_lora_rank": "kv_lora_rank",
    }
)
"""Megatron model flag -> ModelSpec field, compared with the presets to name the model."""

_MODEL_DETAIL_PATTERN = re.compile(
    r"^(apply_|bias_|masked_softmax|persist_layer_norm|rotary_|rope_|position_embedding|"
    r"max_position_embeddings|kv_channels|swiglu|normalization|norm_epsilon|layernorm_|"
    r"group_query_attention|untie_|disable_bias|attention_dropout|hidden_dropout|ffn_dropout|"
    r"qk_|v_head_dim|moe_router_|moe_aux_|moe_z_loss|moe_shared_expert|moe_layer_freq|mtp_|"
    r"multi_latent_attention|make_vocab_size|vocab_size|share_embeddings|init_method|"
    r"activation$|gated_linear_unit|add_bias_linear|add_qkv_bias|mscale|yarn_|beta_fast|"
    r"beta_slow|softmax_|original_max_position)"
)
"""Model details the preset's config.json carries (the flags only pick the preset)."""

_IGNORED_PATTERN = re.compile(
    r"^(lr|min_lr|decoupled_|adam_|sgd_|muon_|lion_|weight_decay|start_weight_decay|"
    r"end_weight_decay|clip_grad|loss_scale|initial_loss_scale|min_loss_scale|hysteresis|"
    r"train_|eval_|exit_|log|save|load|ckpt|data|split|tokenizer|vocab_file|merge_file|mock|"
    r"tensorboard|wandb|comet|mlflow|profile|seed|num_workers|distributed_|"
    r"master_|node_rank|rdzv|use_mcore_models|transformer_impl|attention_backend|manual_gc|"
    r"empty_unused_memory_level|calculate_per_token_loss|overlap_|tp_comm_|align_|bucket_|"
    r"check_for_|use_flash_attn|timing_|rerun_|iterations_to_skip|no_create_|"
    r"gradient_accumulation_fusion|cross_entropy|moe_grouped_gemm|moe_permute_fusion|"
    r"fp8_amax_|fp8_margin|fp8_interval|fp8_wgrad|fp8_dot_product|fp8_multi_head|"
    r"deallocate_pipeline_outputs|batch_p2p|defer_embedding_wgrad|wgrad_deferral|"
    r"cuda_graph_|cpu_offloading_|params_dtype|pipeline_dtype|autocast|"
    r"mcore_gpt|megatron_amp_o2|grad_allreduce_chunk|grad_div_ar_fusion|gradient_as_bucket|"
    r"sync_batch_comm|transformer_engine|use_te|gc_interval|native_amp|accelerator|"
    r"max_steps|max_epochs|max_time|val_check|limit_|accumulate_grad_batches|"
    r"gradient_clip|enable_checkpointing|use_distributed_sampler|logger|results_dir|"
    r"time_limit|dependency|ub_tp_comm_overlap|use_fused|fused_|tiktoken_|"
    r"moe_flex_dispatcher_backend|optimizer$|init_model_with_meta_device|kitchen_|"
    r"use_cpu_initialization|perform_initialization|test_mode|timers|config_logger_dir)"
)
"""Settings with no effect on memory or step time in the tool: optimizer hyperparameters,
schedules of the learning rate, data, logging, checkpoints, kernel fusions, and communication
overlap (the tool's overlap assumptions apply instead)."""


def is_model_detail(name: str) -> bool:
    return bool(_MODEL_DETAIL_PATTERN.match(name.lower()))


def is_ignored(name: str) -> bool:
    entry = TABLE.get(name)
    if entry is not None:
        return isinstance(entry, Ignored)
    return bool(_IGNORED_PATTERN.match(name.lower())) or is_model_detail(name)
