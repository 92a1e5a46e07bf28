"""The `dse` command line. Every DseError (a bad flag, spec or file) becomes one line on stderr and
exit status 2; an OSError met during a run (a full disk) one line and status 1; a reader that
closes stdout early (`dse ... | head`) a quiet exit, 141 as for SIGPIPE. Never a traceback."""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Sequence

from rich.console import Console

from dse.cli.exits import EXIT_BROKEN_PIPE, EXIT_FAILED, EXIT_INTERRUPTED, EXIT_USAGE
from dse.cli.parser import build_parser
from dse.errors import DseError


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # a usage error (one line, see dse.cli.flags) or --help
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    # Markup and highlighting off: names and paths come from users and print as they are (a `[/]`
    # in a model's name is no markup error, a long name no minutes in the highlighter's regexes).
    plain = {"markup": False, "highlight": False}
    console = _Console(**plain) if sys.stdout.isatty() else _Console(width=200, **plain)  # files get whole rows
    try:
        status = args.handler(args, console)
        sys.stdout.flush()  # output still buffered meets a reader that left here, not at exit
        return status
    except DseError as exc:
        print(f"dse: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:
        return _reader_gone()
    except OSError as exc:  # the disk filled, a file vanished: what the checks before the run cannot foresee
        print(f"dse: error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt as exc:  # a message, where one was given, says what was lost
        print(f"dse: {exc.args[0]}" if exc.args else "dse: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


class _Console(Console):
    """rich's Console, but a closed pipe raises BrokenPipeError for `main` to handle like any
    other write (rich's own handler exits with status 1 from wherever the print was)."""

    def on_broken_pipe(self) -> None:
        self.quiet = True
        raise BrokenPipeError


def _reader_gone() -> int:
    """`dse ... | head` closed the pipe: stop quietly, as a Unix tool killed by SIGPIPE does.
    stdout is pointed at /dev/null so that flushing it at exit does not fail a second time."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, io.UnsupportedOperation):  # stdout replaced by an object without a file
        pass
    return EXIT_BROKEN_PIPE
