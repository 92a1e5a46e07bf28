"""The fidelity ladder: the front's best candidates re-evaluated with packet-level collectives."""

import dataclasses

import pytest

from dse.errors import DseError
from dse.evaluation.evaluate import Evaluator
from dse.evaluation.space import SearchSpace
from dse.spec import load_study
from dse.study import resolve_study
from tests.conftest import FABRIC_SPEC, TINY_PARAMS

SEND_BYTES = 1 << 20  # any size: a factor applies to the nearest measured size of its collective


def test_a_slowdown_on_the_network_slows_exactly_the_collectives_it_names(write_spec):
    resolved = resolve_study(load_study(write_spec(FABRIC_SPEC)))
    space = SearchSpace.from_study(resolved)
    params = {**TINY_PARAMS, "num_gpus": 64, "pp": 2, "global_batch": 128, "fabric": "leaf-spine"}
    base = space.candidate(params).system.fabric_network
    plain = Evaluator(space).evaluate(params)
    slowed = Evaluator(space).evaluate(
        params, dataclasses.replace(base, slowdown=((("send_recv", 2, 32, SEND_BYTES), 3.0),))
    )
    unrelated = Evaluator(space).evaluate(
        params, dataclasses.replace(base, slowdown=((("all_to_all", 7, 1, SEND_BYTES), 9.0),))
    )
    assert slowed.metrics["iteration_time_s"] > plain.metrics["iteration_time_s"]
    assert unrelated.metrics["iteration_time_s"] == plain.metrics["iteration_time_s"]


def test_the_ladder_is_for_training_studies(write_spec):
    """An inference study has no collectives to re-price: its levels are off by default, and a
    level (or a physical check) it names is an error naming the field."""
    text = FABRIC_SPEC.replace("model: llama3-8b", "model: llama3-8b\nmode: inference").split("search:")[0]
    assert resolve_study(load_study(write_spec(text))).study.fidelity.levels() == []
    for section, field in (("{packet: {top: 2}}", "fidelity.packet"), ("{validate_top: 2}", "fidelity.validate_top")):
        with pytest.raises(DseError, match=field):
            resolve_study(load_study(write_spec(text + f"fidelity: {section}\n")))


def test_a_training_study_climbs_both_levels_by_default_and_an_unknown_congestion_control_is_refused(write_spec):
    text = FABRIC_SPEC.split("fidelity:")[0] + "budget: {trials: 8}\n"
    assert [name for name, _ in resolve_study(load_study(write_spec(text))).study.fidelity.levels()] == [
        "flow",
        "packet",
    ]
    with pytest.raises(DseError, match="fidelity.packet.congestion_control: 'dcqnc'.*did you mean 'dcqcn'"):
        resolve_study(load_study(write_spec(text + "fidelity: {packet: {congestion_control: dcqnc}}\n")))
    for name in ("timely", "hpcc", "none"):  # every registered algorithm is selectable per study
        chosen = resolve_study(load_study(write_spec(text + f"fidelity: {{packet: {{congestion_control: {name}}}}}\n")))
        assert chosen.study.fidelity.packet.congestion_control == name


def test_the_packet_levels_loss_settings_reach_its_simulator_and_bad_ones_are_refused(write_spec):
    text = FABRIC_SPEC.split("fidelity:")[0] + "budget: {trials: 8}\n"
    lossy = "fidelity: {packet: {loss_rate: 0.001, loss_recovery: selective_repeat}}\n"
    packet = resolve_study(load_study(write_spec(text + lossy))).study.fidelity.packet
    assert packet.options() == {
        "congestion_control": "dcqcn",
        "pfc": True,
        "ecn": True,
        "loss_rate": 0.001,
        "loss_recovery": "selective_repeat",
    }  # the timeout left unset: the NICs' own
    for bad, field in (("loss_recovery: sack", "loss_recovery"), ("loss_rate: 1.5", "loss_rate")):
        with pytest.raises(DseError, match=f"fidelity.packet.{field}"):
            load_study(write_spec(text + f"fidelity: {{packet: {{{bad}}}}}\n"))
    sprayed = text.replace("family: [rail-optimized, leaf-spine]", "family: [spectrum-x]")
    assert sprayed != text
    with pytest.raises(DseError, match="fidelity.packet.loss_recovery: 'go_back_n' discards .*spectrum-x"):
        resolve_study(load_study(write_spec(sprayed + "fidelity: {packet: {loss_recovery: go_back_n}}\n")))


