"""Global routers as data: where a request's scan of its pool starts, and whether it balances.

Why: the engine routes every arrival (and, disaggregated, every KV transfer) by a router's two
traits, not its name (`_engine._route`, in the kernel's file for Numba's cache), so a router
that combines them anew is one `register_router` call (here, or at run time). A router scans
the pool's replicas in order from its starting one and takes the first with the fewest
outstanding requests (routed to it and not yet gone) when it balances, else the starting one:
- start "first": the pool's first replica; "rotate": the next one in turn (a per-pool counter);
  "random": a uniform draw from a seeded xorshift64* stream shared by the pools.
"""

from __future__ import annotations

from dataclasses import dataclass

from simulators._errors import SpecError
from simulators._registry import Registry
from simulators.serving._engine import START_FIRST, START_RANDOM, START_ROTATE

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
    return ROUTERS.choice(name, field)


for _router in (
    Router("round_robin", "each pool's replicas in turn", start="rotate", balances=False),
    Router("least_outstanding", "fewest outstanding requests, the first such replica (Vidur's LOR)", "first", True),
    Router("random", "a uniform seeded draw", start="random", balances=False),
):
    register_router(_router)
