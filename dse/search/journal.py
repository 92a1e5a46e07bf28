"""The study journal, checked before Optuna reads it, and trials.csv kept from a partial read.

Optuna's JournalFileBackend skips a cut last line but appends after it, so the next run joins
the fragment and its own first entry into one undecodable line; from then on every read ends in
a bare JSONDecodeError (or a KeyError, for a foreign line) and the study is lost. So before the
journal is opened a cut tail is truncated (dse.search.jsonlines), and any line Optuna could not replay
is one DseError naming the file and line. A journal cut short (or replaced by an older copy)
reads as a smaller study: `check_trials_kept` refuses to go on, rather than let a report or a
resumed search rewrite trials.csv without the trials only trials.csv still lists.

Writes are grouped by trial: what only concerns a trial still running (its creation, params,
attributes) is held in memory and written, with one fsync, together with the entry that finishes
it (or any other entry, or `flush`); the engine tells each group of results that comes back
inside `together()`, so the group's trials are one write. Optuna writes and syncs every entry alone, 26 per trial of a
20-knob study, which was a third of the search loop's time; a finished trial is on disk as soon
as it is told, as before, and only a trial that was never told can be lost with the process.
"""

from __future__ import annotations

import contextlib
import csv
import json
from collections.abc import Collection, Iterator
from pathlib import Path
from typing import Any

import optuna
from optuna.storages.journal._storage import JournalOperation

from dse.errors import DseError
from dse.search.jsonlines import repair_tail

LOCK_GRACE_S = 3
TRIALS_FILE = "trials.csv"
_OP_CODES = frozenset(int(op) for op in JournalOperation)


class JournalError(DseError, ValueError):
    """A study journal that cannot be read as it is, or that has lost trials."""


def journal_storage(path: Path) -> optuna.storages.JournalStorage:
    """The journal file's storage, once `check_journal` passes. The caller holds the study
    directory's lock (dse.search.studylock), so no other run is writing the tail being repaired.

    Optuna's own file lock is held for milliseconds per write, so one older than a few seconds
    was left by a driver that was killed: it is taken over after `LOCK_GRACE_S` (Optuna's
    default waits 30 s before `--resume` can start)."""
    check_journal(path)
    lock = optuna.storages.journal.JournalFileOpenLock(str(path), grace_period=LOCK_GRACE_S)
    backend = _TrialGroupedBackend(str(path), lock_obj=lock)
    try:
        return HeldJournalStorage(backend)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError, AssertionError) as exc:  # a misfit entry
        raise JournalError(
            f"journal: {path}:{backend.entries}: an entry Optuna cannot replay ({type(exc).__name__}: {exc}); "
            "restore the file from a copy"
        ) from None


class HeldJournalStorage(optuna.storages.JournalStorage):
    """Optuna's journal storage over `_TrialGroupedBackend`; `flush` writes what it holds, and
    within `together()` every entry is held and written at its end in one append."""

    def __init__(self, backend: _TrialGroupedBackend) -> None:
        super().__init__(backend)
        self.flush = backend.flush
        self.together = backend.together


# Entries that only touch a trial still running: held until an entry of another kind is written.
_HELD_OPS = frozenset(
    {
        JournalOperation.CREATE_TRIAL,
        JournalOperation.SET_TRIAL_PARAM,
        JournalOperation.SET_TRIAL_USER_ATTR,
        JournalOperation.SET_TRIAL_SYSTEM_ATTR,
        JournalOperation.SET_TRIAL_INTERMEDIATE_VALUE,
    }
)


