"""Where candidates are evaluated: Ray tasks (local or a cluster), or in-process.

Ray is imported only here and only when used (STYLE 10). The executor, not the engine, sizes
the work into tasks: each task should run long enough (`TASK_TARGET_S`) that Ray's ~2 ms per
task (../shared/TOOLCHAIN.md) stays a few per cent, yet there should be enough tasks to keep
every CPU of the cluster busy, and none so long (`TASK_LIMIT_S`) that the studies of a batch
wait behind one another's tasks; it learns each study's seconds per candidate from the tasks
it has run. At most `WINDOW_PER_CPU` tasks per CPU are in flight at once, so the object store
holds a bounded number of arguments and results; each study's evaluator is put there once.
The store's use is sampled as results come (`STORE_SAMPLE_S`) and its peak reported.

A task whose worker dies (a node lost, a simulator crashing its process) is re-run by Ray up to
`MAX_RETRIES` times; a chunk that still fails is split into single candidates, so the one that
crashes its simulator is found and recorded as failed with the error after `SINGLE_RETRIES`
more attempts, and its neighbours are evaluated normally: never retried forever.
"""

from __future__ import annotations

import contextlib
import math
import os
import socket
import threading
import time
from collections import deque
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from dse.errors import DseError
from dse.evaluation.evaluate import Evaluator
from dse.evaluation.outcome import Outcome
from dse.search.collecting import collect_less

