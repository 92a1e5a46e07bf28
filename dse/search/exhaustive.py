"""The exact mode (`sampler: exhaustive`): every distinct plan of the space, none stored as a trial
unless the fidelity ladder would promote it (the front and its neighbourhood).

The knob combinations are cut into ranges (`RANGE_COMBINATIONS` each); a worker enumerates the
distinct plans of its range itself (SearchSpace.distinct_plans), simulates and judges them, and
returns one columnar table; the driver writes each table whole as a Parquet part of
`plans/` (renamed into place, so an interrupted run leaves no half part) and keeps only the
plans that may still be among those the ladder promotes (ExhaustiveRun). At the end those are
stored in the study as finished trials, so the ladder and the reports work as after any search.
So a space of 10^6 plans costs neither 10^6 trials in the study database (whose entries cost
more than the evaluation) nor 10^6 params dicts in the driver. `--resume` evaluates only the
ranges no part covers and reads the pool back from the parts.
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import pandas as pd

from dse.errors import DseError
from dse.evaluation.evaluate import Evaluator
from dse.evaluation.outcome import Outcome
from dse.search.pareto import direction_signs, dominates, pareto_layers

if TYPE_CHECKING:  # pyarrow is imported where a table is made or read, not with the engine
    import pyarrow as pa

RANGE_COMBINATIONS = 2048  # knob combinations per task: ~0.1-0.4 s of evaluation
PLANS_DIR = "plans"
_PART = re.compile(r"part-(\d{12})-(\d{12})\.parquet")


@dataclass(frozen=True)
class ExhaustiveProgress:
    """What the exact mode has done: plans in the space's record (this run and before), how
    many this run evaluated, how many are feasible, the front's size and this run's seconds."""

    plans: int
    evaluated: int
    feasible: int
    front: int
    wall_s: float
    cpus: int

    def describe(self) -> str:
        rate = self.evaluated / self.wall_s if self.wall_s > 0 else 0.0
        return (
            f"exhaustive: {self.evaluated} plans in {self.wall_s:.1f} s = {rate:,.0f} plans/s on {self.cpus} CPUs; "
            f"front {self.front}"
            + (
                f" ({self.plans} plans recorded, {self.plans - self.evaluated} by an earlier run)"
                if self.plans > self.evaluated
                else ""
            )
        )


@dataclass(frozen=True)
class RangeEvaluator:
    """The executor's evaluator in the exact mode: an item is a range of combination numbers
    ({"start": i, "stop": j}) and its result the range's table (`plan_table`)."""

    evaluator: Evaluator
    task_size: ClassVar[int] = 1

    def simulate_many(self, ranges: Sequence[Mapping[str, int]]) -> list[pa.Table]:
        return [plan_table(self.evaluator, r["start"], r["stop"]) for r in ranges]


def plan_table(evaluator: Evaluator, start: int, stop: int) -> pa.Table:
    """The distinct plans among combinations `start` to `stop`, judged: one row per plan with
    its knobs (a knob of numbers and words as text), derived columns, every metric (null where
    the plan has none: an invalid plan, or one the memory model alone rules out, which is not
    simulated), each constraint, `feasible`, and the reason or error."""
    import pyarrow as pa

    space = evaluator.space
    kind = space.resolved.kind
    plans = list(space.distinct_plans(start, stop))
    outcomes = evaluator.evaluate_many(plans, feasible_only=True)  # plans too big for memory: not simulated
    columns: dict[str, list] = {}
    for name in kind.knobs:
        texts = len({type(v) for v in space.values[name] if v is not None}) > 1
        columns[name] = [str(p[name]) if texts else p[name] for p in plans]
    for name in kind.derived_columns:
        columns[name] = [kind.derived(p)[name] for p in plans]
    for name in metric_names(evaluator):
        columns[name] = [o.metrics.get(name, np.nan) for o in outcomes]
    for name in evaluator.constraint_names:
        columns[f"constraint:{name}"] = [o.constraints.get(name, np.nan) for o in outcomes]
    columns["feasible"] = [_feasible(o) for o in outcomes]
    columns["reason"] = [o.reason for o in outcomes]
    columns["error"] = [o.error for o in outcomes]
    metric_columns = {name: pa.float64() for name in metric_names(evaluator)}
    metric_columns |= {f"constraint:{name}": pa.float64() for name in evaluator.constraint_names}
    arrays = {name: pa.array(values, type=metric_columns.get(name)) for name, values in columns.items()}
    return pa.table(arrays)


