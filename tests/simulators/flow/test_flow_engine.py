"""The flow simulator's two models against closed forms (max-min shares, FIFO queues, the
alpha-beta ring, dependencies, conservation) and against the packet simulator at line rate."""

from __future__ import annotations

import numpy as np
import pytest

from simulators import SpecError
from simulators.flow import MODELS, simulate
from simulators.network import Flow, Link, collective_flows
from simulators.packet import RoceSettings
from simulators.packet import _scenarios as scenarios
from simulators.packet import simulate as simulate_packets

GBPS, DELAY_S, MTU = 400.0, 1e-6, 4096
LINE = RoceSettings.line_rate()
BOTH = pytest.mark.parametrize("model", sorted(MODELS))


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


@BOTH
def test_a_lone_flow_finishes_at_line_rate_plus_the_store_and_forward_tail(model):
    links = chain(3)
    flow = Flow((0, 1, 2), 10 * MTU + 100, MTU)
    result = simulate(links, [flow], model=model)
    assert result.finish_s[0] == pytest.approx(transfer_s(flow.nbytes) + tail_s(links, flow), abs=1e-12)
    packet = simulate_packets(links, [flow], LINE, {1, 2})
    assert result.finish_s[0] == pytest.approx(packet.finish_s[0], abs=1e-11)


@BOTH
@pytest.mark.parametrize("n", [2, 5, 16])
def test_n_flows_on_one_bottleneck_each_get_a_nth_of_it(n, model):
    links, flows, _ = scenarios.incast(n, 1_000_000)
    result = simulate(links, flows, model=model)
    expected = n * transfer_s(flows[0].nbytes, 100) + tail_s(links, flows[0])
    assert result.finish_s == pytest.approx(np.full(n, expected), abs=1e-12)
    if model == "max_min":
        assert result.recomputations == 1  # they start and drain together


@BOTH
@pytest.mark.parametrize("n", [4, 16, 64])
def test_a_ring_all_reduce_on_a_non_blocking_switch_is_the_alpha_beta_formula(n, model):
    links, _, route = scenarios.star(n, GBPS, DELAY_S)
    nbytes = n * 8 * MTU  # whole packets per chunk
    flows = collective_flows("all_reduce", [list(range(n))], nbytes, route, mtu_bytes=MTU)
    result = simulate(links, flows, model=model)
    alpha = 2 * DELAY_S + 2 * transfer_s(MTU)  # a step's two hops, store and forward
    formula = 2 * (n - 1) * alpha + 2 * (n - 1) / n * transfer_s(nbytes)
    assert result.end_s == pytest.approx(formula, rel=1e-9)
    if model == "max_min":
        assert result.recomputations == 2 * (n - 1)  # each step's flows start on one picosecond


@BOTH
def test_two_flows_hashed_onto_one_ecmp_link_get_half_its_rate(model):
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
        result = simulate(links, flows, model=model)
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
    result = simulate(links, flows, model="max_min")
    drain = [3, 1.5, 1.5, 3, 3]
    expected = [d * transfer_s(nbytes) + tail_s(links, f) for d, f in zip(drain, flows)]
    assert result.finish_s == pytest.approx(expected, abs=1e-12)
    assert result.recomputations == 2


@BOTH
def test_a_flow_takes_the_whole_link_once_the_other_drains(model):
    """Two flows of a and b > a bytes on one link: both at C/2 until the short one drains at
    2a/C, then the long one at C, draining at (a + b)/C, long before its first-rate drain time
    2b/C (the run ends at its last finish, not at that superseded time)."""
    links, a, b = chain(1), 10 * MTU, 100 * MTU
    flows = [Flow((0,), a, MTU), Flow((0,), b, MTU)]
    result = simulate(links, flows, model=model)
    expected = [2 * transfer_s(a) + tail_s(links, flows[0]), transfer_s(a + b) + tail_s(links, flows[1])]
    assert result.finish_s == pytest.approx(expected, abs=1e-12)
    assert result.end_s == result.finish_s[1]


def merge(first_gbps: tuple[float, float], bottleneck_gbps: float) -> list[Link]:
    """Senders 0 and 1 on links 0 and 1 into switch 2, which sends on link 2 to node 3."""
    return [
        Link(0, 2, first_gbps[0], DELAY_S),
        Link(1, 2, first_gbps[1], DELAY_S),
        Link(2, 3, bottleneck_gbps, DELAY_S),
    ]


