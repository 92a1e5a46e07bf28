"""The rank side of a replay: run schedules over any `Transport`, time the steps, check the bytes.

`run_rank` knows nothing about sockets or verbs: it posts each step's receive and send on the
transport it is given and waits for both, so TCP, pyverbs and the tests' in-memory transport
run the same code. Inputs are a deterministic pattern of (seed, traffic item, rank, bucket), so
the expected result of every rank, and the expected content of every message, can be computed
independently of the transport (`expected_results`, `expected_message`).
"""

from __future__ import annotations

import time
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from simulators._errors import SpecError
from simulators.rdma._errors import MismatchError, ReplayError
from simulators.rdma._schedule import REDUCE_OPS, Schedule, Step, bucket_sizes, check_op, schedule_of
from simulators.rdma._transport import Transport


@dataclass(frozen=True)
class Traffic:
    """One collective to replay: `op` over `nbytes` (nccl-tests sizes), issued in buckets of
    `bucket_bytes` back to back (None: one bucket), by `algorithm` (a registered collective
    algorithm; None: ring, pairwise for all_to_all)."""

    op: str
    nbytes: int
    bucket_bytes: int | None = None
    algorithm: str | None = None

    def __post_init__(self) -> None:
        check_op(self.op)


CHECKSUMS = ("all", "warmup", "off")


@dataclass(frozen=True)
class Plan:
    """What every rank of one replay runs: the traffic items in order, each `warmup` untimed
    then `iters` timed iterations, a barrier before each.

    `checksum` says which iterations CRC32 every chunk at the receiver: "all", "warmup" (the
    untimed ones, so the timed ones carry no CRC cost: on RDMA a CRC is slower than the wire) or
    "off". `corrupt` = (rank, step, offset) is a test hook flipping one received byte of the first
    traffic item in every iteration, as a faulty link would."""

    world: int
    traffic: tuple[Traffic, ...]
    iters: int = 1
    warmup: int = 1
    seed: int = 0
    checksum: str = "warmup"
    corrupt: tuple[int, int, int] | None = None

    def __post_init__(self) -> None:
        if not self.traffic:
            raise SpecError("traffic: empty; allowed: one or more collectives")
        for name, value, low in (("iters", self.iters, 1), ("warmup", self.warmup, 0)):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise SpecError(f"{name}: {value!r} is not allowed; allowed: integers >= {low}")
        if self.checksum not in CHECKSUMS:
            raise SpecError(f"checksum: {self.checksum!r} is not allowed; allowed: {', '.join(CHECKSUMS)}")
        for t in self.traffic:
            bucket_sizes(t.op, self.world, t.nbytes, t.bucket_bytes, t.algorithm)  # validates sizes and ranks

    def buckets(self, t: int) -> tuple[int, ...]:
        item = self.traffic[t]
        return bucket_sizes(item.op, self.world, item.nbytes, item.bucket_bytes, item.algorithm)

    def schedules(self, t: int) -> list[Schedule]:
        item = self.traffic[t]
        return [self._schedules[(item.op, item.algorithm, size)] for size in self.buckets(t)]

    @cached_property
    def _schedules(self) -> dict[tuple[str, str | None, int], Schedule]:
        return {(t.op, t.algorithm, size): schedule_of(t.op, self.world, size, t.algorithm)
                for i, t in enumerate(self.traffic) for size in self.buckets(i)}  # fmt: skip

    @property
    def rounds(self) -> int:
        """Spans of `timeout_s` a whole replay may take: connecting, then each barrier-led iteration."""
        return 1 + len(self.traffic) * (self.iters + self.warmup)

    def step_bytes(self, t: int) -> np.ndarray:
        """Bytes the busiest rank sends in each step of traffic item t, buckets concatenated."""
        return np.array(
            [max(steps[k].send_bytes for steps in s.steps) for s in self.schedules(t) for k in range(s.num_steps)],
            dtype=np.int64,
        )


@dataclass(frozen=True, eq=False)
class RankResult:
    """One rank's measurements of one traffic item: seconds per timed iteration and step (buckets
    concatenated), seconds from the barrier to its last step, and its result bytes (last iteration)."""

    rank: int
    step_s: np.ndarray  # (iters, steps)
    wall_s: np.ndarray  # (iters,)
    result: np.ndarray | None


