"""The contract every registered network fidelity level keeps (simulators/fidelity/_level.py)."""

from __future__ import annotations

import pytest

from simulators.analytical import plan_collectives
from simulators.fidelity import LEVELS
from simulators.hardware import get_gpu
from simulators.models import get_model
from simulators.network import ALGORITHMS, OPS, Fabric, Failures
from simulators.workload import ParallelPlan, TrainingCandidate, TrainingSystem

# Two-GPU servers under 8-port leaves, 3:1 oversubscribed: 3 servers a leaf, 2 uplinks shared.
FABRIC = Fabric(
    family="leaf-spine", nic_gbps=400, gpus_per_server=2, nics_per_server=2, switch_radix=8, oversubscription=3.0
)
# The same with a leaf uplink failed (leaf 0 keeps one of two), and two-GPU servers on Spectrum-X
# (rail leaves of 4 servers, adaptive routing): the contract holds on them too.
FAILED = Fabric(
    family="leaf-spine",
    nic_gbps=400,
    gpus_per_server=2,
    nics_per_server=2,
    switch_radix=8,
    oversubscription=3.0,
    failures=Failures(links=1, ecmp_convergence_s=0.1),
)
SPECTRUM_X = Fabric(family="spectrum-x", nic_gbps=400, gpus_per_server=2, nics_per_server=2, switch_radix=8)
CAP_BYTES = 1 << 20


def candidate(num_gpus: int, tp: int, pp: int = 1, fabric: Fabric = FABRIC) -> TrainingCandidate:
    """llama3-8b on H100s of `fabric`: tp inside a server, the dp gradient collectives across."""
    gpu = get_gpu("H100-SXM")
    dp = num_gpus // (tp * pp)
    plan = ParallelPlan(tp=tp, pp=pp, dp=dp, micro_batch=1, global_batch=4 * dp, seq_len=2048)
    system = TrainingSystem(gpu, num_gpus, network=fabric.network(gpu, num_gpus))
    return TrainingCandidate(get_model("llama3-8b"), system, plan)


def crossing(c: TrainingCandidate) -> set[tuple[str, int, int]]:
    """The collectives of the step whose group spans more than one server."""
    per_server = FABRIC.gpus_per_server
    return {(u.op, u.ranks, u.stride) for u in plan_collectives(c) if u.ranks > 1 and u.ranks * u.stride > per_server}


def test_the_spec_names_only_registered_levels():
    from dse.spec.study import LEVEL_FIELDS, Fidelity

    assert set(LEVEL_FIELDS) <= set(LEVELS) and "analytical" in LEVELS
    assert set(Fidelity.model_fields) - set(LEVEL_FIELDS) == {"validate_top"}  # every other field is a level
    assert list(LEVEL_FIELDS) == [name for name in LEVELS if name in LEVEL_FIELDS]  # climbed cheapest first


@pytest.fixture(params=sorted(LEVELS))
def level(request):
    return LEVELS[request.param]


def test_inside_one_server_the_fabric_plays_no_part(level):
    assert level.congestion_factors(candidate(2, tp=1), FABRIC, CAP_BYTES) == []


@pytest.mark.parametrize("fabric", [FABRIC, FAILED, SPECTRUM_X], ids=["oversubscribed", "failed-link", "spectrum-x"])
def test_factors_name_collectives_that_cross_servers_and_never_speed_one_up(level, fabric):
    c = candidate(16, tp=1, pp=2, fabric=fabric)
    factors = level.congestion_factors(c, fabric, CAP_BYTES)
    assert {(f.op, f.ranks, f.stride) for f in factors} <= crossing(c)
    assert len({f.key for f in factors}) == len(factors)  # one factor per collective of the step
    for f in factors:
        assert f.op in OPS and f.algorithm in ALGORITHMS
        assert f.groups == c.system.num_gpus // f.ranks  # every GPU is in one group of the collective
        assert f.alone_s > 0 and f.factor >= 1.0 - 1e-9


def test_the_same_inputs_give_the_same_factors(level, monkeypatch):
    from simulators.fidelity import _contention

    c = candidate(16, tp=2)
    first = level.congestion_factors(c, FABRIC, CAP_BYTES)
    monkeypatch.setattr(_contention, "_RUNS", {})  # simulated again, not read back from the process's runs
    assert level.congestion_factors(c, FABRIC, CAP_BYTES) == first


def test_the_packet_level_reports_every_collective_that_crosses_servers():
    """Above the analytical floor a level sees the fabric: one factor per crossing collective,
    and the two gradient rings that share a leaf's uplinks slow each other."""
    c = candidate(16, tp=2)
    factors = LEVELS["packet"].congestion_factors(c, FABRIC, CAP_BYTES)
    assert {(f.op, f.ranks, f.stride) for f in factors} == crossing(c)
    assert max(f.factor for f in factors) > 1.0


