"""`dse collectives`: every registered algorithm per op, size and scale, auto's pick, at a level."""

import json

import pytest

from dse.cli.commands import main
from simulators.hardware import get_gpu
from simulators.network import ALGORITHMS, Fabric
from tests.dse.spec.test_collective_algorithm import ring_all_reduce_s

GIB = 2**30


def rows(capsys, *flags) -> list[dict]:
    assert main(["collectives", *flags, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_every_algorithm_at_every_size_and_scale_with_nccl_tests_busbw(capsys):
    got = rows(capsys, "--num-gpus", "128,512", "--bytes", "1MiB,1GiB")
    assert len(got) == len(ALGORITHMS) * 2 * 2  # none disappears: a row per algorithm, size and scale
    for n in (128, 512):
        network = Fabric("rail-optimized", nic_gbps=400).network(get_gpu("H100-SXM"), n)
        ring = next(r for r in got if r["algorithm"] == "ring" and r["num_gpus"] == n and r["nbytes"] == GIB)
        assert ring["time_s"] == pytest.approx(ring_all_reduce_s(GIB, n, network), rel=1e-9)
        assert ring["busbw_gbytes_per_s"] == pytest.approx(GIB / ring["time_s"] / 1e9 * 2 * (n - 1) / n, rel=1e-12)
        for size in (2**20, GIB):
            cell = [r for r in got if r["num_gpus"] == n and r["nbytes"] == size]
            picked = [r for r in cell if r["auto"]]
            assert len(picked) == 1 and ALGORITHMS[picked[0]["algorithm"]].in_nccl
            nccl = [r["time_s"] for r in cell if ALGORITHMS[r["algorithm"]].in_nccl and r["time_s"] is not None]
            assert picked[0]["time_s"] == min(nccl)
    pairwise = [r for r in got if r["algorithm"] == "pairwise"]
    assert all(r["time_s"] is None and r["reason"] == "no all_reduce" for r in pairwise)


def test_all_gather_busbw_uses_n_minus_one_over_n(capsys):
    got = rows(capsys, "--op", "all_gather", "--num-gpus", "64", "--bytes", "256MiB")
    ring = next(r for r in got if r["algorithm"] == "ring")
    assert ring["busbw_gbytes_per_s"] == pytest.approx(2**28 / ring["time_s"] / 1e9 * 63 / 64, rel=1e-12)


def test_an_algorithm_that_cannot_run_says_why_in_its_cell(capsys):
    # NVLS reduce-scatter runs inside one NVLink domain only
    got = rows(capsys, "--op", "reduce_scatter", "--num-gpus", "16", "--bytes", "1MiB")
    nvls = next(r for r in got if r["algorithm"] == "nvls")
    assert nvls["time_s"] is None and "cannot run on 16 GPUs" in nvls["reason"]


def test_the_table_marks_auto_and_names_the_algorithms(capsys):
    assert main(["collectives", "--num-gpus", "16", "--bytes", "1GiB"]) == 0
    out = capsys.readouterr().out
    assert "all_reduce" in out and " *" in out and "halving_doubling (not in NCCL)" in out and "no all_reduce" in out


def test_flow_and_packet_levels_time_the_schedules(capsys):
    flow = rows(capsys, "--num-gpus", "16", "--bytes", "1MiB", "--level", "flow")
    packet = rows(capsys, "--num-gpus", "16", "--bytes", "1MiB", "--level", "packet")
    for level in (flow, packet):
        ring = next(r for r in level if r["algorithm"] == "ring")
        # a ring all-reduce moves 2(n-1)/n of the buffer through each member's slowest link:
        # never faster than the links' line rate allows
        assert ring["time_s"] > 2**20 * 2 * 15 / 16 / (450e9 + 50e9)
    assert {r["level"] for r in flow} == {"flow"} and {r["level"] for r in packet} == {"packet"}


@pytest.mark.parametrize(
    "flags,message",
    [
        (["--bytes", "1XB"], "--bytes: '1XB' is not a size; allowed: a number with a unit of B, KiB"),
        (["--num-gpus", "128,"], "--num-gpus: '128,' has an empty item"),
        (["--num-gpus", "0"], "--num-gpus: 0 is out of range; allowed: 1 to"),
        (["--op", "allreduce"], "--op: 'allreduce' is not a collective; allowed: all_reduce"),
        (["--level", "packets"], "--level: 'packets' is not a fidelity level; allowed: analytical, flow, packet"),
        (["--gpu", "H100X"], "--gpu: 'H100X' is not a known GPU (did you mean"),
        (["--fabric", "fat_tre"], "--fabric/--num-gpus: "),
        (["--num-gpus", "12"], "--fabric/--num-gpus: num_gpus=12 does not fill whole servers"),
        (["--level", "packet", "--num-gpus", "512"], "--level packet: 512 GPUs, 1 GiB would take too long; allowed"),
    ],
)
def test_each_bad_flag_is_one_line_naming_it_and_what_is_allowed(capsys, flags, message):
    assert main(["collectives", *flags]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
