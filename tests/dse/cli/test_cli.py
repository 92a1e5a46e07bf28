"""The command line: exit codes, one-line errors, listings, and the main job end to end."""

import os
import subprocess
import sys

import pandas as pd
import pytest

from dse.cli.commands import main
from tests.conftest import TINY_SPEC


def test_bad_spec_exits_2_with_one_line_and_no_traceback(write_spec, capsys):
    spec = write_spec().read_text()
    assert "search:\n  tp: [1, 2, 4]" in spec
    path = write_spec(spec.replace("search:\n  tp: [1, 2, 4]", "search:\n  tp: [1, 3]"))
    assert main(["search", str(path), "--ray-address", "off"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("dse: error: search.tp: 3 does not divide")
    assert "Traceback" not in err


def test_missing_spec_file_exits_2(tmp_path, capsys):
    assert main(["search", str(tmp_path / "nope.yaml")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_non_positive_trials_flag_exits_2(write_spec, capsys):
    assert main(["search", str(write_spec()), "--trials", "0"]) == 2
    assert "--trials: 0 is out of range; allowed: 1 to" in capsys.readouterr().err


def test_listings_show_the_catalogues(capsys):
    assert main(["models"]) == 0
    assert "llama3-70b" in capsys.readouterr().out
    assert main(["gpus"]) == 0
    assert "MI300X" in capsys.readouterr().out
    assert main(["topologies"]) == 0
    listing = capsys.readouterr().out
    families = ("leaf-spine", "fat-tree", "rail-optimized", "dual-plane", "star", "fat-tree-dual-tor", "spectrum-x")
    assert all(family in listing for family in families)
    assert "32 / 16" in listing  # 1024 GPUs, radix 64: 32 rail leaves and 16 spines (hand count)
    assert "64 / 64 / 32" in listing  # dual-ToR, 1024 GPUs: 64 leaves, 64 aggregation, 32 core
    star = next(line for line in listing.splitlines() if "star" in line)
    assert "64" in star and "1024" not in star  # a star of radix 64 holds 64 GPUs: shown at that size


def test_topologies_draws_a_fabric_tier_by_tier(capsys):
    """Dual-ToR fat-tree of 1024 GPUs: 32 cores, 64 aggregation switches, 64 leaves, and every
    NIC's two 200G ports on two leaves; Spectrum-X says it routes adaptively."""
    assert main(["topologies", "--draw", "--family", "fat-tree-dual-tor", "--num-gpus", "1024"]) == 0
    drawing = capsys.readouterr().out.splitlines()
    assert [line.split()[:2] for line in drawing[1::2]] == [
        ["core", "32"],
        ["aggregation", "64"],
        ["leaf", "64"],
        ["servers", "128"],
    ]
    assert "each NIC-holding GPU: 2 links at 200 Gb/s up to 2 leaf switches" in drawing[-2]
    assert "each leaf: 32 links at 200 Gb/s up to 32 aggregation switches" in drawing[-4]
    assert main(["topologies", "--draw", "--family", "spectrum-x", "--num-gpus", "512"]) == 0
    assert "adaptive routing" in capsys.readouterr().out.splitlines()[0]
    assert main(["topologies", "--draw", "--family", "star", "--num-gpus", "72"]) == 2
    assert "star fabric of radix 64 holds (64)" in capsys.readouterr().err


def test_a_fabric_exports_as_a_simai_topology_that_reads_back(tmp_path, capsys):
    from simulators.network import read_simai_topology

    path = tmp_path / "fabric.topo"
    assert main(["topologies", "--simai", str(path), "--family", "leaf-spine", "--num-gpus", "64"]) == 0
    topology = read_simai_topology(path)
    # 64 GPUs, 8 NVSwitches (one per server), 2 leaves + 1 spine (bill of materials)
    assert len(topology.nvswitch_ids) == 8 and len(topology.switch_ids) == 3


@pytest.mark.slow
def test_dse_search_end_to_end_on_a_local_ray(write_spec, tmp_path):
    """The README's main job on a tiny budget, as a user runs it: a subprocess with a fresh Ray."""
    out = tmp_path / "out"
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "COLUMNS": "200"}
    run = subprocess.run(
        [sys.executable, "-m", "dse", "search", str(write_spec()), "--trials", "24", "--out", str(out)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert "Pareto front" in run.stdout and "feasible" in run.stdout
    trials = pd.read_csv(out / "trials.csv")
    front = pd.read_csv(out / "pareto.csv")
    assert len(trials) == 24 and not front.empty
    assert (out / "study.journal").exists()
    # Resuming with a larger budget adds exactly the missing trials.
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "dse",
            "search",
            str(write_spec()),
            "--trials",
            "30",
            "--out",
            str(out),
            "--resume",
            "--ray-address",
            "off",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert len(pd.read_csv(out / "trials.csv")) == 30


@pytest.mark.parametrize("address,message", [("127.0.0.1:1", "nothing answers"), ("auto", "cannot join")])
def test_unreachable_ray_cluster_exits_2_before_any_study_exists(write_spec, tmp_path, capsys, address, message):
    out = tmp_path / "out"
    assert main(["search", str(write_spec()), "--ray-address", address, "--out", str(out)]) == 2
    assert f"--ray-address: {message}" in capsys.readouterr().err
    assert not out.exists()


FIXED = ["--set", "num_gpus=16", "--set", "tp=2", "--set", "pp=2", "--set", "micro_batch=1", "--set", "recompute=none"]


def test_simulate_prints_one_json_object_whose_breakdown_adds_up(write_spec, capsys):
    import json

    assert main(["simulate", str(write_spec()), *FIXED, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["params"]["tp"] == 2 and report["params"]["gpu"] == "H100-SXM"
    assert report["feasible"] is True
    total = sum(report["breakdown_s"].values())
    assert total == pytest.approx(report["metrics"]["iteration_time_s"], rel=1e-9)
    assert report["memory_gib"]["total"] == pytest.approx(report["metrics"]["memory_gib_per_gpu"])
    # nccl-tests conventions: busbw = bytes / time * (n-1)/n for all-gather and reduce-scatter.
    uses = {use["name"]: use for use in report["collectives"]}
    gather = uses["tp all_gather"]
    assert gather["ranks"] == 2 and gather["nbytes"] == 1 * 4096 * 4096 * 2
    expected = gather["nbytes"] / gather["time_s"] / 1e9 * (2 - 1) / 2
    assert gather["busbw_gbytes_per_s"] == pytest.approx(expected)
    assert "pp send_recv" in uses and "dp reduce_scatter" in uses


def test_simulate_refuses_to_pick_a_knob_value_silently(write_spec, capsys):
    assert main(["simulate", str(write_spec()), "--set", "tp=2"]) == 2
    err = capsys.readouterr().err
    assert "several values for num_gpus, pp, micro_batch, recompute" in err


def test_simulate_needs_no_choice_for_a_knob_without_effect(write_spec, capsys):
    spec = write_spec(
        """
        name: serve
        mode: inference
        model: llama3-8b
        serving: {requests: 50}
        hardware: {gpu: [H100-SXM]}
        search: {tp: [2], replicas: [1], disaggregated: [false, true], decode_tp: [1, 2]}
        """
    )
    assert main(["simulate", str(spec), "--set", "disaggregated=false", "--json"]) == 0  # no decode pool
    assert '"decode_tp"' in capsys.readouterr().out
    assert main(["simulate", str(spec), "--set", "disaggregated=true"]) == 2
    assert "several values for decode_tp" in capsys.readouterr().err


def test_simulate_an_impossible_plan_reports_why(write_spec, capsys):
    import json

    args = ["simulate", str(write_spec()), *FIXED, "--set", "num_gpus=8", "--set", "tp=4", "--set", "pp=4", "--json"]
    assert main(args) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["feasible"] is False and "not a multiple of tp*pp*cp" in report["reason"]


def test_simulate_best_needs_a_finished_study(write_spec, tmp_path, capsys):
    assert main(["simulate", str(write_spec()), "--config", "best", "--study", str(tmp_path / "none")]) == 2
    assert "pareto.csv does not exist" in capsys.readouterr().err


def test_simulate_prices_nvidias_405b_plan_with_the_embedding_and_loss_counted_as_layers(capsys):
    """pp 8 x vpp 8 over Llama-3.1-405B's 126 layers runs only with pipeline_split embedding+loss."""
    import json
    from pathlib import Path

    spec = Path(__file__).resolve().parents[3] / "search_spaces" / "llama405b.yaml"
    plan = ["--set", "gpu=H100-SXM", "--set", "num_gpus=1024", "--set", "tp=8", "--set", "pp=8", "--set", "cp=2"]
    plan += ["--set", "vpp=8", "--set", "recompute=none"]
    assert main(["simulate", str(spec), *plan, "--set", "pipeline_split=embedding+loss", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["params"]["pipeline_split"] == "embedding+loss" and report["params"]["vpp"] == 8
    assert sum(report["breakdown_s"].values()) == pytest.approx(report["metrics"]["iteration_time_s"], rel=1e-9)
    assert main(["simulate", str(spec), *plan, "--set", "pipeline_split=even", "--json"]) == 0
    refused = json.loads(capsys.readouterr().out)
    assert refused["feasible"] is False and "does not divide layers=126" in refused["reason"]


def test_simulate_with_a_failed_spine_shows_what_it_costs(write_spec, capsys):
    """16 H100s on a leaf-spine of radix 8: 4 NIC ports a leaf, so 4 leaves with 4 uplinks each
    on 2 spines, two links from every leaf to each. One spine down halves what crosses servers:
    the pipeline's sends (stages 8 GPUs apart, on two servers) run at half the bandwidth; the
    data-parallel ones (GPUs 0, 2, 4, 6) stay on NVLink. The first step after the failure also
    waits the ECMP convergence time."""
    import json

    spec = write_spec(
        TINY_SPEC.replace(
            "  num_gpus: [8, 16]", "  num_gpus: [8, 16]\n  fabric: {family: [leaf-spine], switch_radix: 8}"
        )
    )
    args = ["simulate", str(spec), *FIXED, "--fail", "spine=1", "--ecmp-convergence-s", "0.5", "--json"]
    assert main(args) == 0
    report = json.loads(capsys.readouterr().out)
    healthy, failed = report["healthy"], report["failed"]
    assert report["failures"] == "spine=1" and failed["feasible"] is True
    uses = [{use["name"]: use for use in r["collectives"]} for r in (healthy, failed)]
    send = uses[0]["pp send_recv"]  # at half the NIC's 48.5 GB/s it takes nbytes / 48.5 GB/s longer
    slower_s = uses[1]["pp send_recv"]["time_s"] - send["time_s"]
    assert slower_s == pytest.approx(send["nbytes"] / (400 / 8 * 0.97 * 1e9), rel=1e-3)
    assert uses[1]["dp reduce_scatter"] == uses[0]["dp reduce_scatter"]
    step = failed["metrics"]["iteration_time_s"]
    assert step > healthy["metrics"]["iteration_time_s"]
    assert report["delta"]["iteration_time_s"] == pytest.approx(step - healthy["metrics"]["iteration_time_s"])
    assert report["first_step_after_failure_s"] == pytest.approx(step + 0.5)
    assert main(["simulate", str(spec), *FIXED, "--fail", "spine=1", "--ecmp-convergence-s", "0.5"]) == 0
    assert "with spine=1 failed" in capsys.readouterr().out


def test_simulate_with_a_failed_leaf_of_a_single_homed_fabric_is_infeasible_with_the_reason(write_spec, capsys):
    import json

    spec = write_spec(TINY_SPEC.replace("  num_gpus: [8, 16]", "  num_gpus: [8, 16]\n  fabric: {family: [leaf-spine]}"))
    assert main(["simulate", str(spec), *FIXED, "--fail", "leaf=1", "--ecmp-convergence-s", "0", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["healthy"]["feasible"] is True and report["failed"]["feasible"] is False
    assert "cuts GPU 0 (server 0) off the fabric" in report["failed"]["reason"]


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--fail", "spline=1", "--ecmp-convergence-s", "1"], "--fail: 'spline=1' is not allowed; allowed: TIER=COUNT"),
        (["--fail", "spine=0", "--ecmp-convergence-s", "1"], "--fail: 'spine=0' is not allowed"),
        (["--fail", "spine=²", "--ecmp-convergence-s", "1"], "--fail: 'spine=²' is not allowed"),
        (["--fail", "links=99999999999999", "--ecmp-convergence-s", "1"], "COUNT an integer from 1 to 1,048,576"),
        (["--fail", "spine=65536", "--fail", "spine=1", "--ecmp-convergence-s", "1"], "from 1 to 65,536"),
        (["--fail", "spine=1"], "--ecmp-convergence-s: needed with --fail"),
        (["--ecmp-convergence-s", "1"], "--ecmp-convergence-s: only with --fail"),
        (
            ["--fail", "spine=1", "--ecmp-convergence-s", "-1"],
            "--ecmp-convergence-s: -1 is out of range; allowed: a finite number at least 0",
        ),
    ],
)
def test_simulate_refuses_bad_failures_in_one_line(write_spec, capsys, flags, message):
    assert main(["simulate", str(write_spec()), *FIXED, *flags]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_a_study_with_fabric_failures_says_so_in_its_header(write_spec):
    from dse.cli.studies import _failures_line
    from dse.spec import load_study

    fabric = "  fabric: {failures: {switches: {spine: 1}, links: 2, ecmp_convergence_s: 0.1}}"
    study = load_study(write_spec(TINY_SPEC.replace("  num_gpus: [8, 16]", "  num_gpus: [8, 16]\n" + fabric)))
    assert (
        _failures_line(study)
        == "\nfabric with failures: spine=1, links=2 (hardware.fabric.failures; ECMP converges in 0.1 s)"
    )
    assert _failures_line(load_study(write_spec())) == ""


def test_the_header_names_each_compute_share_with_the_gpus_that_take_it():
    from dse.cli.studies import _fractions

    assert _fractions({"H100-SXM": 0.7, "H200": 0.7}) == "0.7"
    assert _fractions({"H100-SXM": 0.7, "B200": 0.509, "H200": 0.7}) == "0.7 (H100-SXM, H200), 0.509 (B200)"
