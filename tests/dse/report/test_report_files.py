"""The study directory after `dse search`, and `dse report DIR` re-rendering it from DIR alone."""

import json
import re
import shlex
import shutil
import textwrap

import pandas as pd
import pytest
from optuna.trial import TrialState

from dse.cli.commands import main
from dse.report.files import save_spec
from dse.search.engine import RunSettings, run_search
from dse.spec import load_study
from dse.study import resolve_study
from tests.dse.conftest import REPORT_SPEC

FILES = (
    "trials.csv",
    "trials.parquet",
    "pareto.csv",
    "summary.md",
    "pareto.png",
    "report.html",
    "spec.yaml",
    "study.journal",
)
REPORT_OBJECTIVES = {
    "iteration_time_s": "minimize",
    "tokens_per_s_per_gpu": "maximize",
    "memory_gib_per_gpu": "minimize",
}


def test_search_writes_every_report_file(reported_study):
    for name in FILES:
        assert (reported_study / name).stat().st_size > 0, name
    assert (reported_study / "pareto.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_parquet_holds_the_same_table_as_the_csv(reported_study):
    parquet = pd.read_parquet(reported_study / "trials.parquet")
    csv = pd.read_csv(reported_study / "trials.csv")
    assert list(parquet.columns) == list(csv.columns) and len(parquet) == len(csv) == 24
    pd.testing.assert_frame_equal(_plain(parquet), _plain(csv))


def _plain(frame: pd.DataFrame) -> pd.DataFrame:
    """Values as Python objects with None for missing, so CSV's float NaN and parquet's typed
    nulls (Int64, all-null columns) compare by value."""
    return frame.astype(object).where(frame.notna(), None)


def _best_sections(summary: str) -> dict[str, tuple[float, str]]:
    """objective -> (the value in bold, the reproduce command) from summary.md."""
    found = {}
    for section in summary.split("\n## Best ")[1:]:
        objective = section.split(" ", 1)[0]
        value = re.search(rf"{objective} = \*\*([^*]+)\*\*", section).group(1)
        command = re.search(r"```\n(dse simulate .+)\n```", section).group(1)
        found[objective] = (float(value), command)
    return found


def test_summary_gives_the_best_feasible_value_of_each_objective(reported_study):
    trials = pd.read_csv(reported_study / "trials.csv")
    feasible = trials[trials["feasible"]]
    best = _best_sections((reported_study / "summary.md").read_text())
    assert set(best) == set(REPORT_OBJECTIVES)
    for objective, direction in REPORT_OBJECTIVES.items():
        expected = feasible[objective].min() if direction == "minimize" else feasible[objective].max()
        assert best[objective][0] == pytest.approx(expected, rel=1e-5)


def test_summary_commands_reproduce_each_best_candidate(reported_study, capsys):
    for objective, (value, command) in _best_sections((reported_study / "summary.md").read_text()).items():
        words = shlex.split(command)
        assert words[:2] == ["dse", "simulate"]
        capsys.readouterr()
        assert main([*words[1:], "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["metrics"][objective] == pytest.approx(value, rel=1e-5)


def test_summary_states_the_final_hypervolume_and_its_reference(reported_study):
    text = (reported_study / "summary.md").read_text().split("## Hypervolume")[1]
    value = float(re.search(r"([0-9.]+) after 24 trials", text).group(1))
    assert 0 < value <= 1
    assert all(f"{m} = " in text for m in REPORT_OBJECTIVES)


def test_pareto_csv_carries_time_and_memory_breakdowns_that_add_up(reported_study):
    front = pd.read_csv(reported_study / "pareto.csv")
    assert len(front) > 1
    times = front.filter(regex=r"^breakdown_.*_s$").sum(axis=1)
    memory = front[[f"memory_{p}_gib" for p in ("weights", "gradients", "optimizer", "activations", "reserve")]]
    assert times.to_numpy() == pytest.approx(front["iteration_time_s"].to_numpy(), rel=1e-9)
    assert memory.sum(axis=1).to_numpy() == pytest.approx(front["memory_gib_per_gpu"].to_numpy(), rel=1e-9)
    assert (memory["memory_weights_gib"] > 0).all()
    shares = front[["goodput_fraction", "checkpoint_overhead_fraction", "lost_work_fraction", "restart_fraction"]]
    assert shares.sum(axis=1).to_numpy() == pytest.approx(1.0, rel=1e-9)


def test_saved_spec_reloads_to_the_spec_that_ran_with_its_overrides(reported_study):
    saved = load_study(reported_study / "spec.yaml")
    ran = load_study(reported_study.parent / "spec.yaml", **{"budget.trials": 24, "output": str(reported_study)})
    assert saved == ran and saved.budget.trials == 24


def test_html_is_self_contained_with_a_div_per_plot(reported_study):
    page = (reported_study / "report.html").read_text()
    assert not re.search(r"<script[^>]+src=|<link\b|<iframe\b", page)  # nothing to fetch
    assert page.count("Plotly.newPlot(") == len(re.findall(r'<div id="plot-\d+"', page))
    # 3 pairs + 3-D + parallel coordinates + time, memory and goodput bars + hypervolume history
    assert len(re.findall(r'<div id="plot-\d+"', page)) == 9
    assert "<h2>Goodput under failures</h2>" in page
    assert "name: reported" in page and "<h2>Spec</h2>" in page


def test_report_rewrites_every_file_from_the_directory_alone(reported_study, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(reported_study, copy)
    for name in FILES[:-2]:  # leave spec.yaml and the journal, the inputs
        (copy / name).unlink()
    assert main(["report", str(copy)]) == 0
    for name in ("trials.csv", "pareto.csv", "trials.parquet"):
        assert (copy / name).read_bytes() == (reported_study / name).read_bytes(), name
    summary = (reported_study / "summary.md").read_text().replace(str(reported_study), str(copy))
    assert (copy / "summary.md").read_text() == summary
    assert (copy / "report.html").stat().st_size > 0 and (copy / "pareto.png").stat().st_size > 0


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda d: d / "missing", "is not a directory"),
        (lambda d: d, "holds no spec.yaml"),
        (lambda d: (d / "spec.yaml").write_text(textwrap.dedent(REPORT_SPEC)) and d, "holds no study.journal"),
    ],
)
def test_report_on_a_bad_directory_is_one_line_and_exit_2(tmp_path, capsys, make, message):
    assert main(["report", str(make(tmp_path))]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("dse: error: report: ") and message in err


def test_report_renders_an_interrupted_study_from_its_finished_trials(write_spec, tmp_path):
    out = tmp_path / "out"
    study = load_study(write_spec(), output=str(out))
    seen = []

    def interrupt_after_nine(number, outcome):
        seen.append(number)
        if len(seen) == 9:
            raise KeyboardInterrupt

    summary = run_search(resolve_study(study), RunSettings(out, None, "off"), on_trial=interrupt_after_nine)
    assert summary.stopped_because == "interrupted"
    assert any(t.state == TrialState.RUNNING for t in summary.study.get_trials(deepcopy=False))
    save_spec(study, out)  # what `dse search` does as the study opens
    assert main(["report", str(out)]) == 0
    trials = pd.read_csv(out / "trials.csv")
    assert len(trials) == 9 and trials["trial"].is_unique
    assert "9 finished trials" in (out / "summary.md").read_text()
    # Resumed, the cut-short trials are failed and flagged; the report leaves them out too.
    summary = run_search(resolve_study(study), RunSettings(out, None, "off", resume=True))
    flagged = {t.number for t in summary.study.get_trials(deepcopy=False) if t.user_attrs.get("interrupted")}
    assert flagged and main(["report", str(out)]) == 0
    trials = pd.read_csv(out / "trials.csv")
    assert len(trials) == 30 and not flagged & set(trials["trial"])


def test_report_with_no_feasible_trial_says_so_everywhere(infeasible_study):
    assert pd.read_csv(infeasible_study / "pareto.csv").empty
    assert "No feasible trial" in (infeasible_study / "summary.md").read_text()
    page = (infeasible_study / "report.html").read_text()
    assert "No feasible trial: nothing to plot." in page and 'id="plot-' not in page
    assert (infeasible_study / "pareto.png").stat().st_size > 0


@pytest.mark.parametrize(
    ("objectives", "plots", "hypervolume"),
    [
        # one objective: its value per trial, parallel coordinates, three bars, the history
        (["usd_per_mtok"], 6, "after 8 trials"),
        # five: ten pairs, parallel coordinates, three bars; no history past the exact method's limit
        (["iteration_time_s", "tokens_per_s", "mfu", "memory_gib_per_gpu", "usd_per_hour"], 14, "Not computed"),
    ],
)
def test_reports_for_one_objective_and_past_the_hypervolume_limit(write_spec, tmp_path, objectives, plots, hypervolume):
    listed = "".join(f"\n  - {m}" for m in objectives)
    spec = write_spec(REPORT_SPEC.split("objectives:")[0] + f"objectives:{listed}\nbudget:\n  trials: 8\n")
    out = tmp_path / "out"
    assert main(["search", str(spec), "--ray-address", "off", "--out", str(out)]) == 0
    page = (out / "report.html").read_text()
    assert len(re.findall(r'<div id="plot-\d+"', page)) == plots
    assert hypervolume in (out / "summary.md").read_text().split("## Hypervolume")[1]
    assert len(_best_sections((out / "summary.md").read_text())) == len(objectives)


def test_a_training_report_shows_its_spec_without_the_serving_settings(reported_study):
    """spec.yaml holds every field, serving's defaults too; the page shows what a training
    study uses, and says what it left out."""
    assert "\nserving:\n" in (reported_study / "spec.yaml").read_text()
    spec = (reported_study / "report.html").read_text().split("<h2>Spec</h2>")[1]
    assert "\ntraining:\n" in spec and "\nserving:" not in spec and "latency_load" not in spec
    assert "serving: unused by a training study, left out here" in spec


def test_parallel_degrees_are_on_log_axes(reported_study):
    """tp 1, 2, 4 are plotted at log2 0, 1, 2 with the degrees as tick labels."""
    from dse.report.html_page import _numeric_axis

    axis = _numeric_axis("tp", pd.Series([1, 4, 2, 4]))
    assert list(axis["values"]) == [0, 2, 1, 2] and axis["ticktext"] == ["1", "2", "4"]
    assert list(_numeric_axis("pp", pd.Series([1, 2]))["values"]) == [1, 2]  # a factor 2: kept linear
