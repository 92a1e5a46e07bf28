"""How the executor sizes work into tasks, and the in-process executor's bookkeeping."""

import math

from dse.evaluation.evaluate import Evaluator
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
