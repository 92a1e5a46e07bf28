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

Pruning: each range goes out with the pool's objective points as they are then. A plan is
first priced at its kind's step floor (StudyKind.step_floors: a lower bound of its step time,
from the model's own layer prices, without the pipeline simulation); where every objective
only gets worse as the step grows (`prunable`), the floor's objectives are the best the plan
could reach, and a plan whose best is dominated by `keep` plans of the pool has at least `keep`
dominators whatever its simulation gives: it can never enter the pool, so it is not simulated.
The pool and the front come out the same as without pruning; the record marks such a plan
`pruned`, with its bound (`floor:<objective>` columns) instead of metrics. Ranges go out spread
over the space (`spread`), so the pool holds good plans of every part of it early.
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
PRUNE = True  # skip plans whose bound the pool dominates (module docstring); off: every plan simulated
PRUNED_REASON = "pruned: at its step floor, dominated by {} plans found before"
_PART = re.compile(r"part-(\d{12})-(\d{12})\.parquet")


@dataclass(frozen=True)
class ExhaustiveProgress:
    """What the exact mode has done: plans in the space's record (this run and before), how
    many this run evaluated, how many are feasible (of those simulated), the front's size, this
    run's seconds, and how many plans of the record were pruned (not simulated: see the module)."""

    plans: int
    evaluated: int
    feasible: int
    front: int
    wall_s: float
    cpus: int
    pruned: int = 0

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

    def simulate_many(self, ranges: Sequence[Mapping[str, Any]]) -> list[pa.Table]:
        return [plan_table(self.evaluator, r["start"], r["stop"], r.get("pool"), r.get("keep", 1)) for r in ranges]


def plan_table(evaluator: Evaluator, start: int, stop: int, pool: np.ndarray | None = None, keep: int = 1) -> pa.Table:
    """The distinct plans among combinations `start` to `stop`, judged: one row per plan with
    its knobs (a knob of numbers and words as text), derived columns, every metric (null where
    the plan has none: an invalid plan, one the memory model alone rules out, or one `pool`
    prunes, none of which is simulated), each constraint, `feasible`, the reason or error,
    `pruned` and the `floor:<objective>` bounds. `pool`: objective points (as costs,
    `direction_signs` applied) of which `keep` dominating a plan's bound prune it."""
    import pyarrow as pa

    space = evaluator.space
    kind = space.resolved.kind
    objectives = space.resolved.objectives
    plans = list(space.distinct_plans(start, stop))
    bounds = np.full((len(plans), len(objectives)), np.nan)
    pruned = np.zeros(len(plans), dtype=bool)
    known: list[Outcome | None] = [None] * len(plans)  # invalid or too big for memory: not simulated
    if pool is not None and len(pool) >= keep:
        known, floors = evaluator.floor_outcomes(plans)
        priced = [i for i, floor in enumerate(floors) if floor is not None and not floor.failed]
        if priced:
            bounds[priced] = [[floors[i].metrics[name] for name in objectives] for i in priced]
            signs = direction_signs(space.resolved.directions)
            pruned[priced] = dominates(pool, bounds[priced] * signs).sum(axis=0) >= keep
    todo = [i for i, skip in enumerate(pruned.tolist()) if not skip and known[i] is None]
    outcomes = list(known)
    for i, outcome in zip(todo, evaluator.evaluate_many([plans[i] for i in todo], feasible_only=True)):
        outcomes[i] = outcome
    valid, fits = evaluator.constraint_names[:2]
    for i in np.flatnonzero(pruned).tolist():
        outcomes[i] = Outcome(
            constraints={valid: 0.0, fits: floors[i].constraints[fits]}, reason=PRUNED_REASON.format(keep)
        )
    columns: dict[str, list] = {}
    for name in kind.knobs:
        texts = len({type(v) for v in space.values[name] if v is not None}) > 1
        columns[name] = [str(p[name]) if texts else p[name] for p in plans]
    for name in kind.derived_columns:
        columns[name] = [kind.derived(p)[name] for p in plans]
    measured = [(i, o.metrics) for i, o in enumerate(outcomes) if o.metrics]  # most plans have none
    for name in metric_names(evaluator):
        columns[name] = [np.nan] * len(plans)
        for i, metrics in measured:
            columns[name][i] = metrics.get(name, np.nan)
    for name in evaluator.constraint_names:
        columns[f"constraint:{name}"] = [o.constraints.get(name, np.nan) for o in outcomes]
    columns["feasible"] = [_feasible(o) and not skip for o, skip in zip(outcomes, pruned)]
    columns["reason"] = [o.reason for o in outcomes]
    columns["error"] = [o.error for o in outcomes]
    columns["pruned"] = pruned.tolist()
    for j, name in enumerate(objectives):
        columns[f"floor:{name}"] = bounds[:, j].tolist()
    metric_columns = {name: pa.float64() for name in metric_names(evaluator)}
    metric_columns |= {f"constraint:{name}": pa.float64() for name in evaluator.constraint_names}
    metric_columns |= {f"floor:{name}": pa.float64() for name in objectives}
    arrays = {name: pa.array(values, type=metric_columns.get(name)) for name, values in columns.items()}
    return pa.table(arrays)


