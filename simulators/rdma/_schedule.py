"""Communication schedules: what each rank sends and receives, step by step, for one collective.

A schedule is data, not code: per rank, a prologue of local copies (input to output buffer) and a
list of steps, each "send bytes [lo, hi) of one buffer to a peer while receiving bytes [lo, hi) of
the output buffer from a peer, then add or copy" (either half may be absent). Any executor
(processes over TCP, pyverbs, an in-memory fake) runs the same lists, so the algorithms are
tested once. The steps are those of the algorithm's shared schedule (simulators.network
.collective_schedule, what the analytical model prices and the packet simulator runs): each
transfer is put in the first step after the transfers it depends on where its sender has no other
send and its receiver no other receive.

Size conventions are nccl-tests' (`nbytes` is what its `size` column reports): all_reduce the
per-rank buffer; all_gather the gathered output; reduce_scatter the per-rank input; all_to_all the
per-rank send buffer. Reductions add int32 elements with wraparound, so every result is exact and
checkable byte for byte; every chunk is therefore a whole number of int32s.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cache

from simulators._errors import SpecError
from simulators.network import ALGORITHMS, collective_schedule
from simulators.network import Schedule as Transfers

OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")
REDUCE_OPS = ("all_reduce", "reduce_scatter")
DEFAULT_ALGORITHMS = {"all_reduce": "ring", "all_gather": "ring", "reduce_scatter": "ring", "all_to_all": "pairwise"}
ELEMENT_BYTES = 4  # int32, the reduction's element


@dataclass(frozen=True)
class Step:
    """One step of one rank: send `send_buf`[send_lo:send_hi] to `send_peer` while receiving
    `recv_hi - recv_lo` bytes from `recv_peer` into out[recv_lo:recv_hi] (added as int32 when
    `reduce`, else copied). A peer of None: nothing to send (or receive) in this step."""

    send_peer: int | None
    send_buf: str  # "in" or "out"
    send_lo: int
    send_hi: int
    recv_peer: int | None
    recv_lo: int
    recv_hi: int
    reduce: bool

    @property
    def send_bytes(self) -> int:
        return self.send_hi - self.send_lo

    @property
    def recv_bytes(self) -> int:
        return self.recv_hi - self.recv_lo

    def source(self, inp, out):
        """The chunk this step sends, as a view of the rank's input or output buffer."""
        return (inp if self.send_buf == "in" else out)[self.send_lo : self.send_hi]


@dataclass(frozen=True)
class Schedule:
    """The steps of one collective of `nbytes` over `world` ranks (one bucket), by `algorithm`.

    Buffers per rank: `in` (in_bytes, the rank's input) and `out` (out_bytes); `prologue[r]` lists
    local copies (in_lo, in_hi, out_lo, out_hi) done before the first step; the result of rank r is
    out[result[r][0]:result[r][1]].
    """

    op: str
    world: int
    nbytes: int
    in_bytes: int
    out_bytes: int
    prologue: tuple[tuple[tuple[int, int, int, int], ...], ...]
    steps: tuple[tuple[Step, ...], ...]
    result: tuple[tuple[int, int], ...]
    algorithm: str = "ring"

    def __post_init__(self) -> None:
        if len(self.steps) != self.world or len(self.prologue) != self.world or len(self.result) != self.world:
            raise SpecError(f"schedule {self.op}: per-rank lists must have {self.world} entries")
        counts = {len(s) for s in self.steps}
        if len(counts) != 1:
            raise SpecError(f"schedule {self.op}: ranks have different step counts {sorted(counts)}")
        for rank, steps in enumerate(self.steps):
            for k, st in enumerate(steps):
                if st.send_peer is None:
                    continue
                partner = self.steps[st.send_peer][k]
                if partner.recv_peer != rank or partner.recv_bytes != st.send_bytes:
                    raise SpecError(
                        f"schedule {self.op}: step {k}: rank {rank} sends {st.send_bytes} B to rank "
                        f"{st.send_peer}, which expects {partner.recv_bytes} B from rank {partner.recv_peer}"
                    )
                if any(self.steps[r][k].recv_peer == rank for r in range(self.world) if r != st.send_peer):
                    raise SpecError(f"schedule {self.op}: step {k}: rank {rank} sends to more than one rank")

    @property
    def num_steps(self) -> int:
        return len(self.steps[0])

    @property
    def scratch_bytes(self) -> int:
        """Bytes of the receive buffer a reducing step needs."""
        return max((st.recv_bytes for steps in self.steps for st in steps if st.reduce), default=0)

    def writer_step(self, rank: int, offset: int) -> int | None:
        """The last step that wrote out[offset] on `rank`, or None when only the prologue did."""
        for k in range(self.num_steps - 1, -1, -1):
            st = self.steps[rank][k]
            if st.recv_peer is not None and st.recv_lo <= offset < st.recv_hi:
                return k
        return None


def unit_bytes(op: str, world: int, algorithm: str | None = None) -> int:
    """The granule of `nbytes` for `op` over `world` ranks: every chunk holds whole elements."""
    _check(op, world)
    return _transfers(op, world, algorithm).chunks * (ELEMENT_BYTES if op in REDUCE_OPS else 1)


