"""The exact mode (`sampler: exhaustive`): every distinct plan of the space, none stored as a trial
unless it is on the front.

The knob combinations are cut into ranges (`RANGE_COMBINATIONS` each); a worker enumerates the
distinct plans of its range itself (SearchSpace.distinct_plans), simulates and judges them, and
returns one columnar table; the driver writes each table whole as a Parquet part of
`plans/` (renamed into place, so an interrupted run leaves no half part) and keeps only the
running Pareto front. At the end the front is stored in the study as finished trials, so the
fidelity ladder and the reports work as after any search. So a space of 10^6 plans costs neither
10^6 trials in the study database (whose entries cost more than the evaluation) nor 10^6
params dicts in the driver. `--resume` evaluates only the ranges no part covers and reads the
front back from the parts.
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
from dse.search.pareto import pareto_mask

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
    and the running front."""

    def __init__(self, evaluator: Evaluator, out_dir: Path) -> None:
        self.evaluator = evaluator
        self.resolved = evaluator.space.resolved
        self.parts = out_dir / PLANS_DIR
        self.parts.mkdir(parents=True, exist_ok=True)
        self.front = pd.DataFrame()
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

    def best(self) -> dict[str, float]:
        """The best value of each objective on the front so far."""
        if self.front.empty:
            return {}
        pick = {"minimize": min, "maximize": max}
        return {name: pick[d](self.front[name]) for name, d in zip(self.resolved.objectives, self.resolved.directions)}

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

    def front_params(self) -> list[dict[str, Any]]:
        """The params of the front's plans, as the space's knob values."""
        space = self.evaluator.space
        by_text = {name: {str(v): v for v in space.values[name]} for name in space.values}
        return [
            {name: by_text[name].get(str(row[name]), row[name]) for name in space.values}
            for row in self.front.to_dict("records")
        ]

    def _add(self, frame: pd.DataFrame) -> None:
        """Count a table's plans and fold its feasible ones into the front."""
        self.plans += len(frame)
        pool = frame[frame["feasible"]]
        self.feasible += len(pool)
        if pool.empty:
            return
        both = pd.concat([self.front, pool], ignore_index=True) if len(self.front) else pool.reset_index(drop=True)
        values = both[list(self.resolved.objectives)].to_numpy(dtype=float)
        self.front = both[pareto_mask(values, self.resolved.directions)].reset_index(drop=True)

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