@pytest.mark.parametrize("family", ["rail-optimized", "leaf-spine"])
def test_contention_never_speeds_a_collective_up(write_spec, family):
    """The first group alone runs on the very paths it takes beside the others, so adding the
    others' traffic can only slow it: every factor is at least 1."""
    from simulators.fidelity import LEVELS

    congestion_factors = LEVELS["packet"].congestion_factors
    space = SearchSpace.from_study(resolve_study(load_study(write_spec(FABRIC_SPEC))))
    params = {**TINY_PARAMS, "num_gpus": 64, "tp": 2, "pp": 2, "global_batch": 128, "fabric": family}
    factors = congestion_factors(space.candidate(params), space.fabric(family, params["nic_gbps"]), 2 << 20)
    assert len(factors) >= 2 and all(f.groups > 1 for f in factors)
    assert all(f.together_s >= f.alone_s * (1 - 1e-12) for f in factors), [(f.op, f.factor) for f in factors]


TP_SPEC = FABRIC_SPEC.replace(
    "fabric: {family: [rail-optimized, leaf-spine]}", "fabric: {family: [leaf-spine], gpus_per_server: 4}"
).replace("tp: [1, 2]", "tp: [8]\n  sequence_parallel: [false]")


@pytest.mark.parametrize(
    "seq_len,algorithm,flows",
    [
        (128, "double_binary_tree", 2 * (2 * 2 * 3 + 2)),  # 2 trees: 3 chain hops up and down per server, 1 across
        (2048, "nvls", 8 + 8 + 4 * 2 * 2 + 8 + 8 * 3),  # loads, shards back, 4 rails' trees, stores, multicasts
    ],
)
def test_packet_fidelity_replays_the_algorithm_the_analytical_model_chose(
    write_spec, monkeypatch, seq_len, algorithm, flows
):
    """Tensor parallelism over two 4-GPU servers: NCCL's tuner (auto) picks the double binary
    tree for 1 MiB all-reduces and NVLS (in-switch reduction, trees across servers) for 16 MiB,
    so the packet run is that algorithm's schedule on the group (4 members to an NVLink domain),
    not a ring, and the fidelity table names it."""
    from dse.evaluation.fidelity import LevelEvaluator
    from simulators.fidelity import LEVELS
    from simulators.fidelity import _contention as _fidelity
    from simulators.network import collective_schedule

    resolved = resolve_study(load_study(write_spec(TP_SPEC.replace("seq_len: 2048", f"seq_len: {seq_len}"))))
    space = SearchSpace.from_study(resolved)
    params = {**TINY_PARAMS, "num_gpus": 64, "tp": 8, "global_batch": 128, "fabric": "leaf-spine"}
    params["sequence_parallel"] = False
    runs = []

    def recording(op, groups, nbytes, route, **kw):
        out = collective_flows(op, groups, nbytes, route, **kw)
        runs.append((op, len(groups), nbytes, kw, out))
        return out

    collective_flows = _fidelity.collective_flows
    monkeypatch.setattr(_fidelity, "collective_flows", recording)
    fabric = space.fabric("leaf-spine", params["nic_gbps"])
    factors = LEVELS["packet"].congestion_factors(space.candidate(params), fabric, 16 << 20)
    chosen = [(f.ranks, f.stride, f.algorithm) for f in factors if f.op == "all_reduce"]
    assert chosen == [(8, 1, algorithm)]
    schedule = collective_schedule("all_reduce", 8, algorithm, per_domain=4)
    assert len(schedule.transfers) == flows != len(collective_schedule("all_reduce", 8, "ring").transfers)
    replayed = [r for r in runs if r[0] == "all_reduce"]
    assert [r[1] for r in replayed] == [8, 1]  # the 8 tensor-parallel groups together, then the first alone
    for _, groups, nbytes, kw, out in replayed:
        assert (kw["algorithm"], kw["per_domain"]) == (algorithm, 4)
        offsets = [g * len(schedule.transfers) for g in range(groups)]
        assert [out.waits_for(f) for f in range(out.count)] == [
            tuple(offset + a for a in t.after) for offset in offsets for t in schedule.transfers
        ]
        assert list(out.nbytes) == [nbytes * len(t.chunks) // schedule.chunks for t in schedule.transfers] * groups
    outcome = LevelEvaluator(Evaluator(space), "packet", 16 << 20).simulate_many([params])[0]
    assert ("all_reduce", 8, 1, algorithm) in {
        (f["op"], f["ranks"], f["stride"], f["algorithm"]) for f in outcome.details["factors"]
    }
