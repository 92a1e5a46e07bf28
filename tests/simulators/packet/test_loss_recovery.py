"""Loss and its recovery in the packet engine, against closed forms.

One flow of N packets of M bytes over one 100 Gb/s link, ACKs back over its twin, no
congestion control: packet k is sent at (k + 1) T (T = M x 8 / rate, the pace), leaves the
wire at (k + 2) T and reaches the receiver d later. A link that is down for one picosecond at
(j + 2) T loses exactly packet j."""

from __future__ import annotations

import math

import numpy as np
import pytest

from simulators._errors import SpecError
from simulators.packet import Flow, Link, LinkFaults, RoceSettings, simulate

GBPS, M, N, DELAY_S = 100, 1000, 100, 1e-6
T_S = M * 8 / (GBPS * 1e9)  # 80 ns: a packet's time on the wire, and the pace
ACK_S = 64 * 8 / (GBPS * 1e9)  # an ACK's time on the wire
LINKS = [Link(0, 1, GBPS, DELAY_S), Link(1, 0, GBPS, DELAY_S)]
FLOW = [Flow((0,), N * M, M)]


def _run(recovery: str, faults: LinkFaults | None = None, **roce) -> object:
    settings = RoceSettings(pfc=False, ecn=False, congestion_control="none", loss_recovery=recovery, **roce)
    return simulate(LINKS, FLOW, settings, set(), faults=faults)


def _lose(j: int) -> LinkFaults:
    """Link 0 down for the picosecond in which packet j leaves it."""
    at_s = (j + 2) * T_S
    return LinkFaults(down_s={0: (at_s, at_s + 1e-12)})


def test_without_loss_recovery_changes_nothing():
    for recovery in ("go_back_n", "selective_repeat", "none"):
        result = _run(recovery)
        assert result.finish_s[0] == pytest.approx((N + 1) * T_S + DELAY_S, abs=1e-12)
        assert result.retransmits[0] == 0 and result.timeouts[0] == 0


def test_go_back_n_resends_everything_sent_since_the_lost_packet():
    """Packet j is lost; j + 1 reveals the gap and the receiver's NAK reaches the sender at
    t_n = (j + 3) T + 2 d + ACK. By then the sender has sent m = floor(t_n / T) packets; it goes
    back to j, so N - j more follow on a link that never idles: the last leaves at
    (m + N - j + 1) T, and m - j packets went twice."""
    j = 10
    result = _run("go_back_n", _lose(j))
    t_nak = (j + 3) * T_S + 2 * DELAY_S + ACK_S
    m = math.floor(t_nak / T_S)
    assert m < N  # the NAK arrives while the sender is still sending
    assert result.lost[0] == 1 and result.timeouts[0] == 0
    assert result.retransmits[0] == m - j
    assert result.finish_s[0] == pytest.approx((m + N - j + 1) * T_S + DELAY_S, abs=1e-12)


def test_selective_repeat_resends_only_the_lost_packet():
    """The receiver keeps every other packet; the sender resends packet j once, in the slot
    after the NAK: N + 1 packets in all, so the loss costs one packet time."""
    j = 10
    result = _run("selective_repeat", _lose(j))
    assert result.lost[0] == 1 and result.retransmits[0] == 1 and result.timeouts[0] == 0
    assert result.finish_s[0] == pytest.approx((N + 2) * T_S + DELAY_S, abs=1e-12)


@pytest.mark.parametrize("recovery", ["go_back_n", "selective_repeat"])
def test_a_lost_last_packet_costs_one_timeout_plus_the_packet_resent(recovery):
    """Nothing follows the last packet, so no NAK: the timer runs from the last ACK that moved
    (packet N - 2's, back at N T + 2 d + ACK) and, one timeout later, the sender resends
    packet N - 1, which reaches the receiver T + d after that."""
    rto_s = 100e-6
    result = _run(recovery, _lose(N - 1), retransmit_timeout_s=rto_s)
    last_ack_s = N * T_S + 2 * DELAY_S + ACK_S
    assert result.timeouts[0] == 1 and result.retransmits[0] == 1
    assert result.finish_s[0] == pytest.approx(last_ack_s + rto_s + T_S + DELAY_S, abs=1e-12)


