"""The contract every registered congestion control keeps in the packet engine, and a toy
algorithm (halve on a CNP, add a step per ACK) registered at run time."""

from dataclasses import dataclass, replace

import numba
import numpy as np
import pytest

from simulators import CatalogError, SpecError
from simulators.packet import (
    CONGESTION_CONTROLS,
    CongestionControl,
    Flow,
    Link,
    Params,
    RoceSettings,
    register,
    simulate,
)
from simulators.packet import _scenarios as scenarios
from simulators.packet._congestion import LINE, OWN, RATE


@dataclass(frozen=True)
class Aimd(Params):
    step_gbps: float = 2.0
    floor_gbps: float = 1.0

    def vector(self) -> np.ndarray:
        return np.array([self.step_gbps * 1e9, self.floor_gbps * 1e9])

    def floor_bps(self, line_bps: float) -> float:
        return min(self.floor_gbps * 1e9, line_bps)


@numba.njit
def _aimd_nothing(state, params, flow, now_ps):
    pass


@numba.njit
def _aimd_marked(state, params, flow, now_ps):
    return True  # a CNP for every marked packet


@numba.njit
def _aimd_cnp(state, params, flow, now_ps):
    state[flow, RATE] = max(state[flow, RATE] / 2.0, params[1])


@numba.njit
def _aimd_ack(state, params, flow, now_ps):
    state[flow, RATE] = min(state[flow, RATE] + params[0], state[flow, LINE])


# halve on a CNP, add 2 Gb/s an ACK
TOY = CongestionControl("toy-aimd", Aimd, 0, _aimd_nothing, _aimd_nothing, _aimd_marked, _aimd_cnp, _aimd_ack)


@pytest.fixture(params=[*CONGESTION_CONTROLS, TOY.name])
def cc(request, registered):
    """Every registered algorithm, and the toy one registered for this test only."""
    if request.param == TOY.name:
        registered(TOY)
    return CONGESTION_CONTROLS[request.param]


def roce(cc, **overrides):
    """PFC, ECN and per-packet ACKs on, with `cc`."""
    return RoceSettings(congestion_control=cc.name, **overrides)


def packet_time_s(nbytes, gbps):
    return round(nbytes * 8 * 1e12 / (gbps * 1e9)) / 1e12


def chain(hops, gbps=100.0, delay_s=1e-6):
    """Host 0 -> switches 1..hops-1 -> host `hops`, and the links back (for ACKs)."""
    forward = [Link(i, i + 1, gbps, delay_s) for i in range(hops)]
    return forward + [Link(i + 1, i, gbps, delay_s) for i in range(hops)], set(range(1, hops))


