"""A real multi-node Ray cluster on this machine for the modules that run dse across nodes
(test_faults, test_exhaustive_cluster): a head with no CPUs and two one-CPU worker nodes, so
every task runs on a worker node and two run at once only on different nodes; every process of
it listens on loopback and admits only this process's token."""

from __future__ import annotations

import pytest

from dse.search.executor import RayExecutor
from dse.search.ray_cluster import LOOPBACK, restore_settings, use_loopback, use_token_auth


@pytest.fixture(scope="module")
def cluster():
    """One cluster per module that asks for it, shut down after the module; this process joins
    it as the driver the way `dse search --ray-address ADDR` does."""
    cluster_utils = pytest.importorskip("ray.cluster_utils")
    import ray

    # The cluster authenticates with this process's token, as dse's private one does: a driver
    # keeps the first token it loads, so a process that ran a private Ray joins only such clusters.
    use_token_auth()
    use_loopback()
    cluster = cluster_utils.Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "node_ip_address": LOOPBACK})
    for _ in range(2):
        cluster.add_node(num_cpus=1, node_ip_address=LOOPBACK)
    cluster.wait_for_nodes()
    driver = RayExecutor(cluster.address)  # joins as dse does: worker env, Numba threads pinned
    try:
        yield cluster
    finally:
        driver.close()
        ray.shutdown()
        cluster.shutdown()
        restore_settings()
