"""Ranks as Ray actors: two ranks on a local Ray, placed by a placement group, addresses
exchanged through Ray, the same executor and checks as local processes."""

from __future__ import annotations

import pytest

from dse.physical.replay_ray import replay_on_ray


@pytest.fixture(scope="module")
def local_ray():
    """One local Ray for the module (it takes seconds to start), the private cluster `dse validate
    --ray-address local` runs on: loopback only, token authentication (dse.search.ray_cluster)."""
    ray = pytest.importorskip("ray")
    from dse.search.executor import connect_ray
    from dse.search.ray_cluster import stop_private

    try:
        started = connect_ray("local")  # False: this process was connected already
    except Exception as exc:  # no Ray on this machine: the only reason to skip
        pytest.skip(f"Ray cannot start here: {exc}")
    yield ray
    if started:
        stop_private(started)


def test_replay_on_ray_actors_verifies_and_measures(local_ray):
    res = replay_on_ray("all_reduce", "tcp", 2, 2 * 4 * 4096, iters=2, checksum="all")
    assert res.verified and res.ranks == 2 and res.placement == "ray PACK on 1 node"
    assert res.step_s.shape == (2, 2, 2) and (res.step_s > 0).all() and res.time_s > 0
    assert res.busbw_gbytes_per_s == pytest.approx(res.algbw_gbytes_per_s)  # 2(n-1)/n = 1 for n = 2


def test_a_rank_error_on_ray_surfaces_as_itself(local_ray):
    from simulators.rdma import MismatchError

    with pytest.raises(MismatchError) as err:
        replay_on_ray("all_gather", "tcp", 2, 2 * 64, corrupt=(0, 0, 9), timeout_s=20)
    assert (err.value.rank, err.value.step, err.value.offset) == (0, 0, 9)


def test_rdma_without_a_device_on_a_ray_node_is_the_one_line_error(local_ray):
    from simulators._errors import SpecError
    from simulators.rdma import devices

    if devices().usable:
        pytest.skip("this machine has a usable RDMA device")
    with pytest.raises(SpecError) as err:
        replay_on_ray("all_reduce", "rdma", 2, 64, timeout_s=20)
    assert "\n" not in str(err.value) and str(err.value).endswith("allowed here: tcp")
