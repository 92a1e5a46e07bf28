"""The fidelity ladder: the front's best candidates re-evaluated with packet-level collectives."""

import dataclasses

import pandas as pd
import pytest

from dse.errors import DseError
from dse.evaluation.evaluate import Evaluator
from dse.evaluation.space import SearchSpace
from dse.report.files import write_reports
from dse.search.engine import RunSettings, run_search
from dse.spec import load_study
from dse.study import resolve_study
from simulators.packet import groups_of
from tests.conftest import TINY_PARAMS

FIDELITY_SPEC = """
name: fidelity
model: llama3-8b
training: {seq_len: 2048}
hardware:
  gpu: [H100-SXM]
  num_gpus: [64]
  fabric: {family: [rail-optimized, leaf-spine]}
search:
  tp: [1, 2]
  pp: [1, 2]
  micro_batch: [1]
  global_batch: [128]
  recompute: [none]
objectives:
  - iteration_time_s: minimize
  - usd_per_mtok: minimize
fidelity:
  packet: {top: 3, message_cap_mb: 2}
budget: {trials: 8, batch_size: 8}
sampler: grid
"""


def test_groups_follow_the_placement_of_the_plan():
    assert groups_of(16, 4, 2) == [[0, 2, 4, 6], [1, 3, 5, 7], [8, 10, 12, 14], [9, 11, 13, 15]]


def test_the_ladder_reports_both_fidelities_side_by_side(write_spec, tmp_path):
    resolved = resolve_study(load_study(write_spec(FIDELITY_SPEC)))
    summary = run_search(resolved, RunSettings(tmp_path, None, "off", False))
    write_reports(summary.study, resolved, tmp_path)
    table = pd.read_csv(tmp_path / "fidelity.csv")
    front = pd.read_csv(tmp_path / "pareto.csv")
    assert len(table) == min(3, len(front)) and list(table["trial"]) == list(front["trial"][:3])
    assert (table["largest_factor"] >= 1.0 - 1e-9).all()
    # a factor of 1 everywhere leaves the candidate's time as it was
    calm = table[table["largest_factor"] <= 1.0 + 1e-9]
    assert calm["iteration_time_s_packet"].tolist() == pytest.approx(calm["iteration_time_s_analytical"].tolist())
    assert "Fidelity comparison" in (tmp_path / "report.html").read_text()


def test_a_slowdown_on_the_network_slows_exactly_the_collectives_it_names(write_spec):
    resolved = resolve_study(load_study(write_spec(FIDELITY_SPEC)))
    space = SearchSpace.from_study(resolved)
    params = {**TINY_PARAMS, "num_gpus": 64, "pp": 2, "global_batch": 128, "fabric": "leaf-spine"}
    base = space.candidate(params).system.fabric_network
    plain = Evaluator(space).evaluate(params)
    slowed = Evaluator(space).evaluate(params, dataclasses.replace(base, slowdown=((("send_recv", 2, 32), 3.0),)))
    unrelated = Evaluator(space).evaluate(params, dataclasses.replace(base, slowdown=((("all_to_all", 7, 1), 9.0),)))
    assert slowed.metrics["iteration_time_s"] > plain.metrics["iteration_time_s"]
    assert unrelated.metrics["iteration_time_s"] == plain.metrics["iteration_time_s"]


def test_packet_fidelity_is_for_training_studies(write_spec):
    text = FIDELITY_SPEC.replace("model: llama3-8b", "model: llama3-8b\nmode: inference").split("search:")[0]
    text += "fidelity:\n  packet: {top: 2}\n"
    with pytest.raises(DseError, match="fidelity.packet"):
        resolve_study(load_study(write_spec(text)))


@pytest.mark.parametrize("family", ["rail-optimized", "leaf-spine"])
def test_contention_never_speeds_a_collective_up(write_spec, family):
    """The first group alone runs on the very paths it takes beside the others, so adding the
    others' traffic can only slow it: every factor is at least 1."""
    from simulators.packet import congestion_factors

    space = SearchSpace.from_study(resolve_study(load_study(write_spec(FIDELITY_SPEC))))
    params = {**TINY_PARAMS, "num_gpus": 64, "tp": 2, "pp": 2, "global_batch": 128, "fabric": family}
    factors = congestion_factors(space.candidate(params), space.fabric(family, params["nic_gbps"]), 2 << 20)
    assert len(factors) >= 2 and all(f.groups > 1 for f in factors)
    assert all(f.together_s >= f.alone_s * (1 - 1e-12) for f in factors), [(f.op, f.factor) for f in factors]
