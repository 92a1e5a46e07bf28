"""The journal's writes grouped by trial (dse.search.journal): a trial asked but not told is
held in memory; telling it writes the whole trial at once; what reaches the file is the same
journal Optuna would have written entry by entry, and reads back as the same study."""

from __future__ import annotations

import json

import optuna

from dse.search.journal import journal_storage


def _lines(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _study(path) -> optuna.Study:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = journal_storage(path)
    return optuna.create_study(study_name="s", storage=storage, sampler=optuna.samplers.RandomSampler(seed=1))


def test_a_trial_reaches_the_file_when_told_and_not_before(tmp_path):
    path = tmp_path / "study.journal"
    study = _study(path)
    on_disk = len(_lines(path))  # the study's creation is written at once
    trial = study.ask()
    for i in range(20):
        trial.suggest_int(f"x{i}", 0, 9)
    trial.set_user_attr("note", "held")
    assert len(_lines(path)) == on_disk  # creation, 20 params, one attribute: all held
    study.tell(trial, 1.0)
    written = _lines(path)[on_disk:]
    assert len(written) == 1 + 20 + 1 + 1  # ... and the tell, written together
    assert [e["op_code"] for e in written][
        -1
    ] == optuna.storages.journal._storage.JournalOperation.SET_TRIAL_STATE_VALUES


def test_the_grouped_journal_reads_back_as_the_study_that_wrote_it(tmp_path):
    path = tmp_path / "study.journal"
    study = _study(path)
    study.optimize(lambda t: t.suggest_float("x", -1, 1) ** 2 + t.suggest_int("n", 0, 3), n_trials=15)
    running = study.ask()
    running.suggest_float("x", -1, 1)
    study.set_user_attr("after", 1)  # a study entry writes the held trial with it
    again = optuna.load_study(study_name="s", storage=journal_storage(path))
    assert [(t.number, t.state, t.params, t.values) for t in again.trials] == [
        (t.number, t.state, t.params, t.values) for t in study.trials
    ]
    assert again.user_attrs == {"after": 1}


def test_flush_writes_a_trial_that_was_never_told(tmp_path):
    """What an interrupted run leaves for --resume: the running trial with its params."""
    path = tmp_path / "study.journal"
    storage = journal_storage(path)
    study = optuna.create_study(study_name="s", storage=storage)
    study.ask().suggest_int("k", 1, 5)
    assert optuna.load_study(study_name="s", storage=journal_storage(path)).trials == []
    storage.flush()
    (trial,) = optuna.load_study(study_name="s", storage=journal_storage(path)).trials
    assert trial.state == optuna.trial.TrialState.RUNNING and set(trial.params) == {"k"}
