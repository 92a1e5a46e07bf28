"""Where candidate batches are evaluated: Ray tasks (local or a cluster), or in-process.

Ray is imported only here and only when used (STYLE 10). Each chunk of params is one Ray task,
so the per-task overhead (~2 ms, ../shared/TOOLCHAIN.md) is paid per chunk, not per trial.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator, Sequence
from typing import Any, Protocol

from dse.errors import DseError
from dse.evaluate import Evaluator, Outcome

WORKER_ENV = {"NUMBA_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}


class Executor(Protocol):
    """Evaluates chunks of params; yields (chunk index, outcomes) as chunks finish."""

    workers: int

    def run(self, chunks: Sequence[Sequence[dict[str, Any]]]) -> Iterator[tuple[int, list[Outcome]]]: ...

    def close(self) -> None: ...


class InProcessExecutor:
    """Evaluates in the calling process (`--ray-address off`): for debugging and quick tests."""

    workers = 1

    def __init__(self, evaluator: Evaluator) -> None:
        self._evaluator = evaluator

    def run(self, chunks):
        for i, chunk in enumerate(chunks):
            yield i, self._evaluator.evaluate_many(chunk)

    def close(self) -> None:
        pass


class RayExecutor:
    """Evaluates chunks as Ray tasks on a local Ray started here or on an existing cluster.

    `address` is "local" (start a private Ray for this run), "auto" (join the cluster this
    machine belongs to) or a cluster address such as "10.0.0.1:6379" or "ray://head:10001".
    """

    def __init__(self, evaluator: Evaluator, address: str = "local") -> None:
        import ray

        self._ray = ray
        self._started_here = False
        if not ray.is_initialized():
            if address == "local":
                os.environ.setdefault("RAY_AUTH_MODE", "disabled")  # loopback-only private cluster
                ray.init(
                    num_cpus=os.cpu_count() or 1,
                    include_dashboard=False,
                    object_store_memory=256 * 1024**2,
                    log_to_driver=False,
                    configure_logging=False,
                    runtime_env={"env_vars": WORKER_ENV},
                )
            else:
                _check_reachable(address)
                try:
                    ray.init(address=address, log_to_driver=False, runtime_env={"env_vars": WORKER_ENV})
                except Exception as exc:  # Ray raises ConnectionError, ValueError, RuntimeError...
                    first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                    raise DseError(
                        f"--ray-address: cannot join a Ray cluster at {address!r} ({first_line}); "
                        f"allowed: local, off, auto, or the address of a running cluster"
                    ) from None
            self._started_here = True
        self.workers = max(1, int(ray.cluster_resources().get("CPU", 1)))
        self._evaluator_ref = ray.put(evaluator)
        self._task = ray.remote(_evaluate_chunk)

    def run(self, chunks):
        ray = self._ray
        pending = {self._task.remote(self._evaluator_ref, list(chunk)): i for i, chunk in enumerate(chunks)}
        try:
            while pending:
                done, _ = ray.wait(list(pending), num_returns=1)
                for ref in done:
                    yield pending.pop(ref), ray.get(ref)
        finally:
            for ref in pending:
                ray.cancel(ref, force=True)

    def close(self) -> None:
        if self._started_here:
            self._ray.shutdown()


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


def _evaluate_chunk(evaluator: Evaluator, chunk: list[dict[str, Any]]) -> list[Outcome]:
    return evaluator.evaluate_many(chunk)


def make_executor(evaluator: Evaluator, ray_address: str) -> Executor:
    if ray_address == "off":
        return InProcessExecutor(evaluator)
    return RayExecutor(evaluator, ray_address)
