"""Runs shared across candidates (simulators/fidelity/_contention.py): a candidate whose
collectives another candidate already ran on the same fabric reuses those runs, and gets the
factors it would have got by running them itself."""

from __future__ import annotations

import dataclasses
import threading

import pytest

from simulators.fidelity import _contention
from simulators.fidelity._flow import FlowLevel
from simulators.hardware import get_gpu
from simulators.models import get_model
from simulators.network import Fabric
from simulators.workload import ParallelPlan, TrainingCandidate, TrainingSystem

FABRIC = Fabric(
    family="leaf-spine", nic_gbps=400, gpus_per_server=2, nics_per_server=2, switch_radix=8, oversubscription=3.0
)
CAP_BYTES = 1 << 20


@dataclasses.dataclass(frozen=True)
class CountingFlow(FlowLevel):
    """The flow level, recording each run it times (the record is not part of its identity)."""

    runs: list = dataclasses.field(default_factory=list, compare=False, hash=False)
    gate: threading.Event | None = dataclasses.field(default=None, compare=False, hash=False)

    def makespan_s(self, links, flows, switches):
        self.runs.append(len(flows.nbytes))
        if self.gate is not None:
            self.gate.wait(5)
        return super().makespan_s(links, flows, switches)


def candidate(
    micro_batch: int = 1, recompute: str = "none", fabric: Fabric = FABRIC, pp: int = 2, zero_stage: int = 0
) -> TrainingCandidate:
    gpu = get_gpu("H100-SXM")
    plan = ParallelPlan(
        tp=1,
        pp=pp,
        dp=16 // pp,
        micro_batch=micro_batch,
        global_batch=32,
        seq_len=2048,
        recompute=recompute,
        zero_stage=zero_stage,
    )
    return TrainingCandidate(get_model("llama3-8b"), TrainingSystem(gpu, 16, network=fabric.network(gpu, 16)), plan)


def test_a_candidate_differing_only_off_the_fabric_reuses_every_run_and_gets_its_own_factors():
    level = CountingFlow()
    first = level.congestion_factors(candidate(), FABRIC, CAP_BYTES)
    timed = len(level.runs)
    assert timed >= 2 and timed % 2 == 0  # each collective alone and together
    other = candidate(micro_batch=2, recompute="full")
    shared = level.congestion_factors(other, FABRIC, CAP_BYTES)
    assert len(level.runs) == timed  # nothing simulated again
    _contention._RUNS.clear()
    assert shared == level.congestion_factors(other, FABRIC, CAP_BYTES)  # as if it had run them itself
    assert [f.alone_s for f in shared] == [f.alone_s for f in first]


@pytest.mark.parametrize("order", [(0, 1, 2, 3), (3, 2, 1, 0), (1, 3, 0, 2)])
def test_a_candidates_factors_do_not_depend_on_what_ran_before_it(order):
    """ECMP numbers a candidate's connections in the order its collectives first use them, so
    a collective met after others must be timed on the paths it would have had then: candidates
    whose collectives overlap only in part, in any order, get what each gets alone."""
    candidates = [candidate(zero_stage=1), candidate(), candidate(pp=4, zero_stage=1), candidate(pp=4, micro_batch=2)]
    level = CountingFlow()
    alone = []
    for c in candidates:
        _contention._RUNS.clear()
        alone.append(level.congestion_factors(c, FABRIC, CAP_BYTES))
    _contention._RUNS.clear()
    shared = {i: level.congestion_factors(candidates[i], FABRIC, CAP_BYTES) for i in order}
    assert [shared[i] for i in range(len(candidates))] == alone


def test_another_fabric_or_level_setting_runs_again():
    level = CountingFlow()
    level.congestion_factors(candidate(), FABRIC, CAP_BYTES)
    timed = len(level.runs)
    faster = dataclasses.replace(FABRIC, nic_gbps=800)
    level.congestion_factors(candidate(fabric=faster), faster, CAP_BYTES)
    assert len(level.runs) == 2 * timed
    other_model = CountingFlow(model="max_min", runs=level.runs)
    other_model.congestion_factors(candidate(), FABRIC, CAP_BYTES)
    assert len(level.runs) == 3 * timed


def test_a_failed_run_is_not_kept():
    @dataclasses.dataclass(frozen=True)
    class FailingOnce(CountingFlow):
        def makespan_s(self, links, flows, switches):
            self.runs.append(len(flows.nbytes))
            if len(self.runs) == 1:
                raise RuntimeError("first run fails")
            return super().makespan_s(links, flows, switches)

    level = FailingOnce()
    with pytest.raises(RuntimeError, match="first run fails"):
        level.congestion_factors(candidate(), FABRIC, CAP_BYTES)
    assert level.congestion_factors(candidate(), FABRIC, CAP_BYTES)  # timed afresh, not the stored failure


def test_threads_asking_for_one_run_at_once_time_it_once():
    gate = threading.Event()
    level = CountingFlow(gate=gate)
    results = []
    threads = [
        threading.Thread(target=lambda: results.append(level.congestion_factors(candidate(), FABRIC, CAP_BYTES)))
        for _ in range(3)
    ]
    for t in threads:
        t.start()
    gate.set()
    for t in threads:
        t.join()
    assert len(results) == 3 and results[0] == results[1] == results[2]
    _contention._RUNS.clear()
    alone = CountingFlow()
    alone.congestion_factors(candidate(), FABRIC, CAP_BYTES)
    assert len(level.runs) == len(alone.runs)


def test_collectives_that_move_the_same_flows_share_one_run():
    """A ring's reduce-scatter and all-gather over one group send the same chunks between the
    same ranks in the same steps (only what the receiver does with them differs), so the
    distributed optimizer's pair is timed once."""
    level = CountingFlow()
    gpu = get_gpu("H100-SXM")
    plan = ParallelPlan(tp=1, pp=2, dp=8, micro_batch=1, global_batch=32, seq_len=2048, zero_stage=1)
    c = TrainingCandidate(get_model("llama3-8b"), TrainingSystem(gpu, 16, network=FABRIC.network(gpu, 16)), plan)
    factors = level.congestion_factors(c, FABRIC, CAP_BYTES)
    by_op = {f.op: f for f in factors if f.ranks == 8}
    rs, ag = by_op["reduce_scatter"], by_op["all_gather"]
    assert (rs.algorithm, ag.algorithm) == ("ring", "ring")
    assert (rs.alone_s, rs.together_s) == (ag.alone_s, ag.together_s)
    assert len(level.runs) == 2 * len(factors) - 2
