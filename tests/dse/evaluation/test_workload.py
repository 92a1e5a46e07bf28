"""`dse workload import`: SimAI's own workload files, timed by our network model."""

import json
from pathlib import Path

import pytest

from dse.cli.commands import main
from tests.conftest import TINY_PARAMS

REFERENCE = Path(__file__).resolve().parents[3].parent / "shared" / "reference" / "simai"
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


def test_exported_candidate_reads_back_and_carries_the_models_compute(write_spec, tmp_path):
    from dse.evaluation.space import SearchSpace
    from dse.spec import load_study
    from dse.study import resolve_study
    from simulators.analytical import simulate_training
    from simulators.workload import read_simai_workload, simai_operations

    spec = write_spec()
    fixed = [
        "--set",
        "num_gpus=16",
        "--set",
        "tp=2",
        "--set",
        "pp=1",
        "--set",
        "micro_batch=1",
        "--set",
        "recompute=none",
    ]
    out = tmp_path / "w.txt"
    assert main(["workload", "export", str(spec), *fixed, "--out", str(out)]) == 0
    workload = read_simai_workload(out)  # our parser is stricter than SimAI's
    header = workload.header
    assert (header.tp, header.pp, header.all_gpus, header.ga) == (2, 1, 16, 8)  # 64 / (dp 8 * mb 1)
    # One GPU: 32 layers, two rows each, and the output layer, per micro-batch.
    rows = [layer for layer in workload.layers if layer.name in ("attention_layer", "mlp_layer")]
    assert len(rows) == 32 * 2 * header.ga
    assert sum(layer.name == "output_layer" for layer in workload.layers) == header.ga
    # Compute in the file = the model's busy time (F + B + W of every layer and micro-batch) plus
    # the optimizer, up to nanosecond rounding per row.
    space = SearchSpace.from_study(resolve_study(load_study(spec)))
    params = {**TINY_PARAMS, "num_gpus": 16, "tp": 2}
    result = simulate_training(space.candidate(params))
    compute = sum(op.compute_s for op in simai_operations(workload))
    assert compute == pytest.approx(
        result.breakdown_s["gemm_s"]
        + result.breakdown_s["attention_and_memory_bound_s"]
        + result.breakdown_s["optimizer_s"],
        rel=1e-5,
    )
    tp_rows = [op for op in simai_operations(workload) if op.group == "tp"]
    assert {op.nbytes for op in tp_rows} == {1 * 4096 * 4096 * 2}


def test_an_uneven_405b_split_exports_each_stages_own_layers(tmp_path):
    """pp 8 x vpp 8 with the embedding and loss counted as layers: rank 0 holds chunk 0 (the
    embedding and one layer) and seven chunks of two, 2*8 - 1 = 15 layers per micro-batch; a
    middle stage, the busiest and the default, holds eight chunks of two."""
    from simulators.workload import read_simai_workload

    spec = Path(__file__).resolve().parents[3] / "search_spaces" / "llama405b.yaml"
    plan = {"gpu": "H100-SXM", "num_gpus": 1024, "tp": 8, "pp": 8, "cp": 1, "vpp": 8, "recompute": "none"}
    fixed = [arg for name, value in plan.items() for arg in ("--set", f"{name}={value}")]
    fixed += ["--set", "pipeline_split=embedding+loss"]
    for stage, layers in (("0", 15), ("busiest", 16)):
        out = tmp_path / f"w{stage}.txt"
        assert main(["workload", "export", str(spec), *fixed, "--out", str(out), "--stage", stage]) == 0
        workload = read_simai_workload(out)
        assert (workload.header.pp, workload.header.vpp) == (8, 8)
        rows = [layer for layer in workload.layers if layer.name in ("attention_layer", "mlp_layer")]
        assert len(rows) == layers * 2 * workload.header.ga