@pytest.mark.parametrize("model, within", [("fifo", 0.03), ("max_min", 0.15)])
@pytest.mark.parametrize("shape", [dict(tp=2), dict(tp=1, pp=2)], ids=["tp2", "pp2"])
def test_the_flow_level_sees_what_a_line_rate_packet_run_sees(shape, model, within):
    """The same crossing collectives as the packet level, each factor close to the packet
    engine's at line rate (no congestion control). With FIFO queues, the flow level's model of
    that fabric, within 3 % (the store-and-forward of small messages, which a fluid leaves to a
    fixed tail); with max-min, its model of a transport that keeps queues short, within 15 %:
    behind senders at line rate a FIFO queue serves the flow that came first, where max-min
    shares the link at once, so a ring step that meets another group's later flow is slowed in
    one and not the other (up to ~12 % apart here; benchmarks/flow_vs_packet.py)."""
    from simulators.fidelity._packet import PacketLevel
    from simulators.packet import RoceSettings

    c = candidate(16, **shape)
    flow = LEVELS["flow"].configured({"model": model}).congestion_factors(c, FABRIC, CAP_BYTES)
    packet = PacketLevel(RoceSettings.line_rate()).congestion_factors(c, FABRIC, CAP_BYTES)
    assert [f.key for f in flow] == [f.key for f in LEVELS["packet"].congestion_factors(c, FABRIC, CAP_BYTES)]
    assert [f.key for f in flow] == [f.key for f in packet]
    assert {(f.op, f.ranks, f.stride) for f in flow} == crossing(c)
    for f, p in zip(flow, packet):
        assert f.alone_s == pytest.approx(p.alone_s, rel=0.02)
        assert f.factor == pytest.approx(p.factor, rel=within)
    assert max(f.factor for f in flow) > 1.2  # the oversubscribed uplinks are shared


def test_the_flow_levels_model_is_an_option_named_in_its_errors():
    from simulators._errors import SpecError

    assert LEVELS["flow"].configured({}) == LEVELS["flow"]
    with pytest.raises(SpecError, match="^fidelity.flow.model: 'wfq' is not allowed; allowed: fifo, max_min$"):
        LEVELS["flow"].configured({"model": "wfq"})
    with pytest.raises(SpecError, match="^fidelity.flow.pfc: not allowed; allowed: model$"):
        LEVELS["flow"].configured({"pfc": True})


def test_lossy_links_slow_every_crossing_collective_at_the_packet_level():
    """1 % loss per link (`fidelity.packet.loss_rate`) with go-back-N: each collective that
    crosses servers takes longer on its own than on a clean fabric (a lost packet and all sent
    after it go again)."""
    c = candidate(16, tp=2)
    clean = LEVELS["packet"].configured({}).congestion_factors(c, FABRIC, CAP_BYTES)
    lossy_level = LEVELS["packet"].configured({"loss_rate": 0.01, "retransmit_timeout_s": 1e-4})
    lossy = lossy_level.congestion_factors(c, FABRIC, CAP_BYTES)
    assert [f.key for f in lossy] == [f.key for f in clean]
    for f, g in zip(lossy, clean):
        assert f.alone_s > g.alone_s


def test_lost_packets_without_recovery_are_an_error_naming_the_field():
    from simulators._errors import SpecError

    level = LEVELS["packet"].configured({"loss_rate": 0.01, "loss_recovery": "none", "acks": False})
    with pytest.raises(SpecError, match="^fidelity.packet.loss_recovery: 'none'"):
        level.congestion_factors(candidate(16, tp=2), FABRIC, CAP_BYTES)


def test_on_spectrum_x_the_packet_engine_sprays_packets_and_never_loses_to_ecmp():
    """The packet level runs an adaptive-routing family with per-packet adaptive routing in its
    switches: each collective together takes no longer than the same flows hashed by ECMP on
    the same links (within 2 %), and the first group alone no longer either."""
    from simulators.fidelity._packet import PacketLevel
    from simulators.packet import RoceSettings

    c = candidate(16, tp=2)
    sprayed = LEVELS["packet"].congestion_factors(c, SPECTRUM_X, CAP_BYTES)
    hashed = PacketLevel(RoceSettings(loss_recovery="selective_repeat"))
    hashed_runs = super(PacketLevel, hashed).congestion_factors(c, SPECTRUM_X, CAP_BYTES)
    assert [f.key for f in sprayed] == [f.key for f in hashed_runs]
    for f, g in zip(sprayed, hashed_runs):
        assert f.together_s <= g.together_s * 1.02 and f.alone_s <= g.alone_s * 1.02
