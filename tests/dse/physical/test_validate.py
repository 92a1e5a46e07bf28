"""dse validate: the best candidates' collectives replayed over TCP, the NIC efficiency fitted."""

import pandas as pd
import pytest

from dse.cli.commands import main
from dse.errors import SpecError
from dse.evaluation.space import SearchSpace
from dse.physical.validate import replay_scope, stands_for_fabric, validate_study
from dse.report.files import write_reports
from dse.search.engine import RunSettings, run_search
from dse.spec import load_study
from dse.spec.network_calibration import fit_nic_efficiency, load_calibration, write_calibration
from dse.study import resolve_study
from tests.conftest import TINY_PARAMS, TINY_SPEC


@pytest.fixture
def finished_study(write_spec, tmp_path):
    spec = write_spec(extra="")
    resolved = resolve_study(load_study(spec, output=str(tmp_path / "study")))
    out = tmp_path / "study"
    summary = run_search(resolved, RunSettings(out, None, "off", False))
    write_reports(summary.study, resolved, out)
    return out


@pytest.mark.slow
def test_validate_replays_and_reports_every_collective_it_knows(finished_study, capsys):
    assert main(["validate", str(finished_study), "--top", "1", "--max-ranks", "2", "--max-mb", "0.25"]) == 0
    table = pd.read_csv(finished_study / "validation.csv")
    assert len(table) and table["verified"].all()
    assert table["algorithm"].isin(["ring", "double_binary_tree", "direct", "pairwise"]).all()
    assert (table["measured_s"] > 0).all() and (table["ranks"] == 2).all()
    assert (table["nbytes"] <= 0.25 * 2**20).all()
    assert not table["stands_for_fabric"].any()  # TCP between processes on one machine
    assert "rows stand for the modelled fabric, the error of the others is the model against" in capsys.readouterr().out
    assert "Physical validation" in (finished_study / "report.html").read_text()
    assert main(["validate", str(finished_study), "--top", "1", "--max-ranks", "2", "--calibrate"]) == 2
    assert "none of the" in capsys.readouterr().err and not (finished_study / "network_calibration.yaml").exists()


def replayed(transport="rdma", placement="ray STRICT_SPREAD on 2 nodes", scale="scale-out", measured=(10, 20, 30)):
    """A validation table: three collectives predicted at 20, 40, 60 GB/s with efficiency 0.96."""
    return pd.DataFrame(
        {
            "measured_busbw_gbytes_per_s": list(map(float, measured)),
            "predicted_busbw_gbytes_per_s": [20.0, 40.0, 60.0],
            "nic_efficiency": [0.96] * 3,
            "transport": [transport] * 3,
            "placement": [placement] * 3,
            "scale": [scale] * 3,
            "stands_for_fabric": [stands_for_fabric(transport, placement, scale)] * 3,
        }
    )


def test_the_fitted_efficiency_makes_the_model_match_the_measurement(tmp_path):
    """Measured busbw at half the predicted one, predicted with efficiency 0.96: the fit is 0.48."""
    table = replayed()
    assert fit_nic_efficiency(table) == pytest.approx(0.48)
    path = write_calibration(table, tmp_path)
    assert load_calibration(path).nic_efficiency == pytest.approx(0.48)


@pytest.mark.parametrize(
    "transport,placement,scale",
    [
        ("tcp", "processes", "scale-out"),  # loopback sockets on one machine
        ("rdma", "processes", "scale-out"),  # RDMA, but every rank on this machine
        ("rdma", "ray PACK on 1 node", "scale-out"),
        ("tcp", "ray STRICT_SPREAD on 2 nodes", "scale-out"),  # between nodes, through the kernel
        ("rdma", "ray STRICT_SPREAD on 2 nodes", "scale-up"),  # the model keeps it on NVLink
    ],
)
def test_a_replay_that_cannot_stand_for_the_fabric_is_labelled_and_not_fitted(tmp_path, transport, placement, scale):
    table = replayed(transport, placement, scale)
    assert not table["stands_for_fabric"].any()
    assert "0 of 3 rows stand for the modelled fabric" in replay_scope(table)
    with pytest.raises(SpecError, match=r"validate --calibrate: none of the 3 collectives .* stands for the modelled"):
        write_calibration(table, tmp_path)
    assert not (tmp_path / "network_calibration.yaml").exists()


def test_a_fit_no_nic_fabric_reaches_is_refused(tmp_path):
    """TCP on loopback measured 0.0012 of the modelled efficiency: a spec using it would price a
    400 Gb/s fabric at under half a Gb/s. Faster than the line rate is refused too."""
    for measured in ((0.025, 0.05, 0.075), (25, 50, 75)):
        with pytest.raises(SpecError, match=r"the fitted nic_efficiency .* is outside .* allowed: 0.3 to 1"):
            fit_nic_efficiency(replayed(measured=measured))
    assert fit_nic_efficiency(replayed(measured=(21, 42, 63))) == 1.0  # 1.008: noise, clipped to the line rate


def test_a_calibration_named_in_the_spec_sets_the_network_models_nic_efficiency(write_spec, tmp_path):
    path = tmp_path / "network_calibration.yaml"
    path.write_text("nic_efficiency: 0.5\n")
    plain = SearchSpace.from_study(resolve_study(load_study(write_spec())))
    text = TINY_SPEC.replace("  num_gpus: [8, 16]\n", f"  num_gpus: [8, 16]\n  network_calibration: {path}\n")
    calibrated = SearchSpace.from_study(resolve_study(load_study(write_spec(text, name="calibrated.yaml"))))
    params = {**TINY_PARAMS, "num_gpus": 16}
    assert calibrated.candidate(params).system.fabric_network.nic_efficiency == 0.5
    assert plain.candidate(params).system.fabric_network.nic_efficiency > 0.9


def test_validate_check_reports_what_the_machine_has(capsys):
    assert main(["validate", "--check"]) == 0
    assert "pyverbs" in capsys.readouterr().out


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"top": -1}, r"validate.top \(--top\): -1 is not allowed; allowed: integers >= 1"),
        ({"max_ranks": 1}, r"validate.max_ranks \(--max-ranks\): 1 .* allowed: integers >= 2"),
        ({"message_cap_bytes": 0}, r"validate.message_cap_bytes \(--max-mb\): 0 .* allowed: integers >= 1"),
        ({"transport": "ib"}, r"validate.transport: 'ib' is unknown; allowed: tcp, rdma"),
    ],
)
def test_bad_validate_arguments_are_one_line_before_any_work(tmp_path, kwargs, match):
    with pytest.raises(SpecError, match=match):
        validate_study(tmp_path / "no-study", **kwargs)


def test_a_front_without_replayable_collectives_says_so_in_one_line(finished_study, monkeypatch):
    monkeypatch.setattr("dse.physical.validate.plan_collectives", lambda candidate: [])
    with pytest.raises(SpecError, match=r"validate: the first 1 candidates .* nothing to replay"):
        validate_study(finished_study, top=1)
