"""The default executor (`--ray-address local`): this process first, a private Ray when the work
is worth its start; and `make_executor`, which picks the executor an address names."""

from __future__ import annotations

import os
import threading
import time

from dse.search.executor import Executor, InProcessExecutor, RayExecutor, Usage

RAY_START_S = 7.0  # starting a private local Ray, measured on a 2-core box (benchmarks/RESULTS.md, issue 20)


class LocalExecutor:
    """`--ray-address local`: evaluates in this process until the work ahead would take longer
    here than a private Ray's start saves, then starts one (RayExecutor) for the rest of the run.

    A private Ray costs about RAY_START_S to start and then spreads work over every CPU: for T
    CPU-seconds of work on c CPUs it wins when T > RAY_START_S * c / (c - 1). The work ahead is
    the candidates of the call in hand plus those the caller `expect`s, at the mean time per
    candidate an evaluator has shown here after its first chunk (which also loads, or compiles,
    the kernels; a mean, as candidates differ: an invalid plan costs nothing). A small study (the
    README's main job) never pays the start; a large one pays it once, early. An evaluator that
    `releases_gil` (a fidelity level, its time in compiled engines) already runs on every CPU
    here, on threads, and shares its collective runs across candidates in this process: a
    private Ray would only add its start and lose that sharing, so such work never starts one.
    (So a switch happens only between chunks run in order, and Ray gets the slice after them.)"""

    def __init__(self) -> None:
        self.usage = Usage(cpus=os.cpu_count() or 1)  # the CPUs the run may use: batch sizes follow them
        self._here = InProcessExecutor(self.usage, threads=self.usage.cpus)
        self._ray: RayExecutor | None = None
        self._timed: dict[int, list] = {}  # evaluator -> [chunks, seconds and candidates after the first]
        self._ahead: dict[int, int] = {}
        self._evaluated_here = 0
        self._start_lock = threading.Lock()
        self.usage.where = "evaluated in this process (the work never outweighed starting a private Ray)"

    def expect(self, evaluator, count: int) -> None:
        self._ahead[id(evaluator)] = count

    def run(self, evaluator, items):
        done = 0
        if self._ray is None:
            chunks = self._here.run(evaluator, items)
            started = time.perf_counter()
            for group in chunks:
                timed = self._timed.setdefault(id(evaluator), [0, 0.0, 0])
                if timed[0]:
                    timed[1] += time.perf_counter() - started
                    timed[2] += len(group)
                timed[0] += 1
                done += len(group)
                self._evaluated_here += len(group)
                yield group
                if done < len(items) and self._start_ray_if_worth(evaluator, len(items) - done):
                    chunks.close()
                    break
                started = time.perf_counter()
        if done < len(items):
            for group in self._ray.run(evaluator, items[done:]):
                yield [(position + done, outcome) for position, outcome in group]

    def _start_ray_if_worth(self, evaluator, left: int) -> bool:
        cpus, (chunks, seconds, candidates) = self.usage.cpus, self._timed[id(evaluator)]
        if cpus < 2 or chunks < 2 or getattr(evaluator, "releases_gil", False):
            return False
        work_s = seconds / max(1, candidates) * (left + self._ahead.get(id(evaluator), 0))
        if work_s <= RAY_START_S * cpus / (cpus - 1):
            return False
        with self._start_lock:  # a batch's studies share this executor
            if self._ray is None:
                began = time.perf_counter()
                self._ray = RayExecutor("local", self.usage)
                self.usage.where = (
                    f"a private Ray started after {self._evaluated_here} candidates here, in "
                    f"{time.perf_counter() - began:.1f} s ({work_s:.0f} CPU-s of work ahead)"
                )
        return True

    def close(self) -> None:
        if self._ray is not None:
            self._ray.close()


def make_executor(ray_address: str) -> Executor:
    """`off`: this process; `local`: this process, and a private Ray once the work is worth it
    (LocalExecutor); anything else: the Ray cluster it names."""
    if ray_address == "off":
        return InProcessExecutor()
    if ray_address == "local":
        return LocalExecutor()
    return RayExecutor(ray_address)
