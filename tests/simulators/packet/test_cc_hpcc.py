"""HPCC (Li et al., SIGCOMM'19) in the packet engine: its window rule on hand-made telemetry,
and the paper's headline behaviours (a lone flow at eta, fair convergence, near-zero queues at
eta utilisation under incast). 1000-byte packets, as in the paper's simulations: with 4 KB
ones a packet is 7 % of a 1 us-link BDP, the queue a newcomer's packet meets biases its U, and
flows joining one by one do not converge (this model; the ns-3 code shares the rule)."""

import numpy as np
import pytest

from simulators import SpecError
from simulators.packet import Flow, Link, RoceSettings, simulate
from simulators.packet._cc_hpcc import HPCC, Hpcc
from simulators.packet._congestion import BASE_RTT_PS, INT, INT_HOPS, LINE, OWN, RATE, RTT_PS, WINDOW

MTU = 1000


def jain(x):
    return x.sum() ** 2 / (len(x) * (x**2).sum())


def incast(senders, nbytes, start_every_s=0.0, delay_s=1e-6):
    """Hosts 0..n-1 to host n through switch n + 1, links both ways, sender h starting at h x
    `start_every_s`."""
    switch = senders + 1
    links = [Link(h, switch, 100, delay_s) for h in range(senders)] + [Link(switch, senders, 100, delay_s)]
    links += [Link(senders, switch, 100, delay_s)] + [Link(switch, h, 100, delay_s) for h in range(senders)]
    flows = [Flow((h, senders), nbytes, MTU, start_s=h * start_every_s) for h in range(senders)]
    return links, flows, {switch}


def test_the_window_follows_the_papers_rule_on_given_telemetry():
    """Algorithm 1 by hand: one hop at B = 100 Gb/s, T = 10 us. The first ACK is the reference;
    the second reports 125 000 bytes sent in 10 us (txRate = B) over a 50 000-byte queue both
    times: U = 50 000 x 8 / (B T) + 1 = 1.4 (the EWMA takes it whole: tau = T), so W = W_c /
    (U / eta) + W_AI with W_c = B T = 125 000 bytes, W_AI = 40 Mb/s x T = 50 bytes."""
    params = Hpcc().vector()
    state = np.zeros((1, OWN + HPCC.columns))
    state[0, LINE], state[0, BASE_RTT_PS], state[0, RATE] = 100e9, 10e6, 100e9
    HPCC.on_start(state, params, 0, 0)
    assert state[0, WINDOW] == pytest.approx(125_000)
    for k, (sent_bytes, at_ps) in enumerate([(0, 1_000_000), (125_000, 11_000_000)]):
        state[0, INT_HOPS] = 1
        state[0, INT : INT + 4] = 50_000, sent_bytes, at_ps, 100e9
        state[0, RTT_PS] = 5_000_000
        HPCC.on_ack(state, params, 0, 20_000_000 * (k + 1))
    window = 125_000 / (1.4 / 0.95) + 50
    assert state[0, WINDOW] == pytest.approx(window, rel=1e-12)
    assert state[0, RATE] == pytest.approx(window * 8 / 10e-6, rel=1e-12)  # paced at W / T


def test_a_lone_flow_settles_at_eta_of_its_bottleneck_plus_one_additive_step():
    """Alone on 3 hops it measures U = rate / B and no queue; W = W_c eta / U + W_AI has the
    fixed point rate = eta B + R_AI = 95.04 Gb/s (HPCC §3: the 1 - eta headroom). Measured
    over 2-4 ms: within 0.5 % of it, and no queue builds at the switches."""
    links = [Link(i, i + 1, 100, 1e-6) for i in range(3)] + [Link(i + 1, i, 100, 1e-6) for i in range(3)]
    window = (2e-3, 4e-3)
    result = simulate(
        links, [Flow((0, 1, 2), 60_000_000, MTU)], RoceSettings(congestion_control="hpcc"), {1, 2}, window
    )
    rate_gbps = result.window_bytes[0] * 8 / (window[1] - window[0]) / 1e9
    assert rate_gbps == pytest.approx(0.95 * 100 + 0.04, rel=0.005)
    # the packet being sent and, while it starts at line rate, the next arriving in the same ps
    assert result.queue_max_bytes[1:3].max() <= 2 * MTU


