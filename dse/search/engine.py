"""The search engine: one driver owns the Optuna study and asks, evaluates and tells in batches.

Batches are asked before any of their trials is told, so the same seed and spec give the same
trials whatever order Ray finishes them in. Identical candidates are simulated once; a repeat is
told the first one's result and points at it (`duplicate_of`). Every finished trial is told as
soon as its chunk returns, so an interrupted study loses nothing it finished; the trials it left
running are failed and asked again on `--resume`.
"""

from __future__ import annotations

import contextlib
import functools
import signal
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import optuna
from optuna.trial import TrialState

from dse.errors import SpecError
from dse.evaluation.evaluate import Evaluator
from dse.evaluation.outcome import Outcome
from dse.evaluation.space import SearchSpace
from dse.search.asking import Asked, ask_batch, tell
from dse.search.cache import SharedCache, evaluation_context
from dse.search.executor import Executor, Usage
from dse.search.exhaustive import ExhaustiveProgress, ExhaustiveRun
from dse.search.journal import HeldJournalStorage, check_trials_kept, journal_storage
from dse.search.ladder import LevelCallback, climb, store_front_details
from dse.search.level_records import LevelProgress
from dse.search.local_executor import make_executor
from dse.search.samplers import make_sampler, sampler_name
from dse.search.studylock import study_lock
from dse.search.trial_records import OUTCOME_ATTR, counts, outcome_attrs, outcome_from_attrs, requeue_interrupted
from dse.search.warmup import Warmup
from dse.spec.resolved import ResolvedStudy

STARTUP_INTERRUPTED = (
    "interrupted while the evaluation workers (Ray) were starting, before the study was created: "
    "there is nothing to resume; run the same command again without --resume"
)
GRID_CHUNK = 512  # plans per chunk of the exact (grid) mode: what an interruption can lose
MIN_BATCH = 32  # the batch the search-quality figures were measured with (benchmarks/RESULTS.md)
SPACE_ATTR = "search_space"
SAMPLER_ATTR = "sampler"


@dataclass(frozen=True)
class RunSettings:
    """How this run goes; overrides of the spec come from the command line."""

    out_dir: Path
    storage: str | None = None
    ray_address: str = "local"
    resume: bool = False


@dataclass(frozen=True)
class SearchSummary:
    study: optuna.Study
    space: SearchSpace
    finished: int
    evaluated: int  # simulated by this run (not a duplicate, not from the shared cache)
    stopped_because: str
    shared_hits: int = 0  # outcomes another study of the batch (or an earlier run) had simulated
    wall_s: float = 0.0
    usage: Usage | None = None  # the executor's, when this run owned it
    batch_size: int | None = None  # trials asked at once; None in the exact (grid) mode, which asks none
    ladder: tuple[LevelProgress, ...] = ()  # each fidelity level's progress, cheapest first
    exhaustive: ExhaustiveProgress | None = None  # the exact mode's record, when the study runs it


