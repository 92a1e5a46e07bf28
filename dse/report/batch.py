"""The combined report of a batch: the studies' fronts side by side (e.g. one model on H100, H200
and B200, or 70B against 405B), written to the batch directory beside each study's own report.

- `batch.html`: one self-contained page: a table of the studies (trials, feasible, front size,
  simulated here, taken from the shared cache, throughput; a link to each report.html), the
  best value of each objective per study, and for every pair of objectives the studies share a
  scatter with one front per study;
- `fronts.csv`: every study's Pareto front, a `study` column first;
- `studies.csv`: one row per study with those figures; `batch.md`: the same as text.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path
from urllib.parse import quote

import pandas as pd
import yaml

from dse.errors import DseError
from dse.report.files import load_study_dir, write_reports
from dse.report.html_page import FOUR_DIGITS, Figures, page, table_html, titled
from dse.report.summary import best_row, objectives_text
from dse.search.batch import BATCH_FILE
from dse.spec.resolved import ResolvedStudy
from simulators._yaml import safe_load

STUDIES_FILE = "studies.csv"
RUN_COLUMNS = ("simulated", "shared_hits", "wall_s", "trials_per_s", "stopped_because")


@dataclass(frozen=True)
class StudyReport:
    """One study of the batch as its report sees it; `run` holds RUN_COLUMNS (from the run, or
    from studies.csv when the batch report is re-rendered)."""

    resolved: ResolvedStudy
    out_dir: Path
    trials: pd.DataFrame
    front: pd.DataFrame
    run: dict


def write_batch_report(out_dir: Path, studies: list[StudyReport]) -> None:
    table = _studies_table(out_dir, studies)
    table.to_csv(out_dir / STUDIES_FILE, index=False)
    fronts = [s.front.assign(study=s.resolved.study.name) for s in studies if not s.front.empty]
    combined = pd.concat(fronts, ignore_index=True) if fronts else pd.DataFrame(columns=["study"])
    combined[["study", *(c for c in combined.columns if c != "study")]].to_csv(out_dir / "fronts.csv", index=False)
    best = _best_table(studies)
    (out_dir / "batch.md").write_text(_markdown(table, best))
    (out_dir / "batch.html").write_text(_page(table, best, studies))


def _studies_table(out_dir: Path, studies: list[StudyReport]) -> pd.DataFrame:
    rows = []
    for s in studies:
        study = s.resolved.study
        rows.append(
            {
                "study": study.name,
                "mode": study.mode,
                "model": s.resolved.model.name,
                "gpus": " ".join(g.name for g in s.resolved.gpus),
                "objectives": objectives_text(s.resolved),
                "trials": len(s.trials),
                "feasible": int(s.trials["feasible"].sum()),
                "front": len(s.front),
                **{k: s.run.get(k) for k in RUN_COLUMNS},
                "report": str((s.out_dir / "report.html").relative_to(out_dir)),
            }
        )
    return pd.DataFrame(rows)


def _objectives(studies: list[StudyReport]) -> dict[str, str]:
    """Every objective of the batch with its direction, in first-seen order."""
    found: dict[str, str] = {}
    for s in studies:
        for metric, direction in zip(s.resolved.objectives, s.resolved.directions):
            found.setdefault(metric, direction)
    return found


def _best_table(studies: list[StudyReport]) -> pd.DataFrame:
    """Per study, the best front value of each objective it optimises (blank for the others)."""
    objectives = _objectives(studies)
    rows = []
    for s in studies:
        row = {"study": s.resolved.study.name}
        for metric, direction in objectives.items():
            if metric in s.resolved.objectives and not s.front.empty:
                row[metric] = best_row(s.front, metric, direction)[metric]
        rows.append(row)
    return pd.DataFrame(rows, columns=["study", *objectives])


def _markdown(table: pd.DataFrame, best: pd.DataFrame) -> str:
    shown = table.drop(columns=["objectives"])
    return "\n".join(
        [
            "# Batch",
            "",
            f"{len(table)} studies, {int(table['trials'].sum())} finished trials, "
            f"{int(table['simulated'].fillna(0).sum())} simulated in this run, "
            f"{int(table['shared_hits'].fillna(0).sum())} taken from the shared cache.",
            "",
            "## Studies",
            "",
            _md_table(shown),
            "",
            "## Best value of each objective (on each study's front)",
            "",
            _md_table(best),
            "",
        ]
    )


def _md_table(frame: pd.DataFrame) -> str:
    def cell(value) -> str:
        if isinstance(value, float):
            return "" if value != value else f"{value:.4g}"
        return str(value)

    lines = ["| " + " | ".join(frame.columns) + " |", "|" + "---|" * len(frame.columns)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join(lines)


def _page(table: pd.DataFrame, best: pd.DataFrame, studies: list[StudyReport]) -> str:
    figures = Figures()
    sections = [
        ("Studies", _studies_html(table)),
        ("Best of each objective", table_html(best, na_rep="", float_format=FOUR_DIGITS)),
    ]
    objectives = _objectives(studies)
    for x, y in combinations(objectives, 2):
        shared = [s for s in studies if x in s.resolved.objectives and y in s.resolved.objectives]
        if shared:
            sections.append((f"Fronts: {y} against {x}", _fronts(figures, shared, x, y, objectives)))
    return page("Batch of studies", f"{len(studies)} studies, {int(table['trials'].sum())} finished trials", sections)


def _studies_html(table: pd.DataFrame) -> str:
    """The studies table with each name a link to its report.html. The links need the table
    unescaped, so every text cell is escaped here (a model's name is whatever its spec says)."""
    shown = table.drop(columns=["report"])
    for column in shown.columns:
        if not pd.api.types.is_numeric_dtype(shown[column]):
            shown[column] = [html.escape(v) if isinstance(v, str) else v for v in shown[column]]
    shown["study"] = [
        f'<a href="{html.escape(quote(r))}">{html.escape(n)}</a>' for n, r in zip(table["study"], table["report"])
    ]
    return table_html(shown, escape=False, na_rep="")


def _fronts(figures: Figures, studies: list[StudyReport], x: str, y: str, objectives: dict[str, str]) -> str:
    """One trace per study: its front projected on (x, y). A front of exactly these two
    objectives is joined in the order of x (a staircase); a front over more objectives is
    drawn as points, since in two of its dimensions it is no curve and a line through it
    zig-zags. The legend always shows, naming the study even where only one has the pair."""
    traces = []
    for s in studies:
        front = s.front.sort_values(x)
        if front.empty:
            continue
        hover = [f"{s.resolved.study.name}: trial {t}" for t in front["trial"]]
        two = len(s.resolved.objectives) == 2
        mode = "lines+markers" if two else "markers"
        name = s.resolved.study.name + ("" if two else f" ({len(s.resolved.objectives)} objectives: points)")
        traces.append(dict(type="scatter", x=front[x], y=front[y], mode=mode, name=name, text=hover))
    if not traces:
        return "<p>No study has a feasible candidate: nothing to plot.</p>"
    layout = titled(f"{y} ({objectives[y]}) against {x} ({objectives[x]}): each study's Pareto front")
    layout |= dict(xaxis=titled(x), yaxis=titled(y), showlegend=True)
    names = ", ".join(s.resolved.study.name for s in studies)
    return f"<p>{html.escape(f'{len(studies)} studies optimise both: {names}.')}</p>" + figures.div(traces, layout)


def write_batch_dir(out_dir: Path, runs: dict[str, dict] | None = None) -> list[StudyReport]:
    """Re-render every study of the batch in `out_dir` and the combined report. `runs` are the
    figures of the run just finished; without them (`dse report` on a batch directory) the
    previous studies.csv provides them."""
    listing = _listing(out_dir / BATCH_FILE)
    if runs is None:
        runs = _previous_runs(out_dir / STUDIES_FILE)
    studies = []
    for entry in listing:
        study_dir = out_dir / entry["dir"]
        study, resolved = load_study_dir(study_dir)
        trials, front = write_reports(study, resolved, study_dir)
        studies.append(StudyReport(resolved, study_dir, trials, front, runs.get(entry["name"], {})))
    write_batch_report(out_dir, studies)
    return studies


MAX_LISTING_BYTES = 1 << 20  # batch.yaml lists names and paths: a few hundred bytes per study


def _listing(path: Path) -> list[dict]:
    """The studies of batch.yaml, each a `name` and a `dir` that stays inside the batch directory
    (the re-rendered reports are written there: a file edited to say `dir: ../..` must not move them)."""
    bad = f"report: {path} is not a batch listing"
    if path.stat().st_size > MAX_LISTING_BYTES:
        raise DseError(f"{bad} (over {MAX_LISTING_BYTES >> 20} MiB)")
    try:
        listing = safe_load(path.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise DseError(f"{bad} ({str(exc).splitlines()[0]})") from None
    studies = listing.get("studies") if isinstance(listing, dict) else None
    if not isinstance(studies, list) or not studies:
        raise DseError(f"{bad}: it needs `studies:`, a list of name and dir")
    for i, entry in enumerate(studies):
        if not (isinstance(entry, dict) and isinstance(entry.get("name"), str) and isinstance(entry.get("dir"), str)):
            raise DseError(f"{bad}: studies[{i}] needs a name and a dir")
        inside = (path.parent / entry["dir"]).resolve().is_relative_to(path.parent.resolve())
        if Path(entry["dir"]).is_absolute() or not inside:
            raise DseError(f"{bad}: studies[{i}].dir {entry['dir']!r} lies outside {path.parent}")
    return studies


def _previous_runs(path: Path) -> dict[str, dict]:
    """The run figures of the last studies.csv, by study (none when there is no such file). A
    damaged one is an error naming it: the rewrite would silently drop the figures it held."""
    if not path.is_file():
        return {}
    fix = f"delete {path} to re-render without the previous run's figures"
    try:
        table = pd.read_csv(path, encoding="utf-8")
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, ValueError) as exc:
        raise DseError(f"report: {path} is not readable ({str(exc).splitlines()[0]}); {fix}") from None
    missing = [c for c in ("study", *RUN_COLUMNS) if c not in table.columns]
    if missing:
        raise DseError(f"report: {path} has no column {', '.join(missing)}; {fix}")
    return table.drop_duplicates("study").set_index("study")[list(RUN_COLUMNS)].to_dict("index")
