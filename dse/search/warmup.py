"""The fidelity ladder's kernels compiled in another process while the analytical search runs.

Why: on a fresh install the flow and packet engines take ~12 s of one core to compile
(benchmarks/compile_time.py), and the ladder needs them only after the analytical search; a
process started with the search compiles them on another core into numba's disk cache, where
the ladder (in this process, or in the Ray workers of a local cluster, which share the cache)
loads them. Each level waits for its kernels rather than compile them beside the process (which
compiles the levels in the ladder's order, so the first level can run while the next compiles).
Nothing starts when the cache already holds them, when the study climbs no level, or when the
workers run on a cluster elsewhere (their cache is theirs). Measured in benchmarks/RESULTS.md
("Compile time on a fresh install").
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Sequence

LOCAL_ADDRESSES = ("off", "local")  # where the workers share this machine's numba cache
POLL_S = 0.1  # how often a level waiting for its kernels looks in the cache


class Warmup:
    """The compiling process, if one was needed; `wait()` before the kernels' first use,
    `close()` ends it if it is still running."""

    def __init__(self, levels: Sequence[str], ray_address: str) -> None:
        self._process: subprocess.Popen | None = None
        if not levels or ray_address not in LOCAL_ADDRESSES:
            return
        from simulators.fidelity._warmup import compiled

        if compiled(levels):
            return
        command = [sys.executable, "-m", "simulators.fidelity._warmup", *levels]
        # Its failure is not the search's: the ladder then compiles what it needs itself.
        self._process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def wait(self, level: str) -> None:
        """Return once `level`'s kernels are in the cache (a lower level's are ready before a
        higher one's), or the process has ended."""
        from simulators.fidelity._warmup import compiled

        while self._process is not None and self._process.poll() is None and not compiled([level]):
            time.sleep(POLL_S)

    def close(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
            self._process.wait()
