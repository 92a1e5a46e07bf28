"""The flow simulator against closed forms (max-min shares, the alpha-beta ring, dependencies,
conservation) and against the packet simulator at line rate on small scenarios."""

from __future__ import annotations

import numpy as np
import pytest

from simulators import SpecError
from simulators.flow import simulate
from simulators.network import Flow, Link, collective_flows
from simulators.packet import RoceSettings
from simulators.packet import _scenarios as scenarios
from simulators.packet import simulate as simulate_packets

GBPS, DELAY_S, MTU = 400.0, 1e-6, 4096
LINE = RoceSettings.line_rate()


def transfer_s(nbytes: float, gbps: float = GBPS) -> float:
    return nbytes * 8 / (gbps * 1e9)


def tail_s(links: list[Link], flow: Flow) -> float:
    """Store and forward of the last packet: each hop's delay and a packet's serialisation
    there: the last packet's alone on one hop; on more, it trails a full packet from the
    second hop on, which is then a full packet's time on every hop."""
    size = min(flow.nbytes, flow.mtu_bytes)
    if len(flow.path) == 1:
        size = flow.nbytes - (flow.nbytes - 1) // flow.mtu_bytes * flow.mtu_bytes
    return sum(links[i].delay_s + transfer_s(size, links[i].gbps) for i in flow.path)


def chain(hops: int, gbps: float = GBPS) -> list[Link]:
    """Nodes 0..hops in a line, link i from node i to i + 1."""
    return [Link(i, i + 1, gbps, DELAY_S) for i in range(hops)]


def test_a_lone_flow_finishes_at_line_rate_plus_the_store_and_forward_tail():
    links = chain(3)
    flow = Flow((0, 1, 2), 10 * MTU + 100, MTU)
    result = simulate(links, [flow])
    assert result.finish_s[0] == pytest.approx(transfer_s(flow.nbytes) + tail_s(links, flow), abs=1e-12)
    packet = simulate_packets(links, [flow], LINE, {1, 2})
    assert result.finish_s[0] == pytest.approx(packet.finish_s[0], abs=1e-11)


@pytest.mark.parametrize("n", [2, 5, 16])
def test_n_flows_on_one_bottleneck_each_get_a_nth_of_it(n):
    links, flows, _ = scenarios.incast(n, 1_000_000)
    result = simulate(links, flows)
    expected = n * transfer_s(flows[0].nbytes, 100) + tail_s(links, flows[0])
    assert result.finish_s == pytest.approx(np.full(n, expected), abs=1e-12)
    assert result.recomputations == 1  # they start and drain together


@pytest.mark.parametrize("n", [4, 16, 64])
def test_a_ring_all_reduce_on_a_non_blocking_switch_is_the_alpha_beta_formula(n):
    links, _, route = scenarios.star(n, GBPS, DELAY_S)
    nbytes = n * 8 * MTU  # whole packets per chunk
    flows = collective_flows("all_reduce", [list(range(n))], nbytes, route, mtu_bytes=MTU)
    result = simulate(links, flows)
    alpha = 2 * DELAY_S + 2 * transfer_s(MTU)  # a step's two hops, store and forward
    formula = 2 * (n - 1) * alpha + 2 * (n - 1) / n * transfer_s(nbytes)
    assert result.end_s == pytest.approx(formula, rel=1e-9)
    assert result.recomputations == 2 * (n - 1)  # each step's flows start on one picosecond


def test_two_flows_hashed_onto_one_ecmp_link_get_half_its_rate():
    from simulators.hardware import get_gpu
    from simulators.network import Fabric, fabric_graph, fabric_links

    fabric = Fabric(family="leaf-spine", nic_gbps=400, gpus_per_server=2, nics_per_server=2, switch_radix=8)
    links, _, route = fabric_links(fabric_graph(fabric, get_gpu("H100-SXM"), 16))
    # leaf 24 to leaf 25, two uplinks each way: each connection hashes onto one of them, once
    routes = {(src, dst): route(src, dst) for src in (0, 1, 2, 3) for dst in (8, 9, 10, 11)}
    pairs = [(routes[a], routes[b]) for a in routes for b in routes if a[0] != b[0] and a[1] != b[1]]
    shared = next((a, b) for a, b in pairs if len(set(a) & set(b)) == 1)
    apart = next((a, b) for a, b in pairs if not set(a) & set(b))
    nbytes = 64 * MTU
    for (a, b), share in ((shared, 2), (apart, 1)):
        assert {links[i].gbps for i in a + b} == {400.0}
        flows = [Flow(a, nbytes, MTU), Flow(b, nbytes, MTU)]
        result = simulate(links, flows)
        expected = [share * transfer_s(nbytes) + tail_s(links, f) for f in flows]
        assert result.finish_s == pytest.approx(expected, abs=1e-12)


