"""Ranks as Ray actors, one per node: the replay across the machines of a Ray cluster.

A placement group puts one bundle per rank, STRICT_SPREAD (one rank per node) where the cluster
has at least as many nodes as ranks and more than one, SPREAD where it has fewer, PACK on one
node. Each actor opens its transport and returns its address (TCP: the node's IP; RDMA: queue
pair numbers, LID and GID); the driver passes the address book back through Ray and every
actor runs the same `run_rank` as a local process would. Ray is imported only here, and only
when called; the caller owns the Ray session (`ray.init` first).
"""

from __future__ import annotations

from typing import Any

from simulators._errors import SpecError
from simulators.rdma._errors import ReplayError
from simulators.rdma._executor import Plan, RankResult, run_rank
from simulators.rdma._transports import transport_of


class RankActor:
    """One rank: `open` creates its transport and endpoints, `run` connects and replays the plan.

    The transport is made in `open`, not in the constructor: an error there (no RDMA device on
    this node) then reaches the driver as itself, where a failed constructor is an ActorDiedError
    carrying a traceback.
    """

    def __init__(self, rank: int, plan: Plan, kind: str, options: dict[str, Any]) -> None:
        self.rank, self.plan, self.kind, self.options = rank, plan, kind, options

    def open(self) -> tuple[Any, str]:
        """This rank's address and the id of the node it runs on."""
        import ray

        options = dict(self.options)
        if self.kind == "tcp":
            options.setdefault("host", ray.util.get_node_ip_address())
        self.transport = transport_of(self.kind)(**options)
        return self.transport.open(self.rank, self.plan.world), ray.get_runtime_context().get_node_id()

    def run(self, book: list[Any], keep_result: bool) -> list[RankResult]:
        try:
            self.transport.connect(book)
            return run_rank(self.rank, self.transport, self.plan, keep_result)
        finally:
            self.transport.close()


def replay_on_ray(op: str, transport: str = "tcp", ranks: int = 2, nbytes: int = 1 << 20, **options: Any):
    """`replay` with the ranks as Ray actors spread over the nodes of the current Ray session."""
    from simulators.rdma import replay

    return replay(op, transport, ranks, nbytes, runner=run_actors, **options)


def run_actors(
    plan: Plan, kind: str, options: dict[str, Any], verify: bool, timeout_s: float, cpus_per_rank: float = 1.0
) -> tuple[list[list[RankResult]], str]:
    """Run the plan on Ray actors; returns results[rank][traffic] and the placement used."""
    import ray
    from ray.util.placement_group import placement_group, remove_placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    if not ray.is_initialized():
        raise SpecError("runner: ray needs a Ray session; allowed: call ray.init(...) first, or runner='processes'")
    nodes = sum(1 for n in ray.nodes() if n.get("Alive"))
    strategy = "PACK" if nodes <= 1 else ("STRICT_SPREAD" if plan.world <= nodes else "SPREAD")
    pg = placement_group([{"CPU": cpus_per_rank}] * plan.world, strategy=strategy)
    actors = []
    try:
        ready, _ = ray.wait([pg.ready()], timeout=timeout_s)
        if not ready:
            raise ReplayError(
                f"ray: no room for {plan.world} ranks of {cpus_per_rank:g} CPU ({strategy} over {nodes} nodes) "
                f"within {timeout_s:g} s; allowed: fewer ranks or a larger cluster"
            )
        remote = ray.remote(num_cpus=cpus_per_rank, max_restarts=0)(RankActor)
        actors = [
            remote.options(
                scheduling_strategy=PlacementGroupSchedulingStrategy(pg, placement_group_bundle_index=r)
            ).remote(r, plan, kind, options)
            for r in range(plan.world)
        ]
        book, nodes_used = zip(*_get(ray, [a.open.remote() for a in actors], timeout_s))
        used = len(set(nodes_used))
        results = _get(ray, [a.run.remote(list(book), verify) for a in actors], timeout_s * plan.rounds)
        return results, f"ray {strategy} on {used} node{'s' if used != 1 else ''}"
    finally:
        for a in actors:
            ray.kill(a)
        remove_placement_group(pg)


def _get(ray, refs: list, timeout_s: float) -> list:
    """ray.get, with a rank's own error (not Ray's wrapper) raised, the most telling first."""
    from ray.exceptions import GetTimeoutError, RayTaskError

    from simulators.rdma._replay import _root_cause

    try:
        return ray.get(refs, timeout=timeout_s)
    except GetTimeoutError:
        raise ReplayError(f"ray: ranks did not answer within {timeout_s:g} s; allowed: a larger timeout_s") from None
    except RayTaskError:
        raised, stuck = [], []  # ranks' own errors; placeholders for peers still blocked or killed
        for ref in refs:
            try:
                ray.get(ref, timeout=5)
            except RayTaskError as exc:
                raised.append(exc.cause if isinstance(exc.cause, BaseException) else ReplayError(str(exc)))
            except Exception as exc:
                stuck.append(ReplayError(f"ray: {type(exc).__name__}"))
        raise _root_cause(raised or stuck) from None