def round_nbytes(op: str, world: int, nbytes: int, algorithm: str | None = None) -> int:
    """`nbytes` rounded down to a size `schedule_of` accepts (at least one granule)."""
    unit = unit_bytes(op, world, algorithm)
    return max(unit, int(nbytes) // unit * unit)


def check_nbytes(op: str, world: int, nbytes: int, field: str = "nbytes", algorithm: str | None = None) -> None:
    unit = unit_bytes(op, world, algorithm)
    if isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes <= 0 or nbytes % unit:
        why = f"{ELEMENT_BYTES}-byte int32 elements split" if op in REDUCE_OPS else "bytes split"
        raise SpecError(
            f"{field}: {nbytes!r} does not divide into {why} over {world} ranks for {op}; "
            f"allowed: positive multiples of {unit}"
        )


def bucket_sizes(
    op: str, world: int, nbytes: int, bucket_bytes: int | None = None, algorithm: str | None = None
) -> tuple[int, ...]:
    """A collective of `nbytes` issued in buckets of `bucket_bytes` (the last one smaller)."""
    check_nbytes(op, world, nbytes, algorithm=algorithm)
    if bucket_bytes is None or bucket_bytes >= nbytes:
        return (nbytes,)
    check_nbytes(op, world, bucket_bytes, "bucket_bytes", algorithm)
    full, rest = divmod(nbytes, bucket_bytes)
    return (bucket_bytes,) * full + ((rest,) if rest else ())


def schedule_of(op: str, world: int, nbytes: int, algorithm: str | None = None) -> Schedule:
    """The schedule of one bucket of `op` by `algorithm` (a registered name or alias; default:
    ring, pairwise for all_to_all), every rank in an NVLink domain of its own."""
    check_nbytes(op, world, nbytes, algorithm=algorithm)
    shared = _transfers(op, world, algorithm)
    size = nbytes // shared.chunks
    rounds = _rounds(shared)
    steps = [[Step(None, "out", 0, 0, None, 0, 0, False) for _ in range(1 + max(rounds))] for _ in range(world)]
    for t, k in zip(shared.transfers, rounds):
        lo, hi = _span(t.sent, size)
        buf = "in" if t.from_input else "out"
        steps[t.src][k] = replace(steps[t.src][k], send_peer=t.dst, send_buf=buf, send_lo=lo, send_hi=hi)
        lo, hi = _span(t.chunks, size)
        steps[t.dst][k] = replace(steps[t.dst][k], recv_peer=t.src, recv_lo=lo, recv_hi=hi, reduce=t.reduce)
    return Schedule(
        op,
        world,
        nbytes,
        shared.in_chunks * size,
        shared.chunks * size,
        tuple(tuple(_span(a, size) + _span(b, size) for a, b in shared.prologue(r)) for r in range(world)),
        tuple(tuple(row) for row in steps),
        tuple(_span(shared.result(r), size) for r in range(world)),
        shared.algorithm,
    )


def replay_algorithm(op: str, world: int, algorithm: str) -> str:
    """The algorithm a replay of `op` on `world` ranks runs for `algorithm`: itself (canonical
    name) where ranks alone can run its schedule, else the op's default."""
    try:
        return _transfers(op, world, algorithm).algorithm
    except SpecError:
        return DEFAULT_ALGORITHMS[op]


def check_op(op: str) -> None:
    if op not in OPS:
        raise SpecError(f"op: {op!r} cannot be replayed; allowed: {', '.join(OPS)}")


def _check(op: str, world: int) -> None:
    check_op(op)
    if isinstance(world, bool) or not isinstance(world, int) or world < 2:
        raise SpecError(f"ranks: {world!r} is not allowed; allowed: integers >= 2")


def _span(chunks: range, size: int) -> tuple[int, int]:
    """Bytes [lo, hi) of contiguous `chunks` of `size` bytes."""
    return (chunks[0] * size, (chunks[-1] + 1) * size) if chunks else (0, 0)


def _replayable(shared: Transfers) -> str | None:
    """Why ranks alone cannot run `shared` (None: they can)."""
    if shared.switches:
        return "it reduces inside the switch"
    if any(len(r) > 1 and r.step != 1 for t in shared.transfers for r in (t.chunks, t.sent)):
        return "its transfers carry strided chunks"
    return None


@cache
def _transfers(op: str, world: int, algorithm: str | None) -> Transfers:
    _check(op, world)
    shared = collective_schedule(op, world, algorithm or DEFAULT_ALGORITHMS[op])
    why = _replayable(shared)
    if why:
        allowed = [name for name, entry in ALGORITHMS.items() if op in entry.schedules and _runs(entry, op, world)]
        raise SpecError(f"algorithm: {shared.algorithm!r} cannot be replayed ({why}); allowed: {', '.join(allowed)}")
    return shared


def _runs(entry, op: str, world: int) -> bool:
    try:
        return _replayable(entry.schedule(op, world)) is None
    except SpecError:  # e.g. NVLS, which needs NVLink domains of two or more
        return False


def _rounds(shared: Transfers) -> list[int]:
    """The step of each transfer: the first after those it depends on where its sender sends
    nothing else, its receiver receives nothing else, and what a rank receives does not land on
    what it sends in that step."""
    rounds: list[int] = []
    sends: dict[tuple[int, int], range] = {}  # (step, rank) -> chunks of out it sends (empty: from in)
    recvs: dict[tuple[int, int], range] = {}  # (step, rank) -> chunks of out it receives
    for t in shared.transfers:
        k = 1 + max((rounds[a] for a in t.after), default=-1)
        reads = range(0) if t.from_input else t.sent
        while (
            (k, t.src) in sends
            or (k, t.dst) in recvs
            or _overlap(sends.get((k, t.dst), range(0)), t.chunks)
            or _overlap(recvs.get((k, t.src), range(0)), reads)
        ):
            k += 1
        sends[k, t.src], recvs[k, t.dst] = reads, t.chunks
        rounds.append(k)
    return rounds


def _overlap(a: range, b: range) -> bool:
    return not set(a).isdisjoint(b)
