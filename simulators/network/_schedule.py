"""Communication schedules: the point-to-point transfers a collective algorithm is made of, and
which must arrive before which starts. One representation for every fidelity.

The cost model prices an algorithm's steps (its `Recipe`); the algorithm's schedule lists the
transfers of those steps, so the packet simulator (one flow per transfer, started when the
transfers it depends on have arrived) and the RDMA replay (per-rank send/receive steps over real
bytes) run the very algorithm the analytical model chose. Units are chunks: the op's buffer
(`nbytes`, nccl-tests convention) is cut into `chunks` equal chunks, so a schedule depends on the
group's shape only (members, members per NVLink domain), not on the message size.

Buffers, for member r of n with C chunks and m = C / n (`Schedule.prologue`, `Schedule.result`):
  all_reduce, reduce_scatter  in = out = C chunks, out starts as a copy of in; reduce_scatter's
                              result on r is out[r*m, (r+1)*m);
  all_gather                  in = m chunks, copied to out[r*m, (r+1)*m); the result is all of out;
  all_to_all                  in = out = C; block r of in is copied to block r of out, block j
                              of in goes to member j, where it lands in block r;
  broadcast                   member 0 (the root) copies in to out; every member ends with it;
  send_recv                   member r + 1 ends with the in buffer of member r.
A switch that reduces or multicasts in the network (NVLS) is a pseudo-member `n + d` for NVLink
domain d, with an out buffer of C chunks that starts empty.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from simulators._errors import SpecError


class Transfer(NamedTuple):
    """`src` sends chunks `source` of its out buffer (of its in buffer when `from_input`) to
    `dst`, which stores them in its out buffer at `chunks` or, when `reduce`, adds them there.
    It starts once the transfers `after` (indices into the schedule, all earlier) have arrived.
    `step` is the algorithm step it belongs to, the unit of the cost recipe's latency term.
    (A NamedTuple: a large ring lists tens of thousands.)"""

    src: int
    dst: int
    chunks: range
    step: int
    after: tuple[int, ...] = ()
    reduce: bool = False
    source: range | None = None  # None: the same chunks as `chunks`
    from_input: bool = False

    @property
    def sent(self) -> range:
        return self.chunks if self.source is None else self.source


@dataclass(frozen=True)
class Schedule:
    """The transfers of `op` by `algorithm` over `ranks` members, `per_domain` to an NVLink
    domain; members 0..ranks-1, then `switches` switch pseudo-members. Transfers are listed in
    an order where every dependency comes first, so the dependencies cannot form a cycle."""

    op: str
    algorithm: str
    ranks: int
    per_domain: int
    chunks: int
    transfers: tuple[Transfer, ...]
    switches: int = 0

    def __post_init__(self) -> None:
        nodes, transfers = self.ranks + self.switches, self.transfers
        for i, t in enumerate(transfers):
            if not (0 <= t.src < nodes and 0 <= t.dst < nodes and t.src != t.dst) or (
                t.after and not (0 <= min(t.after) and max(t.after) < i)
            ):
                raise SpecError(f"schedule {self.algorithm} {self.op}: transfer {i} ({t}) is not allowed")
            for a in t.after:
                if transfers[a].step > t.step:
                    raise SpecError(f"schedule {self.algorithm} {self.op}: transfer {i} is in a step before its inputs")

    @property
    def steps(self) -> int:
        """Latency steps: the cost recipe's count for the same group."""
        return 1 + max((t.step for t in self.transfers), default=-1)

    @property
    def in_chunks(self) -> int:
        return self.chunks // self.ranks if self.op == "all_gather" else self.chunks

    def prologue(self, rank: int) -> tuple[tuple[range, range], ...]:
        """Local copies (in chunks, out chunks) of `rank` before its first transfer."""
        m = self.chunks // self.ranks
        if self.op in ("all_reduce", "reduce_scatter") or (self.op == "broadcast" and rank == 0):
            return ((range(self.chunks), range(self.chunks)),)
        if self.op == "all_gather":
            return ((range(m), range(rank * m, (rank + 1) * m)),)
        if self.op == "all_to_all":
            block = range(rank * m, (rank + 1) * m)
            return ((block, block),)
        return ()

    def result(self, rank: int) -> range:
        """The chunks of `rank`'s out buffer that hold its result."""
        if self.op == "reduce_scatter":
            m = self.chunks // self.ranks
            return range(rank * m, (rank + 1) * m)
        if self.op == "send_recv" and rank == 0:
            return range(0)
        return range(self.chunks)