class _TrialGroupedBackend(optuna.storages.journal.JournalFileBackend):
    """Holds a running trial's entries until one of another kind (module docstring), and counts
    the entries handed to Optuna, so the one it fails to replay is named by its line.

    The file is read once, when Optuna opens it; after that the caller's lock on the study
    directory means only this backend appends, so Optuna's reads are answered from the entries
    appended since its last read, without reopening and rescanning the file each time."""

    entries = 0

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._scanned = False
        self._count = 0  # entries in the journal, written or held
        self._unread: list[dict[str, Any]] = []  # appended since Optuna's last read: the last of _count
        self._held: list[dict[str, Any]] = []  # appended, not yet written
        self._together = 0  # depth of `together()`: while above 0 every entry is held

    def read_logs(self, log_number_from: int) -> Iterator[dict[str, Any]]:
        first_unread = self._count - len(self._unread)
        if self._scanned and log_number_from >= first_unread:
            unread, self._unread = self._unread[log_number_from - first_unread :], []
            yield from unread
            return
        self.flush()
        for self.entries, entry in enumerate(super().read_logs(log_number_from), start=log_number_from + 1):
            yield entry
        self._scanned, self._count, self._unread = True, max(self.entries, log_number_from), []

    def append_logs(self, logs: list[dict[str, Any]]) -> None:
        self._held.extend(logs)
        self._unread.extend(logs)
        self._count += len(logs)
        if not self._together and any(log["op_code"] not in _HELD_OPS for log in logs):
            self.flush()

    @contextlib.contextmanager
    def together(self) -> Iterator[None]:
        """Hold every entry appended inside, and write them all (one append, one fsync) at its end,
        even when it ends by an exception: a group of trials told together reaches the file together."""
        self._together += 1
        try:
            yield
        finally:
            self._together -= 1
            if not self._together:
                self.flush()

    def flush(self) -> None:
        """Write the held entries (one append, one fsync)."""
        if self._held:
            super().append_logs(self._held)
            self._held = []


def check_journal(path: Path) -> None:
    """Truncate a cut last line (with a warning), then refuse the first line that is not an
    Optuna journal entry. A file that does not exist yet is left for Optuna to create. The scan
    costs about a fifth of Optuna's own replay (13 against 70 us per entry, measured on a
    55 MB journal of a tiny study)."""
    if not path.exists():
        return
    if not path.is_file():
        raise JournalError(f"journal: {path} is not a regular file")
    try:
        file = path.open("r+b")
    except OSError as exc:
        raise JournalError(f"journal: cannot open {path} ({exc.strerror})") from None
    with file:
        repair_tail(file, path)
        file.seek(0)
        for number, line in enumerate(file, start=1):
            problem = _problem(line)
            if problem:
                keep = f"keep the {number - 1} entries before it by truncating the file there" if number > 1 else ""
                raise JournalError(
                    f"journal: {path}:{number}: {problem}; the study cannot be read past it "
                    f"(restore the file from a copy{', or ' + keep if keep else ''})"
                )


def _problem(line: bytes) -> str | None:
    """What keeps Optuna from replaying one line, or None."""
    try:
        entry = json.loads(line)
    except UnicodeDecodeError:
        return "not UTF-8 text"
    except json.JSONDecodeError as exc:
        return f"not a JSON entry ({exc.msg} at column {exc.colno})"
    except ValueError:  # an integer of more digits than Python converts
        return "not a JSON entry (a number too long to read)"
    if not isinstance(entry, dict):
        return f"not a journal entry (a JSON {type(entry).__name__}, not an object)"
    op = entry.get("op_code")
    if type(op) is not int or op not in _OP_CODES or not isinstance(entry.get("worker_id"), str):
        return "not an Optuna journal entry (no known op_code and worker_id)"
    return None


def check_trials_kept(out_dir: Path, finished: Collection[int], storage: object) -> None:
    """Refuse when `out_dir`'s trials.csv lists trials that `storage` no longer holds finished
    (`finished` are the numbers it does): its journal lost them, and going on would rewrite
    trials.csv without them. The user moves trials.csv away to go on with what remains."""
    path = out_dir / TRIALS_FILE
    lost = sorted(_listed(path) - set(finished))
    if lost:
        raise JournalError(
            f"journal: {storage} holds {len(finished)} finished trials, but {path} lists {len(lost)} it does not "
            f"hold (trial {lost[0]} first): the journal lost them (cut short or replaced?); the reports are left "
            f"as they are; restore the journal, or move {path} away to go on with the {len(finished)} it holds"
        )


def _listed(path: Path) -> set[int]:
    """The trial numbers a trials.csv lists; none when there is none or it cannot be read (a
    file dse did not write is not a record worth keeping)."""
    try:
        with path.open(newline="", encoding="utf-8") as file:
            return {int(row["trial"]) for row in csv.DictReader(file)}
    except (OSError, UnicodeDecodeError, csv.Error, KeyError, TypeError, ValueError):
        return set()
