"""Import what users already have: Megatron-LM / Megatron-Bridge / NeMo launch settings and
torchtitan job configs, read into the tool's layout and workload (``Imported``).

What the tool cannot express is named in one sentence each (``Imported.unsupported``), never
dropped silently; bad input raises ``RecipeError`` (a ``ValueError``) with one sentence naming
the field.
"""

from explorer.importers.megatron import read_megatron
from explorer.importers.scenario import Imported, imported_json
from explorer.importers.settings import RecipeError
from explorer.importers.torchtitan import read_torchtitan

__all__ = ["Imported", "RecipeError", "imported_json", "read_megatron", "read_torchtitan"]