WORKER_ENV = {"NUMBA_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}  # one thread per Ray CPU slot
TASK_TARGET_S = 0.05
TASK_LIMIT_S = 0.5  # longer tasks would hold a CPU that another study's short tasks are queued for
WINDOW_PER_CPU = 2
MAX_RETRIES = 3
SINGLE_RETRIES = 1
STORE_SAMPLE_S = 0.2  # how often the object store's use is read from Ray's resource view

Evaluated = list[tuple[int, Outcome]]  # (position in the items run, its outcome)


@dataclass
class Usage:
    """What the workers did: the busy CPU-seconds of evaluation against the CPUs available
    over the time evaluations were in flight (the utilisation a run reports at the end)."""

    cpus: int
    busy_s: float = 0.0
    span_s: float = 0.0
    tasks: int = 0
    candidates: int = 0
    crashes: int = 0
    store_capacity_bytes: int = 0  # the Ray object store's size (0: no Ray)
    store_peak_bytes: int = 0  # the most of it in use when sampled
    where: str = ""  # for `--ray-address local`: in this process, or when and why a private Ray started
    tasks_by_node: dict[str, int] = field(default_factory=dict)  # Ray node id -> tasks it ran (empty: no Ray)

    @property
    def utilisation(self) -> float:
        return self.busy_s / (self.span_s * self.cpus) if self.span_s > 0 else 0.0

    def describe(self, wall_s: float) -> str:
        """One line for the end of a run; `wall_s` is the whole run, sampling and telling included."""
        per_task = self.candidates / self.tasks if self.tasks else 0.0
        overall = self.busy_s / (wall_s * self.cpus) if wall_s > 0 else 0.0
        crashed = f"; {self.crashes} tasks lost their worker" if self.crashes else ""
        nodes = f" on {len(self.tasks_by_node)} nodes" if len(self.tasks_by_node) > 1 else ""
        store = (
            f"; object store peak {self.store_peak_bytes / 2**20:.1f} of {self.store_capacity_bytes / 2**20:.0f} MiB"
            if self.store_capacity_bytes
            else ""
        )
        return (
            f"workers: {self.busy_s:.1f} CPU-s of evaluation on {self.cpus} CPUs: busy {self.utilisation:.0%} "
            f"while evaluations were in flight ({self.span_s:.1f} s), {overall:.0%} of the whole run ({wall_s:.1f} s); "
            f"{self.tasks} tasks of {per_task:.1f} candidates{nodes}{store}{crashed}"
            + (f"\n{self.where}" if self.where else "")
        )


class Executor(Protocol):
    """Evaluates candidates of a study; yields groups of (position, outcome) as tasks finish.
    An evaluator is anything with `simulate_many(chunk) -> list[Outcome]` (an Evaluator, or a
    fidelity level's dse.evaluation.fidelity.LevelEvaluator). Closing the iterator early cancels
    the tasks still in flight.

    Outcomes are before the study's own constraints (`Evaluator.simulate_many`)."""

    usage: Usage  # its cpus: what the executor evaluates on at once

    def run(self, evaluator: Evaluator, items: Sequence[dict[str, Any]]) -> Iterator[Evaluated]: ...

    def expect(self, evaluator: Evaluator, count: int) -> None: ...

    def close(self) -> None: ...


class _Sizer:
    """Chunk sizes from the measured seconds per candidate of each evaluator; thread-safe, as
    a batch's studies share one executor."""

    def __init__(self) -> None:
        self._seconds: dict[int, float] = {}
        self._lock = threading.Lock()

    def size(self, evaluator: Evaluator, count: int, workers: int) -> int:
        """Two chunks per CPU for balance, but none shorter than TASK_TARGET_S while that
        still leaves a chunk for every CPU, and none longer than TASK_LIMIT_S; an evaluator that
        names its `task_size` (a fidelity level's: one candidate) gets that."""
        fixed = getattr(evaluator, "task_size", None)
        if fixed:
            return fixed
        balanced = math.ceil(count / (2 * workers))
        seconds = self._seconds.get(id(evaluator))
        if seconds is None:
            return max(1, balanced)
        size = max(balanced, min(math.ceil(TASK_TARGET_S / seconds), math.ceil(count / workers)))
        return max(1, min(size, math.floor(TASK_LIMIT_S / seconds)))

    def learn(self, evaluator: Evaluator, candidates: int, busy_s: float) -> None:
        with self._lock:
            per = busy_s / max(1, candidates)
            old = self._seconds.get(id(evaluator))
            self._seconds[id(evaluator)] = per if old is None else 0.7 * old + 0.3 * per


class InProcessExecutor:
    """Evaluates in the calling process (`--ray-address off`: one thread; LocalExecutor: an
    evaluator that `releases_gil`, a fidelity level whose time is in compiled engines, runs its
    chunks on `threads` threads at once)."""

    def __init__(self, usage: Usage | None = None, threads: int = 1) -> None:
        self.usage = usage or Usage(cpus=1)
        self._threads = threads
        self._sizer = _Sizer()
        self._lock = threading.Lock()
        self._since: float | None = None  # when the current stretch with evaluations in flight began
        self._runs = 0
        self._one_at_a_time = threading.Lock()

    def _begin(self) -> None:
        with self._lock:
            if self._runs == 0:
                self._since = time.perf_counter()
            self._runs += 1

    def _end(self) -> None:
        with self._lock:
            self._runs -= 1
            if self._runs == 0:
                self.usage.span_s += time.perf_counter() - self._since

    def run(self, evaluator, items):
        if self._threads > 1 and getattr(evaluator, "releases_gil", False):
            yield from self._run_threads(evaluator, items)
        else:
            yield from self.run_serially(evaluator, items)

    def run_serially(self, evaluator, items):
        """Chunk after chunk on this thread."""
        size = self._sizer.size(evaluator, len(items), 1)
        for start in range(0, len(items), size):
            with self._one_at_a_time:  # one CPU: a batch's study threads take turns
                self._begin()
                outcomes, busy_s = _evaluate_chunk(evaluator, list(items[start : start + size]))
                self._end()
            self._account(evaluator, len(outcomes), busy_s)
            yield list(enumerate(outcomes, start=start))

    def _run_threads(self, evaluator, items):
        """The chunks on the threads, yielded as each finishes; closing early cancels those not
        begun (those running finish first). Every chunk starts at once, the first one too: the
        engines' kernels load safely from two threads (numba compiles under its own lock, and the
        packet engine's one explicit signature under simulators.packet._engine's)."""
        size = self._sizer.size(evaluator, len(items), self._threads)
        with ThreadPoolExecutor(self._threads, thread_name_prefix="dse-eval") as pool:
            futures = {
                pool.submit(_evaluate_chunk, evaluator, list(items[s : s + size])): s
                for s in range(0, len(items), size)
            }
            self._begin()
            try:
                for future in as_completed(futures):
                    outcomes, busy_s = future.result()
                    self._account(evaluator, len(outcomes), busy_s)
                    yield list(enumerate(outcomes, start=futures[future]))
            finally:
                self._end()
                for future in futures:
                    future.cancel()

    def expect(self, evaluator, count: int) -> None:
        """How many more candidates of `evaluator` the caller expects to ask for after the next
        run (a hint: only LocalExecutor uses it)."""

    def _account(self, evaluator, candidates: int, busy_s: float, node: str | None = None) -> None:
        self._sizer.learn(evaluator, candidates, busy_s)
        with self._lock:
            self.usage.busy_s += busy_s
            self.usage.tasks += 1
            self.usage.candidates += candidates
            if node is not None:
                self.usage.tasks_by_node[node] = self.usage.tasks_by_node.get(node, 0) + 1

    def close(self) -> None:
        pass


class RayExecutor(InProcessExecutor):
    """Evaluates chunks as Ray tasks on a local Ray started here or on an existing cluster.

    `address` is "local" (start a private Ray for this run; LocalExecutor decides when), "auto" (join the cluster that
    RAY_ADDRESS names) or a cluster address such as "10.0.0.1:6379" or "ray://head:10001".
    """

    def __init__(self, address: str = "local", usage: Usage | None = None) -> None:
        import ray

        self._ray = ray
        self._started_here = connect_ray(address)
        super().__init__(usage)
        resources = ray.cluster_resources()
        self.usage.cpus = max(1, int(resources.get("CPU", 1)))
        self.usage.store_capacity_bytes = int(resources.get("object_store_memory", 0))
        self._store_sampled_at = 0.0
        self._refs: dict[int, tuple[Evaluator, Any]] = {}
        self._task = ray.remote(max_retries=MAX_RETRIES)(_evaluate_chunk_on_node)
        self._lost = (ray.exceptions.WorkerCrashedError, ray.exceptions.RayTaskError, ray.exceptions.NodeDiedError)
        self._lost += (ray.exceptions.OutOfMemoryError,)

    def run(self, evaluator, items):
        ray = self._ray
        if id(evaluator) not in self._refs:  # the evaluator is shipped once per study
            self._refs[id(evaluator)] = (evaluator, ray.put(evaluator))
        ref = self._refs[id(evaluator)][1]
        size = self._sizer.size(evaluator, len(items), self.usage.cpus)
        queue = deque((list(range(i, min(i + size, len(items)))), MAX_RETRIES) for i in range(0, len(items), size))
        pending: dict[Any, list[int]] = {}
        window = WINDOW_PER_CPU * self.usage.cpus
        self._begin()
        try:
            while queue or pending:
                while queue and len(pending) < window:
                    positions, retries = queue.popleft()
                    task = self._task.options(max_retries=retries).remote(ref, [items[i] for i in positions])
                    pending[task] = positions
                done, _ = ray.wait(list(pending), num_returns=1)
                self._sample_store()
                positions = pending.pop(done[0])
                try:
                    outcomes, busy_s, node = ray.get(done[0])
                except self._lost as exc:
                    self.usage.crashes += 1
                    if len(positions) > 1:  # find the candidate that brings its worker down
                        queue.extend(([i], SINGLE_RETRIES) for i in positions)
                    else:
                        yield [(positions[0], Outcome(error=_crash_message(exc)))]
                    continue
                self._account(evaluator, len(outcomes), busy_s, node)
                yield list(zip(positions, outcomes))
        finally:
            self._end()
            for task in pending:
                ray.cancel(task, force=True)

    def _sample_store(self) -> None:
        """Note the object store's use (Ray counts it as a resource) at most every STORE_SAMPLE_S."""
        now = time.perf_counter()
        if now - self._store_sampled_at < STORE_SAMPLE_S:
            return
        self._store_sampled_at = now
        # Ray sums the nodes' last resource reports: a node whose report is late is missing from
        # the available view (its `node:<address>` resource with it), which would count its whole
        # store as used. Such a read is skipped. Use is the capacity of the same read less what
        # is free: a node lost since the start takes its store out of both (against the capacity
        # at the start, its whole store would count as used).
        available, total = self._ray.available_resources(), self._ray.cluster_resources()
        if _node_count(available) < _node_count(total):
            return
        capacity = total.get("object_store_memory", self.usage.store_capacity_bytes)
        free = available.get("object_store_memory", capacity)
        with self._lock:
            used = int(capacity - free)
            self.usage.store_peak_bytes = max(self.usage.store_peak_bytes, used)

    def close(self) -> None:
        disconnect_ray(self._started_here)


def _node_count(resources: dict[str, float]) -> float:
    """Nodes in a Ray resource view: each holds one unit of its `node:<address>` resource."""
    return sum(v for k, v in resources.items() if k.startswith("node:") and k != "node:__internal_head__")


@contextlib.contextmanager
def ray_session(address: str) -> Iterator[None]:
    """Connected to Ray (`connect_ray`) for the body; what was started or joined here is
    stopped or left afterwards, so no private cluster outlives its command."""
    started = connect_ray(address)
    try:
        yield
    finally:
        disconnect_ray(started)


def disconnect_ray(started: Path | bool) -> None:
    """Undo `connect_ray`: stop the private cluster it started, or leave the cluster it joined."""
    if isinstance(started, Path):
        from dse.search.ray_cluster import stop_private

        stop_private(started)
    elif started:
        import ray

        ray.shutdown()


def connect_ray(address: str) -> Path | bool:
    """Start a private local Ray (`address` "local": loopback only, token authentication; see
    dse.search.ray_cluster) or join a cluster ("auto": the one RAY_ADDRESS names, or its address)
    unless this process is connected already. Returns the private cluster's run directory,
    True for a cluster joined here, False if connected before. A cluster's workers get this
    driver's code and one thread each (`_cluster_env`); failing to join is one line."""
    import ray

    from dse.search.ray_cluster import named_address, start_private

    if ray.is_initialized():
        return False
    if address == "local":
        return start_private(
            num_cpus=os.cpu_count() or 1,
            object_store_memory=256 * 1024**2,
            log_to_driver=False,
            configure_logging=False,
            runtime_env={"env_vars": WORKER_ENV},
        )
    address = named_address(address)
    _check_reachable(address)
    try:
        ray.init(address=address, log_to_driver=False, runtime_env=_cluster_env())
    except Exception as exc:  # Ray raises ConnectionError, ValueError, RuntimeError...
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DseError(
            f"--ray-address: cannot join a Ray cluster at {address!r} ({first_line}); "
            f"allowed: local, off, auto, or the address of a running cluster"
        ) from None
    return True


def _cluster_env() -> dict[str, Any]:
    """What a joined cluster's workers get: one thread each, and this driver's own dse and
    simulators packages (Ray ships them), so nodes need only the dependencies installed and
    never evaluate with another version of the simulators."""
    import dse
    import simulators

    packages = [os.path.dirname(module.__file__) for module in (dse, simulators)]
    return {"env_vars": WORKER_ENV, "py_modules": packages}


def _check_reachable(address: str) -> None:
    """Fail in seconds, not after Ray's minute-long retries, when a host:port does not answer."""
    host, sep, port = address.rpartition(":")
    if address in ("auto",) or "://" in address or not sep or not port.isdigit():
        return
    try:
        socket.create_connection((host, int(port)), timeout=3).close()
    except OSError as exc:
        raise DseError(
            f"--ray-address: nothing answers at {address!r} ({exc.strerror or exc}); "
            f"allowed: local, off, auto, or the address of a running cluster"
        ) from None


def _evaluate_chunk(evaluator: Evaluator, chunk: list[dict[str, Any]]) -> tuple[list[Outcome], float]:
    """A task: the chunk's outcomes and the seconds they took (for sizing and utilisation)."""
    collect_less()
    start = time.perf_counter()
    outcomes = evaluator.simulate_many(chunk)
    return outcomes, time.perf_counter() - start


def _evaluate_chunk_on_node(evaluator: Evaluator, chunk: list[dict[str, Any]]) -> tuple[list[Outcome], float, str]:
    """A Ray task: `_evaluate_chunk`'s answer and the id of the node that ran it, so a run on a
    cluster shows whether its work spread over the nodes (Usage.tasks_by_node)."""
    import ray

    return (*_evaluate_chunk(evaluator, chunk), ray.get_runtime_context().get_node_id())


def _crash_message(exc: Exception) -> str:
    first = next((line for line in str(exc).splitlines() if line.strip()), type(exc).__name__)
    return f"the evaluation killed its worker, also when retried alone: {type(exc).__name__}: {first}"
