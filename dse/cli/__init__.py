"""The command line: `dse search | simulate | validate | report | batch | list ...`."""

from dse.cli.commands import main

__all__ = ["main"]