@pytest.mark.parametrize("hops", [1, 3])
@pytest.mark.parametrize("nbytes", [100 * 4096, 100 * 4096 + 100])
def test_a_lone_flow_finishes_at_the_store_and_forward_time(cc, hops, nbytes):
    """Nothing queues behind a lone flow (each hop runs at its rate), so no packet is marked and
    no algorithm may slow it: FCT = one packet's pace, every packet serialised once on the
    first link, then the last one waits on each of the h - 1 further hops for the full packet
    ahead of it and is serialised, plus h propagation delays (each serialisation rounded to 1 ps,
    as here): exact, whatever the algorithm, unless it aims below the full rate by design
    (`utilisation_target` eta < 1, HPCC): then no faster than that and no slower than the
    sender's share at eta (3 % slack: its utilisation estimate lags the rate it lowers, so the
    rate undershoots eta for a few round trips; 2.2 % over these 100 packets)."""
    links, switches = chain(hops)
    result = simulate(links, [Flow(tuple(range(hops)), nbytes, 4096)], roce(cc), switches)
    full, last = packet_time_s(4096, 100), packet_time_s(nbytes - (nbytes - 1) // 4096 * 4096, 100)
    packets = -(-nbytes // 4096)
    rest = (hops - 1) * full + hops * 1e-6
    expected = full + (packets - 1) * full + last + rest
    eta = RoceSettings(congestion_control=cc.name).control_params().utilisation_target()
    assert result.marked_packets.sum() == 0
    if eta == 1 or hops == 1:  # one link has no switch to report its load (HPCC's telemetry)
        assert result.fct_s[0] == pytest.approx(expected, rel=1e-12)
    else:
        at_eta = (full + (packets - 1) * full + last) / eta + rest
        assert expected < result.fct_s[0] <= 1.03 * at_eta


@pytest.mark.parametrize("acks", [True, False])
def test_every_byte_arrives_exactly_once_when_lossless(cc, acks):
    """16 senders into one port, PFC on: no drops, each flow's bytes counted once at the
    receiver (the window spans the run), the receiver's link carries every data byte and its
    uplink one 64-byte ACK a packet. An algorithm that learns from ACKs refuses to run
    without them, in one line."""
    links, flows, switches = scenarios.incast(16, 500_000, mtu=4096)
    if cc.acks and not acks:
        with pytest.raises(SpecError, match=f"^acks: False is not allowed with congestion_control '{cc.name}'"):
            roce(cc, acks=acks)
        return
    result = simulate(links, flows, roce(cc, acks=acks), switches, window_s=(0.0, 1.0))
    packets = sum(-(-f.nbytes // f.mtu_bytes) for f in flows)
    assert result.drops.sum() == 0 and np.isfinite(result.finish_s).all()
    assert result.window_bytes.tolist() == [f.nbytes for f in flows]
    assert result.link_bytes[16] == sum(f.nbytes for f in flows)
    assert result.link_bytes[17] == (packets * 64 if acks else 0)


@pytest.mark.parametrize("senders", [4, 16])
def test_an_incast_takes_at_least_its_bytes_over_the_bottleneck(cc, senders):
    links, flows, switches = scenarios.incast(senders, 1_000_000, mtu=4096)
    result = simulate(links, flows, roce(cc), switches)
    bound_s = sum(f.nbytes for f in flows) * 8 / 100e9
    assert result.finish_s.max() >= bound_s
    assert result.finish_s.max() < 4 * bound_s  # and it does finish, near it (PFC keeps it lossless)


def recorded(entry):
    """`entry` with two more state columns holding the lowest and highest rate any hook left."""
    lo = OWN + entry.columns
    start, timer, marked, cnp, ack = entry.hooks()

    @numba.njit
    def note(state, flow):
        state[flow, lo] = min(state[flow, lo], state[flow, RATE])
        state[flow, lo + 1] = max(state[flow, lo + 1], state[flow, RATE])

    @numba.njit
    def on_start(state, params, flow, now_ps):
        state[flow, lo], state[flow, lo + 1] = np.inf, -np.inf
        start(state, params, flow, now_ps)
        note(state, flow)

    @numba.njit
    def on_timer(state, params, flow, now_ps):
        timer(state, params, flow, now_ps)
        note(state, flow)

    @numba.njit
    def on_marked(state, params, flow, now_ps):
        answer = marked(state, params, flow, now_ps)
        note(state, flow)
        return answer

    @numba.njit
    def on_cnp(state, params, flow, now_ps):
        cnp(state, params, flow, now_ps)
        note(state, flow)

    @numba.njit
    def on_ack(state, params, flow, now_ps):
        ack(state, params, flow, now_ps)
        note(state, flow)

    return replace(
        entry,
        name=f"{entry.name}-recorded",
        aliases=(),
        columns=entry.columns + 2,
        on_start=on_start,
        on_timer=on_timer,
        on_marked=on_marked,
        on_cnp=on_cnp,
        on_ack=on_ack,
    )


@pytest.mark.parametrize("acks", [True, False])
def test_the_rate_stays_between_the_floor_and_the_line_rate(cc, acks, registered):
    """Every hook call of a congested run, watched: no rate above the flow's first link, none
    below the algorithm's floor."""
    if cc.acks and not acks:
        pytest.skip("refused without ACKs (test_every_byte_arrives_exactly_once_when_lossless)")
    watched = registered(recorded(cc))
    links, flows, switches = scenarios.incast(8, 2_000_000, mtu=4096)
    result = simulate(links, flows, roce(watched, acks=acks, kmin_bytes=2_000, pmax=0.5), switches)
    lowest, highest = result.cc_state[:, OWN + cc.columns], result.cc_state[:, OWN + cc.columns + 1]
    assert result.marked_packets.sum() > 0
    assert (highest <= 100e9).all()
    assert (lowest >= RoceSettings(congestion_control=cc.name).control_params().floor_bps(100e9)).all()


def test_a_run_is_the_same_for_the_same_seed(cc):
    """ECN marks between Kmin and Kmax are drawn from the seeded generator."""
    links, flows, switches = scenarios.leaf_spine(300_000, stride=4, hosts=8, leaves=2, spines=2)
    settings = roce(cc, kmin_bytes=1_000, kmax_bytes=10_000_000, pmax=0.3)
    first, again = (simulate(links, flows, settings, switches) for _ in range(2))
    other = simulate(links, flows, replace(settings, seed=1), switches)
    assert first.marked_packets.sum() > 0
    assert first.finish_s.tolist() == again.finish_s.tolist() and first.events == again.events
    assert first.marked_packets.tolist() == again.marked_packets.tolist()
    assert first.marked_packets.tolist() != other.marked_packets.tolist()


def test_the_toy_reaches_the_settings_by_name_and_reacts_where_none_does_not(registered):
    links, flows, switches = scenarios.incast(8, 2_000_000, mtu=4096)
    with pytest.raises(CatalogError, match="'toy-aimd' is not a known congestion control"):
        RoceSettings(congestion_control="toy-aimd")
    registered(TOY)
    toy = RoceSettings(congestion_control="TOY-AIMD", congestion_params={"step_gbps": 0.5})
    assert toy.congestion_control == "toy-aimd" and toy.congestion_params == Aimd(step_gbps=0.5)
    reacting = simulate(links, flows, toy, switches)
    plain = simulate(links, flows, replace(toy, congestion_control="none", congestion_params=None), switches)
    assert replace(RoceSettings(), congestion_control="toy-aimd").control_params() == Aimd()
    assert reacting.cnps.sum() > 0 and plain.cnps.sum() == 0
    assert reacting.fct_s.tolist() != plain.fct_s.tolist()


def test_the_toy_is_gone_after_its_test():
    assert TOY.name not in CONGESTION_CONTROLS
    with pytest.raises(CatalogError, match="^congestion_control: 'toy-aimd' is not a known congestion control"):
        RoceSettings(congestion_control="toy-aimd")


def test_unknown_names_and_parameters_are_one_line_naming_the_allowed_ones():
    with pytest.raises(CatalogError, match="^congestion_control: 'cubic' is not a known congestion control; allowed: "):
        RoceSettings(congestion_control="cubic")
    with pytest.raises(CatalogError, match=r"\(did you mean 'dcqcn'\?\); allowed: dcqcn, hpcc, none, timely$"):
        RoceSettings(congestion_control="dcqnc")
    with pytest.raises(SpecError, match="^congestion_params.gain: not a parameter of 'dcqcn'; allowed: g, alpha_"):
        RoceSettings(congestion_params={"gain": 0.5})
    with pytest.raises(SpecError, match=r"^congestion_params.g: 2 is not allowed; allowed: 0 < g <= 1$"):
        RoceSettings(congestion_params={"g": 2})
    with pytest.raises(SpecError, match="^congestion_params.g: not a parameter of 'none'; allowed: \\(it has none\\)$"):
        RoceSettings(congestion_control="none", congestion_params={"g": 0.5})
    with pytest.raises(CatalogError, match="registered twice"):
        register(CONGESTION_CONTROLS["dcqcn"])