def test_a_lost_nak_is_recovered_by_the_timeout_and_go_back_n_resends_the_window():
    """The NAK for a lost packet j is lost too (the way back is down when it leaves): the sender
    sends all N packets, times out one timeout after the last ACK that moved (packet j - 1's),
    and goes back to j: N - j packets again, the first at the timeout."""
    j, rto_s = 10, 200e-6
    nak_leaves_s = (j + 3) * T_S + DELAY_S + ACK_S
    faults = LinkFaults(down_s={0: ((j + 2) * T_S, (j + 2) * T_S + 1e-12), 1: (nak_leaves_s, nak_leaves_s + 1e-12)})
    result = _run("go_back_n", faults, retransmit_timeout_s=rto_s)
    last_progress_s = (j + 1) * T_S + 2 * DELAY_S + ACK_S  # packet j - 1's ACK
    assert result.lost.tolist() == [1, 1] and result.timeouts[0] == 1
    assert result.retransmits[0] == N - j
    assert result.finish_s[0] == pytest.approx(last_progress_s + rto_s + (N - j) * T_S + DELAY_S, abs=1e-12)


@pytest.mark.parametrize("recovery", ["go_back_n", "selective_repeat"])
def test_random_loss_conserves_packets_and_loses_at_the_stated_rate(recovery):
    """1 % loss on the data link: every packet the sender puts on the link is either lost or
    delivered, the flow completes, and the losses are binomial (within 5 sigma)."""
    n, rate = 20_000, 0.01
    flow = [Flow((0,), n * M, M)]
    settings = RoceSettings(
        pfc=False, ecn=False, congestion_control="none", loss_recovery=recovery, retransmit_timeout_s=50e-6
    )
    result = simulate(LINKS, flow, settings, set(), faults=LinkFaults(loss_rate={0: rate}))
    sent = n + result.retransmits[0]
    assert result.link_bytes[0] == sent * M
    assert np.isfinite(result.finish_s[0]) and not result.failed[0]
    assert abs(result.lost[0] - rate * sent) <= 5 * math.sqrt(rate * (1 - rate) * sent)
    if recovery == "selective_repeat":
        assert result.retransmits[0] >= result.lost[0]  # each loss resent at least once
    again = simulate(LINKS, flow, settings, set(), faults=LinkFaults(loss_rate={0: rate}))
    assert again.finish_s[0] == result.finish_s[0]  # the same seed, the same run


def test_a_link_down_for_good_fails_its_flow_after_the_retry_count():
    """NCCL's "transport retry counter exceeded": `retries` timeouts in a row without progress,
    then the flow gives up (no completion, the engine stops)."""
    result = _run("go_back_n", LinkFaults(down_s={0: (0.0, math.inf)}), retransmit_timeout_s=10e-6, retries=3)
    assert result.failed[0] and np.isnan(result.finish_s[0])
    assert result.timeouts[0] == 3
    assert result.end_s == pytest.approx(4 * 10e-6, abs=1e-12)  # the fourth timeout gives up


def test_drop_tail_incast_completes_with_recovery_and_not_without():
    """16 senders into one port through a 1 MB buffer without PFC: the switch drops packets;
    with recovery every flow completes, without it the flows that lost packets never do."""
    from simulators.packet._scenarios import incast

    links, flows, switches = incast(16, 200_000)
    small = dict(buffer_bytes=1_000_000, pfc=False, ecn=False, congestion_control="none", retransmit_timeout_s=1e-3)
    for recovery in ("go_back_n", "selective_repeat"):
        result = simulate(links, flows, RoceSettings(loss_recovery=recovery, **small), switches)
        assert result.drops.sum() > 0 and np.isfinite(result.finish_s).all()
    lossy = simulate(links, flows, RoceSettings(loss_recovery="none", **small), switches)
    assert lossy.drops.sum() > 0 and np.isnan(lossy.finish_s).any()


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"loss_recovery": "sack"}, "loss_recovery"),
        ({"loss_recovery": "go_back_n", "acks": False}, "loss_recovery"),
        ({"loss_rate": 1.0}, "loss_rate"),
        ({"retransmit_timeout_s": 0.0}, "retransmit_timeout_s"),
        ({"retries": 8}, "retries"),
        ({"reorder_packets": 0}, "reorder_packets"),
        ({"adaptive_routing": True, "loss_recovery": "go_back_n"}, "loss_recovery"),  # it discards the reordered
    ],
)
def test_bad_loss_settings_are_one_line_errors(fields, named):
    with pytest.raises(SpecError, match=f"^{named}: .*allowed"):
        RoceSettings(**fields)


def test_unset_recovery_is_what_the_nics_do():
    assert (RoceSettings().recovery(), RoceSettings().reorder()) == ("go_back_n", 1)
    assert RoceSettings(acks=False).recovery() == "none"
    sprayed = RoceSettings(adaptive_routing=True)
    assert (sprayed.recovery(), sprayed.reorder()) == ("selective_repeat", 64)