def pattern(seed: int, t: int, rank: int, bucket: int, nbytes: int) -> np.ndarray:
    """The deterministic input of one rank for one bucket: SFC64 words seeded by all four ids."""
    words = np.random.SFC64([seed, t, rank, bucket]).random_raw(-(-nbytes // 8))
    return words.view(np.uint8)[:nbytes].copy()


def expected_results(plan: Plan, t: int) -> list[np.ndarray]:
    """What each rank must hold after traffic item t, computed with numpy from the inputs alone
    (each input generated once; all_reduce ranks share one array)."""
    parts: list[list[np.ndarray]] = [[] for _ in range(plan.world)]
    for b, sch in enumerate(plan.schedules(t)):
        inputs = [pattern(plan.seed, t, r, b, sch.in_bytes) for r in range(plan.world)]
        size = sch.nbytes // plan.world
        if sch.op in REDUCE_OPS:
            total = inputs[0].view(np.int32).copy()
            for x in inputs[1:]:
                total += x.view(np.int32)  # wraps around, like the replay's reduction
            for r in range(plan.world):
                lo, hi = sch.result[r]
                parts[r].append(total.view(np.uint8)[lo:hi])
        elif sch.op == "all_gather":
            for r in range(plan.world):
                parts[r].extend(inputs)
        else:  # all_to_all: block j of rank r's result is block r of rank j's input
            for r in range(plan.world):
                parts[r].extend(x[r * size : (r + 1) * size] for x in inputs)
    return [p[0] if len(p) == 1 else np.concatenate(p) for p in parts]


def lockstep(plan: Plan, t: int, bucket: int, steps: int | None = None) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Every rank's (input, output) buffers of a bucket after the prologue and the first `steps`
    steps (all by default), all ranks run in memory one step at a time (each step depends only
    on the state after the previous one)."""
    sch = plan.schedules(t)[bucket]
    ins = [pattern(plan.seed, t, r, bucket, sch.in_bytes) for r in range(plan.world)]
    outs = [np.zeros(sch.out_bytes, dtype=np.uint8) for _ in range(plan.world)]
    for r in range(plan.world):
        for ilo, ihi, olo, ohi in sch.prologue[r]:
            outs[r][olo:ohi] = ins[r][ilo:ihi]
    for k in range(sch.num_steps if steps is None else steps):
        sent = [sch.steps[r][k].source(ins[r], outs[r]).copy() for r in range(plan.world)]
        for r in range(plan.world):
            st = sch.steps[r][k]
            if st.recv_peer is not None:
                _land(outs[r], st, sent[st.recv_peer])
    return ins, outs


def expected_message(plan: Plan, t: int, bucket: int, rank: int, step: int) -> np.ndarray:
    """The bytes `rank` should receive at `step` of a bucket: what its peer holds after the
    steps before it, all ranks' schedules run in `lockstep`."""
    ins, outs = lockstep(plan, t, bucket, step)
    steps = plan.schedules(t)[bucket].steps
    peer = steps[rank][step].recv_peer
    return steps[peer][step].source(ins[peer], outs[peer])


def _land(out: np.ndarray, st: Step, data: np.ndarray) -> None:
    """Put what step `st` received into out[recv_lo:recv_hi]: added as int32 when it reduces."""
    if st.reduce:
        view = out[st.recv_lo : st.recv_hi].view(np.int32)
        np.add(view, data.view(np.int32), out=view)
    else:
        out[st.recv_lo : st.recv_hi] = data


def run_rank(rank: int, transport: Transport, plan: Plan, keep_result: bool = True) -> list[RankResult]:
    """Run every traffic item of `plan` as `rank` over a connected transport."""
    return [_run_traffic(rank, transport, plan, t, keep_result) for t in range(len(plan.traffic))]


def _run_traffic(rank: int, transport: Transport, plan: Plan, t: int, keep_result: bool) -> RankResult:
    schedules = plan.schedules(t)
    in_off = np.cumsum([0] + [s.in_bytes for s in schedules])
    out_off = np.cumsum([0] + [s.out_bytes for s in schedules])
    inp = np.concatenate([pattern(plan.seed, t, rank, b, s.in_bytes) for b, s in enumerate(schedules)])
    out = np.zeros(int(out_off[-1]), dtype=np.uint8)
    scratch = np.zeros(max(s.scratch_bytes for s in schedules), dtype=np.uint8)
    bufs = [(inp[in_off[b] : in_off[b + 1]], out[out_off[b] : out_off[b + 1]]) for b in range(len(schedules))]
    total_steps = sum(s.num_steps for s in schedules)
    step_s = np.zeros((plan.iters, total_steps))
    wall_s = np.zeros(plan.iters)
    for buf in (inp, out, scratch):
        transport.register(buf)
    try:
        for it in range(plan.warmup + plan.iters):
            for (bin_, bout), sch in zip(bufs, schedules):
                for ilo, ihi, olo, ohi in sch.prologue[rank]:
                    bout[olo:ohi] = bin_[ilo:ihi]
            check = plan.checksum == "all" or (plan.checksum == "warmup" and it < plan.warmup)
            transport.barrier()
            start = time.perf_counter()
            g = 0
            for b, sch in enumerate(schedules):
                for k, st in enumerate(sch.steps[rank]):
                    dt = _step(rank, transport, plan, t, b, k, g, st, bufs[b], scratch, check)
                    if it >= plan.warmup:
                        step_s[it - plan.warmup, g] = dt
                    g += 1
            if it >= plan.warmup:
                wall_s[it - plan.warmup] = time.perf_counter() - start
    finally:
        for buf in (inp, out, scratch):
            transport.deregister(buf)
    result = None
    if keep_result:
        result = np.concatenate([bout[slice(*sch.result[rank])] for (_, bout), sch in zip(bufs, schedules)])
    return RankResult(rank, step_s, wall_s, result)


def _step(rank, transport, plan, t, b, k, g, st, bufs, scratch, check) -> float:
    """One step: post the receive, post the send, wait for both, reduce; returns its seconds.
    The CRCs are computed outside the timed span."""
    bin_, bout = bufs
    src = st.source(bin_, bout)
    dst = scratch[: st.recv_bytes] if st.reduce else bout[st.recv_lo : st.recv_hi]
    crc = zlib.crc32(src) if check else 0
    start = time.perf_counter()
    try:
        rreq = None if st.recv_peer is None else transport.irecv(st.recv_peer, dst)
        if st.send_peer is not None:
            transport.isend(st.send_peer, src, crc).wait()
        got = None if rreq is None else rreq.wait()
    except ReplayError as exc:
        raise ReplayError(f"rank {rank}: {plan.traffic[t].op} step {g}: {exc}") from None
    if plan.corrupt is not None and t == 0 and plan.corrupt[:2] == (rank, g):
        offset = plan.corrupt[2]
        if not 0 <= offset < len(dst):
            raise SpecError(
                f"corrupt: offset {offset} is outside the {len(dst)}-byte chunk; allowed: 0..{len(dst) - 1}"
            )
        dst[offset] ^= 0xFF
    if st.reduce:
        _land(bout, st, dst)
    elapsed = time.perf_counter() - start
    if check and got is not None and zlib.crc32(dst) != got:
        _blame_chunk(rank, plan, t, b, k, g, st, dst)
    return elapsed


def _blame_chunk(rank, plan, t, b, k, g, st, dst) -> None:
    want = expected_message(plan, t, b, rank, k)
    bad = np.flatnonzero(want != dst)
    where = "no byte differs from the expected chunk (the sender's checksum is wrong)"
    offset = None
    if bad.size:
        offset = int(bad[0])
        where = (
            f"first bad byte at chunk offset {offset} (buffer offset {st.recv_lo + offset}): "
            f"got {dst[offset]:#04x}, expected {want[offset]:#04x}; {bad.size} bytes differ"
        )
    raise MismatchError(
        f"rank {rank}: {plan.traffic[t].op} step {g} (bucket {b}): the {st.recv_bytes}-byte chunk from rank "
        f"{st.recv_peer} fails its CRC32; {where}",
        rank,
        g,
        offset,
    )


def check_results(plan: Plan, t: int, results: Sequence[np.ndarray]) -> None:
    """Compare every byte of every rank's result with `expected_results`; raise MismatchError
    naming the rank, the step that last wrote the first bad byte, and its offset."""
    for rank, (result, want) in enumerate(zip(results, expected_results(plan, t))):
        if result.shape != want.shape:
            raise MismatchError(f"rank {rank}: result has {result.size} bytes, expected {want.size}", rank, None, None)
        if np.array_equal(result, want):
            continue
        bad = np.flatnonzero(result != want)
        offset = int(bad[0])
        step, bucket = _locate(plan, t, rank, offset)
        writer = "the local copy" if step is None else f"step {step}, bucket {bucket}"
        raise MismatchError(
            f"rank {rank}: {plan.traffic[t].op} result byte {offset} is {result[offset]:#04x}, expected "
            f"{want[offset]:#04x} (last written by {writer}); {bad.size} bytes differ",
            rank,
            step,
            offset,
        )


def _locate(plan: Plan, t: int, rank: int, offset: int) -> tuple[int | None, int]:
    """(global step, bucket) that last wrote byte `offset` of `rank`'s concatenated result."""
    first = 0
    for b, sch in enumerate(plan.schedules(t)):
        lo, hi = sch.result[rank]
        if offset < hi - lo:
            k = sch.writer_step(rank, lo + offset)
            return (None if k is None else first + k), b
        offset -= hi - lo
        first += sch.num_steps
    return None, -1
