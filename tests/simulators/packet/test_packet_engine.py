"""The packet engine against closed forms, conservation, PFC and DCQCN behaviour."""

import numpy as np
import pytest

from simulators.packet import Flow, Link, RoceSettings, simulate
from simulators.packet import _scenarios as scenarios

LINE = RoceSettings.line_rate()


def packet_time_s(nbytes, gbps):
    return round(nbytes * 8 * 1e12 / (gbps * 1e9)) / 1e12


def chain(hops, gbps=100.0, delay_s=1e-6):
    """Host 0 -> switches 1..hops-1 -> host `hops`."""
    return [Link(i, i + 1, gbps, delay_s) for i in range(hops)], set(range(1, hops))


@pytest.mark.parametrize("hops", [1, 2, 4])
def test_store_and_forward_over_h_hops(hops):
    """FCT = T (first send) + n T + (h - 1) T + h d for n packets of serialisation T."""
    links, switches = chain(hops)
    n, mtu = 100, 4096
    result = simulate(links, [Flow(tuple(range(hops)), n * mtu, mtu)], LINE, switches)
    t = packet_time_s(mtu, 100)
    assert result.fct_s[0] == pytest.approx(t + n * t + (hops - 1) * t + hops * 1e-6, rel=1e-12)


def test_a_short_last_packet_is_serialised_for_its_own_bytes():
    links, switches = chain(1)
    result = simulate(links, [Flow((0,), 4096 + 100, 4096)], LINE, switches)
    full, short = packet_time_s(4096, 100), packet_time_s(100, 100)
    # first send after one full-packet pace, then the full packet, then the short one
    assert result.fct_s[0] == pytest.approx(full + full + short + 1e-6, rel=1e-12)


@pytest.mark.parametrize("senders", [2, 8])
def test_incast_shares_the_receiver_link_fairly(senders):
    """All senders at line rate: the last byte leaves after every packet of every flow crossed
    the receiver's link, T + k n T + T + 2d; the first flow finishes k - 1 packets earlier."""
    links, flows, switches = scenarios.incast(senders, 1_000_000)
    result = simulate(links, flows, LINE, switches)
    n = flows[0].nbytes // flows[0].mtu_bytes
    t = packet_time_s(flows[0].mtu_bytes, 100)
    assert result.fct_s.max() == pytest.approx(t + senders * n * t + t + 2e-6, rel=1e-12)
    assert result.fct_s.max() - result.fct_s.min() == pytest.approx((senders - 1) * t, rel=1e-9)


def test_an_ecmp_collision_doubles_the_completion_time():
    """Two cross-leaf flows whose destinations map to the same spine share its links (FCT about
    twice a lone flow's); mapped to different spines they do not."""
    links, flows, switches = scenarios.leaf_spine(2_000_000, stride=4, hosts=8, leaves=2, spines=2)
    apart = simulate(links, [flows[0], flows[1]], LINE, switches)  # destinations 4 and 5: spines 0, 1
    together = simulate(links, [flows[0], flows[2]], LINE, switches)  # destinations 4 and 6: spine 0
    assert together.fct_s.max() / apart.fct_s.max() == pytest.approx(2.0, rel=0.02)


def test_no_packet_is_lost_or_duplicated():
    links, flows, switches = scenarios.leaf_spine(300_000, all_to_all=True, hosts=8, leaves=2, spines=2)
    result = simulate(links, flows, LINE, switches)
    into_hosts = [i for i, link in enumerate(links) if link.dst < 8]
    assert result.link_bytes[into_hosts].sum() == sum(f.nbytes for f in flows)
    assert result.drops.sum() == 0 and np.isfinite(result.finish_s).all()