def test_bad_faults_name_the_link():
    with pytest.raises(SpecError, match=r"faults.down_s: link 5 .*allowed: 0 to 1"):
        simulate(LINKS, FLOW, RoceSettings(), set(), faults=LinkFaults(down_s={5: (0.0, 1.0)}))
    with pytest.raises(SpecError, match=r"faults.loss_rate\[0\]"):
        simulate(LINKS, FLOW, RoceSettings(), set(), faults=LinkFaults(loss_rate={0: 1.5}))


# Two hosts joined through either of two switches: links 0: 0->2, 1: 2->1, 2: 0->3, 3: 3->1, and
# their twins back; the flow's own route is through switch 2.
TWO_WAYS = [Link(0, 2, GBPS, DELAY_S), Link(2, 1, GBPS, DELAY_S), Link(0, 3, GBPS, DELAY_S), Link(3, 1, GBPS, DELAY_S)]
TWO_WAYS += [Link(b.dst, b.src, GBPS, DELAY_S) for b in TWO_WAYS]
SWITCHES = {2, 3}


def test_a_failed_link_is_routed_around_after_convergence_and_go_back_n_recovers_what_it_lost():
    """Link 2->1 fails at t_f for good; from t_f + c ECMP sends new packets through switch 3.
    Packet k leaves 2->1 at (k + 3) T + d, so the first lost is j = ceil((t_f - d) / T) - 3;
    the first sent on the new route is q = ceil((t_f + c) / T) - 1. It reaches the receiver at
    (q + 3) T + 2 d, beyond the gap: the NAK is back at t_n = (q + 3) T + 4 d + 2 ACK, by
    when m = floor(t_n / T) packets were sent; go-back-N sends N - j more, the last arriving
    (m + N - j + 2) T + 2 d."""
    n, fail_s, converge_s = 200, 5.001e-6, 2e-6
    settings = RoceSettings(pfc=False, ecn=False, congestion_control="none")
    faults = LinkFaults(down_s={1: (fail_s, math.inf)}, reroute_after_s=converge_s)
    result = simulate(TWO_WAYS, [Flow((0, 1), n * M, M)], settings, SWITCHES, faults=faults)
    j = math.ceil((fail_s - DELAY_S) / T_S) - 3
    q = math.ceil((fail_s + converge_s) / T_S) - 1
    t_nak = (q + 3) * T_S + 4 * DELAY_S + 2 * ACK_S
    m = math.floor(t_nak / T_S)
    assert m < n
    assert result.lost[1] == q - j  # everything that reached 2->1 after it failed
    assert result.link_bytes[3] == (n - j + m - q) * M  # the new route carries the rest
    assert result.finish_s[0] == pytest.approx((m + n - j + 2) * T_S + 2 * DELAY_S, abs=1e-12)
    assert result.timeouts[0] == 0


def test_without_rerouting_or_a_way_around_a_failed_switch_cuts_the_flow_off():
    """Switch 2 fails for good: with routing that never converges, or with switch 3 failed as
    well, the flow's packets are all lost and it fails after its retries; with one way left
    and rerouting on, it completes through switch 3, which carries every packet sent after
    the routing converged."""
    settings = RoceSettings(pfc=False, ecn=False, congestion_control="none", retransmit_timeout_s=20e-6, retries=2)
    flow = [Flow((0, 1), N * M, M)]
    for faults in (
        LinkFaults(switch_down_s={2: (0.0, math.inf)}),
        LinkFaults(switch_down_s={2: (0.0, math.inf), 3: (0.0, math.inf)}, reroute_after_s=1e-6),
    ):
        result = simulate(TWO_WAYS, flow, settings, SWITCHES, faults=faults)
        assert result.failed[0] and np.isnan(result.finish_s[0])
    faults = LinkFaults(switch_down_s={2: (0.0, math.inf)}, reroute_after_s=1e-6)
    result = simulate(TWO_WAYS, flow, settings, SWITCHES, faults=faults)
    assert np.isfinite(result.finish_s[0]) and not result.failed[0]
    before = math.ceil(1e-6 / T_S) - 1  # sent before the routing converged: lost at switch 2
    assert result.lost[0] == before
    assert result.link_bytes[3] == (N + result.retransmits[0] - before) * M  # the rest through switch 3


