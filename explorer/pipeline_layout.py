"""Megatron's explicit pipeline layout string (``--pipeline-model-parallel-layout``), parsed.

Grammar (Megatron-Core transformer/pipeline_parallel_layer_layout.py, parse_str_to_list and
validate_layer_layout; docs "Custom Pipeline Model Parallel Layout"): the string lists model
chunks separated by ``|``, in route order (chunk c runs on pipeline rank c mod pp, virtual stage
c div pp); inside a chunk ``E`` is the embedding, ``t`` one transformer block, ``m`` one
multi-token-prediction module, ``L`` the loss (final norm, LM head); ``x*n`` repeats one
character, ``(...)*n`` a group (which may hold ``|``, not another group); commas are cosmetic.
``E`` must come first and ``L`` last, once each; MTP modules after every block. Example:
DeepSeek-V3 on PP 16 x VPP 2 is ``Et*3|(tt|)*29,m|L``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

FIELD = "pipeline_layout"
LETTERS = frozenset("ELtm")


@dataclass(frozen=True, slots=True)
class LayoutChunk:
    """One model chunk of the layout string."""

    blocks: int
    """Transformer blocks (``t``)."""
    mtp: int
    """Multi-token-prediction modules (``m``)."""
    embedding: bool
    loss: bool


def _repeat_count(text: str, at: int) -> tuple[int, int]:
    """The ``*n`` after position ``at`` (1 when there is none) and the position after it."""
    if at >= len(text) or text[at] != "*":
        return 1, at
    end = at + 1
    while end < len(text) and text[end].isdigit():
        end += 1
    if end == at + 1:
        raise ValueError(f"{FIELD}: '*' at position {at} is not followed by a count")
    return int(text[at + 1 : end]), end


def expand(text: str) -> str:
    """The layout string with every repetition written out and the commas dropped."""
    text, out, i = text.replace(",", "").replace(" ", ""), [], 0
    while i < len(text):
        char = text[i]
        if char == "(":
            close = text.find(")", i)
            inner = text[i + 1 : close]
            if close < 0 or "(" in inner:
                raise ValueError(f"{FIELD}: the group at position {i} is not closed once")
            count, i = _repeat_count(text, close + 1)
            out.append(expand(inner) * count)
            continue
        if char not in LETTERS and char != "|":
            raise ValueError(f"{FIELD}: unknown character {char!r}; use E, t, m, L, |, (...)*n")
        count, i = _repeat_count(text, i + 1)
        out.append(char * count)
    return "".join(out)


@lru_cache(maxsize=256)
def parse_pipeline_layout(text: str, pp: int) -> tuple[LayoutChunk, ...]:
    """The chunks of a layout string for ``pp`` pipeline ranks; ValueError naming the field."""
    flat = expand(text)
    stages = flat.split("|")
    if len(stages) % pp:
        raise ValueError(f"{FIELD} has {len(stages)} chunks, not a multiple of pp = {pp}")
    if not flat.startswith("E") or not flat.endswith("L"):
        raise ValueError(f"{FIELD} must start with the embedding E and end with the loss L")
    if flat.count("E") != 1 or flat.count("L") != 1:
        raise ValueError(f"{FIELD} must hold one embedding E and one loss L")
    if "m" in flat and "t" in flat[flat.index("m") :]:
        raise ValueError(f"{FIELD} must place every transformer block t before the MTP modules m")
    return tuple(LayoutChunk(s.count("t"), s.count("m"), "E" in s, "L" in s) for s in stages)


def check_against_model(chunks: tuple[LayoutChunk, ...], layers: int, mtp: int) -> None:
    """ValueError when the chunks do not hold the model's blocks and MTP modules exactly."""
    blocks, modules = sum(c.blocks for c in chunks), sum(c.mtp for c in chunks)
    if blocks != layers:
        raise ValueError(f"{FIELD} places {blocks} transformer blocks; the model has {layers}")
    if modules != mtp:
        raise ValueError(f"{FIELD} places {modules} MTP modules; the model has {mtp}")
    if sum(1 for c in chunks if c.mtp) > 1:
        raise ValueError(f"{FIELD} must place all MTP modules in one chunk")