@pytest.mark.parametrize("later_s", [0.0, 20e-6])
def test_a_fifo_queue_serves_bytes_in_the_order_they_came(later_s):
    """Two flows of B bytes from 400 Gb/s first hops into a 200 Gb/s link (R), the second
    `later_s` after the first. Senders at line rate keep a backlog there from the start, so it
    sends without a pause and the last byte leaves at 2B/R (total bytes over the bottleneck's
    rate: with both at once, the 2:1 bottleneck after a fast first hop). The first flow's last
    byte arrived, at its sender's 2R, behind 2B - 2R * later_s bits, so it leaves at
    2B/R - 2 later_s; max-min, which shares the link equally from the second's start, has it
    leave at 2B/R - later_s. The packet engine queues as FIFO does."""
    links, nbytes = merge((400.0, 400.0), 200.0), 100 * 8 * MTU
    flows = [Flow((0, 2), nbytes, MTU), Flow((1, 2), nbytes, MTU, start_s=later_s)]
    whole_s = transfer_s(2 * nbytes, 200)
    first_s = {"fifo": whole_s - 2 * later_s, "max_min": whole_s - later_s}
    for model in MODELS:
        result = simulate(links, flows, model=model)
        expected = [first_s[model] + tail_s(links, flows[0]), whole_s + tail_s(links, flows[1])]
        assert result.finish_s == pytest.approx(expected, abs=1e-12)
    packet = simulate_packets(links, flows, LINE, {2}).finish_s
    assert packet == pytest.approx(
        [first_s["fifo"] + tail_s(links, flows[0]), whole_s + tail_s(links, flows[1])], rel=1e-3
    )


def test_a_fifo_queue_shares_a_link_by_the_rates_flows_arrive_at():
    """Flows of B bytes from a 400 Gb/s (C) and a 200 Gb/s first hop into a 200 Gb/s link: FIFO
    gives them its rate in proportion to their arrival, 2:1, while the faster one sends: it
    sent its last bit at B/C, behind 1.5 B bits, which leave at 1.5 B / (C/2) = 3B/C; the other
    then has the link alone, its last bit leaving with the 2B-th at 4B/C. Max-min shares the
    link equally: both leave at 4B/C."""
    links, nbytes = merge((400.0, 200.0), 200.0), 100 * 8 * MTU
    flows = [Flow((0, 2), nbytes, MTU), Flow((1, 2), nbytes, MTU)]
    drain = {"fifo": [3, 4], "max_min": [4, 4]}
    for model in MODELS:
        result = simulate(links, flows, model=model)
        expected = [d * transfer_s(nbytes) + tail_s(links, f) for d, f in zip(drain[model], flows)]
        assert result.finish_s == pytest.approx(expected, abs=1e-12)
    packet = simulate_packets(links, flows, LINE, {2}).finish_s
    assert packet == pytest.approx([d * transfer_s(nbytes) + tail_s(links, f) for d, f in zip([3, 4], flows)], rel=2e-3)


@pytest.mark.parametrize(
    "num_gpus, ranks, stride, algorithm", [(24, 6, 4, "ring"), (32, 8, 4, "ring"), (16, 8, 2, "halving_doubling")]
)
def test_fifo_queues_keep_up_with_line_rate_packets_where_groups_collide(num_gpus, ranks, stride, algorithm):
    """Every group of an all-reduce at once on a 3:1 leaf-spine of two-GPU servers: steps of
    different groups meet on oversubscribed uplinks. The packet engine at line rate keeps a
    backlog there, which FIFO queues model (within 0.5 %); max-min, which throttles each flow to
    its share before the uplink and leaves it idle while a group waits for its other steps,
    comes out more than 10 % slower (benchmarks/flow_vs_packet.py has larger runs)."""
    from simulators.fidelity._contention import group_flows
    from simulators.hardware import get_gpu
    from simulators.network import Fabric, fabric_graph, fabric_links

    gpu = get_gpu("H100-SXM")
    fabric = Fabric(
        "leaf-spine", nic_gbps=400, gpus_per_server=2, nics_per_server=2, switch_radix=8, oversubscription=3.0
    )
    graph = fabric_graph(fabric, gpu, num_gpus)
    links, switches, route = fabric_links(graph)
    network = fabric.network(gpu, num_gpus)
    _, flows, _ = group_flows(graph, route, network, "all_reduce", ranks, stride, 1 << 20, algorithm)
    packet_s = simulate_packets(links, flows, LINE, switches).end_s
    assert simulate(links, flows, model="fifo").end_s == pytest.approx(packet_s, rel=0.005)
    assert simulate(links, flows, model="max_min").end_s > 1.1 * packet_s


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


