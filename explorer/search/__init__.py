"""Mesh search: evaluate, rank, explain and compare training layouts.

``core`` runs the branch-and-bound search over ``explorer.mesh``'s candidate tree; ``bounds``
and ``floor`` hold the step-time and memory lower bounds that prune it (``shapes`` the pipeline
arithmetic behind them, ``context`` the estimate's contexts they reuse); ``rows`` turns
estimates and rejections into DataFrame rows; ``explain`` says what limits a ranked layout,
what its neighbours change, and compares two.
"""

from explorer.mesh import SearchSpace
from explorer.search.core import (
    DEFAULT_RANKED,
    Progress,
    SearchProgress,
    SearchResult,
    SearchStopped,
    search,
)
from explorer.search.explain import Explanation, compare, explain, limits, neighbours

__all__ = [
    "DEFAULT_RANKED",
    "Explanation",
    "Progress",
    "SearchProgress",
    "SearchResult",
    "SearchSpace",
    "SearchStopped",
    "compare",
    "explain",
    "limits",
    "neighbours",
    "search",
]
