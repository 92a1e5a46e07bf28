"""Global routers as data: where a request's scan of its pool starts, and whether it balances.

Why: the engine routes every arrival (and, disaggregated, every KV transfer) with `route`, which
reads a router's two traits, not its name; a router that combines them anew is one
`register_router` call (here, or at run time). A router scans the pool's replicas in order from
its starting one and takes the first with the fewest outstanding requests (routed to the
replica and not yet gone from it) when it balances, else the starting one itself:
- start "first": the pool's first replica; "rotate": the next one in turn (a per-pool counter);
  "random": a uniform draw from a seeded xorshift64* stream shared by the pools.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

from simulators._errors import CatalogError, SpecError
from simulators._registry import Registry

START_FIRST, START_ROTATE, START_RANDOM = 0, 1, 2
STARTS = {"first": START_FIRST, "rotate": START_ROTATE, "random": START_RANDOM}


@dataclass(frozen=True)
class Router:
    """A router by its traits: `start` (one of STARTS) and `balances` (fewest outstanding first)."""

    name: str
    help: str  # one line: what it does and where it comes from
    start: str
    balances: bool
    aliases: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.start not in STARTS:
            raise SpecError(f"router {self.name!r}: start {self.start!r} is not allowed; allowed: {', '.join(STARTS)}")

    @property
    def codes(self) -> tuple[int, bool]:
        """What the engine reads: (start code, balances)."""
        return STARTS[self.start], self.balances


ROUTERS: Registry[Router] = Registry("router")


def register_router(router: Router) -> Router:
    """Add `router` to ROUTERS; a second one of the same name or alias is refused."""
    ROUTERS.register(router.name, router, router.aliases)
    return router


def get_router(name: str, field: str = "router") -> Router:
    """The registered router `name`; a one-line SpecError naming `field` and the routers otherwise."""
    try:
        return ROUTERS.lookup(name, field)
    except CatalogError as err:
        raise SpecError(str(err)) from None


@numba.njit(cache=True)
def route(start, balances, pool_replicas, outstanding, rr_state, rng_state):
    """Index of the replica that takes the next request, among `pool_replicas`."""
    k = len(pool_replicas)
    if start == START_ROTATE:
        first = rr_state[0] % k
        rr_state[0] += 1
    elif start == START_RANDOM:  # xorshift64*, a seeded, platform-independent stream
        x = rng_state[0]
        x ^= x >> np.uint64(12)
        x ^= x << np.uint64(25)
        x ^= x >> np.uint64(27)
        rng_state[0] = x
        first = int((x * np.uint64(2685821657736338717)) >> np.uint64(33)) % k
    else:
        first = 0
    best = pool_replicas[first]
    if balances:
        for m in range(1, k):
            r = pool_replicas[(first + m) % k]
            if outstanding[r] < outstanding[best]:
                best = r
    return best


for _router in (
    Router("round_robin", "each pool's replicas in turn", start="rotate", balances=False),
    Router("least_outstanding", "fewest outstanding requests, the first such replica (Vidur's LOR)", "first", True),
    Router("random", "a uniform seeded draw", start="random", balances=False),
):
    register_router(_router)
