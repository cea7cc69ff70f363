"""The app server's long-lived objects kept out of Python's full garbage collections.

Why: after its first run the server holds about 1.9 million objects that live as long as the
process (the imported modules of pandas, plotly, pyarrow and streamlit, the presets, the core's
caches). Python's cyclic collector walks all of them in every full (generation 2) collection:
under AppTest on the Meshes page, one slider run in about 30 took 66-99 ms longer than the
others (32 ms median), and each time a generation-2 collection of 72-95 ms ran inside it
(``gc.callbacks`` timing, 2026-12-03). A slider move that lands on one is the slow one a
person notices, and the p95 of ``python -m explorer.ui.bench_browser``. With the objects alive
after the first run frozen (``gc.freeze``: moved to a permanent generation the collector does
not walk; reference counting still frees them), the same collections took 6-10 ms. In the
served app (``streamlit run app.py`` driven by ``python -m explorer.ui.bench_browser --pages
meshes --moves 30 --repeats 3``, the collector timed by a ``gc.callbacks`` hook): after start-up
one full collection in the timed moves, 66.7 ms; with the freeze, 5.4 ms. They are rare there
(about one in a hundred moves), so the bench's medians do not move; the move that meets one
does.

What it costs: one full collection at the end of the process's first run (so no cyclic garbage
is frozen with the live objects). Objects frozen here are never collected as cycles: a cycle
that becomes garbage later among them stays until the process ends. They are the first run's,
so that is bounded by one run's state; everything made later is collected as before.
Source: Python documentation, ``gc.freeze`` ("... to avoid copy-on-write on fork and make
collections faster"); Instagram's "Dismissing Python Garbage Collection at Instagram" (2017)
for the technique on a long-running server.
"""

from __future__ import annotations

import gc
import threading

_lock = threading.Lock()
_frozen = False


def freeze_long_lived() -> bool:
    """After the process's first script run: collect once, then freeze every object still
    alive. True when this call froze them, False on every later call (cheap: a flag)."""
    global _frozen
    if _frozen:
        return False
    with _lock:  # script runs of several sessions may finish at once
        if _frozen:
            return False
        gc.collect()
        gc.freeze()
        _frozen = True
        return True
