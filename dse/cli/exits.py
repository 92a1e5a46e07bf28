"""The exit statuses of `dse`: 0 done, 1 a failure met during a run, 2 a bad flag, spec or file."""

import signal

EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 128 + signal.SIGPIPE  # what a shell shows for a reader that left early
