"""Study output in reports/<study>/: the tables, and every file re-rendered from the study alone.

`dse search` writes them when it stops; `dse report DIR` rewrites them from DIR/spec.yaml and
the study's storage, so an interrupted study or a changed report can be rendered again without
simulating anything but the few Pareto candidates.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import optuna
import pandas as pd
import yaml
from optuna.trial import TrialState

from dse import paths
from dse.errors import DseError
from dse.evaluation.fidelity import FIDELITY_FILE, packet_fidelity
from dse.evaluation.space import SearchSpace
from dse.physical.validate import VALIDATION_FILE
from dse.report.html_page import render_html
from dse.report.png import write_pareto_png
from dse.report.summary import summary_markdown
from dse.search.hypervolume import MAX_OBJECTIVES, HypervolumeHistory, hypervolume_history
from dse.search.journal import TRIALS_FILE, check_trials_kept, journal_storage
from dse.search.pareto import pareto_mask
from dse.search.studylock import study_lock
from dse.search.trial_records import INTERRUPTED_ATTR, OUTCOME_ATTR
from dse.spec import Study, load_study
from dse.spec.resolved import ResolvedStudy
from dse.study import resolve_study
from simulators.analytical import simulate_training_batch
from simulators.workload import GIB

SPEC_FILE = "spec.yaml"
JOURNAL_FILE = "study.journal"


def trials_frame(study: optuna.Study, resolved: ResolvedStudy) -> pd.DataFrame:
    """One row per finished trial: parameters, metrics, feasibility and the reason or error."""
    kind = resolved.kind
    metric_order = [*resolved.objectives, *(m for m in kind.metrics if m not in resolved.objectives)]
    knobs, derived = kind.knobs, kind.derived_columns
    rows = []
    for trial in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.FAIL)):
        if trial.user_attrs.get(INTERRUPTED_ATTR) or OUTCOME_ATTR not in trial.user_attrs:
            continue
        record = trial.user_attrs[OUTCOME_ATTR]
        params = kind.canonical_params(trial.params)
        constraints = trial.constraints
        row = {
            "trial": trial.number,
            "state": "complete" if trial.state == TrialState.COMPLETE else "failed",
            "feasible": trial.state == TrialState.COMPLETE and all(v <= 0 for v in constraints.values()),
            "duplicate_of": record.get("duplicate_of"),
            **{name: params[name] for name in knobs},
            **kind.derived(params),
            **{name: record["metrics"].get(name) for name in metric_order},
            "reason": record.get("reason"),
            "error": record.get("error"),
        }
        rows.append(row)
    columns = ["trial", "state", "feasible", "duplicate_of", *knobs, *derived, *metric_order, "reason", "error"]
    frame = pd.DataFrame(rows, columns=columns)
    unused = [m for m in metric_order[len(resolved.objectives) :] if frame[m].isna().all()]
    # Integer columns that may be empty (a knob without effect, a derived degree) stay integers.
    nullable = dict.fromkeys(("duplicate_of", *kind.nullable_columns), "Int64")
    frame = frame.drop(columns=unused).astype(nullable)
    return frame.sort_values("trial", ignore_index=True)


def pareto_frame(trials: pd.DataFrame, resolved: ResolvedStudy) -> pd.DataFrame:
    """The feasible, distinct candidates no other feasible candidate beats in every objective."""
    pool = trials[trials["feasible"] & trials["duplicate_of"].isna()]
    if pool.empty:
        return pool.drop(columns=["state", "feasible", "duplicate_of", "error"])
    mask = pareto_mask(pool[list(resolved.objectives)].to_numpy(dtype=float), resolved.directions)
    front = pool[mask].drop(columns=["state", "feasible", "duplicate_of", "error"])
    first = resolved.objectives[0]
    return front.sort_values(first, ascending=resolved.directions[0] == "minimize", ignore_index=True)


def with_breakdown(front: pd.DataFrame, resolved: ResolvedStudy) -> pd.DataFrame:
    """The front with each candidate's time breakdown (`breakdown_*_s`, adding up to
    iteration_time_s) and memory per GPU (`memory_*_gib`, adding up to memory_gib_per_gpu). The
    search ranks metrics only, so the few Pareto candidates are simulated once more for these."""
    if front.empty or not resolved.kind.has_step_breakdowns:
        return front
    space = SearchSpace.from_study(resolved)
    results = simulate_training_batch([space.candidate(space.params_of_row(row)) for _, row in front.iterrows()])
    times = pd.DataFrame([result.breakdown_s for result in results], index=front.index).add_prefix("breakdown_")
    memory = pd.DataFrame([dataclasses.asdict(result.memory) for result in results], index=front.index) / GIB
    memory.columns = [f"memory_{name.removesuffix('_bytes')}_gib" for name in memory.columns]
    return pd.concat([front, times, memory], axis=1)


def history_of(trials: pd.DataFrame, resolved: ResolvedStudy) -> HypervolumeHistory | None:
    """The hypervolume history of the study, or None when no trial is feasible or there are
    more objectives than the exact method handles (the reports say which)."""
    if not trials["feasible"].any() or len(resolved.objectives) > MAX_OBJECTIVES:
        return None
    values = trials[list(resolved.objectives)].to_numpy(dtype=float)
    return hypervolume_history(trials["trial"], values, trials["feasible"], resolved.directions)


def spec_yaml(study: Study) -> str:
    """The validated spec as YAML that `load_study` reads back to an equal Study: every field
    explicit (command-line overrides included, defaults frozen), the calibration file made absolute."""
    if study.hardware.calibration:
        calibration = str(Path(study.hardware.calibration).resolve())
        study = study.model_copy(update={"hardware": study.hardware.model_copy(update={"calibration": calibration})})
    body = yaml.dump(study.model_dump(mode="json"), Dumper=_SpecDumper, sort_keys=False)
    return f"# The spec this study ran, overrides applied; `dse report DIR` re-renders the study from it.\n{body}"


class _SpecDumper(yaml.SafeDumper):
    """Block mappings, with lists of plain values on one line (`tp: [1, 2, 4]`) as specs are written."""


_SpecDumper.add_representer(
    list,
    lambda dumper, items: dumper.represent_sequence(
        "tag:yaml.org,2002:seq", items, flow_style=not any(isinstance(v, dict | list) for v in items)
    ),
)


def save_spec(study: Study, out_dir: Path) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / SPEC_FILE
    path.write_text(spec_yaml(study))
    return path


def load_study_dir(out_dir: Path) -> tuple[optuna.Study, ResolvedStudy]:
    """The study and resolved spec that `dse search` left in `out_dir` (finished or not)."""
    if not out_dir.is_dir():
        raise DseError(f"report: {out_dir} is not a directory")
    if not (out_dir / SPEC_FILE).is_file():
        raise DseError(f"report: {out_dir} holds no {SPEC_FILE}; `dse search SPEC --out {out_dir} --resume` writes it")
    study = load_study(out_dir / SPEC_FILE, output=str(out_dir))
    resolved = resolve_study(study)
    with study_lock(out_dir):  # a search appending to the journal is not read half-written
        if study.storage:
            target = paths.storage(study.storage, "report: storage")
            storage = optuna.storages.get_storage(target) if "://" in target else journal_storage(Path(target))
        elif (out_dir / JOURNAL_FILE).is_file():
            storage = journal_storage(out_dir / JOURNAL_FILE)
        else:
            raise DseError(f"report: {out_dir} holds no {JOURNAL_FILE} and {SPEC_FILE} names no storage")
        try:
            return optuna.load_study(study_name=study.name, storage=storage), resolved
        except KeyError:
            raise DseError(f"report: the storage of {out_dir} holds no study {study.name!r}") from None


def write_reports(study: optuna.Study, resolved: ResolvedStudy, out_dir: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Write every report file into `out_dir`; return the trials and the front.

    trials.csv and trials.parquet (every finished trial), pareto.csv (the front with its time
    and memory breakdowns), fidelity.csv (the packet-level re-evaluation, when the spec asks for
    it), spec.yaml, summary.md, pareto.png and the self-contained report.html. Nothing is
    written when the study holds fewer trials than the trials.csv already there (dse.search.journal).
    """
    with study_lock(out_dir):
        return _write_reports(study, resolved, out_dir)


def _write_reports(study: optuna.Study, resolved: ResolvedStudy, out_dir: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    trials = trials_frame(study, resolved)
    check_trials_kept(out_dir, trials["trial"].tolist(), f"the storage of {out_dir}")
    front = with_breakdown(pareto_frame(trials, resolved), resolved)
    history = history_of(trials, resolved)
    fidelity = packet_fidelity(front, resolved)
    if not fidelity.empty:
        fidelity.to_csv(out_dir / FIDELITY_FILE, index=False)
    spec_path = save_spec(resolved.study, out_dir)
    trials.to_csv(out_dir / TRIALS_FILE, index=False)
    trials.to_parquet(out_dir / "trials.parquet", index=False)
    front.to_csv(out_dir / "pareto.csv", index=False)
    (out_dir / "summary.md").write_text(summary_markdown(trials, front, resolved, history, spec_path))
    write_pareto_png(trials, front, resolved, out_dir / "pareto.png")
    validation_path = out_dir / VALIDATION_FILE
    validation = pd.read_csv(validation_path) if validation_path.is_file() else None
    page = render_html(trials, front, resolved, history, spec_path.read_text(), fidelity, validation)
    (out_dir / "report.html").write_text(page)
    return trials, front
