"""The mesh's axis algebra, in one place: group sizes of the dense and the expert layers.

One owner for what ``Layout``, the topology's groups, the memory states, the mesh rules and the
search's floors each used to recompute: dense layers use the axes dp, tp, pp, cp (world =
dp x tp x pp x cp); the expert layers re-cut the same dp x cp x tp ranks of each pipeline stage
into etp x ep x edp, so expert data parallel is edp = dp x cp x tp / (ep x etp); dense weights
reduce and shard (ZeRO) over dp x cp, routed experts over edp. Source: torchtitan
``ParallelDims`` (the one object that derives every mesh dimension); Megatron-Core
``parallel_state.initialize_model_parallel`` (expert_data_parallel_size, folded expert mesh).
"""

from __future__ import annotations

from typing import NamedTuple, Protocol


class _Degrees(Protocol):
    @property
    def dp(self) -> int: ...
    @property
    def tp(self) -> int: ...
    @property
    def pp(self) -> int: ...
    @property
    def cp(self) -> int: ...
    @property
    def ep(self) -> int | None: ...
    @property
    def etp(self) -> int | None: ...


class MeshDims(NamedTuple):
    """The degrees of one mesh; every group size derives from these six."""

    dp: int = 1
    tp: int = 1
    pp: int = 1
    cp: int = 1
    ep: int = 1
    etp: int = 1

    @classmethod
    def of(cls, layout: _Degrees) -> MeshDims:
        """The degrees of a ``Layout`` or a ``Candidate`` (an open ep or etp counts as 1)."""
        return cls(layout.dp, layout.tp, layout.pp, layout.cp, layout.ep or 1, layout.etp or 1)

    @property
    def world(self) -> int:
        """GPUs of the mesh: dp x tp x pp x cp (experts fold into the same ranks)."""
        return self.dp * self.tp * self.pp * self.cp

    @property
    def dp_cp(self) -> int:
        """Ranks holding the same dense weights: gradient reduction and ZeRO over dp x cp."""
        return self.dp * self.cp

    @property
    def folded(self) -> int:
        """Ranks of one pipeline stage that the expert layers re-cut: dp x cp x tp."""
        return self.dp * self.cp * self.tp

    @property
    def expert_group(self) -> int:
        """Ranks one expert-parallel cut spans: ep x etp."""
        return self.ep * self.etp

    @property
    def experts_fold(self) -> bool:
        """Whether ep x etp divides dp x cp x tp (Megatron-Core's folding requires it)."""
        return self.folded % self.expert_group == 0

    @property
    def edp(self) -> int:
        """Expert data parallel: ranks holding the same routed experts, dp x cp x tp / (ep x
        etp). ValueError (one sentence) when ep x etp does not divide dp x cp x tp."""
        folded, group = self.dp * self.cp * self.tp, self.ep * self.etp
        if folded % group:
            raise ValueError(
                f"EP x ETP = {self.expert_group} must divide DP x CP x TP = {self.folded} "
                "(Megatron-Core folds the experts into those ranks)"
            )
        return folded // group

    def dense_sizes(self) -> dict[str, int]:
        """Degree of each mesh axis in the dense layers (ep folded: size 1)."""
        return {"tp": self.tp, "cp": self.cp, "ep": 1, "dp": self.dp, "pp": self.pp}

    def expert_sizes(self) -> dict[str, int]:
        """Degree of each axis in the expert layers: etp x ep x edp = tp x cp x dp per stage."""
        return {"etp": self.etp, "ep": self.ep, "edp": self.edp, "pp": self.pp}

    def microbatches(self, global_batch_size: int, micro_batch_size: int) -> int:
        """Micro-batches per step on each pipeline: global batch / (dp x micro-batch), floored."""
        return global_batch_size // (self.dp * micro_batch_size)