def metric_names(evaluator: Evaluator) -> list[str]:
    """The study's objectives first, then every other metric of its kind."""
    resolved = evaluator.space.resolved
    return [*resolved.objectives, *(m for m in resolved.kind.metrics if m not in resolved.objectives)]


def _feasible(outcome: Outcome) -> bool:
    return not outcome.failed and all(v <= 0 for v in outcome.constraints.values())


class ExhaustiveRun:
    """The exact mode's driver side for one study directory: which ranges are left, the parts,
    and the running pool of plans that may still be among the `keep` best.

    The pool is what the fidelity ladder would promote had every plan been a trial: the first
    `keep` feasible plans by non-dominated sorting (the front, then the front of the rest...).
    A plan dominated by `keep` or more others can never be among them, and the number of plans
    dominating a plan only grows as plans arrive, so each range's feasible plans are folded in
    with their dominator counts and those at `keep` or more dropped for good. The counts are
    over the pool (dropped plans are not compared again), yet exact for every plan that stays:
    each plan dominating it has fewer dominators still, so it is in the pool too. The front is
    the pool's plans no plan dominates."""

    def __init__(self, evaluator: Evaluator, out_dir: Path, keep: int = 1) -> None:
        self.evaluator = evaluator
        self.resolved = evaluator.space.resolved
        self.keep = max(1, keep)
        self.parts = out_dir / PLANS_DIR
        self.parts.mkdir(parents=True, exist_ok=True)
        self.pool = pd.DataFrame()
        self._dominators = np.zeros(0, dtype=np.int64)  # per pool row
        self.plans = self.feasible = 0
        covered = self._covered()
        for part in covered:
            self._add(pd.read_parquet(part))
        self.recorded = len(covered)  # ranges with their part written

    def ranges(self) -> list[dict[str, int]]:
        """Every range of combinations of the space, in order."""
        size = self.evaluator.space.size
        return [{"start": s, "stop": min(s + RANGE_COMBINATIONS, size)} for s in range(0, size, RANGE_COMBINATIONS)]

    def missing_ranges(self) -> list[dict[str, int]]:
        """The ranges no part covers, in order."""
        done = {(start, stop) for start, stop, _ in self._parsed()}
        return [r for r in self.ranges() if (r["start"], r["stop"]) not in done]

    @property
    def front(self) -> pd.DataFrame:
        """The feasible plans no other dominates, so far."""
        return self.pool[self._dominators == 0] if len(self.pool) else self.pool

    def best(self) -> dict[str, float]:
        """The best value of each objective on the front so far."""
        if self.pool.empty:
            return {}
        pick = {"minimize": min, "maximize": max}
        return {name: pick[d](self.pool[name]) for name, d in zip(self.resolved.objectives, self.resolved.directions)}

    def run(
        self,
        executor,
        stop: threading.Event,
        past_deadline: Callable[[], bool],
        on_range: Callable[[ExhaustiveRun], None] | None = None,
    ) -> tuple[str, ExhaustiveProgress]:
        """Evaluate every missing range on `executor`, recording each as it comes; returns why it
        stopped and the progress. `on_range(self)` after each range."""
        started = time.monotonic()
        todo = self.missing_ranges()
        evaluated = 0
        stopped = "every candidate of the space evaluated"
        results: Iterator = executor.run(RangeEvaluator(self.evaluator), todo)
        try:
            for group in results:
                for position, table in group:
                    if isinstance(table, Outcome):  # the worker died on this range, also alone
                        raise DseError(
                            f"exhaustive: combinations {todo[position]} could not be evaluated: {table.error}"
                        )
                    self._write(todo[position], table)
                    self.recorded += 1
                    frame = table.to_pandas()
                    self._add(frame)
                    evaluated += len(frame)
                    if on_range:
                        on_range(self)
                if stop.is_set():
                    stopped = "interrupted"
                    break
                if past_deadline():
                    stopped = "timeout reached"
                    break
        finally:
            results.close()
        wall_s = time.monotonic() - started
        progress = ExhaustiveProgress(
            self.plans, evaluated, self.feasible, len(self.front), wall_s, executor.usage.cpus
        )
        return stopped, progress

    def promoted_params(self) -> list[dict[str, Any]]:
        """The params of the plans the ladder would promote from the whole space: whole layers
        of non-dominated sorting of the pool until `keep` are taken (the front at least), as the
        space's knob values."""
        space = self.evaluator.space
        by_text = {name: {str(v): v for v in space.values[name]} for name in space.values}
        if self.pool.empty:  # no feasible plan yet
            return []
        values = self.pool[list(self.resolved.objectives)].to_numpy(dtype=float)
        chosen = [i for layer in pareto_layers(values, self.resolved.directions, self.keep) for i in layer]
        rows = self.pool.iloc[sorted(chosen)].to_dict("records")
        return [{name: by_text[name].get(str(row[name]), row[name]) for name in space.values} for row in rows]

    def _add(self, frame: pd.DataFrame) -> None:
        """Count a table's plans and fold its feasible ones into the pool (class docstring)."""
        self.plans += len(frame)
        new = frame[frame["feasible"]].reset_index(drop=True)
        self.feasible += len(new)
        if new.empty:
            return
        signs = direction_signs(self.resolved.directions)
        costs_new = new[list(self.resolved.objectives)].to_numpy(dtype=float) * signs
        counts_new = dominates(costs_new, costs_new).sum(axis=0)
        counts_old = self._dominators
        if len(self.pool):
            costs_old = self.pool[list(self.resolved.objectives)].to_numpy(dtype=float) * signs
            counts_new = counts_new + dominates(costs_old, costs_new).sum(axis=0)
            counts_old = counts_old + dominates(costs_new, costs_old).sum(axis=0)
            both = pd.concat([self.pool, new], ignore_index=True)
        else:
            both = new
        counts = np.concatenate([counts_old, counts_new])
        stay = counts < self.keep
        self.pool, self._dominators = both[stay].reset_index(drop=True), counts[stay]

    def _write(self, rng: Mapping[str, int], table: pa.Table) -> None:
        """The range's part, written beside its place and renamed into it (whole or not at all)."""
        name = f"part-{rng['start']:012d}-{rng['stop']:012d}.parquet"
        import pyarrow.parquet as pq

        partial = self.parts / f".{name}.partial"
        pq.write_table(table, partial)
        os.replace(partial, self.parts / name)

    def _parsed(self) -> list[tuple[int, int, Path]]:
        out = []
        for path in self.parts.iterdir():
            match = _PART.fullmatch(path.name)
            if match:
                out.append((int(match[1]), int(match[2]), path))
        return sorted(out)

    def _covered(self) -> list[Path]:
        """The parts of ranges this space still cuts the same way (a spec whose space changed is
        refused by the study's fingerprint before this is read)."""
        expected = {(r["start"], r["stop"]) for r in self.ranges()}
        stray = [p for s, e, p in self._parsed() if (s, e) not in expected]
        if stray:
            raise DseError(
                f"exhaustive: {stray[0]} does not match this space's ranges of {RANGE_COMBINATIONS} combinations; "
                f"move {self.parts} away to start the record again"
            )
        return [p for _, _, p in self._parsed()]
