"""Offload as a training knob: checked in the spec, default for old studies, and the plan that
fits only with offload judged feasible by the search's own constraint."""

from __future__ import annotations

import json

import pytest

from dse.cli import main
from dse.errors import DseError
from dse.evaluation.evaluate import Evaluator
from dse.evaluation.space import SearchSpace
from dse.spec import load_study
from dse.study import resolve_study
from tests.conftest import TINY_PARAMS, TINY_SPEC

OFFLOAD_KNOBS = "recompute: [none, full]\n  zero_stage: [0, 1]\n  offload: [none, optimizer, activations]"
OFFLOAD_SPEC = TINY_SPEC.replace("recompute: [none, full]", OFFLOAD_KNOBS)


def space_of(write_spec, text=OFFLOAD_SPEC) -> SearchSpace:
    return SearchSpace.from_study(resolve_study(load_study(write_spec(text))))


def test_a_plan_that_does_not_fit_hbm_fits_with_activation_offload(write_spec):
    evaluator = Evaluator(space_of(write_spec))
    params = {**TINY_PARAMS, "micro_batch": 2, "zero_stage": 1}
    plain = evaluator.evaluate({**params, "offload": "none"})
    offloaded = evaluator.evaluate({**params, "offload": "activations"})
    assert not plain.feasible and plain.reason.startswith("needs 100.0 GiB per GPU; H100-SXM has 80 GiB")
    assert offloaded.feasible
    assert offloaded.metrics["iteration_time_s"] >= plain.metrics["iteration_time_s"]


def test_studies_recorded_before_the_knob_read_as_no_offload(write_spec):
    space = space_of(write_spec)
    kind = space.resolved.kind
    assert "offload" not in TINY_PARAMS
    assert kind.params_key(TINY_PARAMS) == kind.params_key({**TINY_PARAMS, "offload": "none"})
    assert space.candidate(TINY_PARAMS).plan.offload == "none"


def test_an_unknown_offload_value_is_one_line_with_the_allowed(write_spec):
    with pytest.raises(DseError) as err:
        space_of(write_spec, TINY_SPEC.replace("recompute: [none, full]", "recompute: [none]\n  offload: [weights]"))
    message = str(err.value)
    assert "\n" not in message and message.startswith("search.offload")
    assert "allowed: none, optimizer, activations, optimizer+activations" in message


def test_offload_on_gpus_without_a_host_tier_is_refused_before_any_trial(write_spec):
    text = OFFLOAD_SPEC.replace("gpu: [H100-SXM]", "gpu: [MI300X]")
    with pytest.raises(DseError) as err:
        space_of(write_spec, text)
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith("search.offload: 'optimizer' needs a host memory tier, and no GPU of hardware.gpu")
    assert "(MI300X)" in message and "set hardware.host_tier, or allowed here: none" in message


def test_simulate_prints_the_memory_per_tier(write_spec, capsys):
    plan = {"num_gpus": 8, "tp": 1, "pp": 1, "micro_batch": 2, "recompute": "none", "zero_stage": 1}
    args = ["simulate", str(write_spec(OFFLOAD_SPEC)), *(f"--set={k}={v}" for k, v in plan.items())]
    assert main([*args, "--set", "offload=activations", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    memory = report["memory_gib"]
    assert report["feasible"] is True
    assert memory["host_activations"] > 0 and memory["host_optimizer"] == 0
    assert memory["host_total"] == pytest.approx(memory["host_activations"])
    assert memory["host_capacity"] == pytest.approx(2048 / 8)  # DGX-H100: 2 TiB of DDR5 over 8 GPUs
    assert memory["total"] == pytest.approx(report["metrics"]["memory_gib_per_gpu"])
    assert sum(report["breakdown_s"].values()) == pytest.approx(report["metrics"]["iteration_time_s"], rel=1e-9)
    assert report["breakdown_s"]["offload_s"] >= 0
    assert main([*args, "--set", "offload=none", "--json"]) == 0
    assert "host_total" not in json.loads(capsys.readouterr().out)["memory_gib"]
    assert main([*args, "--set", "offload=optimiser"]) == 2
    assert "did you mean 'optimizer'" in capsys.readouterr().err


def test_hardware_host_tier_gives_a_gpu_without_a_row_its_host(write_spec):
    text = OFFLOAD_SPEC.replace("gpu: [H100-SXM]", "gpu: [MI300X]\n  host_tier: DGX-H100")
    space = space_of(write_spec, text)
    candidate = space.candidate({**TINY_PARAMS, "gpu": "MI300X", "offload": "optimizer"})
    assert candidate.system.host.name == "DGX-H100"
    assert candidate.system.host.memory_bytes_per_gpu == 2048 * 2**30 / 8


def test_an_unknown_host_tier_is_one_line_with_the_rows(write_spec):
    with pytest.raises(DseError) as err:
        space_of(write_spec, OFFLOAD_SPEC.replace("gpu: [H100-SXM]", "gpu: [H100-SXM]\n  host_tier: DGX-H1000"))
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith("hardware.host_tier: 'DGX-H1000' is not a host tier of memory_tiers.yaml; allowed: ")
    assert "DGX-H100" in message and "GB200-superchip" in message


def test_nvme_offload_in_a_spec_fits_the_drives_share_and_prints_it(write_spec, capsys):
    text = OFFLOAD_SPEC.replace("offload: [none, optimizer, activations]", "offload: [none, optimizer-nvme]")
    plan = {"num_gpus": 8, "tp": 1, "pp": 1, "micro_batch": 1, "recompute": "full", "zero_stage": 0}
    args = ["simulate", str(write_spec(text)), *(f"--set={k}={v}" for k, v in plan.items())]
    assert main([*args, "--set", "offload=optimizer-nvme", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    memory = report["memory_gib"]
    assert report["feasible"] is True and memory["optimizer"] == 0
    assert memory["nvme_optimizer"] == pytest.approx(12 * 8.03e9 / 2**30, rel=0.01)  # llama3-8b's Adam state
    assert memory["nvme_capacity"] == pytest.approx(28610 / 8)
    assert memory["host_total"] == 0


def test_a_cxl_host_gives_the_cpu_optimizer_step_more_bandwidth(write_spec):
    """The CPU Adam step reads and writes the offloaded state at the GPU's share of host memory
    bandwidth: CXL expanders interleaved with the DIMMs shorten it (hardware.host_tier)."""
    params = {**TINY_PARAMS, "offload": "optimizer", "zero_stage": 1}
    times = {}
    for tier in ("DGX-H100", "DGX-H100-CXL-8x256GB"):
        text = OFFLOAD_SPEC.replace("gpu: [H100-SXM]", f"gpu: [H100-SXM]\n  host_tier: {tier}")
        space = space_of(write_spec, text)
        assert space.candidate(params).system.host.name == tier
        times[tier] = Evaluator(space).evaluate(params).metrics["iteration_time_s"]
    assert times["DGX-H100-CXL-8x256GB"] < times["DGX-H100"]