@BOTH
def test_runs_on_disjoint_links_do_not_disturb_each_other(model):
    """A recomputation covers only the flows linked to what changed: a parking lot beside an
    incast, in one run, is each of them alone."""
    lot_links, nbytes = chain(3), 100 * MTU
    lot = [Flow((0, 1, 2), nbytes, MTU)] + [Flow((i,), nbytes, MTU, start_s=i * 1e-6) for i in (0, 1, 2, 2)]
    cast_links, cast, _ = scenarios.incast(4, 300_000)
    shift = len(lot_links)
    moved = [Link(a.src + 10, a.dst + 10, a.gbps, a.delay_s) for a in cast_links]
    both = simulate(
        lot_links + moved,
        lot + [Flow(tuple(i + shift for i in f.path), f.nbytes, f.mtu_bytes) for f in cast],
        model=model,
    )
    alone = [simulate(lot_links, lot, model=model).finish_s, simulate(cast_links, cast, model=model).finish_s]
    alone = np.concatenate(alone)
    assert (both.finish_s == alone).all()


@BOTH
def test_dependencies_start_flows_as_the_packet_engine_does(model):
    """After the last flow waited for finishes, plus the gap, or at the flow's own start if later."""
    links = chain(2)
    flows = [
        Flow((0, 1), 3 * MTU, MTU),
        Flow((0,), 2 * MTU, MTU, start_s=5e-6),
        Flow((0, 1), MTU, MTU, after=(0, 1), gap_s=2e-6),
        Flow((1,), MTU, MTU, start_s=1e-3, after=(0,), gap_s=1e-6),
        Flow((0, 1), 500, MTU, after=(2, 2)),  # waiting twice for one flow is waiting for it once
    ]
    result = simulate(links, flows, model=model)
    packet = simulate_packets(links, flows, LINE, {1})
    first = transfer_s(3 * MTU) + tail_s(links, flows[0])
    second = 5e-6 + transfer_s(2 * MTU) + tail_s(links, flows[1])
    third = max(first, second) + 2e-6
    assert result.start_s == pytest.approx([0, 5e-6, third, 1e-3, result.finish_s[2]], abs=1e-12)
    assert result.start_s == pytest.approx(packet.start_s, abs=1e-12)
    assert result.finish_s == pytest.approx(packet.finish_s, abs=1e-11)


@BOTH
def test_bytes_are_conserved_on_every_link(model):
    links, flows, switches = scenarios.leaf_spine(100_000, all_to_all=True, uplink_gbps=200)
    result = simulate(links, flows, model=model)
    carried = np.zeros(len(links), np.int64)
    for f in flows:
        carried[list(f.path)] += f.nbytes
    assert (result.link_bytes == carried).all()
    assert (result.link_bytes == simulate_packets(links, flows, LINE, switches).link_bytes).all()


@BOTH
def test_the_order_of_simultaneous_flows_does_not_change_the_run(model):
    links, flows, _ = scenarios.leaf_spine(200_000, all_to_all=True, uplink_gbps=200)
    order = np.random.default_rng(1).permutation(len(flows))
    straight, shuffled = simulate(links, flows, model=model), simulate(links, [flows[i] for i in order], model=model)
    assert (shuffled.finish_s == straight.finish_s[order]).all()
    assert shuffled.recomputations == straight.recomputations


@BOTH
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
def test_reference_scenarios_agree_with_the_packet_engine_at_line_rate(scenario, fair, model):
    """The last flow within 1 %. Every flow within 2 % with FIFO queues, and with max-min
    where FIFO queues share as max-min does: in the two-tier incast the senders beside the
    receiver arrive at line rate and the remote ones through shared spine links, so FIFO gives
    the near ones more and they finish ~15 % before max-min has them finish."""
    links, flows, switches = scenario()
    flow, packet = simulate(links, flows, model=model), simulate_packets(links, flows, LINE, switches)
    assert flow.end_s == pytest.approx(packet.end_s, rel=0.01)
    assert (np.abs(flow.finish_s / packet.finish_s - 1).max() < 0.02) == (fair or model == "fifo")