def test_pfc_keeps_a_small_buffer_lossless_where_drop_tail_loses_packets():
    """16 senders into one port: 1 MB of buffer holds every ingress port's XOFF plus what is in
    flight while its pause travels, so PFC loses nothing; without PFC the buffer overflows."""
    links, flows, switches = scenarios.incast(16, 2_000_000)
    small = dict(
        buffer_bytes=1_000_000, ecn=False, congestion_control="none", pfc_xoff_bytes=15 * 1502, pfc_xon_bytes=12 * 1502
    )
    lossy = simulate(links, flows, RoceSettings(pfc=False, **small), switches)
    lossless = simulate(links, flows, RoceSettings(pfc=True, **small), switches)
    assert lossy.drops.sum() > 0
    assert lossless.drops.sum() == 0 and lossless.pause_frames.sum() > 0
    assert np.isfinite(lossless.finish_s).all()
    assert lossless.queue_max_bytes[16] <= 1_000_000  # the receiver's link


def test_pfc_incast_on_a_two_tier_fabric_favours_the_receivers_own_switch_as_htsim_does():
    """htsim (../shared/reference/htsim): 31 senders x 10 MB to host 0, the 3 on its ToR finish
    at 5.83 ms, the last remote one at 25.87 ms: remote/local 4.44. Scaled down to 1 MB here
    (same shares), the ratio must be within 15 % of htsim's."""
    links, flows, switches = scenarios.two_tier_incast(31, 1_000_000)
    pfc = RoceSettings(ecn=False, congestion_control="none", pfc_xoff_bytes=15 * 1500, pfc_xon_bytes=12 * 1500)
    result = simulate(links, flows, pfc, switches)
    local, remote = result.fct_s[:3], result.fct_s[3:]
    assert local.max() < remote.min()
    assert remote.max() / local.mean() == pytest.approx(25866.70 / 5833.60, rel=0.15)
    assert result.drops.sum() == 0


def test_dcqcn_converges_to_the_fair_share_of_a_bottleneck():
    """Two line-rate senders into one 100 Gb/s port, DCQCN alone (no PFC): once converged
    (6-14 ms) each delivers within 5 % of half the link."""
    links, flows, switches = scenarios.incast(2, 100_000_000, mtu=4096)
    window = (6e-3, 14e-3)
    result = simulate(links, flows, RoceSettings(pfc=False), switches, window_s=window)
    rate_gbps = result.window_bytes * 8 / (window[1] - window[0]) / 1e9
    assert result.cnps.min() > 0
    assert rate_gbps == pytest.approx([50.0, 50.0], rel=0.05)


def test_dcqcn_with_pfc_keeps_an_incast_queue_bounded_and_lossless():
    links, flows, switches = scenarios.incast(8, 4_000_000, mtu=4096)
    result = simulate(links, flows, RoceSettings(), switches)
    assert result.drops.sum() == 0 and np.isfinite(result.finish_s).all()
    assert result.queue_max_bytes[8] <= 8 * 15 * 4096 + 8 * 2 * 100e9 * 1e-6 / 8 + 4096  # XOFF + pause round trip


def test_flows_wait_for_the_flows_they_depend_on():
    links, switches = chain(1)
    first = Flow((0,), 4096 * 10, 4096)
    second = Flow((0,), 4096 * 10, 4096, after=(0,), gap_s=5e-6)
    result = simulate(links, [first, second], LINE, switches)
    assert result.start_s[1] == pytest.approx(result.finish_s[0] + 5e-6, rel=1e-12)


def test_a_tree_all_reduce_takes_its_depth_in_store_and_forward_hops_up_and_down():
    """Seven ranks on one switch: each tree is 2 levels deep, so reduce and broadcast take 2
    sequential transfers each; the two trees (S/2 each) share the links. The slowest transfer
    of a level carries a node's two children into it: 2 x S/2 on its downlink."""
    from simulators.packet import collective_flows
    from simulators.packet._scenarios import star

    links, switches, route = star(7, 400)
    nbytes = 8 << 20
    flows = collective_flows("all_reduce", [list(range(7))], nbytes, route, algorithm="tree")
    assert flows.count == 2 * 2 * 6  # two trees, each 6 transfers up and 6 down
    result = simulate(links, flows, LINE, switches)
    half_s = nbytes / 2 * 8 / 400e9
    assert 4 * half_s < result.finish_s.max() < 4 * 2 * half_s * 1.1  # 4 levels, at most two halves each
    assert np.isfinite(result.finish_s).all()


