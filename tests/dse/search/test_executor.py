"""How the executor sizes work into tasks, the in-process executor's bookkeeping, and when the
default (`local`) starts a private Ray."""

import math
import threading
import time

import dse.search.local_executor as executor_module
from dse.evaluation.evaluate import Evaluator
from dse.evaluation.outcome import Outcome
from dse.evaluation.space import SearchSpace
from dse.search.executor import TASK_LIMIT_S, TASK_TARGET_S, InProcessExecutor, _Sizer
from dse.spec import load_study
from dse.study import resolve_study


def test_chunks_balance_the_cpus_then_follow_the_measured_cost_within_bounds(write_spec):
    evaluator = Evaluator(SearchSpace.from_study(resolve_study(load_study(write_spec()))))
    sizer = _Sizer()
    assert sizer.size(evaluator, 64, 16) == 2  # nothing measured yet: two chunks per CPU
    sizer.learn(evaluator, 100, 100 * 1e-4)  # cheap candidates (0.1 ms): fewer, longer tasks...
    assert sizer.size(evaluator, 64, 16) == 4  # ...but still one per CPU
    assert sizer.size(evaluator, 100_000, 16) == math.ceil(100_000 / 32)  # balance wins on big batches
    assert sizer.size(evaluator, 3000, 4) == math.ceil(TASK_TARGET_S / 1e-4) == 500  # not 375 (balanced)
    slow = Evaluator(SearchSpace.from_study(resolve_study(load_study(write_spec(name="b.yaml")))))
    sizer.learn(slow, 4, 4 * 0.3)  # 0.3 s per candidate: tasks stay under the limit
    assert sizer.size(slow, 64, 2) == math.floor(TASK_LIMIT_S / 0.3) == 1
    assert sizer.size(evaluator, 3000, 4) == 500  # each study its own measure


def test_in_process_outcomes_keep_their_positions_and_usage_adds_up(write_spec):
    space = SearchSpace.from_study(resolve_study(load_study(write_spec())))
    points = space.grid()[:10]
    executor = InProcessExecutor()
    evaluator = Evaluator(space)
    got = dict(pair for group in executor.run(evaluator, points) for pair in group)
    assert sorted(got) == list(range(10))
    assert [got[i].metrics for i in range(10)] == [o.metrics for o in evaluator.simulate_many(points)]
    usage = executor.usage
    assert usage.candidates == 10 and usage.tasks >= 2 and 0 < usage.busy_s <= usage.span_s
    assert 0 < usage.utilisation <= 1