@BOTH
@pytest.mark.parametrize(
    "op, algorithm",
    [("all_reduce", "ring"), ("all_gather", "ring"), ("all_reduce", "halving_doubling"), ("all_to_all", "pairwise")],
)
def test_a_collective_agrees_with_the_packet_engine_at_line_rate(op, algorithm, model):
    links, switches, route = scenarios.star(8, GBPS, DELAY_S)
    flows = collective_flows(op, [list(range(8))], 8 << 20, route, algorithm=algorithm, mtu_bytes=MTU)
    flow, packet = simulate(links, flows, model=model), simulate_packets(links, flows, LINE, switches)
    assert flow.end_s == pytest.approx(packet.end_s, rel=0.05)


def test_bad_inputs_are_named():
    links = chain(2)
    with pytest.raises(SpecError, match=r"^model: 'pfc' is not allowed; allowed: fifo, max_min$"):
        simulate(links, [Flow((0,), MTU)], model="pfc")
    with pytest.raises(SpecError, match=r"^flows\[0\]\.path: link 7 is not allowed; allowed: link ids 0\.\.1$"):
        simulate(links, [Flow((7,), MTU)], model="fifo")
    with pytest.raises(SpecError, match=r"^flows\[1\]\.path: link 1 ends at node 2, link 0 starts at 0$"):
        simulate(links, [Flow((0,), MTU), Flow((1, 0), MTU)], model="fifo")
    with pytest.raises(SpecError, match=r"^flows\[0\]: needs a path, nbytes >= 1 and mtu_bytes >= 1$"):
        simulate(links, [Flow((0,), 0)], model="fifo")
    with pytest.raises(SpecError, match=r"^flows\[1\]\.after: 1 is not another flow's index$"):
        simulate(links, [Flow((0,), MTU), Flow((0,), MTU, after=(1,))], model="fifo")
    with pytest.raises(SpecError, match=r"^links\[1\]\.gbps: 0\.0 is not allowed; allowed: > 0$"):
        simulate([links[0], Link(1, 2, 0.0, DELAY_S)], [Flow((0,), MTU)], model="fifo")
    with pytest.raises(SpecError, match=r"^links\[0\]\.delay_s: -1e-06 is not allowed; allowed: >= 0$"):
        simulate([Link(0, 1, GBPS, -DELAY_S)], [Flow((0,), MTU)], model="fifo")
    with pytest.raises(SpecError, match=r"^flows: 2 never completed \(a dependency cycle\?\)$"):
        simulate(links, [Flow((0,), MTU, after=(1,)), Flow((0,), MTU, after=(0,))], model="fifo")
    with pytest.raises(SpecError, match="^flows, links: at least one of each is needed$"):
        simulate(links, [], model="fifo")


def test_the_buffered_kernel_answers_the_same_whatever_room_it_is_given():
    """The FIFO kernel never reallocates: given too little room (heap entries, queue segments,
    their entries) it says so, and given less room for segment entries than it writes it
    compacts them in place, and answers as with ample room."""
    from simulators.fidelity._contention import group_flows
    from simulators.flow._engine import PS_PER_S, Links, simulate_buffered, simulate_queued
    from simulators.hardware import get_gpu
    from simulators.network import Fabric, fabric_graph, fabric_links

    gpu = get_gpu("H100-SXM")
    fabric = Fabric(
        "leaf-spine", nic_gbps=400, gpus_per_server=2, nics_per_server=2, switch_radix=8, oversubscription=3.0
    )
    graph = fabric_graph(fabric, gpu, 24)
    links, _, route = fabric_links(graph)
    _, flows, _ = group_flows(graph, route, fabric.network(gpu, 24), "all_reduce", 6, 4, 1 << 20, "ring")
    engine_links = Links(
        np.array([a.gbps * 1e9 for a in links]), np.array([round(a.delay_s * PS_PER_S) for a in links], np.int64)
    )
    ample = simulate_buffered(engine_links, flows)
    assert ample[5] > 200  # queue segments opened, each with one entry or more
    assert simulate_queued(engine_links, flows, (10, 10, 10))[-1]  # too little room: said
    *compacted, short = simulate_queued(engine_links, flows, (2 * flows.count, 10**5, 100))
    assert not short
    for got, want in zip(compacted, ample):
        assert np.array_equal(got, want)
