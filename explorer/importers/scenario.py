"""What an import yields (``Imported``), and the draft an importer fills while it reads.

The draft holds the layout and workload fields read so far, the settings it used, and the
sentences for what the tool cannot express; ``finish`` checks the degrees against the world size
and builds the frozen specs (``RecipeError``, one sentence naming the field, on a contradiction).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from explorer.importers.settings import RecipeError, Setting, Settings
from explorer.precision import precision_policy
from explorer.specs import Layout, TrainingWorkload
from explorer.units import BYTES_PER_DTYPE

Framework = Literal["megatron", "torchtitan"]

LAYOUT_KEYS = {
    "tp": "tp", "pp": "pp", "dp": "dp", "cp": "cp", "ep": "ep", "etp": "etp", "zero": "zero",
    "mbs": "micro_batch_size", "recompute": "recompute", "schedule": "schedule",
    "virtual": "virtual_stages", "sequence_parallel": "sequence_parallel",
    "stage_layers": "stage_layers", "recompute_modules": "recompute_modules",
    "recompute_ops": "recompute_ops", "recompute_method": "recompute_method",
    "recompute_num_layers": "recompute_num_layers", "recompute_every": "recompute_every",
    "first_stage_layers": "first_stage_layers", "last_stage_layers": "last_stage_layers",
    "pipeline_layout": "pipeline_layout", "activation_offload": "activation_offload",
    "offload_layers": "offload_layers", "optimizer_offload_fraction": "optimizer_offload_fraction",
    "reshard_after_forward": "reshard_after_forward", "dp_shard": "dp_shard",
}  # fmt: skip
"""JSON key (as in search rows) -> ``Layout`` field."""
WORKLOAD_KEYS = ("seq_len", "global_batch_size", "precision", "grad_dtype")


@dataclass(frozen=True, slots=True, kw_only=True)
class Imported:
    """A user's launch settings as the tool's scenario, with what it could not express."""

    framework: Framework
    layout: Layout
    workload: TrainingWorkload
    num_gpus: int | None
    """GPUs the settings run on (launcher flags, ``trainer.num_nodes x devices``, the degrees'
    product, or ``--gpus``); None when nothing says."""
    model: str | None
    """The model preset whose shape the settings name; None when they name none or no match."""
    given: frozenset[str]
    """Keys (``LAYOUT_KEYS`` and ``WORKLOAD_KEYS``) the settings set; the rest are defaults."""
    unsupported: tuple[str, ...]
    """One sentence per setting the tool cannot express (never dropped silently)."""
    notes: tuple[str, ...] = ()
    """How values were read (a preset matched, DP from the world size, ...)."""
    assumptions: tuple[tuple[str, str], ...] = ()
    """Named assumptions the settings imply, as ``--assume`` keys and values (torchtitan runs
    PyTorch's memory behaviour: ``memory.framework=pytorch``)."""


def imported_json(imported: Imported) -> dict[str, Any]:
    """The import as the CLI prints it: the layout under the search rows' keys."""
    lay, work = imported.layout, imported.workload
    layout = {key: getattr(lay, name) for key, name in LAYOUT_KEYS.items()}
    for name in ("stage_layers", "recompute_modules", "activation_offload"):
        value = getattr(lay, name)
        layout[name] = list(value) if value else None if name == "stage_layers" else []
    return {
        "framework": imported.framework,
        "model": imported.model,
        "num_gpus": imported.num_gpus,
        "layout": layout,
        "workload": {key: getattr(work, key) for key in WORKLOAD_KEYS},
        "given": sorted(imported.given),
        "unsupported": list(imported.unsupported),
        "notes": list(imported.notes),
        "assumptions": dict(imported.assumptions),
    }


@dataclass(slots=True)
class Draft:
    """The fields read so far from ``settings``, and the settings used to read them."""

    settings: Settings
    layout: dict[str, Any] = field(default_factory=dict)
    workload: dict[str, Any] = field(default_factory=dict)
    unsupported: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    used: set[str] = field(default_factory=set)
    num_gpus: int | None = None
    model: str | None = None
    assumptions: dict[str, str] = field(default_factory=dict)
    batch_defaults_to_one_step: bool = False
    """No global batch means micro-batch x DP (Megatron-LM's default for a launch line)."""
    replicas: tuple[int, str] | None = None
    """HSDP: copies of the sharded states (Megatron --num-distributed-optimizer-instances,
    torchtitan data_parallel_replicate_degree) and the setting's spelling; each copy is sharded
    over dp / replicas ranks (``dp_shard``), set once DP is known."""

    def get(self, *names: str) -> Setting | None:
        """The first of ``names`` that is set (None, "" and "null" count as not set)."""
        for name in names:
            setting = self.settings.get(name)
            if setting is not None:
                self.used.add(name)
                if setting.value not in (None, "", "null", "None"):
                    return setting
        return None

    def int(self, *names: str) -> int | None:
        setting = self.get(*names)
        return None if setting is None else as_int(setting)

    def flag(self, *names: str) -> bool | None:
        setting = self.get(*names)
        return None if setting is None else as_bool(setting)

    def text(self, *names: str) -> str | None:
        setting = self.get(*names)
        return None if setting is None else str(setting.value).strip().lower()

    def say(self, sentence: str) -> None:
        self.unsupported.append(sentence)

    def finish(self, framework: Framework) -> Imported:
        """The frozen specs; RecipeError (one sentence naming the field) on contradictions."""
        self._fill_dp()
        self._shard_groups()
        if self.layout.get("zero", 0) != 3:
            self.layout.pop("reshard_after_forward", None)  # only ZeRO-3 gathers weights
        self._default_grad_dtype()
        self._default_global_batch()
        try:
            layout = Layout(**self.layout)
            workload = TrainingWorkload(**self.workload)
        except ValueError as error:
            raise RecipeError(f"the imported settings contradict: {error}") from None
        _check_batch(layout, workload, self.workload)
        reverse = {name: key for key, name in LAYOUT_KEYS.items()}
        given = {reverse[name] for name in self.layout} | set(self.workload)
        return Imported(
            framework=framework, layout=layout, workload=workload, num_gpus=self.num_gpus,
            model=self.model, given=frozenset(given), unsupported=tuple(self.unsupported),
            notes=tuple(self.notes), assumptions=tuple(sorted(self.assumptions.items())),
        )  # fmt: skip

    def _shard_groups(self) -> None:
        """``dp_shard`` from the HSDP replicas, now that DP is known."""
        if self.replicas is None:
            return
        instances, spelled = self.replicas
        dp = self.layout.get("dp", 1)
        if dp % instances:
            raise RecipeError(f"{spelled} {instances} does not divide data-parallel size {dp}")
        if instances > 1:
            self.layout["dp_shard"] = dp // instances

    def _default_global_batch(self) -> None:
        open_batch = "global_batch_size" not in self.workload and "dp" in self.layout
        if self.batch_defaults_to_one_step and open_batch:
            mbs = self.layout.get("micro_batch_size", 1)
            self.workload["global_batch_size"] = mbs * self.layout["dp"]
            self.notes.append("No global batch: Megatron-LM's default, micro-batch x DP.")

    def _default_grad_dtype(self) -> None:
        """A gradient dtype equal to the precision's default is left None (one spelling)."""
        grad = self.workload.get("grad_dtype")
        precision = self.workload.get("precision", "bf16-mixed")
        if grad is not None and (
            precision == "fp32" or precision_policy(precision).grad_bytes == BYTES_PER_DTYPE[grad]
        ):
            self.workload["grad_dtype"] = None

    def _fill_dp(self) -> None:
        lay = self.layout
        model_parallel = lay.get("tp", 1) * lay.get("pp", 1) * lay.get("cp", 1)
        if "dp" in lay:
            world = lay["dp"] * model_parallel
            if self.num_gpus is not None and world != self.num_gpus:
                raise RecipeError(
                    f"the degrees give DP x TP x PP x CP = {world} GPUs, but the settings run "
                    f"on {self.num_gpus}"
                )
            self.num_gpus = world
            return
        if self.num_gpus is None:
            self.notes.append(
                "The settings do not say how many GPUs they run on; DP is left at 1 (pass "
                "--gpus N)."
            )
            return
        if self.num_gpus % model_parallel:
            raise RecipeError(
                f"TP x PP x CP = {model_parallel} does not divide the {self.num_gpus} GPUs the "
                f"settings run on"
            )
        lay["dp"] = self.num_gpus // model_parallel
        self.notes.append(f"DP {lay['dp']} = {self.num_gpus} GPUs / (TP x PP x CP).")


def _check_batch(layout: Layout, workload: TrainingWorkload, given: dict[str, Any]) -> None:
    """Megatron and torchtitan both refuse a global batch that is not a whole number of
    micro-batches on every data-parallel rank."""
    if "global_batch_size" not in given:
        return
    per_step = layout.micro_batch_size * layout.dp
    if workload.global_batch_size % per_step:
        raise RecipeError(
            f"global_batch_size {workload.global_batch_size} is not a multiple of micro-batch "
            f"{layout.micro_batch_size} x DP {layout.dp}"
        )


def as_int(setting: Setting) -> int:
    """The setting's value as an integer (RecipeError naming it otherwise)."""
    value = setting.value
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise RecipeError(f"{setting.spelled} must be an integer, got {value!r}")
    try:
        return int(value)
    except ValueError:
        hint = " (expand shell variables first)" if "$" in str(value) else ""
        raise RecipeError(f"{setting.spelled} must be an integer, got {value!r}{hint}") from None


def as_bool(setting: Setting) -> bool:
    """The setting's value as a boolean: a bare flag, YAML true/false, or 1/0 text."""
    value = setting.value
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes", "on"):
        return True
    if text in ("false", "0", "no", "off"):
        return False
    raise RecipeError(f"{setting.spelled} must be true or false, got {value!r}")
