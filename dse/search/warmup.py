"""The fidelity ladder's kernels compiled in other processes while the analytical search runs.

Why: on a fresh install the flow and packet engines take ~12 s of one core to compile
(benchmarks/compile_time.py), and the ladder needs them only after the analytical search; a
process per level started with the search compiles that level's kernels into numba's disk
cache, where the ladder (in this process, or in the Ray workers of a local cluster, which share
the cache) loads them. Each level waits for its kernels rather than compile them beside its
process. One process a level, not one for all in turn: once the analytical search is done this
process mostly waits, and the packet engine (the longest to compile) then gets a core of its own
instead of following the flow engine's. Nothing starts for a level whose kernels the cache
already holds, when the study climbs no level, or when the workers run on a cluster elsewhere
(their cache is theirs). Measured in benchmarks/RESULTS.md ("Compile time on a fresh install").
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Sequence

LOCAL_ADDRESSES = ("off", "local")  # where the workers share this machine's numba cache
POLL_S = 0.1  # how often a level waiting for its kernels looks in the cache


class Warmup:
    """The compiling processes, one per level whose kernels the cache lacks; `wait()` before a
    level's kernels' first use, `close()` ends those still running."""

    def __init__(self, levels: Sequence[str], ray_address: str) -> None:
        self._processes: dict[str, subprocess.Popen] = {}
        if not levels or ray_address not in LOCAL_ADDRESSES:
            return
        from simulators.fidelity._warmup import compiled

        for level in levels:
            if not compiled([level]):
                command = [sys.executable, "-m", "simulators.fidelity._warmup", level]
                # Its failure is not the search's: the ladder then compiles what it needs itself.
                self._processes[level] = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def wait(self, level: str) -> None:
        """Return once `level`'s kernels are in the cache, or its process has ended."""
        from simulators.fidelity._warmup import compiled

        process = self._processes.get(level)
        while process is not None and process.poll() is None and not compiled([level]):
            time.sleep(POLL_S)

    def close(self) -> None:
        for process in self._processes.values():
            if process.poll() is None:
                process.kill()
                process.wait()
