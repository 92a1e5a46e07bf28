"""How often an evaluating process collects garbage.

The training model's memo tables hold millions of long-lived objects, and a cold evaluation
allocates fast: with CPython's default thresholds (700, 10, 10) it spent about a fifth of its
time collecting (benchmarks/RESULTS.md, training-model speed). A process that evaluates collects
less often; cyclic garbage waits longer, for at most that many allocations. Apart from the
executor so the command line can set it before its own imports (a tenth of a second of young
collections while `dse search` imports), without importing the executor to do so.
"""

from __future__ import annotations

import gc

GC_THRESHOLDS = (100_000, 50, 100)


def collect_less() -> None:
    """Set GC_THRESHOLDS in this process (evaluating ones: the driver, every Ray worker)."""
    if gc.get_threshold() != GC_THRESHOLDS:
        gc.set_threshold(*GC_THRESHOLDS)