def _two_leaves() -> list[Link]:
    """Hosts 0, 1 on leaf 4 and 2, 3 on leaf 5; spines 6 and 7; every link 100 Gb/s both ways."""
    pairs = [(0, 4), (1, 4), (2, 5), (3, 5), (4, 6), (4, 7), (5, 6), (5, 7)]
    return [Link(a, b, GBPS, DELAY_S) for a, b in pairs] + [Link(b, a, GBPS, DELAY_S) for a, b in pairs]


def test_adaptive_routing_spreads_a_hash_collision_over_both_spines():
    """Two flows, 0 -> 2 and 1 -> 3, that ECMP hashed onto spine 6: under ECMP they share the
    leaf's one uplink, so together they take twice a lone flow's time; adaptive routing sends
    each packet to the emptier uplink, so both run at line rate and finish with the lone flow
    (within 5 %), the receivers placing the few reordered packets without a resend."""
    links = _two_leaves()
    up6 = {4: 4, 5: 6}  # the link from each leaf to spine 6
    down = {2: 10, 3: 11}  # leaf 5 to hosts 2 and 3 (twins listed after the eight links)
    n = 2000
    flows = [Flow((src, up6[4], 14, down[dst]), n * M, M) for src, dst in ((0, 2), (1, 3))]  # 14: spine 6 -> leaf 5
    base = dict(pfc=True, ecn=False, congestion_control="none", loss_recovery="selective_repeat", reorder_packets=16)
    alone = simulate(links, flows[:1], RoceSettings(**base), {4, 5, 6, 7}).finish_s[0]
    ecmp = simulate(links, flows, RoceSettings(**base), {4, 5, 6, 7})
    adaptive = simulate(links, flows, RoceSettings(adaptive_routing=True, **base), {4, 5, 6, 7})
    assert ecmp.finish_s.max() == pytest.approx(2 * alone, rel=0.05)
    assert adaptive.finish_s.max() == pytest.approx(alone, rel=0.05)
    assert adaptive.link_bytes[5] > 0 and adaptive.retransmits.sum() == 0  # spine 7 carried some
    assert (adaptive.link_bytes[[4, 5]].sum()) == 2 * n * M  # every packet up exactly once


@pytest.mark.parametrize("algorithm", ["none", "dcqcn", "timely", "hpcc"])
@pytest.mark.parametrize("recovery", ["go_back_n", "selective_repeat"])
def test_every_congestion_control_recovers_from_loss_and_its_window_reopens(algorithm, recovery):
    """1 % loss on the incast's shared port: whatever the algorithm (HPCC's window included:
    lost bytes must not count as in flight for ever), every flow completes with each byte once."""
    from simulators.packet._scenarios import incast

    links, flows, switches = incast(4, 300_000)
    settings = RoceSettings(congestion_control=algorithm, loss_recovery=recovery, retransmit_timeout_s=200e-6, pfc=True)
    result = simulate(links, flows, settings, switches, faults=LinkFaults(loss_rate={4: 0.01}))
    assert np.isfinite(result.finish_s).all() and not result.failed.any()
    assert result.lost[4] > 0
    assert result.retransmits.sum() >= result.lost[4]  # each loss sent again at least once
    assert result.link_bytes[4] >= sum(f.nbytes for f in flows)


def test_adaptive_routing_steers_around_a_dead_uplink_at_once():
    """Leaf 4's uplink to spine 6 is down for good and routing never converges: ECMP's flow,
    hashed onto it, loses every packet and fails; with adaptive routing the leaf skips the dead
    port from the first packet, so nothing is lost and the flow takes its healthy time."""
    links = _two_leaves()
    flow = [Flow((0, 4, 14, 10), N * M, M)]  # 0 -> leaf 4 -> spine 6 -> leaf 5 -> 2
    base = dict(pfc=False, ecn=False, congestion_control="none", retransmit_timeout_s=20e-6, retries=1)
    healthy = simulate(links, flow, RoceSettings(adaptive_routing=True, **base), {4, 5, 6, 7})
    faults = LinkFaults(down_s={4: (0.0, math.inf)})
    hashed = simulate(links, flow, RoceSettings(**base), {4, 5, 6, 7}, faults=faults)
    sprayed = simulate(links, flow, RoceSettings(adaptive_routing=True, **base), {4, 5, 6, 7}, faults=faults)
    assert hashed.failed[0]
    assert sprayed.lost.sum() == 0 and sprayed.link_bytes[5] == N * M  # all through spine 7
    assert sprayed.finish_s[0] == healthy.finish_s[0]
