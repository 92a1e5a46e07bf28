"""hardware.collective_algorithm: validated against the registry, carried by every candidate's
network to the training model, its collectives table and the cache address."""

import json

import pytest

from dse.cli.commands import main
from dse.search.cache import evaluation_context
from dse.spec import load_study
from dse.study import resolve_study
from simulators.hardware import get_gpu
from simulators.network import Fabric
from simulators.network._protocols import PROTOCOLS
from tests.conftest import TINY_PARAMS

# 16 H100s (two servers), plain data parallelism without ZeRO: one dp all-reduce of the gradients.
SPEC = """
name: forced
model: llama3-8b
hardware:
  gpu: [H100-SXM]
  num_gpus: [16]
{extra}
search: {{tp: [1], pp: [1], micro_batch: [1], global_batch: [64], recompute: [none], zero_stage: [0]}}
"""


def spec(write_spec, algorithms: str = "") -> str:
    extra = f"  collective_algorithm: {algorithms}" if algorithms else ""
    return str(write_spec(SPEC.format(extra=extra)))


def collectives(path: str, capsys) -> dict:
    assert main(["simulate", path, "--json"]) == 0
    return {c["name"]: c for c in json.loads(capsys.readouterr().out)["collectives"]}


def ring_all_reduce_s(nbytes: float, n: int, network) -> float:
    """The ring's alpha-beta cost by hand (Thakur et al. 2005; NCCL's step counts): 2(n-1) steps,
    2 per server across the network, the rest on NVLink; 2(n-1)/n of the buffer through the slower
    of NVLink and the server's NICs together; the fastest NCCL protocol."""
    levels = network.levels
    g, domains = network.domain_gpus, n // network.domain_gpus
    top = next(i for i, reach in enumerate(levels.reach_gpus) if reach >= n)
    steps, inter = 2 * (n - 1), 2 * domains
    rate = min(levels.bytes_per_s[0], g * levels.bytes_per_s[top])
    wire = nbytes * 2 * (n - 1) / n
    return min(
        p.base_s
        + (steps - inter) * (p.scaleup_step_s + levels.latency_s[0])
        + inter * (p.net_step_s + levels.latency_s[top])
        + wire / rate / p.bandwidth_factor
        for p in PROTOCOLS["ring"]
    )


def test_a_forced_ring_prices_the_gradient_all_reduce_at_the_rings_closed_form(write_spec, capsys):
    reduce = collectives(spec(write_spec, "{all_reduce: ring}"), capsys)["dp all_reduce"]
    network = Fabric("rail-optimized", nic_gbps=400).network(get_gpu("H100-SXM"), 16)
    assert reduce["algorithm"] == "ring"
    assert reduce["time_s"] == pytest.approx(ring_all_reduce_s(reduce["nbytes"], 16, network), rel=1e-9)


def test_a_forced_algorithm_changes_what_simulate_reports(write_spec, capsys):
    auto = collectives(spec(write_spec), capsys)["dp all_reduce"]
    forced = collectives(spec(write_spec, "{all_reduce: halving_doubling}"), capsys)["dp all_reduce"]
    assert auto["algorithm"] != "halving_doubling"  # not an NCCL algorithm: auto never picks it
    assert forced["algorithm"] == "halving_doubling" and forced["time_s"] != pytest.approx(auto["time_s"])


@pytest.mark.parametrize(
    "algorithms,message",
    [
        ("{all_reduce: rign}", "'rign' is not a known collective algorithm (did you mean 'ring'?); allowed: "),
        ("{all_reduce: pairwise}", "'pairwise' does not implement all_reduce; allowed: auto, "),
        ("{allreduce: ring}", "'allreduce' is not a collective; allowed: all_reduce, "),
    ],
)
def test_a_bad_choice_is_one_line_naming_the_field_and_what_is_allowed(write_spec, capsys, algorithms, message):
    assert main(["simulate", spec(write_spec, algorithms)]) == 2
    err = capsys.readouterr().err
    assert "hardware.collective_algorithm" in err and message in err and len(err.strip().splitlines()) == 1


def test_auto_is_the_default_and_spelling_it_out_changes_no_address(write_spec):
    plain = load_study(spec(write_spec))
    spelled = load_study(spec(write_spec, "{all_reduce: auto, all_gather: AUTO}"))
    forced = load_study(spec(write_spec, "{all_reduce: ring}"))
    assert plain.hardware.collective_algorithm == spelled.hardware.collective_algorithm == {}
    address = [evaluation_context(resolve_study(s)).address(TINY_PARAMS) for s in (plain, spelled, forced)]
    assert address[0] == address[1] != address[2]


def test_an_algorithm_that_cannot_run_there_makes_the_candidate_infeasible_with_the_reason(write_spec, capsys):
    # NVLS reduce-scatter runs inside one NVLink domain only; 16 GPUs are two domains
    path = spec(write_spec, "{reduce_scatter: nvls}")
    with open(path) as f:
        text = f.read()
    with open(path, "w") as f:
        f.write(text.replace("zero_stage: [0]", "zero_stage: [1]"))  # ZeRO-1: a reduce-scatter of the gradients
    assert main(["simulate", path, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert not out["feasible"] and "hardware.collective_algorithm.reduce_scatter: 'nvls' cannot run" in out["reason"]


def test_the_study_header_names_the_forced_algorithms(write_spec):
    from dse.cli.studies import _algorithms_line

    assert _algorithms_line(load_study(spec(write_spec))) == ""
    line = _algorithms_line(load_study(spec(write_spec, "{all_reduce: ring, all_to_all: pairwise}")))
    assert line == (
        "\ncollective algorithms: all_reduce ring, all_to_all pairwise, auto for the rest "
        "(hardware.collective_algorithm)"
    )


def test_the_flow_level_runs_the_forced_algorithm():
    import dataclasses

    from simulators.fidelity import LEVELS
    from simulators.models import get_model
    from simulators.workload import ParallelPlan, TrainingCandidate, TrainingSystem

    gpu, fabric = get_gpu("H100-SXM"), Fabric("rail-optimized", nic_gbps=400)
    network = dataclasses.replace(fabric.network(gpu, 16), algorithms=(("all_reduce", "halving_doubling"),))
    plan = ParallelPlan(tp=1, pp=1, dp=16, micro_batch=1, global_batch=64, seq_len=2048, zero_stage=0)
    candidate = TrainingCandidate(get_model("llama3-8b"), TrainingSystem(gpu, 16, network=network), plan)
    from simulators.analytical import plan_collectives

    assert {use.algorithm for use in plan_collectives(candidate) if use.op == "all_reduce"} == {"halving_doubling"}
    factors = LEVELS["flow"].congestion_factors(candidate, fabric, 2**20)
    assert factors and {f.algorithm for f in factors if f.op == "all_reduce"} == {"halving_doubling"}


def test_a_serving_deployment_runs_the_forced_algorithm(write_spec):
    from dse.evaluation.serving import deployment_of
    from dse.evaluation.space import SearchSpace
    from tests.conftest import SERVING_SPEC

    text = SERVING_SPEC.replace("  gpu: [H100-SXM]", "  gpu: [H100-SXM]\n  collective_algorithm: {all_reduce: ring}")
    for spec_text, expected in ((SERVING_SPEC, "auto"), (text, "ring")):
        resolved = resolve_study(load_study(write_spec(spec_text)))
        params = SearchSpace.from_study(resolved).grid()[0]
        assert deployment_of(resolved, params).fabric_network.algorithm_for("all_reduce") == expected