def batch_size(setting: int | str, cpus: int, studies_sharing: int = 1) -> int:
    """Trials asked at once. `auto` gives each CPU of the cluster two candidates, so a large
    cluster is not left idle behind a fixed batch (the studies of a batch share its CPUs), and
    never fewer than MIN_BATCH, so on a small machine the samplers run as measured."""
    if setting != "auto":
        return int(setting)
    return max(MIN_BATCH, -(-2 * cpus // studies_sharing))


TrialCallback = Callable[[int, Outcome], None]


def open_storage(settings: RunSettings) -> optuna.storages.BaseStorage:
    """The study database: an Optuna URL if given, else a journal file in the output directory.

    The journal needs no server, and with a trial's entries written together (dse.search.journal)
    the driver costs 0.6-0.8 ms a trial against ~40 ms with SQLite (benchmarks/RESULTS.md).
    """
    target = settings.storage or str(settings.out_dir / "study.journal")
    if "://" in target:
        return optuna.storages.get_storage(target)
    Path(target).parent.mkdir(parents=True, exist_ok=True)
    return journal_storage(Path(target))


def open_study(
    resolved: ResolvedStudy, space: SearchSpace, settings: RunSettings, storage: optuna.storages.BaseStorage
) -> optuna.Study:
    """Create the study in `storage`, or load it for `--resume`; refuse to mix a new run into an old one."""
    spec = resolved.study
    exists = spec.name in optuna.study.get_all_study_names(storage)
    where = settings.storage or settings.out_dir
    if exists and not settings.resume:
        raise SpecError(
            f"out: {where} already holds study {spec.name!r}; pass --resume to continue it, or --out DIR for a new one"
        )
    if settings.resume and not exists:
        raise SpecError(
            f"--resume: {where} holds no study {spec.name!r} to resume (a run interrupted before its study "
            "opened, during Ray start-up, leaves none); run it again without --resume"
        )
    # Before anything is written: a journal that lost trials (or is gone) leaves trials.csv as it is.
    if exists:
        study = optuna.load_study(study_name=spec.name, storage=storage)
        finished = [t.number for t in study.get_trials(deepcopy=False) if counts(t) and OUTCOME_ATTR in t.user_attrs]
        check_trials_kept(settings.out_dir, finished, where)
    else:
        check_trials_kept(settings.out_dir, (), where)
        study = optuna.create_study(study_name=spec.name, storage=storage, directions=list(resolved.directions))
    fingerprint = {name: repr(d) for name, d in space.distributions.items()}
    fingerprint["objectives"] = repr(list(zip(resolved.objectives, resolved.directions)))
    if exists:
        stored = study.user_attrs.get(SPACE_ATTR, {})
        changed = sorted(k for k in fingerprint if stored.get(k) != fingerprint[k])
        if changed:
            raise SpecError(
                f"--resume: the spec's {', '.join(changed)} changed since study {spec.name!r} began; "
                f"resume with the same search space and objectives, or start a new study with --out"
            )
        # `auto` keeps the choice the study began with; a resumed sampler takes a fresh seed
        # (still determined by the spec) so it does not propose the first run's trials again.
        sampler = study.user_attrs[SAMPLER_ATTR] if spec.sampler == "auto" else spec.sampler
        seed = spec.seed + len(study.get_trials(deepcopy=False))
        if sampler != study.user_attrs[SAMPLER_ATTR]:  # the loop runs what the study records (grid, exhaustive)
            sampler_name(sampler, space, spec.budget.trials)  # the grid size limit
            study.set_user_attr(SAMPLER_ATTR, sampler)
    else:
        sampler = sampler_name(spec.sampler, space, spec.budget.trials)
        seed = spec.seed
        study.set_user_attr(SPACE_ATTR, fingerprint)
        study.set_user_attr(SAMPLER_ATTR, sampler)
    study.sampler = make_sampler(sampler, seed, resolved.kind.params_key)
    return study


def _holding_study_dir(run: Callable[..., SearchSummary]) -> Callable[..., SearchSummary]:
    """Run with the study directory's lock held (dse.search.studylock), taken before Ray starts, so a
    second run on the directory is refused at once instead of corrupting the first's journal."""

    @functools.wraps(run)
    def locked(resolved: ResolvedStudy, settings: RunSettings, *args, **kwargs) -> SearchSummary:
        with study_lock(settings.out_dir):
            return run(resolved, settings, *args, **kwargs)

    return locked


@_holding_study_dir
def run_search(
    resolved: ResolvedStudy,
    settings: RunSettings,
    on_trial: TrialCallback | None = None,
    on_start: Callable[[int, list[Outcome]], None] | None = None,
    on_level: LevelCallback | None = None,
    on_range: Callable[[ExhaustiveRun], None] | None = None,
    *,
    executor: Executor | None = None,
    stop: threading.Event | None = None,
    shared: SharedCache | None = None,
    studies_sharing: int = 1,
) -> SearchSummary:
    """Run the study to its trial budget or timeout, then climb the fidelity ladder
    (dse.search.ladder) unless interrupted; returns when done.

    The first Ctrl-C asks the loop to stop after the chunk in hand (nothing half-told); a
    second one interrupts at once. Either way finished trials are already in the database.
    A batch passes the executor, stop event and shared cache its studies have in common, and
    how many studies share the executor's CPUs. `on_range` follows the exact mode (`sampler:
    exhaustive`) range by range.
    """
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    spec = resolved.study
    space = SearchSpace.from_study(resolved)
    space.check_runnable()  # before any study or cluster exists
    started = time.monotonic()
    # the ladder's kernels compile in another process meanwhile, when the cache lacks them
    levels = [name for name, _ in spec.fidelity.levels()] if resolved.kind.replays_collectives else []
    warmup = Warmup(levels, settings.ray_address)
    owned = executor is None
    try:
        executor = executor or make_executor(settings.ray_address)  # fails before any study exists
    except KeyboardInterrupt:  # nothing to resume yet: say so now, not at the next --resume
        warmup.close()
        raise KeyboardInterrupt(STARTUP_INTERRUPTED) from None
    except BaseException:
        warmup.close()
        raise
    batch = batch_size(spec.budget.batch_size, executor.usage.cpus, studies_sharing)
    stopped = "trial budget reached"
    ladder: list[LevelProgress] = []
    record: ExhaustiveProgress | None = None
    storage = None
    try:
        storage = open_storage(settings)
        study = open_study(resolved, space, settings, storage)
        cache = requeue_interrupted(study, resolved.kind)
        loop = _Loop(study, resolved, Evaluator(space), executor, shared, cache, on_trial)
        prior = [
            outcome_from_attrs(t.user_attrs[OUTCOME_ATTR], t.constraints)
            for t in study.get_trials(deepcopy=False)
            if counts(t) and OUTCOME_ATTR in t.user_attrs
        ]
        loop.finished = len(prior)
        grid = study.user_attrs[SAMPLER_ATTR] == "grid"
        exhaustive = None
        if study.user_attrs[SAMPLER_ATTR] == "exhaustive":  # keep what the ladder's widest level promotes
            widest = max((level.top for _, level in spec.fidelity.levels()), default=1)
            exhaustive = ExhaustiveRun(
                loop.evaluator, settings.out_dir, widest if resolved.kind.replays_collectives else 1
            )
        points = space.grid() if grid else []
        if exhaustive and on_start:
            on_start(len(exhaustive.ranges()), prior)
        elif on_start:  # a grid ends at its distinct plans, fewer than the budget when it is small
            on_start(min(spec.budget.trials, len(points)) if grid else spec.budget.trials, prior)
        deadline = _now() + spec.budget.timeout_s if spec.budget.timeout_s else None
        try:
            with stop_on_sigint() if stop is None else contextlib.nullcontext(stop) as stop:
                if grid:  # the exact front: every distinct plan, evaluated in bulk, no sampler
                    stopped = loop.run_grid(space, points, spec, max(batch, GRID_CHUNK), stop, deadline)
                if exhaustive:  # the same, storing as trials only what the ladder promotes
                    stopped, record = loop.run_exhaustive(exhaustive, stop, deadline, on_range)
                while not (grid or exhaustive) and loop.finished < spec.budget.trials:
                    if stop.is_set():
                        stopped = "interrupted"
                    elif _past(deadline):
                        stopped = "timeout reached"
                    else:
                        count = min(batch, spec.budget.trials - loop.finished)
                        executor.expect(loop.evaluator, spec.budget.trials - loop.finished - count)
                        loop.run_batch(ask_batch(study, space.distributions, count), stop, deadline)
                        continue
                    break
                if stopped != "interrupted" and not stop.is_set():
                    ladder = climb(study, resolved, loop.evaluator, executor, stop, on_level, warmup.wait)
                    if any(level.stopped == "interrupted" for level in ladder):
                        stopped = "interrupted"
                store_front_details(study, resolved, loop.evaluator)
        except KeyboardInterrupt:
            stopped = "interrupted"
    finally:
        warmup.close()
        if isinstance(storage, HeldJournalStorage):  # trials asked and never told, for --resume
            storage.flush()
        if owned:
            executor.close()
    wall_s = time.monotonic() - started
    usage = executor.usage if owned else None
    asked = None if grid or exhaustive else batch
    return SearchSummary(
        study,
        space,
        loop.finished,
        loop.evaluated,
        stopped,
        loop.shared_hits,
        wall_s,
        usage,
        asked,
        tuple(ladder),
        record,
    )


class _Loop:
    """Evaluates asked trials once per distinct candidate and tells each as its chunk returns."""

    def __init__(self, study, resolved, evaluator, executor, shared, cache, on_trial) -> None:
        self.study = study
        self.objectives = resolved.objectives
        self.params_key = resolved.kind.params_key
        self.evaluator = evaluator
        self.executor = executor
        self.shared = shared
        self.context = evaluation_context(resolved) if shared is not None else None
        self.cache: dict[tuple, tuple[int, Outcome]] = cache  # candidate -> (first trial, outcome)
        self.on_trial = on_trial
        self.finished = 0
        self.evaluated = 0
        self.shared_hits = 0

    def _evaluate(self, items: list[dict[str, Any]]) -> Iterator[list[tuple[int, Outcome]]]:
        """Judged outcomes of distinct candidates, in groups of (position, outcome) as they come:
        first those the shared cache knows, then those simulated here, then those another
        study was simulating (simulated here after all if that study gave them up)."""
        judge = self.evaluator.judge
        if self.shared is None:
            for group in self.executor.run(self.evaluator, items):
                self.evaluated += len(group)
                yield [(i, judge(items[i], o)) for i, o in group]
            return
        addresses = [self.context.address(p) for p in items]
        known, mine, theirs = self.shared.claim(addresses)
        self.shared_hits += len(known)
        if known:
            yield [(i, judge(items[i], o)) for i, o in known.items()]
        try:
            for group in self.executor.run(self.evaluator, [items[i] for i in mine]):
                self.evaluated += len(group)
                for j, outcome in group:
                    self.shared.put(addresses[mine[j]], outcome)
                yield [(mine[j], judge(items[mine[j]], o)) for j, o in group]
        finally:
            self.shared.release([addresses[i] for i in mine])
        waited = {i: self.shared.wait(addresses[i]) for i in theirs}
        self.shared_hits += sum(o is not None for o in waited.values())
        if any(o is not None for o in waited.values()):
            yield [(i, judge(items[i], o)) for i, o in waited.items() if o is not None]
        again = [i for i, o in waited.items() if o is None]
        for group in self.executor.run(self.evaluator, [items[i] for i in again]) if again else ():
            self.evaluated += len(group)
            yield [(again[j], judge(items[again[j]], o)) for j, o in group]

    def run_batch(self, batch: list[Asked], stop: threading.Event, deadline: float | None = None) -> None:
        """Evaluate and tell one asked batch; an interruption or the deadline stops it between
        groups of results (what was not told is failed and asked again on --resume). Each group
        is told in one storage write (the journal's `together`)."""
        fresh: dict[tuple, list[Asked]] = {}
        with self._together():
            for trial in batch:
                key = self.params_key(trial.params)
                if key in self.cache:
                    first, outcome = self.cache[key]
                    self._tell(trial, outcome, duplicate_of=first)
                else:
                    fresh.setdefault(key, []).append(trial)
        keys = list(fresh)
        for group in self._evaluate([fresh[k][0].params for k in keys]):
            with self._together():
                for position, outcome in group:
                    first, *repeats = fresh[keys[position]]
                    self.cache[keys[position]] = (first.number, outcome)
                    self._tell(first, outcome)
                    for trial in repeats:
                        self._tell(trial, outcome, duplicate_of=first.number)
            if stop.is_set() or _past(deadline):
                return

    def _together(self) -> contextlib.AbstractContextManager:
        storage = self.study._storage
        return storage.together() if isinstance(storage, HeldJournalStorage) else contextlib.nullcontext()

    def run_grid(
        self, space: SearchSpace, points: list[dict], spec, size: int, stop: threading.Event, deadline: float | None
    ) -> str:
        """Evaluate every distinct plan not yet evaluated (in the seed's shuffled order, up to the
        budget) in large chunks across the workers, and store each chunk as finished trials:
        the exact front of the space, with no sampler in the loop. An interruption loses only
        the chunk in hand. `points`: the space's distinct plans (`space.grid()`)."""
        order = np.random.default_rng(spec.seed).permutation(len(points))
        todo = [points[i] for i in order if self.params_key(points[i]) not in self.cache]
        todo = todo[: max(0, spec.budget.trials - self.finished)]
        for start in range(0, len(todo), size):
            if stop.is_set():
                return "interrupted"
            if _past(deadline):
                return "timeout reached"
            batch = todo[start : start + size]
            self.executor.expect(self.evaluator, len(todo) - start - len(batch))
            outcomes: list[Outcome | None] = [None] * len(batch)
            late = False
            for group in self._evaluate(batch):
                for position, outcome in group:
                    outcomes[position] = outcome
                if _past(deadline):  # keep what this chunk has evaluated so far
                    late = True
                    break
            self._store(space, [(params, outcome) for params, outcome in zip(batch, outcomes) if outcome is not None])
            if late:
                return "timeout reached"
        whole = len(self.cache) >= len(points)
        return "every candidate of the space evaluated" if whole else "trial budget reached"

    def run_exhaustive(
        self,
        run: ExhaustiveRun,
        stop: threading.Event,
        deadline: float | None,
        on_range: Callable[[ExhaustiveRun], None] | None,
    ) -> tuple[str, ExhaustiveProgress]:
        """Every range of the space not yet recorded (dse.search.exhaustive), then the plans the
        ladder would promote from the whole space (the front and its neighbourhood) not yet in
        the study stored as finished trials (also when interrupted: those so far), their outcomes
        evaluated again on the executor as any trial's are."""
        if on_range:
            on_range(run)
        stopped, progress = run.run(self.executor, stop, lambda: _past(deadline), on_range)
        fresh = [p for p in run.promoted_params() if self.params_key(p) not in self.cache]
        outcomes: list[Outcome | None] = [None] * len(fresh)
        for group in self._evaluate(fresh) if fresh else ():
            for position, outcome in group:
                outcomes[position] = outcome
        done = [(p, o) for p, o in zip(fresh, outcomes) if o is not None]
        self._store(self.evaluator.space, done, tell=False)  # on_range followed them
        return stopped, progress

    def _store(self, space: SearchSpace, done: list[tuple[dict, Outcome]], tell: bool = True) -> None:
        """Evaluated plans stored as finished trials in one write, and told to `on_trial`."""
        frozen = [self._frozen(space, params, outcome) for params, outcome in done]
        self.study.add_trials(frozen)
        first = len(self.study.get_trials(deepcopy=False)) - len(frozen)
        for number, (params, outcome) in enumerate(done, start=first):
            self.cache[self.params_key(params)] = (number, outcome)
            self.finished += 1
            if self.on_trial and tell:
                self.on_trial(number, outcome)

    def _frozen(self, space: SearchSpace, params, outcome: Outcome) -> optuna.trial.FrozenTrial:
        common = dict(
            params=dict(params),
            distributions=dict(space.distributions),
            user_attrs={OUTCOME_ATTR: outcome_attrs(outcome)},
        )
        if outcome.failed:
            return optuna.trial.create_trial(state=TrialState.FAIL, **common)
        values = _objective_values(self.study, self.objectives, outcome.metrics)
        return optuna.trial.create_trial(values=values, constraints=dict(outcome.constraints), **common)

    def _tell(self, trial: Asked, outcome: Outcome, duplicate_of: int | None = None) -> None:
        attrs = {OUTCOME_ATTR: outcome_attrs(outcome, duplicate_of)}
        if outcome.failed:
            tell(self.study, trial, attrs, {}, None)
        else:
            values = _objective_values(self.study, self.objectives, outcome.metrics)
            tell(self.study, trial, attrs, outcome.constraints, values)
        self.finished += 1
        if self.on_trial:
            self.on_trial(trial.number, outcome)


@contextlib.contextmanager
def stop_on_sigint():
    """Turn the first SIGINT into a stop request; the second raises KeyboardInterrupt."""
    stop = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return

    def handler(signum, frame):
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()

    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield stop
    finally:
        signal.signal(signal.SIGINT, previous)


def _now() -> float:
    """The clock budget.timeout_s is measured on (one place, so a test can move it)."""
    return time.monotonic()


def _past(deadline: float | None) -> bool:
    return deadline is not None and _now() >= deadline


def _objective_values(study: optuna.Study, objectives: tuple[str, ...], metrics: Mapping[str, float]) -> list[float]:
    """Objective values in study order. A plan that could not be simulated has no metrics: it
    is told the worst value of each direction, which the samplers never compare because its
    violated `plan_valid` constraint already ranks it below every feasible trial."""
    worst = [float("inf") if d == optuna.study.StudyDirection.MINIMIZE else float("-inf") for d in study.directions]
    return [metrics.get(name, w) for name, w in zip(objectives, worst)]
