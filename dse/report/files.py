"""Study output in reports/<study>/: the tables, and every file re-rendered from the study alone.

`dse search` writes them when it stops; `dse report DIR` rewrites them from DIR/spec.yaml and
the study's storage, so an interrupted study or a changed report can be rendered again: every
number comes from the study database (trials, and what the fidelity ladder stored), and no
simulator runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import optuna
import pandas as pd
import yaml

from dse import paths
from dse.errors import DseError
from dse.physical import VALIDATION_FILE
from dse.report.fidelity_table import FIDELITY_FILE, fidelity_frame
from dse.report.html_page import render_html
from dse.report.png import PngProcess, draw_pareto_png, pareto_plot
from dse.report.summary import summary_markdown
from dse.search.hypervolume import MAX_OBJECTIVES, HypervolumeHistory, hypervolume_history
from dse.search.journal import TRIALS_FILE, check_trials_kept, journal_storage
from dse.search.level_records import Standing, progress_of, standings
from dse.search.study_table import pareto_frame, trials_frame
from dse.search.studylock import study_lock
from dse.spec import Study, load_study
from dse.spec.resolved import ResolvedStudy
from dse.study import resolve_study

SPEC_FILE = "spec.yaml"
JOURNAL_FILE = "study.journal"


def with_breakdown(front: pd.DataFrame, standing: Mapping[int, Standing]) -> pd.DataFrame:
    """The front with each candidate's time breakdown (`breakdown_*_s`, adding up to
    iteration_time_s) and memory per GPU (`memory_*_gib`, adding up to memory_gib_per_gpu;
    `memory_host_*_gib`, apart, what the plan offloads to host memory) at the level it is ranked
    at, as the search stored them (nothing is simulated here; a candidate whose breakdown was never
    stored, in a study stopped before its end, has none)."""
    if front.empty:
        return front
    rows = [
        {k: v for k, v in standing[t].details.items() if k.startswith(("breakdown_", "memory_"))}
        if t in standing
        else {}
        for t in front["trial"]
    ]
    extra = pd.DataFrame(rows, index=front.index)
    return pd.concat([front, extra], axis=1) if len(extra.columns) else front


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


def write_reports(
    study: optuna.Study, resolved: ResolvedStudy, out_dir: Path, png: PngProcess | None = None
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Write every report file into `out_dir`; return the trials and the front. `png`, a process
    started earlier, draws pareto.png while this one writes the rest; without one it is drawn here.

    trials.csv and trials.parquet (every finished trial), pareto.csv (the front with its time
    and memory breakdowns), fidelity.csv (each promoted candidate at every level of the ladder,
    when it climbed one), spec.yaml, summary.md, pareto.png and the self-contained report.html. Nothing is
    written when the study holds fewer trials than the trials.csv already there (dse.search.journal).
    """
    with study_lock(out_dir):
        return _write_reports(study, resolved, out_dir, png)


def _write_reports(
    study: optuna.Study, resolved: ResolvedStudy, out_dir: Path, png: PngProcess | None
) -> tuple[pd.DataFrame, pd.DataFrame]:
    trials = trials_frame(study, resolved)
    check_trials_kept(out_dir, trials["trial"].tolist(), f"the storage of {out_dir}")
    standing = standings(study, resolved)
    front = with_breakdown(pareto_frame(trials, resolved), standing)
    plot = pareto_plot(trials, front, resolved)
    if png is not None:
        png.send(plot, out_dir / "pareto.png")
    history = history_of(trials, resolved)
    fidelity = fidelity_frame(study, resolved, standing)
    if not fidelity.empty:
        fidelity.to_csv(out_dir / FIDELITY_FILE, index=False)
    ladder = progress_of(study, resolved)
    spec_path = save_spec(resolved.study, out_dir)
    trials.to_csv(out_dir / TRIALS_FILE, index=False)
    _typed(trials).to_parquet(out_dir / "trials.parquet", index=False)
    front.to_csv(out_dir / "pareto.csv", index=False)
    (out_dir / "summary.md").write_text(summary_markdown(trials, front, resolved, history, spec_path, fidelity, ladder))
    if png is None:
        draw_pareto_png(plot, out_dir / "pareto.png")
    validation_path = out_dir / VALIDATION_FILE
    validation = pd.read_csv(validation_path) if validation_path.is_file() else None
    page = render_html(trials, front, resolved, history, spec_path.read_text(), fidelity, validation, ladder)
    (out_dir / "report.html").write_text(page)
    if png is not None:
        png.wait()
    return trials, front


def _typed(frame: pd.DataFrame) -> pd.DataFrame:
    """The table with every column of mixed value types (a knob of numbers and words, such as
    checkpoint_interval_s: [optimal, 3600]) as text, which Arrow can type."""
    mixed = [
        column
        for column in frame.columns
        if frame[column].dtype == object and len({type(v) for v in frame[column].dropna()}) > 1
    ]
    return frame.astype({column: str for column in mixed}) if mixed else frame
