"""Closed forms of the goodput model against independent computations: a brute-force minimum of
Daly's expected time, the small-rate limit of lost work, a Monte-Carlo run of exponential
failures, a hand count of checkpoint bytes, and the observed run's interruption count."""

import math

import numpy as np
import pytest

from simulators.models import get_model
from simulators.network import Fabric
from simulators.reliability import (
    BYTES_PER_PARAM,
    ReliabilityConfig,
    checkpoint_size,
    counts,
    daly_interval_s,
    failure_catalog,
    goodput,
    interruptions,
    job_goodput,
    spare_free_probability,
    wall_per_work,
    young_interval_s,
)
from simulators.workload import ParallelPlan


def brute_force_interval(delta, restart, mtbf):
    grid = np.geomspace(delta / 100, 10 * mtbf, 200_001)
    wall = mtbf * np.exp(restart / mtbf) * np.expm1((grid + delta) / mtbf) / grid
    return grid[np.argmin(wall)]


@pytest.mark.parametrize("delta,mtbf", [(10.0, 3600.0), (60.0, 11_000.0), (600.0, 20_000.0), (5.0, 1e6)])
def test_daly_interval_near_the_exact_optimum(delta, mtbf):
    best = brute_force_interval(delta, 300.0, mtbf)
    daly = daly_interval_s(delta, mtbf)
    # Daly's estimate is second order in sqrt(delta/M): within 1 % of the optimum for delta << M,
    # and its expected time within 0.01 % of the optimum's.
    assert daly == pytest.approx(best, rel=0.01)
    assert wall_per_work(daly, delta, 300.0, mtbf) == pytest.approx(wall_per_work(best, delta, 300.0, mtbf), rel=1e-4)
    assert young_interval_s(delta, mtbf) == pytest.approx(math.sqrt(2 * delta * mtbf))


def test_daly_interval_is_mtbf_when_checkpoints_outlast_two_mtbf():
    assert daly_interval_s(3000.0, 1000.0) == 1000.0


def test_lost_work_per_failure_is_half_an_interval_in_the_small_rate_limit():
    mtbf, tau, delta, restart = 1e9, 600.0, 10.0, 100.0
    g = goodput(mtbf, delta, restart, interval_s=tau)
    wall_per_failure = mtbf  # failures a unit of wall time: 1 / M
    lost_per_failure = g.lost_work * wall_per_failure
    assert lost_per_failure == pytest.approx((tau + delta) / 2, rel=1e-3)
    assert g.restarts * wall_per_failure == pytest.approx(restart, rel=1e-3)
    assert g.ideal + g.checkpoint + g.lost_work + g.restarts == pytest.approx(1.0)
    assert g.checkpoint == pytest.approx(delta / (tau + delta), rel=1e-3)


def simulate_wall_time(work, tau, delta, restart, mtbf, rng):
    """Exponential failures: segments of tau work + delta checkpoint, a failure anywhere (restarts
    included) losing the segment in progress."""
    wall, done = 0.0, 0.0
    while done < work:
        segment = min(tau, work - done) + delta
        while True:
            fail = rng.exponential(mtbf)
            if fail >= segment:
                wall += segment
                break
            wall += fail
            while True:  # the restart, itself interrupted by failures
                fail = rng.exponential(mtbf)
                if fail >= restart:
                    wall += restart
                    break
                wall += fail
        done += segment - delta
    return wall


def test_daly_expected_wall_time_matches_monte_carlo():
    rng = np.random.default_rng(7)
    work, tau, delta, restart, mtbf = 200 * 3600.0, 1800.0, 120.0, 900.0, 3 * 3600.0
    runs = [simulate_wall_time(work, tau, delta, restart, mtbf, rng) for _ in range(400)]
    expected = wall_per_work(tau, delta, restart, mtbf) * work
    # 400 runs of ~100 failures each: the standard error of the mean is ~0.3 %; 1.5 % is 5 sigma.
    assert np.mean(runs) == pytest.approx(expected, rel=0.015)


def test_checkpoint_bytes_by_hand():
    model = get_model("llama3-70b")
    plan = ParallelPlan(tp=8, pp=4, dp=16, micro_batch=1, global_batch=1024, seq_len=8192, zero_stage=1)
    size = checkpoint_size(model, plan, gpus_per_server=8)
    assert BYTES_PER_PARAM == 2 + 4 + 4 + 4  # bf16 weight, fp32 master, Adam m and v
    assert size.total_bytes == model.total_params * 14
    assert size.writer_gpus == 512 and size.writer_servers == 64
    assert size.load_bytes_per_gpu == pytest.approx(model.total_params * 14 / 512)
    plain = checkpoint_size(model, ParallelPlan(**{**plan.__dict__, "zero_stage": 0}), gpus_per_server=8)
    assert plain.writer_gpus == 32 and plain.writer_servers == 4  # one replica: tp * pp GPUs
    assert plain.load_bytes_per_gpu == pytest.approx(model.total_params * 14 / 32)


def test_llama3_cluster_reproduces_its_interruption_count():
    run = failure_catalog().observed
    fabric = Fabric(family=run.fabric_family, nic_gbps=run.nic_gbps)
    total = sum(c.interruptions for c in failure_catalog().components.values())
    assert total == 419
    assert interruptions(fabric, run.gpus).total_per_day * run.days == pytest.approx(419, abs=0.5)


