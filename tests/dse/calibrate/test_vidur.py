"""A Vidur MLP profile as a kernel calibration table: the GEMM shapes of each timed layer, and
the shipped example made from Vidur's public A100 profile."""

from pathlib import Path

import numpy as np

from dse.calibrate.vidur import gemm_rows
from dse.cli.commands import main
from simulators.hardware import gemm_time_s, get_gpu
from simulators.hardware.calibration import load_calibration
from simulators.serving import load_vidur_profile

ROOT = Path(__file__).resolve().parents[3]
FIXTURE = ROOT / "tests" / "simulators" / "serving" / "data" / "mlp.csv"  # Vidur's layout, Llama-2-70B shape
EXAMPLE = ROOT / "simulators" / "hardware" / "calibration" / "examples" / "a100-vidur-llama3-8b.csv"


def test_each_timed_layer_is_the_gemm_vidurs_block_runs():
    """Llama-2-70B at tp 4: 64 heads of 128, 8 KV heads, hidden 8192, gated FFN 28672."""
    profile = load_vidur_profile(mlp_csv=FIXTURE).mlp
    rows = gemm_rows(profile, "A100-80GB", "fixture")
    first = {row["source"].split()[-3]: row for row in rows if row["m"] == 1 and row["source"].endswith("tp 4")}
    assert {op: (r["n"], r["k"]) for op, r in first.items()} == {
        "attn_pre_proj": ((64 + 2 * 8) * 128 // 4, 8192),
        "attn_post_proj": (8192, 64 * 128 // 4),
        "mlp_up_proj": (2 * 28672 // 4, 8192),
        "mlp_down_proj": (8192, 28672 // 4),
    }
    i = int(np.flatnonzero((profile.num_tokens == 1) & (profile.tp == 4))[0])
    assert first["mlp_up_proj"]["time_s"] == profile.op_s["mlp_up_proj"][i]  # Vidur's median, in seconds
    assert all(row["precision"] == "fp16" and row["batch"] == 1 for row in rows)


def test_the_shipped_example_loads_and_the_model_returns_its_measurements():
    table = load_calibration(EXAMPLE)
    points = table.points("A100-80GB", "gemm", "fp16")
    assert len(points.time_s) == 256  # 16 powers of two from 1 to 32768 tokens x 4 tp x 4 layers
    gpu = get_gpu("A100-80GB")
    m, n, k, batch = points.shapes.T
    assert np.allclose(gemm_time_s(gpu, m, n, k, batch, "fp16", calibration=table), points.time_s, rtol=0, atol=0)
    # Between measured shapes the factor stays within its neighbours': no time outside the
    # measured times' range scaled by the analytical curve's.
    between = gemm_time_s(gpu, 3000, 6144, 4096, 1, "fp16", calibration=table)
    assert points.time_s[(m == 2048) & (n == 6144)][0] < between < points.time_s[(m == 4096) & (n == 6144)][0]


def test_the_command_writes_a_table_and_refuses_a_profile_without_shapes(tmp_path, capsys):
    out = tmp_path / "table.csv"
    assert main(["calibrate", "vidur", str(FIXTURE), "--gpu", "A100-80GB", "--out", str(out)]) == 0
    assert "fp16 GEMMs measured on A100-80GB; the analytical model against them" in capsys.readouterr().out
    assert load_calibration(out).points("A100-80GB", "gemm", "fp16") is not None
    shapeless = tmp_path / "mlp.csv"
    lines = FIXTURE.read_text().splitlines()
    header = lines[0].split(",")
    keep = [i for i, c in enumerate(header) if c not in ("n_embd", "n_head")]
    shapeless.write_text("\n".join(",".join(line.split(",")[i] for i in keep) for line in lines) + "\n")
    assert main(["calibrate", "vidur", str(shapeless), "--gpu", "A100-80GB", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "lacks the model shape columns n_embd, n_head" in err
    assert main(["calibrate", "vidur", str(tmp_path), "--gpu", "A100-80GB", "--out", str(out)]) == 2
