"""Where dse writes, checked before a run starts: one line naming the flag or field, never a traceback.

- An output directory or file must be creatable and writable (`--out /proc/x`, an existing regular
  file as `--out DIR`, `/dev/null`, a read-only directory, a name over 255 bytes); the check
  leaves nothing behind (its probe is a temporary file).
- A storage URL must parse, name a dialect whose driver is installed, and open (`--storage
  mysql://...` without MySQLdb); a journal file that already holds something must be an Optuna
  journal, so a study is never appended to an unrelated file.
- Paths a spec names (`output:`, `storage:`) stay inside the output directory: a spec is often
  someone else's, and only the command line may send files elsewhere (`spec_paths`).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from dse.errors import SpecError

JOURNAL_PROBE_BYTES = 1 << 20  # the first record of a journal is far shorter
NAME_MAX_BYTES = 255  # the longest file name Linux and macOS file systems take


def output_dir(path: Path, what: str) -> Path:
    """`path` if dse can make it a directory and write in it; else SpecError naming `what`."""
    _names_fit(path, what)
    if path.exists() and not path.is_dir():
        raise SpecError(f"{what}: {path} exists and is not a directory; name a directory (new or existing)")
    _writable_from(path, what)
    return path


def output_file(path: Path, what: str) -> Path:
    """`path` if dse can write it as a regular file (a new one, or one already there)."""
    _names_fit(path, what)
    if path.exists() and not path.is_file():
        raise SpecError(f"{what}: {path} is not a regular file; name a new or existing file")
    if not path.exists():
        _writable_from(path.parent, what)
    elif not _can_open(path):
        raise SpecError(f"{what}: {path} is not writable")
    return path


def _names_fit(path: Path, what: str) -> None:
    """No name on the way is too long to create (the system's error would come from any stat)."""
    if any(len(part.encode()) > NAME_MAX_BYTES for part in path.parts):
        raise SpecError(f"{what}: {str(path)[:80]}... has a name over {NAME_MAX_BYTES} bytes; name a shorter path")


def _writable_from(path: Path, what: str) -> None:
    """The nearest existing directory at or above `path` is one where dse may create entries."""
    ancestor = path.absolute()
    while not ancestor.exists():
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise SpecError(f"{what}: {path} lies under {ancestor}, which is not a directory")
    try:
        with tempfile.TemporaryFile(dir=ancestor):
            pass
    except OSError as exc:
        raise SpecError(f"{what}: cannot write in {ancestor} ({exc.strerror or exc}); name another path") from None


def _can_open(path: Path) -> bool:
    try:
        with path.open("ab"):
            return True
    except OSError:
        return False


def storage(target: str, what: str) -> str:
    """An Optuna storage URL that opens here, or a journal file that is new, empty or a journal."""
    if "://" not in target:
        journal(Path(target), what)
        return target
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        url = make_url(target)
        dialect = url.get_dialect()
    except ArgumentError as exc:
        raise SpecError(f"{what}: {target!r} is not a storage URL this build supports ({exc})") from None
    shown = url.render_as_string(hide_password=True)
    try:
        dialect.import_dbapi()
    except ImportError as exc:
        raise SpecError(
            f"{what}: {shown} needs the database driver {exc.name or exc}, which is not installed; "
            "install it, or leave the storage out for a journal file in the output directory"
        ) from None
    if url.get_backend_name() == "sqlite":
        if url.database in (None, "", ":memory:"):
            raise SpecError(f"{what}: {shown} is a database in memory; the study would be lost when dse exits")
        output_file(Path(url.database), what)
    return _opens(target, shown, what)


def _opens(target: str, shown: str, what: str) -> str:
    import optuna
    from sqlalchemy.exc import SQLAlchemyError

    try:
        optuna.storages.get_storage(target)
    except (SQLAlchemyError, ValueError, ImportError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise SpecError(f"{what}: cannot open {shown}: {reason}") from None
    return target


def journal(path: Path, what: str) -> Path:
    """A journal file to append to: new, empty, or one whose first line is an Optuna journal record."""
    output_file(path, what)
    if not path.exists() or path.stat().st_size == 0:
        return path
    with path.open("rb") as handle:
        first = handle.read(JOURNAL_PROBE_BYTES).split(b"\n", 1)[0]
    try:
        record = json.loads(first)
    except ValueError:
        record = None
    if not isinstance(record, dict) or "op_code" not in record:
        raise SpecError(f"{what}: {path} holds something other than an Optuna journal; name a new file")
    return path


def spec_paths(output: str | None, storage_target: str | None, out_dir: Path) -> None:
    """Refuse an `output:` or `storage:` of the spec (those not overridden on the command line)
    that leaves the output directory: `output` must stay under the working directory, a storage
    file (a journal or an SQLite database) under `out_dir`. Network databases write no file here."""
    if output is not None:
        _inside(Path.cwd(), Path(output), "output", "--out DIR")
    if storage_target is None:
        return
    if "://" not in storage_target:
        _inside(out_dir, Path(storage_target), "storage", "--storage")
    elif storage_target.startswith("sqlite:"):
        from sqlalchemy.engine import make_url
        from sqlalchemy.exc import ArgumentError

        try:
            database = make_url(storage_target).database
        except ArgumentError:
            return  # `storage`, checked next, says what is wrong with it
        if database not in (None, "", ":memory:"):
            _inside(out_dir, Path(database), "storage", "--storage")


def _inside(root: Path, path: Path, field: str, flag: str) -> None:
    resolved = path.resolve() if path.is_absolute() else (Path.cwd() / path).resolve()
    if not resolved.is_relative_to(root.resolve()):
        raise SpecError(
            f"{field}: {str(path)!r} lies outside {root}; a spec may only write inside the output directory "
            f"(give {flag} on the command line to write elsewhere)"
        )