def test_a_parking_lot_gets_max_min_rates_not_proportional_ones():
    """Links 0, 1, 2 in a line: a long flow over all three, one local flow on links 0 and 1 and
    two on link 2. Max-min: link 2 is the bottleneck, C/3 for the long flow and its two local
    ones, the spare 2C/3 to the locals of links 0 and 1 (proportional fairness would give the
    long flow less, about 0.21 C). The locals of 0 and 1 drain at 1.5 B/C; the others, their
    rates unchanged, at 3 B/C."""
    links, nbytes = chain(3), 100 * MTU
    flows = [Flow((0, 1, 2), nbytes, MTU)] + [Flow((i,), nbytes, MTU) for i in (0, 1, 2, 2)]
    result = simulate(links, flows)
    drain = [3, 1.5, 1.5, 3, 3]
    expected = [d * transfer_s(nbytes) + tail_s(links, f) for d, f in zip(drain, flows)]
    assert result.finish_s == pytest.approx(expected, abs=1e-12)
    assert result.recomputations == 2


def test_a_flow_takes_the_whole_link_once_the_other_drains():
    """Two flows of a and b > a bytes on one link: both at C/2 until the short one drains at
    2a/C, then the long one at C, draining at (a + b)/C, long before its first-rate drain time
    2b/C (the run ends at its last finish, not at that superseded time)."""
    links, a, b = chain(1), 10 * MTU, 100 * MTU
    flows = [Flow((0,), a, MTU), Flow((0,), b, MTU)]
    result = simulate(links, flows)
    expected = [2 * transfer_s(a) + tail_s(links, flows[0]), transfer_s(a + b) + tail_s(links, flows[1])]
    assert result.finish_s == pytest.approx(expected, abs=1e-12)
    assert result.end_s == result.finish_s[1]


@pytest.mark.parametrize("seed", range(5))
def test_water_filling_gives_every_flow_a_bottleneck_it_shares_equally(seed):
    """Max-min fairness, checked by its definition on random flows over random links: no link
    carries more than its rate, and every flow crosses a full link on which no flow gets more."""
    from simulators.flow._engine import waterfill, waterfill_scratch

    rng = np.random.default_rng(seed)
    n_links, n_flows = 12, 40
    rate = rng.choice([100e9, 200e9, 400e9], n_links)
    paths = [rng.choice(n_links, rng.integers(1, 5), replace=False) for _ in range(n_flows)]
    path_start = np.cumsum([0] + [len(p) for p in paths]).astype(np.int64)
    path_links = np.concatenate(paths).astype(np.int64)
    active = rng.permutation(n_flows).astype(np.int64)[: n_flows - 5]  # some flows idle
    flow_rate = np.zeros(n_flows)
    scratch = waterfill_scratch(n_links, n_flows, len(path_links))
    for _ in range(2):  # the scratch arrays are left ready for the next call
        flow_rate[:] = 0
        waterfill(active, len(active), path_start, path_links, rate, flow_rate, scratch)
        load = np.zeros(n_links)
        for f in active:
            load[paths[f]] += flow_rate[f]
        assert (load <= rate * (1 + 1e-9)).all()
        for f in active:
            on = [[g for g in active if link in paths[g]] for link in paths[f]]
            assert any(
                load[link] >= rate[link] * (1 - 1e-9) and flow_rate[f] >= max(flow_rate[others]) * (1 - 1e-9)
                for link, others in zip(paths[f], on)
            ), f"flow {f} has no bottleneck"
        assert (flow_rate[np.setdiff1d(np.arange(n_flows), active)] == 0).all()


def test_runs_on_disjoint_links_do_not_disturb_each_other():
    """A recomputation covers only the flows linked to what changed: a parking lot beside an
    incast, in one run, is each of them alone."""
    lot_links, nbytes = chain(3), 100 * MTU
    lot = [Flow((0, 1, 2), nbytes, MTU)] + [Flow((i,), nbytes, MTU, start_s=i * 1e-6) for i in (0, 1, 2, 2)]
    cast_links, cast, _ = scenarios.incast(4, 300_000)
    shift = len(lot_links)
    moved = [Link(a.src + 10, a.dst + 10, a.gbps, a.delay_s) for a in cast_links]
    both = simulate(
        lot_links + moved, lot + [Flow(tuple(i + shift for i in f.path), f.nbytes, f.mtu_bytes) for f in cast]
    )
    alone = np.concatenate([simulate(lot_links, lot).finish_s, simulate(cast_links, cast).finish_s])
    assert (both.finish_s == alone).all()


def test_dependencies_start_flows_as_the_packet_engine_does():
    """After the last flow waited for finishes, plus the gap, or at the flow's own start if later."""
    links = chain(2)
    flows = [
        Flow((0, 1), 3 * MTU, MTU),
        Flow((0,), 2 * MTU, MTU, start_s=5e-6),
        Flow((0, 1), MTU, MTU, after=(0, 1), gap_s=2e-6),
        Flow((1,), MTU, MTU, start_s=1e-3, after=(0,), gap_s=1e-6),
        Flow((0, 1), 500, MTU, after=(2, 2)),  # waiting twice for one flow is waiting for it once
    ]
    result = simulate(links, flows)
    packet = simulate_packets(links, flows, LINE, {1})
    first = transfer_s(3 * MTU) + tail_s(links, flows[0])
    second = 5e-6 + transfer_s(2 * MTU) + tail_s(links, flows[1])
    third = max(first, second) + 2e-6
    assert result.start_s == pytest.approx([0, 5e-6, third, 1e-3, result.finish_s[2]], abs=1e-12)
    assert result.start_s == pytest.approx(packet.start_s, abs=1e-12)
    assert result.finish_s == pytest.approx(packet.finish_s, abs=1e-11)


