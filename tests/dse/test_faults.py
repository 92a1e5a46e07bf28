"""A worker node that dies in the middle of a study costs a retry of its tasks, never a lost or
duplicated trial (issue 8): a real multi-node Ray cluster on this machine, one node removed
while the study runs."""

import pytest

from dse.checks import resolve_study
from dse.engine import RunSettings, run_search
from dse.report import trials_frame
from dse.spec import load_study


@pytest.mark.slow
def test_a_worker_node_lost_mid_study_costs_no_trial(write_spec, tmp_path, monkeypatch):
    cluster_utils = pytest.importorskip("ray.cluster_utils")
    import ray

    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    cluster = cluster_utils.Cluster(initialize_head=True, head_node_args={"num_cpus": 0})
    workers = [cluster.add_node(num_cpus=1) for _ in range(2)]
    cluster.wait_for_nodes()
    try:
        resolved = resolve_study(load_study(write_spec(), sampler="random", **{"budget.trials": 96}))
        seen: list[int] = []

        def on_trial(number, outcome):
            seen.append(number)
            if len(seen) == 8:  # the first chunks are in: take a worker node away mid-study
                cluster.remove_node(workers[0], allow_graceful=False)

        summary = run_search(resolved, RunSettings(tmp_path / "out", None, cluster.address, False), on_trial=on_trial)
        trials = trials_frame(summary.study, resolved)
        assert summary.finished == 96 and len(trials) == 96
        assert sorted(trials["trial"]) == list(range(96))  # every trial once, none lost or doubled
        assert (trials["state"] == "complete").all()
        assert len(cluster.list_all_nodes()) == 2  # the head and the worker left
    finally:
        ray.shutdown()
        cluster.shutdown()
