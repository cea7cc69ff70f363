"""``python -m explorer probe``: measure this machine's GPU (or CPU) and write a probe file.

Run alone it measures GEMMs, attention and memory bandwidth; under ``torchrun`` with two or
more ranks also the collectives' bus bandwidth by message size (rank 0 writes the file). The
file is what ``--calibration FILE`` reads (format: explorer.probe).
"""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path

from explorer.cli import UserError

NAME = "probe"
HELP = "measure this machine's GEMMs, attention, HBM and (under torchrun) collectives to a file"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", required=True, metavar="FILE.toml", help="the file to write")
    parser.add_argument(
        "--quick", action="store_true", help="a tiny sweep (seconds on a CPU), for tests"
    )


def run(args: argparse.Namespace) -> dict[str, object]:
    if importlib.util.find_spec("torch") is None:
        raise UserError("the probe needs PyTorch on this machine: pip install torch")
    out = Path(args.out)
    if not out.parent.is_dir():
        raise UserError(f"cannot write {out}: the folder {out.parent} does not exist")
    from explorer.probe.run import probe, rank
    from explorer.probe.schema import to_toml

    calibration = probe(quick=args.quick)
    if rank() == 0:
        out.write_text(to_toml(calibration), encoding="utf-8")
    return {
        "path": str(out) if rank() == 0 else "",
        "rank": rank(),
        "kind": calibration.kind,
        "device_name": calibration.device_name,
        "world_size": calibration.world_size,
        "elapsed_s": calibration.elapsed_s,
        "points": {
            name: len(getattr(calibration, name))
            for name in ("gemm", "attention", "memory", "collective")
        },
        "best_gemm_flops_per_s": {
            d: max(p.flops_per_s for p in calibration.gemm_points(d))
            for d in dict.fromkeys(p.dtype for p in calibration.gemm)
        },
        "best_memory_bytes_per_s": max((p.bytes_per_s for p in calibration.memory), default=None),
        "best_busbw_bytes_per_s": {
            k: max(b for _, b in calibration.busbw_points(k))
            for k in dict.fromkeys(p.kind for p in calibration.collective)
        },
        "skipped": list(calibration.skipped),
    }


def render(result: dict) -> str:
    if not result["path"]:
        return f"rank {result['rank']}: measured; rank 0 writes the file"
    gemm = ", ".join(f"{d} {v / 1e12:,.2f}" for d, v in result["best_gemm_flops_per_s"].items())
    busbw = ", ".join(f"{k} {v / 1e9:,.2f}" for k, v in result["best_busbw_bytes_per_s"].items())
    memory = result["best_memory_bytes_per_s"]
    lines = [
        f"wrote {result['path']}: {result['device_name']} ({result['kind']}, "
        f"{result['world_size']} rank(s)) in {result['elapsed_s']:.1f} s",
        f"  best GEMM TFLOP/s (1e12 FLOP/s): {gemm or 'none'}",
        f"  best memory bandwidth: {memory / 1e9:,.1f} GB/s" if memory else "  memory: none",
        f"  best busbw GB/s (1e9 B/s): {busbw or 'none (run under torchrun)'}",
    ]
    return "\n".join(lines + [f"  skipped: {s}" for s in result["skipped"]])