def metric_names(evaluator: Evaluator) -> list[str]:
    """The study's objectives first, then every other metric of its kind."""
    resolved = evaluator.space.resolved
    return [*resolved.objectives, *(m for m in resolved.kind.metrics if m not in resolved.objectives)]


def _feasible(outcome: Outcome) -> bool:
    return not outcome.failed and all(v <= 0 for v in outcome.constraints.values())


def prunable(evaluator: Evaluator) -> bool:
    """Whether every objective only gets worse as a plan's step time grows (StudyKind's
    `step_monotone`), so that a plan's step floor gives the best objectives it could reach."""
    space = evaluator.space
    kind, resolved = space.resolved.kind, space.resolved
    fixed_spares = "auto" not in space.values.get("spare_servers", ())
    worse = {"minimize": "rises", "maximize": "falls"}
    for name, direction in zip(resolved.objectives, resolved.directions):
        way = kind.step_monotone.get(name) or (kind.step_monotone_fixed_spares.get(name) if fixed_spares else None)
        if way != worse[direction]:
            return False
    return True


def spread(ranges: list[dict[str, int]]) -> list[dict[str, int]]:
    """The ranges in bit-reversed order of their place (0, 1/2, 1/4, 3/4, ... of the space):
    the first few already sample every part of it."""
    bits = max(1, (len(ranges) - 1).bit_length())
    return [ranges[i] for i in sorted(range(len(ranges)), key=lambda i: int(f"{i:0{bits}b}"[::-1], 2))]


class _RangeItems(Sequence):
    """The ranges to evaluate, each read with the pool as it is when the executor sends it out."""

    def __init__(self, run: ExhaustiveRun, ranges: list[dict[str, int]]) -> None:
        self.run, self.ranges = run, ranges

    def __len__(self) -> int:
        return len(self.ranges)

    def __getitem__(self, index):
        if isinstance(index, slice):  # still read late (LocalExecutor hands Ray the rest as a slice)
            return _RangeItems(self.run, self.ranges[index])
        return {**self.ranges[index], **self.run.pruning()}


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
        self._costs = np.zeros((0, len(self.resolved.objectives)))  # the pool's objectives, as costs
        self.prune = PRUNE and prunable(evaluator)
        self.plans = self.feasible = self.pruned = 0
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
        todo = spread(self.missing_ranges())
        evaluated = 0
        stopped = "every candidate of the space evaluated"
        results: Iterator = executor.run(RangeEvaluator(self.evaluator), _RangeItems(self, todo))
        try:
            for group in results:
                for position, table in group:
                    if isinstance(table, Outcome):  # the worker died on this range, also alone
                        raise DseError(
                            f"exhaustive: combinations {todo[position]} could not be evaluated: {table.error}"
                        )
                    self._write(todo[position], table)
                    self.recorded += 1
                    # only the feasible rows become a frame (the driver shares the CPUs with the workers)
                    feasible = table.filter(table.column("feasible")).to_pandas()
                    pruned = sum(table.column("pruned").to_pylist())
                    self._add(feasible, table.num_rows, pruned)
                    evaluated += table.num_rows
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
            self.plans, evaluated, self.feasible, len(self.front), wall_s, executor.usage.cpus, self.pruned
        )
        return stopped, progress

    def pruning(self) -> dict[str, Any]:
        """What a range takes to prune with: the pool's points and `keep` (nothing when off)."""
        return {"pool": self._costs, "keep": self.keep} if self.prune else {}

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

    def _add(self, frame: pd.DataFrame, plans: int | None = None, pruned: int | None = None) -> None:
        """Count a table's plans and fold its feasible ones into the pool (class docstring);
        `frame` may hold only the feasible rows, with the table's `plans` and `pruned` given."""
        self.plans += len(frame) if plans is None else plans
        if pruned is None:  # parts from before pruning have no such column
            pruned = int(frame["pruned"].sum()) if "pruned" in frame else 0
        self.pruned += pruned
        new = frame[frame["feasible"]].reset_index(drop=True)
        self.feasible += len(new)
        if new.empty:
            return
        signs = direction_signs(self.resolved.directions)
        costs_new = new[list(self.resolved.objectives)].to_numpy(dtype=float) * signs
        counts_new = dominates(costs_new, costs_new).sum(axis=0)
        costs_old, counts_old = self._costs, self._dominators
        if len(self.pool):
            counts_new = counts_new + dominates(costs_old, costs_new).sum(axis=0)
            counts_old = counts_old + dominates(costs_new, costs_old).sum(axis=0)
            both = pd.concat([self.pool, new], ignore_index=True)
        else:
            both = new
        counts = np.concatenate([counts_old, counts_new])
        stay = counts < self.keep
        self.pool, self._dominators = both[stay].reset_index(drop=True), counts[stay]
        self._costs = np.concatenate([costs_old, costs_new])[stay]

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
