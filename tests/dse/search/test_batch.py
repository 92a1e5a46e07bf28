"""`dse batch` in process: studies share one cache (each candidate simulated once in all), each
keeps its own report, and the combined report holds every front; bad batches stop with one line."""

import pandas as pd

from dse.cli.commands import main
from dse.evaluation.space import SearchSpace
from dse.spec import load_study
from dse.study import resolve_study
from tests.conftest import TINY_SPEC

# The tiny study again, judged differently: other objectives, a memory bound, another price.
SECOND = (
    TINY_SPEC.split("objectives:")[0].replace("name: tiny", "name: tiny-bounded")
    + """
objectives:
  - iteration_time_s
  - memory_gib_per_gpu
constraints:
  - {metric: memory_gib_per_gpu, max: 40}
cost:
  usd_per_gpu_hour: {H100-SXM: 7.0}
sampler: grid
budget:
  trials: 100
"""
)


def test_a_batch_simulates_each_shared_candidate_once_and_reports_every_front(write_spec, tmp_path, capsys):
    first = write_spec(TINY_SPEC.replace("sampler: tpe", "sampler: grid"), name="first.yaml")
    second = write_spec(SECOND, name="second.yaml")
    out = tmp_path / "batch"
    assert main(["batch", str(first), str(second), "--ray-address", "off", "--out", str(out), "--trials", "100"]) == 0
    studies = pd.read_csv(out / "studies.csv")
    assert list(studies["study"]) == ["tiny", "tiny-bounded"]
    space = SearchSpace.from_study(resolve_study(load_study(first)))
    distinct = len({space.resolved.kind.params_key(p) for p in space.grid()})
    # Both studies see every candidate of the (same) space; all of them are simulated once.
    assert list(studies["trials"]) == [distinct, distinct]
    assert studies["simulated"].sum() == distinct
    assert studies["simulated"].sum() + studies["shared_hits"].sum() == 2 * distinct
    fronts = pd.read_csv(out / "fronts.csv")
    for name in ("tiny", "tiny-bounded"):
        own = pd.read_csv(out / name / "pareto.csv")
        assert sorted(fronts.loc[fronts["study"] == name, "trial"]) == sorted(own["trial"])
        assert (out / name / "report.html").is_file()
    page = (out / "batch.html").read_text()
    assert 'href="tiny/report.html"' in page and "Fronts: " in page
    assert "tiny-bounded" in (out / "batch.md").read_text()
    assert f"{distinct} simulated" in capsys.readouterr().out.replace("\n", " ")
    assert main(["report", str(out)]) == 0  # the combined report re-renders from the directory
    assert pd.read_csv(out / "studies.csv")["simulated"].sum() == distinct


def test_a_batch_resumed_takes_every_outcome_from_its_cache_file(write_spec, tmp_path):
    spec = write_spec(SECOND, name="second.yaml")
    out = tmp_path / "batch"
    assert main(["batch", str(spec), "--ray-address", "off", "--out", str(out), "--trials", "20"]) == 0
    assert main(["batch", str(spec), "--ray-address", "off", "--out", str(out), "--trials", "30", "--resume"]) == 0
    studies = pd.read_csv(out / "studies.csv")
    assert studies["trials"].tolist() == [30] and studies["simulated"].tolist() == [10]


def test_two_studies_of_one_name_or_a_bad_spec_stop_the_batch_before_it_starts(write_spec, tmp_path, capsys):
    spec = write_spec(name="one.yaml")
    same = write_spec(name="two.yaml")
    assert main(["batch", str(spec), str(same), "--ray-address", "off", "--out", str(tmp_path / "b")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "two.yaml: name: 'tiny' is also the name of" in err
    bad = write_spec(TINY_SPEC.replace("name: tiny", "name: bad").replace("tp: [1, 2, 4]", "tp: [3]"), name="bad.yaml")
    assert main(["batch", str(spec), str(bad), "--ray-address", "off", "--out", str(tmp_path / "c")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"dse: error: {bad}: search.tp") and err.count("\n") == 1
    assert not (tmp_path / "b").exists() and not (tmp_path / "c").exists()


def test_batch_fronts_join_two_objective_fronts_and_plot_others_as_points():
    """A front over three objectives is no curve in two of them: it is drawn as points, not a
    zig-zag line; a lone study still gets its legend entry."""
    from types import SimpleNamespace

    from dse.report.batch import StudyReport, _fronts
    from dse.report.html_page import Figures

    def study(name, objectives):
        front = pd.DataFrame({"trial": [1, 2, 3], "a": [3.0, 1.0, 2.0], "b": [1.0, 3.0, 2.0]})
        resolved = SimpleNamespace(study=SimpleNamespace(name=name), objectives=objectives)
        return StudyReport(resolved, None, front, front, {})

    names = {"a": "minimize", "b": "minimize"}
    page = _fronts(Figures(), [study("two", ("a", "b")), study("three", ("a", "b", "c"))], "a", "b", names)
    assert '"mode":"lines+markers","name":"two"' in page
    assert '"mode":"markers","name":"three (3 objectives: points)"' in page
    assert '"showlegend":true' in page and "2 studies optimise both: two, three." in page
