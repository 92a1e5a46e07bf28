"""The contract every registered router keeps, and a toy router added at run time."""

import numpy as np
import pytest

from simulators._errors import SpecError
from simulators.hardware import get_gpu
from simulators.models import get_model
from simulators.serving import (
    ROUTERS,
    Deployment,
    Pool,
    Requests,
    Router,
    get_router,
    make_requests,
    simulate_deployment,
    uniform,
)
from tests.simulators.serving.test_scheduler_contract import registered

H100, LLAMA8B = get_gpu("H100-SXM"), get_model("llama3-8b")
# A combination no entry has: the fewest outstanding requests, ties going round the pool.
TOY = Router("least_outstanding_rr", "fewest outstanding, ties in turn (a test router)", start="rotate", balances=True)
MASK = (1 << 64) - 1


@pytest.fixture(params=[*ROUTERS, TOY.name])
def router(request, monkeypatch):
    """Every registered router, and the toy one registered for this test only."""
    if request.param == TOY.name:
        registered(monkeypatch, ROUTERS, TOY)
    return get_router(request.param)


def stream(n=400, rate=40.0, seed=4):
    return make_requests(n, seed, rate_qps=rate, prompt=uniform(16, 1200), output=uniform(1, 200))


def xorshift_starts(seed, n, k):
    """The random router's starting replicas, from its definition (xorshift64*, seeded)."""
    x, out = (seed * 0x9E3779B97F4A7C15 | 1) & MASK, []
    for _ in range(n):
        x ^= x >> 12
        x ^= (x << 25) & MASK
        x ^= x >> 27
        out.append((((x * 2685821657736338717) & MASK) >> 33) % k)
    return out


def expected_replicas(router, requests, done_ns, k, seed):
    """Each arrival's replica by the router's definition, with the outstanding requests of each
    replica counted from the run's completion times (a request done at an arrival's instant has
    left: finishing batches go first)."""
    arrival = np.round((requests.arrival_s - requests.arrival_s[0]) * 1e9).astype(np.int64)
    starts = {"first": [0] * len(arrival), "rotate": [j % k for j in range(len(arrival))]}
    starts["random"] = xorshift_starts(seed, len(arrival), k)
    chosen = []
    for j, t in enumerate(arrival):
        first = starts[router.start][j]
        if not router.balances:
            chosen.append(first)
            continue
        load = [sum(1 for i in range(j) if chosen[i] == r and done_ns[i] > t) for r in range(k)]
        order = [(first + m) % k for m in range(k)]
        chosen.append(min(order, key=lambda r: (load[r], order.index(r))))
    return np.array(chosen)


def test_every_arrival_goes_where_the_routers_definition_says(router):
    requests = stream()
    deployment = Deployment(LLAMA8B, H100, Pool("sarathi", count=3), router=router.name)
    result = simulate_deployment(deployment, requests, seed=11)
    assert np.array_equal(result.replica, expected_replicas(router, requests, result.done_ns, 3, seed=11))
    if router.start == "rotate" and not router.balances:
        assert np.array_equal(result.replica, np.arange(len(requests)) % 3)  # round robin's closed form


def test_each_request_ends_in_a_replica_of_its_pool_and_runs_are_deterministic(router):
    requests = stream(n=200)
    split = Deployment(LLAMA8B, H100, Pool("sarathi", count=2), decode=Pool("vllm", count=3), router=router.name)
    runs = [simulate_deployment(split, requests, seed=s).replica for s in (5, 5, 6)]
    decoded = requests.output_tokens > 1
    assert set(runs[0][decoded]) <= {2, 3, 4} and set(runs[0][~decoded]) <= {0, 1}
    assert np.array_equal(runs[0], runs[1])
    if router.start == "random":
        assert not np.array_equal(runs[0], runs[2])  # the seed drives the draws
        counts = np.bincount(
            simulate_deployment(
                Deployment(LLAMA8B, H100, Pool("sarathi", count=4), router=router.name), stream(n=2000, rate=400.0)
            ).replica,
            minlength=4,
        )
        assert (abs(counts - 500) < 5 * np.sqrt(2000 * 0.25 * 0.75)).all()  # uniform within 5 sigma


def test_the_toy_router_breaks_ties_in_turn(monkeypatch):
    """Requests a minute apart each finish before the next arrives: every replica is idle at
    every arrival, so least_outstanding sends all to the first replica and the toy goes round."""
    registered(monkeypatch, ROUTERS, TOY)
    requests = Requests(np.arange(9) * 60.0, np.full(9, 100), np.full(9, 10))
    pool = Pool("sarathi", count=3)
    toy, lor = (
        simulate_deployment(Deployment(LLAMA8B, H100, pool, router=name), requests).replica
        for name in (TOY.name, "least_outstanding")
    )
    assert np.array_equal(toy, np.arange(9) % 3) and (lor == 0).all()


def test_an_unknown_router_is_one_line_naming_the_registered_ones():
    with pytest.raises(
        SpecError, match="^router: 'rr' is not a known router; allowed: round_robin, least_outstanding, random$"
    ):
        Deployment(LLAMA8B, H100, Pool(), router="rr")
    with pytest.raises(SpecError, match="start 'last' is not allowed; allowed: first, rotate, random"):
        Router("broken", "no such start", start="last", balances=False)


def test_a_router_registered_at_run_time_reaches_the_spec(monkeypatch, write_spec):
    from dse.evaluation.serving import deployment_of
    from dse.evaluation.space import SearchSpace
    from dse.spec import load_study
    from dse.study import resolve_study
    from tests.conftest import SERVING_SPEC
    from tests.dse.evaluation.test_serving_study import candidate

    text = SERVING_SPEC.replace("  decode_tp: [1, 2]\n", f"  decode_tp: [1, 2]\n  router: [{TOY.name}]\n")
    with pytest.raises(Exception, match=f"'{TOY.name}' is not allowed; allowed: round_robin, least_outstanding"):
        load_study(write_spec(text))
    registered(monkeypatch, ROUTERS, TOY)
    resolved = resolve_study(load_study(write_spec(text)))
    assert SearchSpace.from_study(resolved).values["router"] == (TOY.name,)
    assert deployment_of(resolved, candidate(router=TOY.name)).router == TOY.name