def test_bytes_are_conserved_on_every_link():
    links, flows, switches = scenarios.leaf_spine(100_000, all_to_all=True, uplink_gbps=200)
    result = simulate(links, flows)
    carried = np.zeros(len(links), np.int64)
    for f in flows:
        carried[list(f.path)] += f.nbytes
    assert (result.link_bytes == carried).all()
    assert (result.link_bytes == simulate_packets(links, flows, LINE, switches).link_bytes).all()


def test_the_order_of_simultaneous_flows_does_not_change_the_run():
    links, flows, _ = scenarios.leaf_spine(200_000, all_to_all=True, uplink_gbps=200)
    order = np.random.default_rng(1).permutation(len(flows))
    straight, shuffled = simulate(links, flows), simulate(links, [flows[i] for i in order])
    assert (shuffled.finish_s == straight.finish_s[order]).all()
    assert shuffled.recomputations == straight.recomputations


@pytest.mark.parametrize(
    "scenario, fair",
    [
        (lambda: scenarios.p2p(1_000_000), True),
        (lambda: scenarios.incast(8, 1_000_000), True),
        (lambda: scenarios.leaf_spine(1_000_000, 1), True),
        (lambda: scenarios.leaf_spine(1_000_000, 4), True),
        (lambda: scenarios.leaf_spine(500_000, all_to_all=True, uplink_gbps=200), True),
        (lambda: scenarios.two_tier_incast(8, 1_000_000), False),
    ],
    ids=["p2p", "incast8", "leaf-spine-stride1", "leaf-spine-stride4", "leaf-spine-a2a", "two-tier-incast8"],
)
def test_reference_scenarios_agree_with_the_packet_engine_at_line_rate(scenario, fair):
    """The last flow within 5 %; every flow too where FIFO queues share as max-min does (in the
    two-tier incast the senders beside the receiver arrive at line rate and the remote ones
    through shared spine links, so FIFO gives the near ones more and they finish ~15 % early)."""
    links, flows, switches = scenario()
    flow, packet = simulate(links, flows), simulate_packets(links, flows, LINE, switches)
    assert flow.end_s == pytest.approx(packet.end_s, rel=0.05)
    assert (np.abs(flow.finish_s / packet.finish_s - 1).max() < 0.05) == fair


@pytest.mark.parametrize(
    "op, algorithm",
    [("all_reduce", "ring"), ("all_gather", "ring"), ("all_reduce", "halving_doubling"), ("all_to_all", "pairwise")],
)
def test_a_collective_agrees_with_the_packet_engine_at_line_rate(op, algorithm):
    links, switches, route = scenarios.star(8, GBPS, DELAY_S)
    flows = collective_flows(op, [list(range(8))], 8 << 20, route, algorithm=algorithm, mtu_bytes=MTU)
    flow, packet = simulate(links, flows), simulate_packets(links, flows, LINE, switches)
    assert flow.end_s == pytest.approx(packet.end_s, rel=0.05)


def test_bad_inputs_are_named():
    links = chain(2)
    with pytest.raises(SpecError, match=r"^flows\[0\]\.path: link 7 is not allowed; allowed: link ids 0\.\.1$"):
        simulate(links, [Flow((7,), MTU)])
    with pytest.raises(SpecError, match=r"^flows\[1\]\.path: link 1 ends at node 2, link 0 starts at 0$"):
        simulate(links, [Flow((0,), MTU), Flow((1, 0), MTU)])
    with pytest.raises(SpecError, match=r"^flows\[0\]: needs a path, nbytes >= 1 and mtu_bytes >= 1$"):
        simulate(links, [Flow((0,), 0)])
    with pytest.raises(SpecError, match=r"^flows\[1\]\.after: 1 is not another flow's index$"):
        simulate(links, [Flow((0,), MTU), Flow((0,), MTU, after=(1,))])
    with pytest.raises(SpecError, match=r"^links\[1\]\.gbps: 0\.0 is not allowed; allowed: > 0$"):
        simulate([links[0], Link(1, 2, 0.0, DELAY_S)], [Flow((0,), MTU)])
    with pytest.raises(SpecError, match=r"^links\[0\]\.delay_s: -1e-06 is not allowed; allowed: >= 0$"):
        simulate([Link(0, 1, GBPS, -DELAY_S)], [Flow((0,), MTU)])
    with pytest.raises(SpecError, match=r"^flows: 2 never completed \(a dependency cycle\?\)$"):
        simulate(links, [Flow((0,), MTU, after=(1,)), Flow((0,), MTU, after=(0,))])
    with pytest.raises(SpecError, match="^flows, links: at least one of each is needed$"):
        simulate(links, [])