def test_every_packet_is_acknowledged_along_the_reverse_path():
    """Two senders, per-packet ACKs: the receiver's uplink and each sender's downlink carry one
    64-byte frame per data packet that sender sent; a marked packet's CNP rides on its ACK."""
    links, flows, switches = scenarios.incast(2, 400 * 4096, mtu=4096)
    result = simulate(links, flows, RoceSettings(pfc=False), switches)
    packets = flows[0].nbytes // flows[0].mtu_bytes  # 403: ns-3 framing leaves 4068 payload bytes each
    receiver_up, to_sender = 3, (4, 5)  # links 3.. lead back (see scenarios.incast)
    assert result.link_bytes[receiver_up] == 2 * packets * 64
    assert [result.link_bytes[i] for i in to_sender] == [packets * 64, packets * 64]
    assert np.isfinite(result.finish_s).all()


def test_a_path_through_a_link_that_does_not_exist_is_named():
    from simulators import SpecError

    links, switches = chain(2)
    with pytest.raises(SpecError, match=r"flows\[0\]\.path: link 5 is not allowed; allowed: link ids 0\.\.1"):
        simulate(links, [Flow((0, 5), 4096)], LINE, switches)
    with pytest.raises(SpecError, match=r"flows\[0\]\.path: link -1"):
        simulate(links, [Flow((-1,), 4096)], LINE, switches)


def test_collectives_name_the_allowed_ops_and_algorithms_even_for_one_rank():
    from simulators import CatalogError, SpecError
    from simulators.packet import collective_flows
    from simulators.packet._scenarios import star

    route = star(4)[2]
    with pytest.raises(SpecError, match="^op: 'gather' is not a collective; allowed: all_reduce, "):
        collective_flows("gather", [[0]], 1024, route)
    with pytest.raises(SpecError, match="^algorithm: 'double_binary_tree' does not implement op 'broadcast'"):
        collective_flows("broadcast", [[0]], 1024, route, algorithm="tree")
    with pytest.raises(CatalogError, match=r"^algorithm: 'rings' is not a known collective algorithm \(did you mean"):
        collective_flows("all_reduce", [[0, 1]], 1024, route, algorithm="rings")


def test_an_array_of_the_wrong_type_is_refused_by_name(monkeypatch):
    """The engine is entered past numba's dispatcher, whose conversion checks an array only by
    item size: float64 delays would be read as integers, so they are refused first."""
    import simulators.packet._run as run

    engine = run.simulate_packets

    def float_delays(links, *rest):
        return engine(links._replace(delay_ps=links.delay_ps.astype(np.float64)), *rest)

    monkeypatch.setattr(run, "simulate_packets", float_delays)
    links, switches = chain(1)
    with pytest.raises(TypeError, match=r"^Links\.delay_ps: float64 1-D array given"):
        simulate(links, [Flow((0,), 4096, 4096)], LINE, switches)


def test_two_threads_that_first_run_the_engine_at_once_both_get_it(monkeypatch):
    """A fidelity level's threads meet the engine's first load together: the second must find the
    entry point the first loaded, not compile again after compiling was closed (it failed a
    candidate with "compilation disabled"). Each thread's flow then takes the closed-form FCT."""
    import threading

    from simulators.packet import _engine

    links, switches = chain(2)
    simulate(links, [Flow((0, 1), 4096, 4096)], LINE, switches)  # the engine loaded, compiling closed
    _engine._engine.cache_clear()  # as a process whose threads both ask for the entry point first
    barrier, fcts, errors = threading.Barrier(2), [], []

    def run(n):
        barrier.wait()
        try:
            fcts.append((n, simulate(links, [Flow((0, 1), n * 4096, 4096)], LINE, switches).fct_s[0]))
        except Exception as exc:  # noqa: BLE001 - the failure is what the test reports
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(n,)) for n in (10, 20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    t = packet_time_s(4096, 100)
    for n, fct in fcts:
        assert fct == pytest.approx(t + n * t + t + 2e-6, rel=1e-12)
