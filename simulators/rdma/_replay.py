"""Replay collectives with real bytes between ranks run as local processes, and measure them.

`replay("all_reduce", "tcp", ranks=4, nbytes=8 << 20)` spawns one process per rank, exchanges
their addresses through a queue, runs the algorithm's schedule (ring by default) over the transport, verifies every
byte of every rank's result in this process against numpy, and returns the timings with
nccl-tests bandwidths. `replay_many` runs several collectives over the same processes and
connections (process start-up is most of a small replay's cost). Ray actors instead of
processes: `dse.physical.replay_ray.replay_on_ray`.
"""

from __future__ import annotations

import multiprocessing as mp
import queue
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from simulators._errors import SpecError
from simulators.rdma._errors import MismatchError, ReplayError
from simulators.rdma._executor import Plan, RankResult, Traffic, check_results, run_rank
from simulators.rdma._handshake import new_secret
from simulators.rdma._transports import TRANSPORTS, transport_of


@dataclass(frozen=True, eq=False)
class Replay:
    """Measurements of one collective replayed `iters` times on `ranks` ranks.

    step_s[i, r, s]: seconds of step s (buckets concatenated) on rank r in timed iteration i,
    from posting its receive to the end of its reduction; step_bytes[s]: bytes each rank sends
    in step s. rank_s[i, r]: seconds from the barrier to rank r's last step (with CRC work
    between steps when checksum="all"). time_s: median over
    iterations of the slowest rank; algbw = nbytes / time_s and busbw = algbw x 2(n-1)/n
    (all_reduce) or (n-1)/n, in GB/s of 1e9 bytes (nccl-tests). verified: every byte of every
    rank's result was compared with the numpy value (a mismatch raises MismatchError instead).
    """

    op: str
    transport: str
    ranks: int
    nbytes: int
    bucket_bytes: int
    iters: int
    step_s: np.ndarray
    step_bytes: np.ndarray
    rank_s: np.ndarray
    time_s: float
    algbw_gbytes_per_s: float
    busbw_gbytes_per_s: float
    verified: bool
    placement: str = "processes"
    algorithm: str = "ring"  # the collective algorithm whose schedule ran

    @property
    def buckets(self) -> int:
        return -(-self.nbytes // self.bucket_bytes)


def replay(
    op: str,
    transport: str = "tcp",
    ranks: int = 2,
    nbytes: int = 1 << 20,
    *,
    bucket_bytes: int | None = None,
    algorithm: str | None = None,
    runner: str = "processes",
    **options: Any,
) -> Replay:
    """Replay one collective of `nbytes` (nccl-tests sizes) on `ranks` ranks by `algorithm`
    (default: ring, pairwise for all_to_all); see `replay_many`."""
    traffic = [Traffic(op, nbytes, bucket_bytes, algorithm)]
    return replay_many(traffic, transport, ranks, runner=runner, **options)[0]


def replay_many(
    traffic: Sequence[Traffic],
    transport: str = "tcp",
    ranks: int = 2,
    *,
    iters: int = 1,
    warmup: int = 1,
    seed: int = 0,
    checksum: str = "warmup",
    verify: bool = True,
    timeout_s: float = 60.0,
    transport_options: dict[str, Any] | None = None,
    corrupt: tuple[int, int, int] | None = None,
    runner: str | Callable = "processes",
) -> list[Replay]:
    """Replay each collective in `traffic`, in order, on the same `ranks` ranks and connections.

    runner "processes" spawns local processes; a function (plan, transport, options, verify,
    timeout_s) -> (results, placement) runs the ranks elsewhere (dse.physical.replay_ray: Ray actors).
    checksum: "all", "warmup" or "off" (see `Plan`). verify=False skips the byte-for-byte check
    of the results, which otherwise travel to this process (memory: the sum of the results of
    all ranks). transport_options go to every rank's transport (TCP: `handshake_timeout_s`, how
    long a connection may stay silent before it is refused). Raises SpecError for a bad
    argument, MismatchError naming rank, step and byte offset for wrong data, ReplayError when
    a rank fails or times out.
    """
    plan = Plan(ranks, tuple(traffic), iters, warmup, seed, checksum, corrupt)
    # each rank's transport waits timeout_s; the ranks of this run share a key made here, for it alone
    options = {"timeout_s": timeout_s, "secret": new_secret(), **(transport_options or {})}
    if runner == "processes":
        transport_of(transport)  # an unavailable transport fails here, in one line
        results = _run_processes(plan, transport, options, verify, timeout_s)
        placement = "processes"
    elif callable(runner):  # e.g. dse.physical.replay_ray.run_actors: ranks elsewhere, same executor
        if transport not in TRANSPORTS:  # devices are checked where the ranks run, not here
            transport_of(transport)
        results, placement = runner(plan, transport, options, verify, timeout_s)
    else:
        raise SpecError(f"runner: {runner!r} is unknown; allowed: processes, or a function running the ranks")
    return assemble(plan, transport, results, verify, placement)


def assemble(plan: Plan, transport: str, results: list[list[RankResult]], verify: bool, placement: str) -> list[Replay]:
    """Check the ranks' results (results[rank][t]) and turn them into one Replay per traffic item."""
    from simulators.network import algorithm_bandwidth_gbytes_per_s, bus_bandwidth_gbytes_per_s

    out = []
    for t, item in enumerate(plan.traffic):
        per_rank = [results[r][t] for r in range(plan.world)]
        if verify:
            check_results(plan, t, [res.result for res in per_rank])
        step_s = np.stack([res.step_s for res in per_rank], axis=1)
        rank_s = np.stack([res.wall_s for res in per_rank], axis=1)
        time_s = float(np.median(rank_s.max(axis=1)))
        buckets = plan.buckets(t)
        out.append(
            Replay(
                op=item.op,
                transport=transport,
                ranks=plan.world,
                nbytes=item.nbytes,
                bucket_bytes=buckets[0],
                iters=plan.iters,
                step_s=step_s,
                step_bytes=plan.step_bytes(t),
                rank_s=rank_s,
                time_s=time_s,
                algbw_gbytes_per_s=float(algorithm_bandwidth_gbytes_per_s(item.nbytes, time_s)),
                busbw_gbytes_per_s=float(bus_bandwidth_gbytes_per_s(item.op, item.nbytes, plan.world, time_s)),
                verified=verify,
                placement=placement,
                algorithm=plan.schedules(t)[0].algorithm,
            )
        )
    return out


def rank_main(rank, plan, kind, options, keep_result, addr_q, book_q, result_q) -> None:
    """Body of one rank process: open, publish the address, connect, run, report."""
    transport = None
    try:
        transport = transport_of(kind)(**options)
        addr_q.put((rank, transport.open(rank, plan.world)))
        book = book_q.get(timeout=options["timeout_s"])
        transport.connect(book)
        result_q.put((rank, run_rank(rank, transport, plan, keep_result), None))
    except BaseException as exc:  # noqa: BLE001  (reported to the parent, which raises it)
        result_q.put(
            (rank, None, exc if isinstance(exc, ReplayError | SpecError) else ReplayError(f"rank {rank}: {exc!r}"))
        )
    finally:
        if transport is not None:
            transport.close()


def _run_processes(plan: Plan, kind: str, options: dict, verify: bool, timeout_s: float) -> list[list[RankResult]]:
    ctx = mp.get_context("spawn")
    addr_q, result_q = ctx.Queue(), ctx.Queue()
    book_qs = [ctx.Queue() for _ in range(plan.world)]
    procs = [
        ctx.Process(
            target=rank_main,
            args=(r, plan, kind, options, verify, addr_q, book_qs[r], result_q),
            name=f"dse-replay-rank{r}",
            daemon=True,
        )
        for r in range(plan.world)
    ]
    for p in procs:
        p.start()
    deadline = time.monotonic() + timeout_s * plan.rounds
    ok = False
    try:
        book: list[Any] = [None] * plan.world
        for _ in range(plan.world):
            rank, addr = _get(addr_q, procs, deadline, result_q)
            book[rank] = addr
        for q in book_qs:
            q.put(book)
        results: list[Any] = [None] * plan.world
        errors: list[BaseException] = []
        for _ in range(plan.world):
            try:
                rank, res, err = _get(result_q, procs, deadline)
            except ReplayError as exc:
                errors.append(exc)
                break
            if err is not None:
                errors.append(err)
                deadline = min(deadline, time.monotonic() + 2.0)  # let the root cause arrive too
            results[rank] = res
        if errors:
            raise _root_cause(errors)
        ok = True
        return results
    finally:
        for p in procs:
            if not ok:
                p.terminate()
            p.join(timeout=5)
            if p.is_alive():
                p.kill()
                p.join(timeout=5)


def _get(q, procs, deadline: float, errors_q=None):
    """Next item of q, or a ReplayError when a rank died or the deadline passed."""
    while True:
        if errors_q is not None:  # a rank that fails before publishing its address reports here
            try:
                rank, _, err = errors_q.get_nowait()
                raise err if err is not None else ReplayError(f"rank {rank}: finished before the address exchange")
            except queue.Empty:
                pass
        try:
            return q.get(timeout=0.2)
        except queue.Empty:
            pass
        dead = [p for p in procs if p.exitcode not in (None, 0)]
        if dead:
            raise ReplayError(f"{dead[0].name} exited with status {dead[0].exitcode} before reporting")
        if time.monotonic() > deadline:
            raise ReplayError("replay: ranks did not finish before the deadline; allowed: a larger timeout_s")


def _root_cause(errors: list[BaseException]) -> BaseException:
    """A data mismatch explains the peers' broken connections, not the other way round."""
    for err in errors:
        if isinstance(err, MismatchError | SpecError):
            return err
    return errors[0]