def test_flows_joining_one_by_one_converge_to_the_fair_share():
    """HPCC's fairness experiment (§5, flows joining a bottleneck one at a time; the figure
    number not re-checked): 4 flows join a 100 Gb/s port 1 ms apart; 12 ms after the last
    joined they share it with Jain's index >= 0.99 and together use eta of it (within 1 %)."""
    links, flows, switches = incast(4, 60_000_000, start_every_s=1e-3, delay_s=2e-6)
    window = (15e-3, 16e-3)
    result = simulate(links, flows, RoceSettings(congestion_control="hpcc", pfc=False), switches, window)
    rate_gbps = result.window_bytes * 8 / (window[1] - window[0]) / 1e9
    assert (result.start_s < window[0]).all() and (result.finish_s > window[1]).all()
    assert jain(rate_gbps) >= 0.99
    assert rate_gbps.sum() == pytest.approx(95, rel=0.01)


def test_an_incast_keeps_the_queue_near_zero_while_the_port_runs_at_eta(rtt_watched):
    """The paper's claim (abstract, §5: near-zero queues with eta utilisation, and little
    congestion in incasts): 16 senders at line rate into one port. From 1 ms
    on every ACK's RTT stays within 1 us (12.5 KB of queue) of the base RTT, the port delivers
    eta of its rate (within 2 %), no PFC pause is sent and every flow ends within 10 % of the
    ideal incast time at eta. The queue's peak is bounded by the windows: a sender may have at
    most W_init (one BDP) plus a packet in flight."""
    links, flows, switches = incast(16, 4_000_000)
    entry = rtt_watched(HPCC, 1e-3)
    ideal_s = 16 * 4_000_000 * 8 / 100e9
    window = (1e-3, 0.8 * ideal_s)
    result = simulate(links, flows, RoceSettings(congestion_control=entry.name), switches, window)
    base_ps = result.cc_state[0, BASE_RTT_PS]
    bdp_bytes = 100e9 * base_ps / 1e12 / 8
    lowest, highest = (result.cc_state[:, OWN + HPCC.columns + k] for k in (0, 1))
    assert result.queue_max_bytes[16] <= 16 * (bdp_bytes + MTU)
    assert lowest.min() >= base_ps and highest.max() <= base_ps + 1e6
    assert result.window_bytes.sum() * 8 / (window[1] - window[0]) == pytest.approx(0.95 * 100e9, rel=0.02)
    assert result.pause_frames.sum() == 0
    assert result.finish_s.max() <= 1.1 * ideal_s / 0.95


def test_telemetry_refuses_paths_through_more_switches_than_it_has_slots():
    links = [Link(i, i + 1, 100, 1e-6) for i in range(7)] + [Link(i + 1, i, 100, 1e-6) for i in range(7)]
    flow = Flow(tuple(range(7)), 10 * MTU, MTU)
    with pytest.raises(SpecError, match=r"^flows\[0\]: a path through 6 switches is not allowed .*allowed: at most 5"):
        simulate(links, [flow], RoceSettings(congestion_control="hpcc"), set(range(1, 7)))
    result = simulate(links, [flow], RoceSettings(congestion_control="dcqcn"), set(range(1, 7)))
    assert np.isfinite(result.finish_s).all()  # without telemetry any path length runs
    with pytest.raises(SpecError, match=r"^congestion_params.eta: 1.5 is not allowed; allowed: 0 < eta <= 1$"):
        RoceSettings(congestion_control="hpcc", congestion_params={"eta": 1.5})