@pytest.mark.skipif(not REFERENCE.exists(), reason="../shared/reference is not beside this checkout")
def test_an_older_aicb_file_is_timed_with_the_job_size_given(capsys):
    """Older AICB files state only tp: no ep or pp (1), and the GPU count comes from --num-gpus,
    as SimAI takes it from -g; without it, one line says what is missing."""
    path = REFERENCE / "workloads" / "aicb" / "G13B-M1-C01_GPT13B_megatron_tp8_pp1_mbs1_A100.txt"
    assert main(["workload", "import", str(path), "--gpu", "A100-80GB"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "header lacks all_gpus" in err and "--num-gpus" in err
    assert main(["workload", "import", str(path), "--gpu", "A100-80GB", "--num-gpus", "64", "--json"]) == 0
    parts = json.loads(capsys.readouterr().out)
    assert parts["bubble_s"] == 0 == parts["exposed_pp_s"] and parts["exposed_tp_s"] > 0 < parts["exposed_dp_s"]
    assert main(["workload", "import", str(path), "--gpu", "A100-80GB", "--num-gpus", "60"]) == 2
    assert "all_gpus=60 is not a multiple of tp*pp=8" in capsys.readouterr().err


def test_every_pipeline_stage_exports_to_its_own_file(write_spec, tmp_path, capsys):
    from simulators.workload import read_simai_workload

    spec = write_spec()
    fixed = [f"--set={k}={v}" for k, v in (("num_gpus", 16), ("tp", 2), ("pp", 2), ("micro_batch", 1))]
    fixed += ["--set=recompute=none"]
    out = tmp_path / "w.txt"
    assert main(["workload", "export", str(spec), *fixed, "--out", str(out), "--stage", "all"]) == 0
    stages = [read_simai_workload(tmp_path / f"w-stage{k}.txt") for k in (0, 1)]
    names = [[layer.name for layer in w.layers] for w in stages]
    # llama3-8b's 32 layers, 16 a stage, each an attention and an MLP row per micro-batch; the
    # output layer on the last stage only.
    ga = stages[0].header.ga
    assert [n.count("attention_layer") for n in names] == [16 * ga, 16 * ga]
    assert [n.count("output_layer") for n in names] == [0, ga]
    assert main(["workload", "export", str(spec), *fixed, "--out", str(out), "--stage", "2"]) == 2
    assert "--stage: 2 is past the plan's last stage; allowed: busiest, all, 0 to 1" in capsys.readouterr().err
    assert main(["workload", "export", str(spec), *fixed, "--out", str(out), "--stage", "x"]) == 2
    assert "allowed: busiest, all or a stage number from 0" in capsys.readouterr().err


def test_chakra_export_writes_one_trace_per_rank_and_guards_its_directory(write_spec, tmp_path, capsys):
    from simulators.workload import read_chakra_trace

    spec = write_spec()
    fixed = [f"--set={k}={v}" for k, v in (("num_gpus", 8), ("tp", 2), ("pp", 2), ("micro_batch", 1))]
    fixed += ["--set=recompute=none"]
    out = tmp_path / "et"
    argv = ["workload", "export", str(spec), *fixed, "--format", "chakra", "--out", str(out)]
    assert main(argv) == 0
    assert sorted(p.name for p in out.iterdir()) == [f"dse.{rank}.et" for rank in range(8)]
    assert all(read_chakra_trace(p)[1] for p in out.iterdir())
    capsys.readouterr()
    for extra, expected in (
        ([], "--out: " + str(out) + " holds files; allowed: a new or empty directory, or --force"),
        (["--stage", "0"], "--stage: --format chakra writes every rank of every stage"),
    ):
        assert main([*argv, *extra]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and expected in err and "Traceback" not in err, err
    (out / "dse.9.et").write_bytes(b"")  # a rank of an earlier, larger export
    assert main([*argv, "--force"]) == 0
    assert len(list(out.iterdir())) == 8
    a_file = tmp_path / "f.txt"
    a_file.write_text("x")
    assert main([*argv[:-1], str(a_file)]) == 2
    assert "is not a directory" in capsys.readouterr().err