@dataclass
class Builder:
    """Collects transfers in order; `add` returns the index that later transfers name in `after`."""

    transfers: list[Transfer] = field(default_factory=list)

    def add(self, src: int, dst: int, chunks: range, step: int, after=(), **kw) -> int:
        self.transfers.append(Transfer(src, dst, chunks, step, tuple(after), **kw))
        return len(self.transfers) - 1


def ring_pass(b: Builder, members, parts, shift: int, first_step: int, reduce: bool, entry=None) -> dict:
    """len(members) - 1 ring steps: in step k member i sends parts[(i - k - shift) % n] to member
    i + 1, once it has what member i - 1 sent it in step k - 1 (or, in step 0, the transfers
    `entry[member]`; a reducing pass waits for them in every step, as each chunk it sends holds
    the member's own data, which they made). With shift 0 a reducing pass leaves member i with
    part i + 1 fully reduced, with shift 1 with part i; a copying pass with shift 0 circulates
    part i of every member i. Returns, per member, every transfer it received, in order."""
    n, entry, transfers = len(members), entry or {}, b.transfers
    own = {m: tuple(entry.get(m, ())) for m in members}
    got: dict = {m: [] for m in members}
    for k in range(n - 1):
        last = {m: (got[m][-1],) + (own[m] if reduce else ()) for m in members} if k else own
        for i, m in enumerate(members):
            nxt = members[(i + 1) % n]
            got[nxt].append(len(transfers))
            transfers.append(Transfer(m, nxt, parts[(i - k - shift) % n], first_step + k, last[m], reduce))
    return got


def binary_tree(b: Builder, order, chunks: range, first_step: int, entry: dict, copied=None) -> dict:
    """A binary tree over `order` (position k's parent is (k - 1) // 2): each position adds its
    children's data and sends it up once both arrived (and its own `entry` transfers; a child's
    data is added only once the parent's `copied` transfers, which overwrite, landed), then the
    root's result comes down, each position forwarding it once it has it. A position at depth d
    (of D) sends up in step first_step + D - d and receives the result in first_step + D + d - 1,
    2D steps in all (NCCL's tree without chunk pipelining). Returns, per node, the transfers
    after which it holds the result."""
    n = len(order)
    depth = [(k + 1).bit_length() - 1 for k in range(n)]
    top = depth[-1]
    up: dict[int, int] = {}
    for k in range(n - 1, 0, -1):
        parent = order[(k - 1) // 2]
        after = [up[c] for c in (2 * k + 1, 2 * k + 2) if c < n] + list(entry.get(order[k], ()))
        after += [a for a in (copied or {}).get(parent, ()) if a not in after]
        up[k] = b.add(order[k], parent, chunks, first_step + top - depth[k], after, reduce=True)
    done = {order[0]: [up[c] for c in (1, 2) if c < n] + list(entry.get(order[0], ()))}
    for k in range(1, n):
        parent = order[(k - 1) // 2]
        done[order[k]] = [b.add(parent, order[k], chunks, first_step + top + depth[k] - 1, done[parent])]
    return done


def domains_of(ranks: int, per_domain: int, algorithm: str, exact: bool = False) -> int:
    """N: the NVLink domains of `per_domain` members a group of `ranks` spans."""
    if not 1 <= per_domain <= ranks or (exact and ranks % per_domain):
        must = "a divisor of ranks" if exact else "1..ranks"
        raise SpecError(f"{algorithm}: per_domain {per_domain} is not allowed for {ranks} ranks; allowed: {must}")
    return -(-ranks // per_domain)
