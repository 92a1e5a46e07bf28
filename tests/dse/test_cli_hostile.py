"""Hostile command lines: every bad flag, file or path ends in one line naming what is wrong and
exit status 2, never a traceback; HTML never carries user text unescaped (issue 14)."""

from __future__ import annotations

import csv

import pytest

from dse.cli import main
from tests.conftest import TINY_PARAMS

FIXED = ["--set", "num_gpus=8", "--set", "tp=1", "--set", "pp=1", "--set", "micro_batch=1", "--set", "recompute=none"]


def _refused(capsys, argv: list[str], *expected: str) -> str:
    """Run the CLI, assert exit 2 with one line on stderr holding every `expected`; return it."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("dse"), err
    for text in expected:
        assert text in err, err
    return err


@pytest.mark.parametrize(
    ("assignment", "expected"),
    [
        ("tp=0", ["--set tp=0", "search.tp", "below 1"]),
        ("gpu=NOPE", ["--set gpu=NOPE", "allowed: H100-SXM"]),
        ("gpu=H100-SXN", ["did you mean 'H100-SXM'?"]),
        ("gpu=H200", ["not a GPU of this spec"]),  # in the catalogue, but the spec has no price for it
        ("recompute=selctive", ["--set recompute=selctive", "allowed: none, selective, full"]),
        ("zero_stage=7", ["allowed: 0, 1, 2, 3"]),
        ("fabric=fat-tre", ["hardware.fabric.family"]),
        ("tpp=2", ["did you mean 'tp'?", "knobs: gpu"]),
        ("tp=two", ["tp='two' is not an integer"]),
        ("sequence_parallel=yes", ["true or false"]),
        ("tp", ["'tp' is not knob=value"]),
    ],
)
def test_simulate_refuses_a_bad_set_in_one_line(write_spec, capsys, assignment, expected):
    _refused(capsys, ["simulate", str(write_spec()), *FIXED, "--set", assignment], *expected)


def test_simulate_still_explains_a_plan_that_cannot_run(write_spec, capsys):
    """A value the spec's types allow but the plan cannot use is a finding, not a usage error."""
    assert main(["simulate", str(write_spec()), *FIXED, "--set", "tp=3", "--json"]) == 0
    assert "not a multiple of tp*pp*cp" in capsys.readouterr().out


def _front(path, **changes) -> None:
    params = {**TINY_PARAMS, **changes}
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(params)
        writer.writerow(params.values())


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"", "is empty"),
        (bytes(range(256)) * 8, "is not a readable CSV"),
        (b'a,b\n1,2,3,4\n"unterminated\n', "is not a readable CSV"),
        (b"a,b\n1,2\n", "is not a pareto.csv of this study"),
    ],
)
def test_config_best_refuses_a_damaged_pareto_csv(write_spec, tmp_path, capsys, content, expected):
    study = tmp_path / "study"
    study.mkdir()
    (study / "pareto.csv").write_bytes(content)
    argv = ["simulate", str(write_spec()), "--config", "best", "--study", str(study)]
    _refused(capsys, argv, "--config:", str(study / "pareto.csv"), expected)


def test_config_best_checks_each_cell_like_a_set(write_spec, tmp_path, capsys):
    study = tmp_path / "study"
    study.mkdir()
    _front(study / "pareto.csv", tp=0)
    argv = ["simulate", str(write_spec()), "--config", "best", "--study", str(study)]
    _refused(capsys, argv, "pareto.csv tp=0", "below 1")
    _front(study / "pareto.csv", recompute="selctive")
    _refused(capsys, argv, "allowed: none, selective, full")


def test_config_best_reads_a_sound_front(write_spec, tmp_path, capsys):
    study = tmp_path / "study"
    study.mkdir()
    _front(study / "pareto.csv")
    assert main(["simulate", str(write_spec()), "--config", "best", "--study", str(study), "--json"]) == 0
    assert '"tp": 1' in capsys.readouterr().out
