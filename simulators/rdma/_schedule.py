"""Communication schedules: what each rank sends and receives, step by step, for one collective.

A schedule is data, not code: per rank, a prologue of local copies (input to output buffer) and a
list of steps, each "send bytes [lo, hi) of one buffer to a peer while receiving bytes [lo, hi) of
the output buffer from a peer, then add or copy". Any executor (processes over TCP, pyverbs, an
in-memory fake) runs the same lists, so the algorithms are tested once.

Size conventions are nccl-tests' (`nbytes` is what its `size` column reports): all_reduce the
per-rank buffer; all_gather the gathered output; reduce_scatter the per-rank input; all_to_all the
per-rank send buffer. Reductions add int32 elements with wraparound, so every result is exact and
checkable byte for byte; every chunk is therefore a whole number of int32s.
"""

from __future__ import annotations

from dataclasses import dataclass

from simulators._errors import SpecError

OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")
REDUCE_OPS = ("all_reduce", "reduce_scatter")
ELEMENT_BYTES = 4  # int32, the reduction's element


@dataclass(frozen=True)
class Step:
    """One step of one rank: send `send_buf`[send_lo:send_hi] to `send_peer` while receiving
    `recv_hi - recv_lo` bytes from `recv_peer` into out[recv_lo:recv_hi] (added as int32 when
    `reduce`, else copied)."""

    send_peer: int
    send_buf: str  # "in" or "out"
    send_lo: int
    send_hi: int
    recv_peer: int
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
    """The steps of one collective of `nbytes` over `world` ranks (one bucket).

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

    def __post_init__(self) -> None:
        if len(self.steps) != self.world or len(self.prologue) != self.world or len(self.result) != self.world:
            raise SpecError(f"schedule {self.op}: per-rank lists must have {self.world} entries")
        counts = {len(s) for s in self.steps}
        if len(counts) != 1:
            raise SpecError(f"schedule {self.op}: ranks have different step counts {sorted(counts)}")
        for rank, steps in enumerate(self.steps):
            for k, st in enumerate(steps):
                partner = self.steps[st.send_peer][k]
                if partner.recv_peer != rank or partner.recv_bytes != st.send_bytes:
                    raise SpecError(
                        f"schedule {self.op}: step {k}: rank {rank} sends {st.send_bytes} B to rank "
                        f"{st.send_peer}, which expects {partner.recv_bytes} B from rank {partner.recv_peer}"
                    )

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
            if st.recv_lo <= offset < st.recv_hi:
                return k
        return None


def unit_bytes(op: str, world: int) -> int:
    """The granule of `nbytes` for `op` over `world` ranks: every chunk holds whole elements."""
    _check(op, world)
    return world * (ELEMENT_BYTES if op in REDUCE_OPS else 1)


def round_nbytes(op: str, world: int, nbytes: int) -> int:
    """`nbytes` rounded down to a size `schedule_of` accepts (at least one granule)."""
    unit = unit_bytes(op, world)
    return max(unit, int(nbytes) // unit * unit)


def check_nbytes(op: str, world: int, nbytes: int, field: str = "nbytes") -> None:
    unit = unit_bytes(op, world)
    if isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes <= 0 or nbytes % unit:
        why = f"{ELEMENT_BYTES}-byte int32 elements split" if op in REDUCE_OPS else "bytes split"
        raise SpecError(
            f"{field}: {nbytes!r} does not divide into {why} over {world} ranks for {op}; "
            f"allowed: positive multiples of {unit}"
        )


def bucket_sizes(op: str, world: int, nbytes: int, bucket_bytes: int | None = None) -> tuple[int, ...]:
    """A collective of `nbytes` issued in buckets of `bucket_bytes` (the last one smaller)."""
    check_nbytes(op, world, nbytes)
    if bucket_bytes is None or bucket_bytes >= nbytes:
        return (nbytes,)
    check_nbytes(op, world, bucket_bytes, "bucket_bytes")
    full, rest = divmod(nbytes, bucket_bytes)
    return (bucket_bytes,) * full + ((rest,) if rest else ())


def schedule_of(op: str, world: int, nbytes: int) -> Schedule:
    """The schedule of one bucket: ring all_reduce / all_gather / reduce_scatter, pairwise all_to_all."""
    check_nbytes(op, world, nbytes)
    return _BUILDERS[op](world, nbytes)


def check_op(op: str) -> None:
    if op not in OPS:
        raise SpecError(f"op: {op!r} cannot be replayed; allowed: {', '.join(OPS)}")


def _check(op: str, world: int) -> None:
    check_op(op)
    if isinstance(world, bool) or not isinstance(world, int) or world < 2:
        raise SpecError(f"ranks: {world!r} is not allowed; allowed: integers >= 2")


def _chunk(world: int, nbytes: int, c: int) -> tuple[int, int]:
    size = nbytes // world
    c %= world
    return c * size, (c + 1) * size


def _ring_reduce_scatter_steps(rank: int, world: int, nbytes: int, shift: int) -> list[Step]:
    """n - 1 steps; in step k rank i sends chunk (i - k - shift) to i + 1 and adds chunk
    (i - k - 1 - shift) from i - 1, so afterwards it holds chunk (i + 1 - shift) fully reduced."""
    nxt, prv = (rank + 1) % world, (rank - 1) % world
    steps = []
    for k in range(world - 1):
        slo, shi = _chunk(world, nbytes, rank - k - shift)
        rlo, rhi = _chunk(world, nbytes, rank - k - 1 - shift)
        steps.append(Step(nxt, "out", slo, shi, prv, rlo, rhi, True))
    return steps


def _ring_all_gather_steps(rank: int, world: int, nbytes: int, owned: int) -> list[Step]:
    """n - 1 steps starting from chunk `owned` (relative to the rank): in step k rank i forwards
    chunk (i + owned - k) to i + 1 and stores chunk (i + owned - k - 1) from i - 1."""
    nxt, prv = (rank + 1) % world, (rank - 1) % world
    steps = []
    for k in range(world - 1):
        slo, shi = _chunk(world, nbytes, rank + owned - k)
        rlo, rhi = _chunk(world, nbytes, rank + owned - k - 1)
        steps.append(Step(nxt, "out", slo, shi, prv, rlo, rhi, False))
    return steps


def _all_reduce(world: int, nbytes: int) -> Schedule:
    # Reduce-scatter with step k sending chunk (i - k) leaves rank i owning chunk i + 1; the
    # all-gather then circulates the owned chunks: 2(n - 1) steps of nbytes / n.
    steps = tuple(
        tuple(_ring_reduce_scatter_steps(r, world, nbytes, 0) + _ring_all_gather_steps(r, world, nbytes, 1))
        for r in range(world)
    )
    whole = ((0, nbytes, 0, nbytes),)
    return Schedule("all_reduce", world, nbytes, nbytes, nbytes, (whole,) * world, steps, ((0, nbytes),) * world)


def _reduce_scatter(world: int, nbytes: int) -> Schedule:
    # Shifted by one so rank i ends with chunk i, as NCCL's reduce_scatter does.
    steps = tuple(tuple(_ring_reduce_scatter_steps(r, world, nbytes, 1)) for r in range(world))
    whole = ((0, nbytes, 0, nbytes),)
    result = tuple(_chunk(world, nbytes, r) for r in range(world))
    return Schedule("reduce_scatter", world, nbytes, nbytes, nbytes, (whole,) * world, steps, result)


def _all_gather(world: int, nbytes: int) -> Schedule:
    share = nbytes // world
    steps = tuple(tuple(_ring_all_gather_steps(r, world, nbytes, 0)) for r in range(world))
    prologue = tuple(((0, share) + _chunk(world, nbytes, r),) for r in range(world))
    return Schedule("all_gather", world, nbytes, share, nbytes, prologue, steps, ((0, nbytes),) * world)


def _all_to_all(world: int, nbytes: int) -> Schedule:
    # Pairwise exchange: in step k (1..n-1) rank i sends block i + k to rank i + k and receives
    # block i - k of its output from rank i - k; its own block is a local copy.
    steps = []
    for r in range(world):
        row = []
        for k in range(1, world):
            to, frm = (r + k) % world, (r - k) % world
            row.append(Step(to, "in", *_chunk(world, nbytes, to), frm, *_chunk(world, nbytes, frm), False))
        steps.append(tuple(row))
    prologue = tuple((_chunk(world, nbytes, r) + _chunk(world, nbytes, r),) for r in range(world))
    return Schedule("all_to_all", world, nbytes, nbytes, nbytes, prologue, tuple(steps), ((0, nbytes),) * world)


_BUILDERS = {
    "all_reduce": _all_reduce,
    "all_gather": _all_gather,
    "reduce_scatter": _reduce_scatter,
    "all_to_all": _all_to_all,
}
