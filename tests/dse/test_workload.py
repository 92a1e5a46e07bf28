"""`dse workload import`: SimAI's own workload files, timed by our network model."""

import json
from pathlib import Path

import pytest

from dse.cli import main

REFERENCE = Path(__file__).resolve().parents[2].parent / "shared" / "reference" / "simai"
GPT13B = REFERENCE / "workloads" / "generated"


@pytest.mark.skipif(not REFERENCE.exists(), reason="../shared/reference is not beside this checkout")
def test_imported_gpt13b_workload_lands_near_simai_analytical(capsys):
    # SimAI-Analytical's total for this file on 128 H800s (results/run2_gpt13b_128_EndToEnd.csv):
    # 34,453,887 us. The compute rows are the same; only the collectives are priced differently.
    (path,) = GPT13B.glob("H800-gpt_13B-*.txt")
    assert main(["workload", "import", str(path), "--gpu", "H800", "--json"]) == 0
    parts = json.loads(capsys.readouterr().out)
    assert parts["iteration_time_s"] == pytest.approx(34.453887, rel=0.10)
    assert parts["iteration_time_s"] == pytest.approx(sum(v for k, v in parts.items() if k != "iteration_time_s"))


def test_malformed_workload_exits_2_with_its_line(tmp_path, capsys):
    bad = tmp_path / "bad.txt"
    bad.write_text(
        "HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 8 ep: 1 pp: 1 vpp: 1 ga: 1 all_gpus: 8 "
        "checkpoints: 0 checkpoint_initiates: 0 pp_comm: 0\n2\nlayer -1 1 NONE 0 1 NONE 0 1 NONE 0 100\n"
    )
    assert main(["workload", "import", str(bad), "--gpu", "H100-SXM"]) == 2
    assert "line 2" in capsys.readouterr().err
