"""The command line: `dse search | simulate | validate | report | batch | list ...`."""

from __future__ import annotations

from collections.abc import Sequence

from dse.search.collecting import collect_less

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command (dse.cli.commands.main). The process collects garbage as an evaluating one
    does from its start, its imports included: the commands it loads are imported here, after that."""
    collect_less()
    from dse.cli.commands import main as run

    return run(argv)
