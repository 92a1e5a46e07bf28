"""nccl-tests logs read, the collective curves fitted to them, and a spec that names the result."""

import dataclasses

import numpy as np
import pytest

from dse.calibrate.nccl_tests import fit_curves, read_log
from dse.cli.commands import main
from dse.errors import SpecError
from dse.evaluation.space import SearchSpace
from dse.spec import load_study
from dse.spec.network_calibration import load_calibration
from dse.study import resolve_study
from simulators.hardware import get_gpu
from simulators.network import Network, collective_time_s
from tests.conftest import TINY_PARAMS, TINY_SPEC

H100 = get_gpu("H100-SXM")
SIZES = [2**20, 2**24, 2**28, 2**32]


def nccl_tests_log(program: str, hosts: list[str], rows: list[tuple[int, float]], *, named: bool = True) -> str:
    """An nccl-tests 2.19 log (src/util.cu's header and row formats) for (size, out-of-place us) rows."""
    lines = ["# nccl-tests version 2.19.6 nccl-headers=22703 nccl-library=22703"]
    if named:
        lines.append(f"# Collective test starting: ./build/{program}")
    lines += [f"# nThread 1 nGpus 1 minBytes 1048576 maxBytes {SIZES[-1]} step: 16(factor) warmup iters: 5", "#"]
    lines.append("# Using devices")
    for rank, host in enumerate(hosts):
        device = f"device {rank % 8:2d} [0000:1b:00] NVIDIA H100"
        lines.append(f"#  Rank {rank:2d} Group  0 Pid {1000 + rank:6d} on {host:>10s} {device}")
    lines += ["#", "#       size         count      type   redop    root     time   algbw   busbw #wrong"]
    for size, time_us in rows:
        algbw = size / time_us / 1e3
        row = f"{size:12d}  {size // 4:12d}     float     sum      -1  {time_us:7.1f}  {algbw:6.2f}  {algbw:6.2f}"
        lines.append(row + "    N/A")
    lines += ["# Out of bounds values : 0 OK", "# Avg bus bandwidth    : 1.0", "#"]
    return "\n".join(lines) + "\n"


def modelled_us(op, size, ranks, domain=8):
    network = dataclasses.replace(Network.from_gpu(H100), domain_gpus=domain)
    return float(collective_time_s(op, size, ranks, 1, network)) * 1e6


def test_the_fit_recovers_measured_over_modelled_time_per_size_and_scale(tmp_path):
    """Logs whose times are the model's times a known factor: the fitted curve is that factor,
    one host's ranks a scale-up curve, two hosts' a scale-out one."""
    slow = {2**20: 2.0, 2**24: 1.5, 2**28: 1.1, 2**32: 1.0}
    one = nccl_tests_log("all_reduce_perf", ["a"] * 8, [(s, modelled_us("all_reduce", s, 8) * slow[s]) for s in SIZES])
    rows = [(s, modelled_us("all_reduce", s, 16) * 1.25) for s in SIZES]
    two = nccl_tests_log("all_reduce_perf", ["a"] * 8 + ["b"] * 8, rows)
    measurements = read_log(tmp_path / "one.log", one) + read_log(tmp_path / "two.log", two)
    curves = {(c.op, c.scale): c for c in fit_curves(measurements, H100, "test").curves}
    up, out = curves["all_reduce", "scale-up"], curves["all_reduce", "scale-out"]
    assert up.sizes_bytes == tuple(SIZES) and out.sizes_bytes == tuple(SIZES)
    assert up.factors == pytest.approx([slow[s] for s in SIZES], rel=1e-3)  # the log rounds to 0.1 us
    assert out.factors == pytest.approx([1.25] * 4, rel=1e-3)


def test_the_operation_is_read_from_the_log_or_its_file_name(tmp_path):
    rows = [(2**20, 100.0)]
    assert read_log(tmp_path / "x.log", nccl_tests_log("alltoall_perf", ["a"] * 8, rows))[0].op == "all_to_all"
    unnamed = nccl_tests_log("all_gather_perf", ["a"] * 8, rows, named=False)
    assert read_log(tmp_path / "all_gather_perf.out", unnamed)[0].op == "all_gather"
    with pytest.raises(SpecError, match=r"x.log: cannot tell the operation .* allowed: all_reduce_perf"):
        read_log(tmp_path / "x.log", unnamed)
    with pytest.raises(SpecError, match=r"no '#  Rank  N Group"):
        read_log(tmp_path / "all_reduce.log", "size time\n1 2\n")


def test_a_spec_naming_the_curves_prices_its_collectives_with_them(write_spec, tmp_path, capsys):
    """`dse calibrate nccl-tests` writes the file; a spec naming it slows the candidates'
    scale-up all-reduces by the measured factor at their size, and nothing else."""
    log = tmp_path / "all_reduce_perf.log"
    rows = [(s, modelled_us("all_reduce", s, 8) * 3) for s in SIZES]
    log.write_text(nccl_tests_log("all_reduce_perf", ["a"] * 8, rows))
    calibration = tmp_path / "network_calibration.yaml"
    assert main(["calibrate", "nccl-tests", str(log), "--gpu", "H100-SXM", "--out", str(calibration)]) == 0
    assert "all_reduce scale-up: 4 sizes" in capsys.readouterr().out
    assert load_calibration(calibration).nic_efficiency is None
    text = TINY_SPEC.replace("  num_gpus: [8, 16]\n", f"  num_gpus: [8, 16]\n  network_calibration: {calibration}\n")
    space = SearchSpace.from_study(resolve_study(load_study(write_spec(text, name="calibrated.yaml"))))
    network = space.candidate({**TINY_PARAMS, "tp": 8}).system.fabric_network
    plain = Network.from_gpu(H100)
    for size in (2**22, 2**30):  # between and at measured sizes: the factor 3 everywhere
        assert collective_time_s("all_reduce", size, 8, 1, network) == pytest.approx(
            3 * collective_time_s("all_reduce", size, 8, 1, dataclasses.replace(network, calibration=None)), rel=2e-3
        )
    assert collective_time_s("all_gather", 2**30, 8, 1, network) == pytest.approx(
        collective_time_s("all_gather", 2**30, 8, 1, dataclasses.replace(network, calibration=None))
    )
    assert np.isfinite(collective_time_s("all_reduce", 2**30, 8, 1, plain))


def test_a_bad_calibration_file_is_one_line_naming_it(write_spec, tmp_path, capsys):
    bad = tmp_path / "network_calibration.yaml"
    bad.write_text("collectives:\n- {op: all_reduce, scale: scale-up, sizes_bytes: [2, 1], factors: [1, 1]}\n")
    text = TINY_SPEC.replace("  num_gpus: [8, 16]\n", f"  num_gpus: [8, 16]\n  network_calibration: {bad}\n")
    assert main(["search", str(write_spec(text)), "--ray-address", "off"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "collectives[0]" in err and "allowed: increasing numbers > 0" in err
