"""Measure every configuration and write ``validation/results.json``.

Usage: ``python -m validation.run_all [--heldout] [--output PATH] [--only ID ...]`` (needs
torch==2.13.0, the ``validate`` extra). Each configuration takes about a second in one CPU
process; the file it writes is deterministic, so a rerun on the same torch version gives the
same bytes. ``--heldout`` measures the held-out set (``heldout_configs``, chosen after the
estimator was fitted to ``results.json``) into ``validation/heldout.json``.

Model shapes keep real widths (hidden size, heads, FFN, vocabulary of published models) with
few layers: fake tensors cost per operation, not per byte, and the estimator takes the layer
count from the same ModelSpec.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from explorer.specs import Layout, ModelSpec, Precision, Recompute, TrainingWorkload

RESULTS_PATH = Path(__file__).with_name("results.json")
HELDOUT_PATH = Path(__file__).with_name("heldout.json")
HELDOUT_CHOSEN = "2026-11-29"
"""Date the held-out configurations were chosen; explorer/memory was not changed for them."""

TINY = ModelSpec(
    name="tiny (2 layers, h 256)",
    num_hidden_layers=2,
    hidden_size=256,
    num_attention_heads=8,
    num_key_value_heads=4,
    intermediate_size=768,
    vocab_size=4096,
)
SMALL = ModelSpec(
    name="small MHA (4 layers, h 1024, V 32000)",
    num_hidden_layers=4,
    hidden_size=1024,
    num_attention_heads=16,
    intermediate_size=4096,
    vocab_size=32000,
)
LLAMA_1B = ModelSpec(
    name="Llama-3.2-1B widths, 2 layers",  # meta-llama/Llama-3.2-1B config.json, untied here
    num_hidden_layers=2,
    hidden_size=2048,
    num_attention_heads=32,
    num_key_value_heads=8,
    intermediate_size=8192,
    vocab_size=128256,
)
LLAMA_1B_TIED = ModelSpec(
    name="Llama-3.2-1B widths, 2 layers, tied embeddings",
    num_hidden_layers=2,
    hidden_size=2048,
    num_attention_heads=32,
    num_key_value_heads=8,
    intermediate_size=8192,
    vocab_size=128256,
    tie_word_embeddings=True,
)
LLAMA_8B = ModelSpec(
    name="Llama-3.1-8B widths, 2 layers",  # meta-llama/Llama-3.1-8B config.json
    num_hidden_layers=2,
    hidden_size=4096,
    num_attention_heads=32,
    num_key_value_heads=8,
    intermediate_size=14336,
    vocab_size=128256,
)
QWEN3_STYLE = ModelSpec(
    name="Qwen3-1.7B widths, 2 layers (q/k norms, head_dim 128)",  # Qwen/Qwen3-1.7B config.json
    num_hidden_layers=2,
    hidden_size=2048,
    num_attention_heads=16,
    num_key_value_heads=8,
    head_dim=128,
    intermediate_size=6144,
    vocab_size=151936,
    qk_norm=True,
)
SMALL_MOE = ModelSpec(
    name="small MoE (3 layers, 8 experts top-2, 1 shared, first layer dense)",
    num_hidden_layers=3,
    hidden_size=1024,
    num_attention_heads=16,
    num_key_value_heads=4,
    intermediate_size=2816,
    vocab_size=32000,
    n_routed_experts=8,
    num_experts_per_tok=2,
    moe_intermediate_size=704,
    n_shared_experts=1,
    first_k_dense_replace=1,
)
MISTRAL_7B = ModelSpec(
    name="Mistral-7B widths, 2 layers",  # mistralai/Mistral-7B-v0.1 config.json (presets/models)
    num_hidden_layers=2,
    hidden_size=4096,
    num_attention_heads=32,
    num_key_value_heads=8,
    intermediate_size=14336,
    vocab_size=32000,
)
QWEN25_7B = ModelSpec(
    name="Qwen2.5-7B widths, 2 layers (q/k/v biases)",  # Qwen/Qwen2.5-7B config.json
    num_hidden_layers=2,
    hidden_size=3584,
    num_attention_heads=28,
    num_key_value_heads=4,
    intermediate_size=18944,
    vocab_size=152064,
    attention_bias=True,
)
QWEN25_1B5 = ModelSpec(
    name="Qwen2.5-1.5B widths, 2 layers (q/k/v biases, tied embeddings)",  # Qwen/Qwen2.5-1.5B
    num_hidden_layers=2,
    hidden_size=1536,
    num_attention_heads=12,
    num_key_value_heads=2,
    intermediate_size=8960,
    vocab_size=151936,
    tie_word_embeddings=True,
    attention_bias=True,
)
MOE_16X4 = ModelSpec(
    name="small MoE (2 layers, 16 experts top-4, no shared expert, every layer MoE)",
    num_hidden_layers=2,
    hidden_size=1024,
    num_attention_heads=16,
    num_key_value_heads=4,
    intermediate_size=2816,
    vocab_size=32000,
    n_routed_experts=16,
    num_experts_per_tok=4,
    moe_intermediate_size=512,
)


def config(
    model: ModelSpec,
    precision: Precision,
    seq: int,
    mbs: int = 1,
    *,
    dp: int = 1,
    tp: int = 1,
    fsdp: bool = False,
    ac: bool = False,
    selective: bool = False,
    sp: bool = True,
    accumulate: int = 1,
    tag: str = "",
) -> Any:
    """One configuration; the id spells out its settings (``sel``: selective recompute)."""
    from validation.measure import Config

    recompute: Recompute = "full" if ac else "selective" if selective else "none"
    parts = [
        tag,
        f"fsdp{dp}" if fsdp else "",
        f"tp{tp}" + ("" if sp else "-nosp") if tp > 1 else "",
        precision,
        f"s{seq}",
        f"b{mbs}",
        "ac" if ac else "",
        "sel" if selective else "",
        f"ga{accumulate}" if accumulate > 1 else "",
    ]
    layout = Layout(
        dp=dp,
        tp=tp,
        zero=3 if fsdp else 0,
        sequence_parallel=sp,
        micro_batch_size=mbs,
        recompute=recompute,
    )
    batch = mbs * dp * accumulate
    workload = TrainingWorkload(seq_len=seq, global_batch_size=batch, precision=precision)
    cid = "-".join(p for p in parts if p)
    return Config(id=cid, model=model, layout=layout, workload=workload, fsdp=fsdp)


def configs() -> list[Any]:
    """Every measured configuration (ids are stable: tests and the app refer to them)."""
    c = config
    single = [
        c(TINY, "bf16-pure", 512, 2, tag="tiny"),
        c(SMALL, "fp32", 1024, tag="small"),
        c(SMALL, "fp32", 2048, 2, tag="small"),
        c(SMALL, "bf16-pure", 1024, tag="small"),
        c(SMALL, "bf16-pure", 4096, tag="small"),
        c(SMALL, "bf16-pure", 1024, 4, tag="small"),
        c(SMALL, "fp32", 2048, 2, ac=True, tag="small"),
        c(LLAMA_1B, "bf16-pure", 2048, tag="llama1b"),
        c(LLAMA_1B, "bf16-pure", 4096, 2, ac=True, tag="llama1b"),
        c(LLAMA_1B_TIED, "bf16-pure", 2048, tag="llama1b-tied"),
        c(LLAMA_8B, "bf16-pure", 4096, tag="llama8b"),
        c(LLAMA_8B, "bf16-pure", 8192, tag="llama8b"),
        c(QWEN3_STYLE, "bf16-pure", 2048, tag="qwen3"),
        c(SMALL, "bf16-pure", 2048, accumulate=4, tag="small"),
    ]
    fsdp = [
        c(TINY, "bf16-mixed", 512, 2, dp=8, fsdp=True, tag="tiny"),
        c(SMALL, "bf16-mixed", 2048, fsdp=True, tag="small"),
        c(SMALL, "bf16-mixed", 2048, 2, dp=8, fsdp=True, tag="small"),
        c(SMALL, "fp32", 2048, dp=8, fsdp=True, tag="small"),
        c(SMALL, "bf16-pure", 2048, dp=8, fsdp=True, tag="small"),
        c(LLAMA_1B, "bf16-mixed", 4096, 2, dp=32, fsdp=True, tag="llama1b"),
        c(LLAMA_1B, "bf16-mixed", 8192, dp=128, fsdp=True, ac=True, tag="llama1b"),
        c(LLAMA_8B, "bf16-mixed", 4096, dp=8, fsdp=True, tag="llama8b"),
        c(LLAMA_8B, "bf16-mixed", 4096, dp=8, fsdp=True, ac=True, tag="llama8b"),
        c(LLAMA_8B, "bf16-mixed", 4096, dp=64, fsdp=True, tag="llama8b"),
        c(LLAMA_8B, "bf16-mixed", 8192, 2, dp=64, fsdp=True, ac=True, tag="llama8b"),
        c(LLAMA_8B, "bf16-mixed", 4096, dp=256, fsdp=True, ac=True, tag="llama8b"),
        c(LLAMA_8B, "bf16-mixed", 4096, dp=1024, fsdp=True, ac=True, tag="llama8b"),
        c(LLAMA_8B, "bf16-mixed", 4096, dp=8, fsdp=True, accumulate=2, tag="llama8b"),
    ]
    tensor_parallel = [
        c(LLAMA_8B, "bf16-pure", 4096, tp=2, tag="llama8b"),
        c(LLAMA_8B, "bf16-pure", 4096, tp=4, tag="llama8b"),
        c(LLAMA_8B, "bf16-pure", 4096, tp=8, tag="llama8b"),
        c(LLAMA_8B, "bf16-pure", 4096, tp=4, sp=False, tag="llama8b"),
        c(LLAMA_8B, "fp32", 2048, tp=8, tag="llama8b"),
        c(LLAMA_8B, "bf16-pure", 8192, tp=4, ac=True, tag="llama8b"),
        c(LLAMA_8B, "bf16-mixed", 4096, dp=8, tp=2, fsdp=True, tag="llama8b"),
        c(LLAMA_8B, "bf16-mixed", 8192, dp=16, tp=4, fsdp=True, ac=True, tag="llama8b"),
        c(LLAMA_8B, "bf16-mixed", 4096, 2, dp=64, tp=8, fsdp=True, ac=True, tag="llama8b"),
    ]
    moe = [
        c(SMALL_MOE, "bf16-pure", 2048, tag="moe"),
        c(SMALL_MOE, "fp32", 1024, tag="moe"),
        c(SMALL_MOE, "bf16-mixed", 2048, dp=8, fsdp=True, tag="moe"),
        c(SMALL_MOE, "bf16-mixed", 4096, dp=8, fsdp=True, ac=True, tag="moe"),
    ]
    return single + fsdp + tensor_parallel + moe


def heldout_configs() -> list[Any]:
    """Configurations chosen after the change requests, never used to fit explorer/memory.

    New widths (Mistral-7B, Qwen2.5-7B and -1.5B with q/k/v biases), a 16-expert top-4 MoE
    without shared expert, FSDP 16 x TP 2 and FSDP x TP without SP, TP 2 with b 4, 4
    accumulated micro-batches under FSDP2, s 16384, and selective recompute (the last two
    differ from stored ``results.json`` configurations only by it).
    """
    c = config
    return [
        c(MISTRAL_7B, "bf16-pure", 4096, 2, tag="mistral7b"),
        c(MISTRAL_7B, "bf16-pure", 2048, 4, tp=2, tag="mistral7b"),
        c(MISTRAL_7B, "bf16-mixed", 4096, dp=16, tp=2, fsdp=True, tag="mistral7b"),
        c(QWEN25_7B, "bf16-pure", 2048, tag="qwen25-7b"),
        c(QWEN25_7B, "bf16-pure", 4096, tp=4, tag="qwen25-7b"),
        c(QWEN25_7B, "bf16-mixed", 4096, dp=32, fsdp=True, ac=True, tag="qwen25-7b"),
        c(QWEN25_1B5, "bf16-pure", 4096, tag="qwen25-1b5-tied"),
        c(LLAMA_1B, "bf16-mixed", 2048, dp=8, fsdp=True, accumulate=4, tag="llama1b"),
        c(LLAMA_1B, "bf16-pure", 16384, ac=True, tag="llama1b"),
        c(LLAMA_8B, "bf16-mixed", 4096, dp=8, tp=4, fsdp=True, sp=False, tag="llama8b"),
        c(MOE_16X4, "bf16-pure", 2048, tag="moe16"),
        c(MOE_16X4, "bf16-mixed", 4096, dp=8, fsdp=True, ac=True, tag="moe16"),
        c(LLAMA_1B, "bf16-pure", 2048, selective=True, tag="llama1b"),
        c(LLAMA_8B, "bf16-pure", 4096, tp=2, selective=True, tag="llama8b"),
    ]


def write_results(records: list[dict[str, Any]], path: Path, heldout: bool = False) -> None:
    """The data file: provenance, then one record per configuration."""
    import torch

    document: dict[str, Any] = {
        "generated_by": "python -m validation.run_all" + (" --heldout" if heldout else ""),
        "torch_version": torch.__version__,
        "method": (
            "One rank's tensor memory in the second training step (forward, loss, backward, "
            "AdamW foreach step) on fake CPU tensors under torch.distributed._tools MemTracker "
            "or FSDPMemTracker, fake process group; no CUDA context, library workspaces, NCCL "
            "buffers or allocator reserve."
        ),
    }
    if heldout:
        document["held_out"] = (
            f"Chosen on {HELDOUT_CHOSEN}, after explorer/memory was fitted to results.json "
            "(CR-1 to CR-9); never used to change explorer/memory."
        )
    document["configs"] = records
    path.write_text(json.dumps(document, indent=1) + "\n")


def main(argv: list[str] | None = None) -> int:
    """Measure the selected configurations (all by default) and write the data file."""
    from validation.measure import measure

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, default=None, help="default: results.json")
    parser.add_argument("--only", nargs="*", default=None, help="configuration ids to measure")
    parser.add_argument(
        "--heldout", action="store_true", help="the held-out set, to heldout.json by default"
    )
    args = parser.parse_args(argv)
    output = args.output or (HELDOUT_PATH if args.heldout else RESULTS_PATH)
    candidates = heldout_configs() if args.heldout else configs()
    selected = [cfg for cfg in candidates if args.only is None or cfg.id in args.only]
    records, started = [], time.perf_counter()
    for cfg in selected:
        tick = time.perf_counter()
        records.append(measure(cfg))
        print(f"{cfg.id}: {time.perf_counter() - tick:.1f} s", file=sys.stderr)
    write_results(records, output, args.heldout)
    print(
        f"{len(records)} configurations in {time.perf_counter() - started:.0f} s", file=sys.stderr
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