def test_dual_tor_removes_leaf_and_nic_link_interruptions():
    single = Fabric(family="fat-tree", nic_gbps=400)
    dual = Fabric(family="fat-tree-dual-tor", nic_gbps=400)
    assert counts(dual, 4096).fabric_parts == 0 < counts(single, 4096).fabric_parts
    assert counts(dual, 4096).all_fabric_parts > counts(single, 4096).all_fabric_parts  # bought, not failing
    a, b = interruptions(single, 4096), interruptions(dual, 4096)
    assert b.per_day["fabric"] == 0 and a.per_day["fabric"] > 0
    assert a.total_per_day - b.total_per_day == pytest.approx(a.per_day["fabric"])
    for name in ("gpu", "host", "software", "nic"):
        assert a.per_day[name] == b.per_day[name]


def test_spares_follow_the_poisson_tail():
    mean = 2.5
    assert spare_free_probability(0, mean) == 0.0
    by_hand = sum(math.exp(-mean) * mean**k / math.factorial(k) for k in range(4))
    assert spare_free_probability(4, mean) == pytest.approx(by_hand)


def test_spares_and_async_raise_goodput():
    model = get_model("llama3-70b")
    plan = ParallelPlan(tp=8, pp=4, dp=64, micro_batch=1, global_batch=1024, seq_len=8192, zero_stage=1)
    fabric = Fabric(family="fat-tree", nic_gbps=400)
    base = job_goodput(model, plan, fabric, ReliabilityConfig(mode="sync"), step_s=10.0).goodput.ideal
    spares = job_goodput(model, plan, fabric, ReliabilityConfig(mode="sync", spare_servers=16), step_s=10.0)
    assert spares.goodput.ideal > base
    assert spares.spare_free_probability > 0.99
    chosen = job_goodput(model, plan, fabric, ReliabilityConfig(interval_s=95.0), step_s=10.0)
    assert chosen.goodput.interval_s == 100.0  # a whole number of steps


def test_unknown_storage_is_a_one_line_error():
    with pytest.raises(ValueError, match=r"reliability.storage: 'tape' is not allowed; allowed: parallel-fs"):
        ReliabilityConfig(storage="tape")


def test_every_catalogue_figure_says_where_it_came_from():
    from simulators.reliability import storage_catalog

    failures, storage = failure_catalog(), storage_catalog()
    sources = [c.source for c in failures.components.values()] + [s.source for s in failures.restart.values()]
    sources += [t.source for t in storage.tiers.values()] + [storage.device_to_host_gbytes_per_s_per_gpu.source]
    assert all(len(source) > 20 for source in sources)
    assert set(storage.tiers) == {"parallel-fs", "local-nvme", "object-store"}


def test_checkpoint_times_by_hand_on_each_tier_and_mode():
    from simulators.reliability import checkpoint_cost, storage_catalog

    model = get_model("llama3-70b")
    plan = ParallelPlan(tp=8, pp=4, dp=16, micro_batch=1, global_batch=1024, seq_len=8192, zero_stage=1)
    size = checkpoint_size(model, plan, gpus_per_server=8)  # 512 GPUs on 64 servers write
    tiers, nic = storage_catalog().tiers, 8 * 400 / 8  # eight 400 Gb/s NICs: 400 GB/s a server
    total, per_server, per_gpu = model.total_params * 14, model.total_params * 14 / 64, model.total_params * 14 / 512
    sync = checkpoint_cost(size, "sync", tiers["parallel-fs"], 512, 8, nic)
    assert sync.blocking_s == pytest.approx(max(per_server / 25e9, total / 2000e9)) and sync.background_s == 0
    assert sync.load_s == pytest.approx(max(per_server / 25e9, total / 2000e9))  # ZeRO: each reads its shard
    local = checkpoint_cost(size, "async", tiers["local-nvme"], 512, 8, nic)
    assert local.blocking_s == pytest.approx(per_gpu / 50e9)
    assert local.background_s == pytest.approx(max(per_server / 16e9, per_server / 400e9))
    memory = checkpoint_cost(size, "in_memory", tiers["object-store"], 512, 8, nic)
    assert memory.background_s == pytest.approx(per_server / 400e9) == memory.load_s


def test_planned_stops_take_their_relaunches_and_no_work():
    """A planned stop every 2 h costing 10 min takes 1/12 of the wall time; the other shares
    shrink by 11/12, lost work included (a planned stop follows a checkpoint)."""
    from simulators.reliability._goodput import goodput

    base = goodput(3 * 3600.0, 30.0, 900.0, interval_s=1800.0)
    planned = goodput(3 * 3600.0, 30.0, 900.0, interval_s=1800.0, planned_per_s=1 / 7200, planned_restart_s=600.0)
    keep = 1 - 600.0 / 7200
    assert planned.ideal == pytest.approx(base.ideal * keep)
    assert planned.lost_work == pytest.approx(base.lost_work * keep)
    assert planned.restarts == pytest.approx(base.restarts * keep + 600.0 / 7200)
    assert planned.ideal + planned.checkpoint + planned.lost_work + planned.restarts == pytest.approx(1.0)
    with pytest.raises(ValueError, match="no time trains"):
        goodput(3 * 3600.0, 30.0, 900.0, planned_per_s=1 / 100, planned_restart_s=600.0)
