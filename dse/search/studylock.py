"""One dse run per study directory at a time: an exclusive lock on DIR/dse.lock.

Two drivers appending to one journal corrupt each other (Optuna's UpdateFinishedTrialError),
and a report read while a search appends could take the line being written for a cut tail. So
a search, a resume and a report each hold an exclusive flock on a file in the study directory
while they run. The kernel drops the lock when its process dies, so a killed run leaves no stale
lock; the file keeps the holder's pid only for the message the next run prints. The lock is
re-entrant within one process: a search writes its reports under it, and the threads of a batch
each hold their own study's directory.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
from collections.abc import Iterator
from pathlib import Path

from dse.errors import DseError

LOCK_FILE = "dse.lock"
_held: dict[Path, list[int]] = {}  # resolved directory -> [descriptor, depth]
_guard = threading.Lock()


class StudyLockedError(DseError, RuntimeError):
    """Another dse run holds the study directory."""


@contextlib.contextmanager
def study_lock(out_dir: Path) -> Iterator[None]:
    """Hold `out_dir`'s lock (creating the directory) for the body; refuse at once if another
    process holds it. A run that fails before writing anything (say, its Ray cluster is
    unreachable) leaves no directory behind: one it created and that holds only the lock goes."""
    key = out_dir.resolve()
    created = not out_dir.exists()
    with _guard:
        if key not in _held:
            _held[key] = [_acquire(out_dir), 0]
        _held[key][1] += 1
    try:
        yield
    except BaseException:
        with _guard:
            last = _held[key][1] == 1
        if created and last and [p.name for p in out_dir.iterdir()] == [LOCK_FILE]:
            (out_dir / LOCK_FILE).unlink()
            out_dir.rmdir()
        raise
    finally:
        with _guard:
            _held[key][1] -= 1
            if not _held[key][1]:
                os.close(_held.pop(key)[0])


def _acquire(out_dir: Path) -> int:
    path = out_dir / LOCK_FILE
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise DseError(f"out: cannot lock {out_dir} ({path}: {exc.strerror})") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        holder = os.pread(fd, 32, 0).decode(errors="replace").strip()
        os.close(fd)
        by = f"pid {holder}" if holder.isdigit() else "another process"
        raise StudyLockedError(
            f"out: {out_dir} is in use by another dse run ({by}, holding {path}); "
            "wait for it to finish, or give this run another --out"
        ) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd
