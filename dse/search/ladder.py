"""The fidelity ladder, climbed by the engine after the analytical search.

Each level of the spec's `fidelity` (cheapest first: flow, then packet) takes at most `top`
candidates, successive-halving style: from the feasible candidates of the level below (for the
first level, every feasible distinct trial), the non-dominated ones and then their
neighbourhood (the next layers of non-dominated sorting), each layer in the order of the first
objective. They are evaluated in that order (dse.evaluation.fidelity.LevelEvaluator) on the
executor until the level's budget of wall-clock seconds is spent; the best are evaluated first,
so a budget that runs out leaves the least promising behind. Every evaluation is judged like a
trial (costs, constraints) and stored in the study database as soon as it returns, as is each
level's progress (how many were promoted and evaluated, the seconds spent, why it stopped), so an
interrupted run resumes at the level and the candidate it was at, within what is left of that
level's budget. The records' format and how reports read them: dse.search.level_records.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
import optuna

from dse.evaluation.evaluate import Evaluator
from dse.evaluation.fidelity import LevelEvaluator
from dse.evaluation.outcome import Outcome
from dse.search.executor import Executor
from dse.search.level_records import (
    ANALYTICAL,
    LevelProgress,
    save_front_details,
    save_progress,
    save_record,
    standings,
)
from dse.search.pareto import pareto_layers
from dse.spec.resolved import ResolvedStudy

LevelCallback = Callable[[LevelProgress], None]


@dataclass(frozen=True)
class Contender:
    """A candidate that may be promoted: its trial, knobs and judged outcome at the level below."""

    trial: int
    params: Mapping
    outcome: Outcome


def climb(
    study: optuna.Study,
    resolved: ResolvedStudy,
    evaluator: Evaluator,
    executor: Executor,
    stop: threading.Event,
    on_level: LevelCallback | None = None,
    ready: Callable[[str], None] | None = None,
) -> list[LevelProgress]:
    """Climb every level of the spec's ladder in turn; returns each level's progress. `ready`
    is called with a level's name before its first evaluation (the engine's warm-up waits there
    for the level's compiled kernels)."""
    if not resolved.kind.replays_collectives:
        return []
    out = []
    below = ANALYTICAL
    for name, settings in resolved.study.fidelity.levels():
        if stop.is_set():
            break
        # ranked by the level below, whatever higher levels found since (so a resumed run
        # promotes the very candidates the interrupted one did)
        params = {t.number: t.params for t in study.get_trials(deepcopy=False)}
        stored = standings(study, resolved)
        pool = [Contender(t, params[t], s.outcomes[below]) for t, s in stored.items() if s.feasible_at(below)]
        promoted = promote(pool, settings.top, resolved.objectives, resolved.directions)
        done = {c.trial for c in promoted if stored[c.trial].at(name)}
        level = LevelEvaluator(evaluator, name, int(settings.message_cap_mb * 2**20), settings.options())
        if ready:
            ready(name)
        progress = _run_level(study, level, promoted, done, settings.budget_s, executor, stop)
        if on_level:
            on_level(progress)
        out.append(progress)
        below = name
    return out


def promote(
    pool: list[Contender], top: int, objectives: tuple[str, ...], directions: tuple[str, ...]
) -> list[Contender]:
    """The first `top` of `pool` by non-dominated sorting: the front, then the front of the
    rest, and so on, each layer in the order of the first objective (ties by trial number)."""
    if not pool:
        return []
    values = np.array([[c.outcome.metrics[m] for m in objectives] for c in pool], dtype=float)
    sign = 1.0 if directions[0] == "minimize" else -1.0
    chosen: list[Contender] = []
    for layer in pareto_layers(values, directions, top):
        chosen += [pool[i] for i in sorted(layer, key=lambda i: (sign * values[i, 0], pool[i].trial))]
    return chosen[:top]


def _run_level(
    study: optuna.Study,
    level: LevelEvaluator,
    promoted: list[Contender],
    done: set[int],
    budget_s: float,
    executor: Executor,
    stop: threading.Event,
) -> LevelProgress:
    """Evaluate the promoted candidates not yet evaluated at this level (not in `done`), best first, until the
    budget (less what earlier runs spent here) is gone; store each result as it comes."""
    name = level.level
    todo = [e for e in promoted if e.trial not in done]
    spent_before = LevelProgress.stored(study, name).wall_s
    started = time.monotonic()
    stopped = "every promoted candidate evaluated"
    judge = level.evaluator.judge
    if todo and spent_before >= budget_s:
        stopped = "time budget spent"
    elif todo:
        results = executor.run(level, [dict(e.params) for e in todo])
        try:
            for group in results:
                for position, outcome in group:
                    entry = todo[position]
                    save_record(study, name, entry.trial, judge(entry.params, outcome))
                    done.add(entry.trial)
                if stop.is_set():
                    stopped = "interrupted"
                    break
                if spent_before + time.monotonic() - started >= budget_s:
                    stopped = "time budget spent"
                    break
        finally:
            results.close()  # cancels what is still in flight
    progress = LevelProgress(name, len(promoted), len(done), spent_before + time.monotonic() - started, stopped)
    save_progress(study, progress)
    return progress


def store_front_details(study: optuna.Study, resolved: ResolvedStudy, evaluator: Evaluator) -> int:
    """Store the step breakdown of every candidate of the final front that no level above the
    analytical one evaluated (those carry their own), so the reports read it and simulate
    nothing. Returns how many were stored."""
    from dse.search.study_table import pareto_frame, trials_frame

    if not resolved.kind.has_step_breakdowns:
        return 0
    front = pareto_frame(trials_frame(study, resolved), resolved)
    standing = standings(study, resolved)
    missing = [int(t) for t in front["trial"] if not standing[int(t)].details]
    trials = {t.number: t for t in study.get_trials(deepcopy=False)}
    batch = [trials[t].params for t in missing]
    for trial, details in zip(missing, resolved.kind.step_details(evaluator.space, batch)):
        save_front_details(study, trial, details)
    return len(missing)
