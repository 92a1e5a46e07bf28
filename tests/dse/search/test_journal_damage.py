"""A study journal damaged on disk, and two runs on one study directory (issue 14).

A cut last line (a crash mid-write) is truncated with a warning, and the study reads and resumes;
damage in the middle is one error naming file:line (exit 2, no traceback); a journal that lost
trials never rewrites trials.csv; a second run on a directory another run holds is refused.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from optuna.storages.journal._storage import JournalOperation

from dse.cli.commands import main
from dse.search.journal import JournalError, journal_storage
from dse.search.studylock import LOCK_FILE, StudyLockedError, study_lock
from tests.conftest import TINY_SPEC

ROOT = Path(__file__).resolve().parents[3]
TRIALS = 10


@pytest.fixture(scope="module")
def searched(tmp_path_factory) -> Path:
    """A finished study of TRIALS trials, searched once; each test damages its own copy."""
    root = tmp_path_factory.mktemp("searched")
    spec = root / "spec.yaml"
    spec.write_text(textwrap.dedent(TINY_SPEC))
    assert main(["search", str(spec), "--ray-address", "off", "--out", str(root / "out"), "--trials", str(TRIALS)]) == 0
    return root


@pytest.fixture
def study(searched, tmp_path) -> Path:
    shutil.copytree(searched, tmp_path, dirs_exist_ok=True)
    return tmp_path / "out"


def resume(study: Path, trials: int) -> int:
    spec = study.parent / "spec.yaml"
    return main(["search", str(spec), "--ray-address", "off", "--out", str(study), "--resume", "--trials", str(trials)])


def one_line_error(capsys) -> str:
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if not line.startswith("dse: warning:")]
    assert len(lines) == 1 and lines[0].startswith("dse: error: ") and "Traceback" not in err, err
    return lines[0]


def test_a_cut_last_line_is_dropped_with_a_warning_and_the_study_reports_and_resumes(study, capsys):
    journal = study / "study.journal"
    last = journal.read_bytes().splitlines(keepends=True)[-1]
    with journal.open("ab") as file:
        file.write(last[:40])  # a driver killed while it wrote its next entry
    capsys.readouterr()
    assert main(["report", str(study)]) == 0
    err = capsys.readouterr().err
    assert f"dse: warning: {journal}: its last line was cut" in err and "dropped those 40 bytes" in err
    assert journal.read_bytes().endswith(b"\n")
    assert resume(study, TRIALS + 4) == 0  # appends after a complete line: the journal stays readable
    assert "warning" not in capsys.readouterr().err
    assert main(["report", str(study)]) == 0
    assert len(pd.read_csv(study / "trials.csv")) == TRIALS + 4


@pytest.mark.parametrize(
    "line, problem",
    [
        (b"garbage\n", "not a JSON entry"),
        (b'{"hello": "world"}\n', "not an Optuna journal entry"),
        (b'{"op_code": [4], "worker_id": "w"}\n', "not an Optuna journal entry"),
        (b'{"op_code": true, "worker_id": "w"}\n', "not an Optuna journal entry"),
        (b"[1, 2]\n", "not a journal entry (a JSON list"),
        (b"\xff\xfe\n", "not UTF-8 text"),
        (b"\n", "not a JSON entry"),
        (b"1" * 5000 + b"\n", "not a JSON entry (a number too long to read)"),
        (b'{"op_code": 6, "worker_id": "w"}\n', "an entry Optuna cannot replay"),  # well-formed, does not fit
        (
            # a trial created with its params (as the engine writes them) whose distribution is not one
            b'{"op_code": 4, "worker_id": "w", "study_id": 0, "datetime_start": null, "distributions": {"x": "[]"}, '
            b'"params": {"x": 1}}\n',
            "an entry Optuna cannot replay",
        ),
    ],
)
def test_a_damaged_line_in_the_middle_is_one_error_naming_file_and_line(study, capsys, line, problem):
    journal = study / "study.journal"
    lines = journal.read_bytes().splitlines(keepends=True)
    journal.write_bytes(b"".join([*lines[:20], line, *lines[20:]]))
    before = journal.read_bytes()
    for command in (["report", str(study)], None):
        assert (main(command) if command else resume(study, TRIALS + 4)) == 2
        error = one_line_error(capsys)
        assert f"{journal}:21: {problem}" in error
    assert journal.read_bytes() == before  # nothing appended after the damage


def test_a_journal_cut_in_half_never_rewrites_trials_csv(study, capsys):
    journal, trials = study / "study.journal", study / "trials.csv"
    written = trials.read_bytes()
    lines = journal.read_bytes().splitlines(keepends=True)
    told = [i for i, line in enumerate(lines) if json.loads(line)["op_code"] == JournalOperation.SET_TRIAL_STATE_VALUES]
    journal.write_bytes(b"".join(lines[: told[len(told) // 2]]))  # half the told trials lose their outcome
    assert main(["report", str(study)]) == 2
    error = one_line_error(capsys)
    assert f"{trials} lists" in error and "the journal lost them" in error
    assert trials.read_bytes() == written
    cut = journal.read_bytes()
    assert resume(study, TRIALS + 4) == 2  # nor does a resumed search go on from the partial study
    assert "the journal lost them" in one_line_error(capsys)
    assert journal.read_bytes() == cut and trials.read_bytes() == written


HOLD = """
import sys
from pathlib import Path
from dse.search.studylock import study_lock
with study_lock(Path(sys.argv[1])):
    print("held", flush=True)
    sys.stdin.read()