class _Timed:
    """An evaluator whose candidates take `seconds` each (a sleep: wall time, as the executor measures)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def simulate_many(self, chunk):
        time.sleep(self.seconds * len(chunk))
        return [Outcome(metrics={"x": float(item["i"])}) for item in chunk]


class _StandInRay(InProcessExecutor):
    """Where LocalExecutor would start a private Ray: evaluates here, and counts the starts."""

    starts = 0

    def __init__(self, address, usage):
        assert address == "local"
        _StandInRay.starts += 1
        super().__init__(usage)


def test_local_runs_small_work_here_and_hands_large_work_to_a_private_ray(monkeypatch):
    """The break-even: T CPU-s on c CPUs is worth a start of S when T > S * c / (c - 1)."""
    monkeypatch.setattr(executor_module, "RayExecutor", _StandInRay)
    monkeypatch.setattr(executor_module, "RAY_START_S", 0.05)
    monkeypatch.setattr(executor_module.os, "cpu_count", lambda: 2)  # break-even: 0.1 s of work
    items = [{"i": i} for i in range(40)]
    small = executor_module.LocalExecutor()
    got = dict(pair for group in small.run(_Timed(0.0001), items) for pair in group)  # 4 ms in all
    assert sorted(got) == list(range(40)) and _StandInRay.starts == 0
    assert "evaluated in this process" in small.usage.describe(1.0)
    large = executor_module.LocalExecutor()
    large.expect(cheap := _Timed(0.002), 240)  # timed over two chunks here, with 0.48 s ahead: no start...
    list(large.run(cheap, items[:10]))
    assert _StandInRay.starts == 0  # ...before two chunks show the time per candidate
    large.expect(cheap, 200)
    got = dict(pair for group in large.run(cheap, items) for pair in group)
    assert _StandInRay.starts == 1 and large.usage.candidates == 50
    assert {i: o.metrics["x"] for i, o in got.items()} == {i: float(i) for i in range(40)}  # positions kept
    assert "a private Ray started after" in large.usage.describe(1.0)


class _Compiled(_Timed):
    """As if its time were in compiled kernels that release the GIL: records the threads it ran on."""

    releases_gil = True
    task_size = 1

    def __init__(self, seconds: float) -> None:
        super().__init__(seconds)
        self.threads: set[int] = set()

    def simulate_many(self, chunk):
        self.threads.add(threading.get_ident())
        return super().simulate_many(chunk)


def test_an_evaluator_that_releases_the_gil_runs_on_threads_with_positions_kept():
    items = [{"i": i} for i in range(6)]
    threaded, alone = _Compiled(0.02), _Compiled(0.02)
    got = dict(pair for group in InProcessExecutor(threads=2).run(threaded, items) for pair in group)
    assert {i: o.metrics["x"] for i, o in got.items()} == {i: float(i) for i in range(6)}
    assert len(threaded.threads) == 2 and threading.get_ident() not in threaded.threads  # every chunk on the two
    list(InProcessExecutor().run(alone, items))  # `--ray-address off`: this thread only
    assert alone.threads == {threading.get_ident()}


def test_a_node_lost_since_the_start_takes_its_store_out_of_the_use():
    """Use is the capacity of the same read less what is free: two nodes of 100 MiB at the start,
    one lost since, 10 MiB in use on the other, is 10 MiB (against the capacity at the start it
    would be the lost node's whole store more)."""
    from dse.search.executor import InProcessExecutor, RayExecutor, Usage

    mib = 2**20

    class OneNodeLeft:
        def cluster_resources(self):
            return {"object_store_memory": 100 * mib, "node:10.0.0.2": 1.0}

        def available_resources(self):
            return {"object_store_memory": 90 * mib, "node:10.0.0.2": 1.0}

    executor = RayExecutor.__new__(RayExecutor)  # its sampling alone, on a cluster read given here
    InProcessExecutor.__init__(executor, Usage(cpus=1, store_capacity_bytes=200 * mib))
    executor._ray, executor._store_sampled_at = OneNodeLeft(), 0.0
    executor._sample_store()
    assert executor.usage.store_peak_bytes == 10 * mib


def test_local_never_starts_a_ray_for_work_that_already_runs_on_every_cpu_here(monkeypatch):
    """A fidelity level's threads use every CPU of this process: however long its work ahead, a
    private Ray would add its start and gain no CPU (it also loses the runs shared in-process)."""
    monkeypatch.setattr(executor_module, "RayExecutor", _StandInRay)
    monkeypatch.setattr(executor_module, "RAY_START_S", 0.001)
    monkeypatch.setattr(executor_module.os, "cpu_count", lambda: 2)
    starts, executor = _StandInRay.starts, executor_module.LocalExecutor()
    level = _Compiled(0.01)  # 10 ms a candidate, 0.2 s ahead: 100 times the break-even
    executor.expect(level, 20)
    got = dict(pair for group in executor.run(level, [{"i": i} for i in range(12)]) for pair in group)
    assert sorted(got) == list(range(12)) and _StandInRay.starts == starts
    assert len(level.threads) == 2 and threading.get_ident() not in level.threads  # both CPUs' threads


def test_an_evaluating_process_collects_garbage_less_often():
    """Chunks run with GC_THRESHOLDS (the memo tables' millions of objects made the default
    thresholds cost a fifth of a cold evaluation); the process's own are put back here."""
    import gc

    from dse.search.collecting import GC_THRESHOLDS

    before = gc.get_threshold()
    seen = []

    class Probe(_Timed):
        def simulate_many(self, chunk):
            seen.append(gc.get_threshold())
            return super().simulate_many(chunk)

    try:
        gc.set_threshold(700, 10, 10)
        list(InProcessExecutor().run(Probe(0.0), [{"i": i} for i in range(3)]))
    finally:
        gc.set_threshold(*before)
    assert seen and set(seen) == {GC_THRESHOLDS}
