"""The whole user input as one frozen value, to and from URL query parameters and JSON.

A scenario holds what a person entered, even when it does not make a valid layout (a layout
whose degrees do not multiply to the cluster, a cluster with no GPUs): the app shows the error
and keeps the input. ``Scenario.layout_spec()``, ``.training_spec()`` and ``.serving_spec()``
and ``resolve_model`` / ``resolve_cluster`` turn it into specs and raise ``ValueError`` with one
sentence when they cannot.

``inputs`` holds the value and its groups, ``codec`` the URL and JSON forms, ``resolve`` the
model and cluster a scenario names (presets, a generic size, an uploaded config.json).
"""

from explorer.scenario.codec import (
    QUERY_KEYS,
    from_dict,
    from_json,
    from_query,
    to_dict,
    to_json,
    to_query,
)
from explorer.scenario.inputs import (
    DEEPSEEK_V3,
    EXAMPLES,
    AssumptionValue,
    ClusterInputs,
    LayoutInputs,
    MixedInputs,
    ModelRef,
    ModelSource,
    Overrides,
    Scenario,
    SearchInputs,
    ServingInputs,
    StragglerInputs,
    TrainingInputs,
    WorkloadKind,
    fitted_dp,
    world_size_error,
)
from explorer.scenario.resolve import (
    compact_config,
    model_ref_from_upload,
    resolve_cluster,
    resolve_mixed,
    resolve_model,
    resolve_straggler,
)

__all__ = [
    "DEEPSEEK_V3",
    "EXAMPLES",
    "QUERY_KEYS",
    "AssumptionValue",
    "ClusterInputs",
    "LayoutInputs",
    "MixedInputs",
    "ModelRef",
    "ModelSource",
    "Overrides",
    "Scenario",
    "SearchInputs",
    "ServingInputs",
    "StragglerInputs",
    "TrainingInputs",
    "WorkloadKind",
    "compact_config",
    "fitted_dp",
    "from_dict",
    "from_json",
    "from_query",
    "model_ref_from_upload",
    "resolve_cluster",
    "resolve_mixed",
    "resolve_model",
    "resolve_straggler",
    "to_dict",
    "to_json",
    "to_query",
    "world_size_error",
]
