"""Transformer Engine's comm-GEMM overlap ("userbuffers") configurations, as published.

Megatron-Core's --tp-comm-overlap (NeMo's ub_tp_comm_overlap, Megatron-Bridge's
CommOverlapConfig.tp_comm_overlap) replaces each sequence-parallel all-gather and
reduce-scatter of a block by a GEMM fused with its collective (Transformer Engine
transformer_engine/common/comm_gemm_overlap/comm_gemm_overlap.cpp), configured per GEMM of
the layer (ten names: qkv / proj / fc1 / fc2 x fprop / dgrad / wgrad) with one of three
methods:
- ``ring``: ring exchange (CommOverlapP2PBase). An all-gather before a GEMM (qkv_fprop,
  fc1_fprop, proj_dgrad, fc2_dgrad) runs as tp GEMM chunks of the tp-th of the rows each, the
  next chunk arriving from a peer (point-to-point, copy engine) while the current one is
  multiplied; a reduce-scatter after a GEMM (proj_fprop, fc2_fprop) as tp chunks, each
  chunk's result sent to its owner while the next is computed, then one kernel sums the tp
  received chunks (reduce_bf16 / reduce_fp8_in_bf16_out). ``aggregate`` moves two chunks a step.
- ``pipeline``: the GEMM split into ``num_splits`` chunks along its rows, each chunk's
  reduce-scatter run by a userbuffers kernel on ``num_sm`` SMs while the next chunk is
  computed (CommOverlapBase::split_overlap_rs); ``set_sm_margin`` launches the GEMM on the
  other SMs.
- ``bulk``: a collective the GEMM does not wait for, run beside it on ``num_sm`` SMs
  (CommOverlapBase::bulk_overlap): in the backward of a column-parallel layer (qkv, fc1), the
  all-gather of its sequence-parallel input (for the weight gradient) beside the input-gradient
  GEMM (``*_dgrad``) and the reduce-scatter of the input gradient beside the weight-gradient
  GEMM (``*_wgrad``).
``fp8_buf``: the reduce-scatter moves the GEMM's FP8 output (1 byte per element).
Sources: each config below names its file.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

UbMethod = Literal["ring", "pipeline", "bulk"]

UB_GEMMS: Final = (
    "qkv_fprop", "proj_fprop", "fc1_fprop", "fc2_fprop",
    "qkv_dgrad", "qkv_wgrad", "fc1_dgrad", "fc1_wgrad", "proj_dgrad", "fc2_dgrad",
)  # fmt: skip
"""The ten GEMMs of a layer a userbuffers config names (TransformerLayerTPOverlapCfg)."""


@dataclass(frozen=True, slots=True)
class UbGemm:
    """How one GEMM overlaps its collective (the fields of NeMo's RingExchangeOverlapCfg,
    PipelineOverlapCfg and BulkOverlapCfg that change its time)."""

    method: UbMethod
    num_sm: int = 1
    """SMs the communication kernel holds (pipeline, bulk; ring exchange copies with the copy
    engine and holds none beyond ``set_sm_margin``'s)."""
    num_splits: int = 4
    """GEMM chunks of the pipeline method."""
    set_sm_margin: bool = False
    """The GEMM runs on the GPU's SMs less ``num_sm``."""
    aggregate: bool = False
    """Ring exchange moves two chunks per step."""
    fp8_buf: bool = False
    """The reduce-scatter moves the GEMM's FP8 output."""


RING = UbGemm("ring")
"""RingExchangeOverlapCfg() / method ring_exchange, aggregate 0."""


def _ring_rs(sm_margin: bool = True) -> UbGemm:
    return UbGemm("ring", num_sm=1, set_sm_margin=sm_margin)


def _pipe(num_sm: int, fp8_buf: bool = False) -> UbGemm:
    return UbGemm("pipeline", num_sm=num_sm, num_splits=4, set_sm_margin=True, fp8_buf=fp8_buf)


def _bulk(num_sm: int) -> UbGemm:
    return UbGemm("bulk", num_sm=num_sm)


@dataclass(frozen=True, slots=True)
class UbConfig:
    """One layer's userbuffers config: a ``UbGemm`` per GEMM name of ``UB_GEMMS``."""

    qkv_fprop: UbGemm
    proj_fprop: UbGemm
    fc1_fprop: UbGemm
    fc2_fprop: UbGemm
    qkv_dgrad: UbGemm
    qkv_wgrad: UbGemm
    fc1_dgrad: UbGemm
    fc1_wgrad: UbGemm
    proj_dgrad: UbGemm
    fc2_dgrad: UbGemm
    source: str = ""


def _config(
    bulk: tuple[int, int, int, int],
    proj_fprop: UbGemm,
    fc2_fprop: UbGemm,
    source: str,
    fc2_dgrad: UbGemm = RING,
) -> UbConfig:
    """A config whose four all-gather GEMMs ring-exchange (every published one here):
    ``bulk`` = num_sm of qkv_dgrad, qkv_wgrad, fc1_dgrad, fc1_wgrad."""
    qd, qw, fd, fw = bulk
    return UbConfig(
        qkv_fprop=RING, proj_fprop=proj_fprop, fc1_fprop=RING, fc2_fprop=fc2_fprop,
        qkv_dgrad=_bulk(qd), qkv_wgrad=_bulk(qw), fc1_dgrad=_bulk(fd), fc1_wgrad=_bulk(fw),
        proj_dgrad=RING, fc2_dgrad=fc2_dgrad, source=source,
    )  # fmt: skip


_LAUNCHER = "NVIDIA/NeMo-Framework-Launcher launcher_scripts/conf/training/tp_overlap/"
_BRIDGE = "NVIDIA-NeMo/Megatron-Bridge src/megatron/bridge/training/comm_overlap.py (0685ff5d5) "

UB_CONFIGS: Final[dict[str, UbConfig]] = {
    "ub_cfg_h100_h12288_tp4_mbs2_seqlen2048": _config(
        (4, 4, 2, 4),
        _pipe(24, fp8_buf=True),
        _ring_rs(),
        _LAUNCHER + "ub_cfg_h100_h12288_tp4_mbs2_seqlen2048.yaml (5d302f86b: GPT-3 175B, FP8; "
        "its header says MBS1, and NeMo's userbuffers_fp8_h100_h12288_tp4_mbs1_seqlen2048, "
        "nemo/collections/llm/recipes/tp_overlap_configs/userbuffers.py at 0594a700a, is the same)",
    ),
    "ub_cfg_h100_h8192_tp4_mbs1_seqlen4096": _config(
        (8, 16, 2, 4),
        _pipe(24),
        _pipe(16),
        _LAUNCHER + "ub_cfg_h100_h8192_tp4_mbs1_seqlen4096.yaml (e5abe838f: 70B, seq 4096)",
        fc2_dgrad=UbGemm("ring", aggregate=True),
    ),
    "ub_cfg_h100_h8192_tp4_mbs1_seqlen8192": _config(
        (4, 24, 2, 4),
        _pipe(24),
        _pipe(16),
        _LAUNCHER + "ub_cfg_h100_h8192_tp4_mbs1_seqlen8192.yaml (a3f310000: 70B, seq 8192; "
        "the default of llama/llama3_70b.yaml at 3dd35614c)",
    ),
    "userbuffers_fp8_h100_h8192_tp4_mbs1_seqlen8192": _config(
        (4, 24, 2, 4),
        _ring_rs(),
        _ring_rs(),
        _BRIDGE + "userbuffers_fp8_h100_h8192_tp4_mbs1_seqlen8192 (Llama 3 70B, H100, FP8)",
    ),
    "userbuffers_bf16_h100_h8192_tp4_mbs1_seqlen8192": _config(
        (4, 24, 2, 4),
        _pipe(24),
        _pipe(16),
        _BRIDGE + "userbuffers_bf16_h100_h8192_tp4_mbs1_seqlen8192 (Llama 3 70B, H100, BF16; "
        "NeMo nemo/collections/llm/recipes/tp_overlap_configs/userbuffers.py has the same)",
    ),
    "userbuffers_fp8_h100_h16384_tp8_cp2_mbs1_seqlen8192": _config(
        (2, 24, 2, 2),
        _ring_rs(),
        _ring_rs(),
        _BRIDGE + "userbuffers_fp8_h100_h16384_tp8_cp2_mbs1_seqlen8192 (Llama 3.1 405B, H100)",
    ),
    "userbuffers_fp8_b200_h16384_tp4_cp2_mbs1_seqlen8192": _config(
        (8, 32, 2, 8),
        _ring_rs(),
        _ring_rs(),
        _BRIDGE + "userbuffers_fp8_b200_h16384_tp4_cp2_mbs1_seqlen8192 (Llama 3.1 405B, B200 "
        "and GB200)",
    ),
    "te_default": UbConfig(
        qkv_fprop=RING,
        proj_fprop=_pipe(16),
        fc1_fprop=RING,
        fc2_fprop=_pipe(16),
        qkv_dgrad=UbGemm("bulk", num_sm=16, set_sm_margin=True),
        qkv_wgrad=UbGemm("bulk", num_sm=16, set_sm_margin=True),
        fc1_dgrad=UbGemm("bulk", num_sm=16, set_sm_margin=True),
        fc1_wgrad=UbGemm("bulk", num_sm=16, set_sm_margin=True),
        proj_dgrad=RING,
        fc2_dgrad=RING,
        source="Transformer Engine transformer_engine/pytorch/module/base.py initialize_ub "
        "get_default_config (no config given, as NeMo-Framework-Launcher's nemotron_340b.yaml "
        "at 3be81fc10 leaves tp_overlap@model.ub_tp_comm_overlap_cfg optional and unset): ring "
        "exchange for the all-gathers, pipeline (16 SMs, 4 splits) for the reduce-scatters, bulk "
        "on 16 SMs, set_sm_margin except for ring exchange",
    ),
    "userbuffers_fp8_b200_h8192_tp2_mbs1_seqlen8192": _config(
        (4, 24, 2, 4),
        _ring_rs(),
        _ring_rs(),
        _BRIDGE + "userbuffers_fp8_b200_h8192_tp2_mbs1_seqlen8192 (Llama 3 70B, B200 and GB200)",
    ),
}
"""Published userbuffers configs by their file or variable name."""

UbConfigName = Literal[
    "",
    "ub_cfg_h100_h12288_tp4_mbs2_seqlen2048",
    "ub_cfg_h100_h8192_tp4_mbs1_seqlen4096",
    "ub_cfg_h100_h8192_tp4_mbs1_seqlen8192",
    "userbuffers_fp8_h100_h8192_tp4_mbs1_seqlen8192",
    "userbuffers_bf16_h100_h8192_tp4_mbs1_seqlen8192",
    "userbuffers_fp8_h100_h16384_tp8_cp2_mbs1_seqlen8192",
    "userbuffers_fp8_b200_h16384_tp4_cp2_mbs1_seqlen8192",
    "te_default",
    "userbuffers_fp8_b200_h8192_tp2_mbs1_seqlen8192",
]
"""A key of ``UB_CONFIGS``, or "" for none: the names the assumption and the published runs
take (tests/test_tp_overlap.py holds the two lists equal)."""
