"""What the terminal shows around a search: the rate, the bar's total, the resume hint, and an
interruption before the study exists."""

import pytest

from dse.cli.commands import main
from dse.cli.parser import build_parser
from dse.cli.progress import rate_text
from dse.cli.studies import _given_flags
from dse.evaluation.space import SearchSpace
from dse.search.engine import RunSettings, run_search
from dse.spec import load_study
from dse.study import resolve_study
from tests.conftest import TINY_SPEC


@pytest.mark.parametrize(
    "trials,elapsed_s,shown",
    [(4, 10.0, "2.5 s/trial"), (1, 90.0, "90.0 s/trial"), (5, 2.0, "2.5 trials/s"), (3000, 2.0, "1,500 trials/s")],
)
def test_rate_reads_in_seconds_per_trial_below_one_trial_a_second(trials, elapsed_s, shown):
    assert rate_text(trials, elapsed_s) == shown


def test_resume_hint_repeats_the_budget_and_places_the_user_gave():
    args = build_parser().parse_args(
        ["search", "s.yaml", "--trials", "200", "--timeout", "90", "--seed", "3", "--out", "runs/a"]
    )
    assert _given_flags(args) == " --trials 200 --timeout 90 --seed 3 --out runs/a"
    assert _given_flags(build_parser().parse_args(["search", "s.yaml"])) == ""
    on_a_cluster = build_parser().parse_args(["search", "s.yaml", "--ray-address", "10.0.0.1:6379"])
    assert _given_flags(on_a_cluster) == " --ray-address 10.0.0.1:6379"


def test_a_grid_smaller_than_the_budget_ends_its_bar_at_its_size(write_spec, tmp_path):
    small = TINY_SPEC.replace("num_gpus: [8, 16]", "num_gpus: [8]").replace("tp: [1, 2, 4]", "tp: [1, 2]")
    resolved = resolve_study(load_study(write_spec(small), sampler="grid", **{"budget.trials": 500}))
    plans = len(SearchSpace.from_study(resolved).grid())
    assert plans < 500
    totals = []
    settings = RunSettings(tmp_path / "out", None, "off", False)
    summary = run_search(resolved, settings, on_start=lambda total, prior: totals.append(total))
    assert totals == [plans] and summary.finished == plans


def test_an_interruption_during_ray_start_up_says_nothing_was_created(write_spec, tmp_path, capsys, monkeypatch):
    import dse.search.engine as engine

    def interrupted(address):
        raise KeyboardInterrupt

    monkeypatch.setattr(engine, "make_executor", interrupted)
    spec, out = write_spec(), tmp_path / "out"
    assert main(["search", str(spec), "--out", str(out)]) == 130
    err = capsys.readouterr().err.strip()
    assert "before the study was created" in err and "without --resume" in err and len(err.splitlines()) == 1
    monkeypatch.undo()
    assert main(["search", str(spec), "--out", str(out), "--resume", "--ray-address", "off"]) == 2
    assert "during Ray start-up" in capsys.readouterr().err