"""


def test_a_second_run_on_a_held_study_directory_is_refused_naming_it_and_the_holder(study, capsys):
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(study)], cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline() == "held\n"
        journal = (study / "study.journal").read_bytes()
        for command in (["report", str(study)], None):
            assert (main(command) if command else resume(study, TRIALS + 4)) == 2
            error = one_line_error(capsys)
            assert f"{study} is in use by another dse run (pid {holder.pid}, holding {study / LOCK_FILE})" in error
        assert (study / "study.journal").read_bytes() == journal
    finally:
        holder.communicate("")
    with study_lock(study):  # the holder gone, its lock went with it
        pass


def test_the_lock_is_reentrant_in_one_process_and_exclusive_across_descriptors(tmp_path):
    import fcntl
    import os

    with study_lock(tmp_path), study_lock(tmp_path):  # a search writing its reports under its own lock
        fd = os.open(tmp_path / LOCK_FILE, os.O_RDWR)
        with pytest.raises(BlockingIOError):
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.close(fd)
    fd = os.open(tmp_path / LOCK_FILE, os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # released when the outer hold ends
    with pytest.raises(StudyLockedError, match=f"pid {os.getpid()}"):
        with study_lock(tmp_path):
            pass
    os.close(fd)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(damage=st.binary(max_size=120), at=st.integers(min_value=0), cut=st.integers(min_value=0, max_value=300))
def test_any_damage_either_reads_or_is_a_journal_error(searched, tmp_path, damage, at, cut):
    """Bytes inserted at a line boundary and a tail cut anywhere: the journal opens, or the one
    error names it; never another exception."""
    lines = (searched / "out" / "study.journal").read_bytes().splitlines(keepends=True)
    at %= len(lines) + 1
    data = b"".join([*lines[:at], damage, *lines[at:]])
    path = tmp_path / "study.journal"
    path.write_bytes(data[: max(0, len(data) - cut)])
    try:
        journal_storage(path)
    except JournalError as exc:
        assert str(exc).startswith(f"journal: {path}")
    assert path.read_bytes().endswith(b"\n") or not path.read_bytes()


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=6,
)
FIELDS = (
    "study_id trial_id study_name directions user_attr system_attr param_name param_value_internal distribution "
    "state values value datetime_start datetime_complete distributions params user_attrs system_attrs "
    "intermediate_values step intermediate_value trial_ids"
).split()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    entry=st.fixed_dictionaries(
        {"op_code": st.integers(0, 10), "worker_id": st.text(max_size=4)},
        optional={name: JSON | st.integers(0, 12) for name in FIELDS},
    ),
    at=st.integers(min_value=0),
)
def test_a_well_formed_entry_that_does_not_fit_is_a_journal_error(searched, tmp_path, entry, at):
    """Entries with real op codes and arbitrary fields: Optuna replays them, or the one error."""
    lines = (searched / "out" / "study.journal").read_bytes().splitlines(keepends=True)
    at %= len(lines) + 1
    path = tmp_path / "study.journal"
    path.write_bytes(b"".join([*lines[:at], json.dumps(entry).encode() + b"\n", *lines[at:]]))
    try:
        journal_storage(path)
    except JournalError as exc:
        line = int(str(exc).removeprefix(f"journal: {path}:").split(":")[0])  # this entry, or one it misleads
        assert line > at and "an entry Optuna cannot replay" in str(exc)
