"""Where the README's main job spends its wall time: `dse search` run in this process, with the wall
clock and the process's CPU time (every thread) read at each phase's end.

    python benchmarks/main_job_phases.py [SPEC] [--runs N]

Each run searches into a new temporary directory; the phases are the imports of the command line
and of the search command, the spec and study set-up, the analytical search, each fidelity level,
and the reports. The interpreter's own start-up (~0.1 s) is not in it. Prints each run's phases
(issue 20: the main job in <= 5 s warm; benchmarks/RESULTS.md); `--runs N` runs N processes.
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _stamp(marks: list, name: str) -> None:
    marks.append((name, time.perf_counter(), _cpu_s()))


def _timed(module, name: str, marks: list, label) -> None:
    """Wrap module.name so each call stamps `label(args)` at its end."""
    function = getattr(module, name)

    def wrapped(*args, **kwargs):
        result = function(*args, **kwargs)
        _stamp(marks, label(args))
        return result

    setattr(module, name, wrapped)


def run_once(spec: Path) -> list[tuple[str, float, float]]:
    """One search in this process: (phase, wall s, CPU s) per phase, in order."""
    marks: list = [("start", time.perf_counter(), _cpu_s())]
    import dse.cli.commands as commands

    _stamp(marks, "import dse.cli.commands")
    import dse.cli.progress  # noqa: F401 - what `dse search` imports before it starts
    import dse.report.files as files
    import dse.search.engine as engine
    import dse.search.ladder as ladder

    _stamp(marks, "the search command's imports")
    _timed(engine, "open_storage", marks, lambda a: "spec, study, header")
    _timed(ladder, "_run_level", marks, lambda a: f"{a[1].level} level")
    _timed(engine, "climb", marks, lambda a: "(ladder done)")
    _timed(engine, "store_front_details", marks, lambda a: "front details")
    _timed(files, "write_reports", marks, lambda a: "reports")
    original = ladder.climb

    def climb(*args, **kwargs):  # the analytical search ends where the ladder begins
        _stamp(marks, "analytical search")
        return original(*args, **kwargs)

    engine.climb = climb
    with tempfile.TemporaryDirectory() as out:
        commands.main(["search", str(spec), "--out", str(Path(out) / "study")])
    _stamp(marks, "the rest (front table)")
    phases = []
    for (_, wall0, cpu0), (name, wall1, cpu1) in zip(marks, marks[1:]):
        if name != "(ladder done)":
            phases.append((name, wall1 - wall0, cpu1 - cpu0))
    return phases


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("spec", nargs="?", default=str(ROOT / "search_spaces" / "llama70b.yaml"))
    parser.add_argument("--runs", type=int, default=1, help="runs, each in a new process")
    args = parser.parse_args()
    if args.runs > 1:  # each run in a process of its own: imports and kernel loads are per process
        import subprocess

        for _ in range(args.runs):
            subprocess.run([sys.executable, __file__, args.spec], check=True)
        return
    phases = run_once(Path(args.spec))
    total = ("total", sum(p[1] for p in phases), sum(p[2] for p in phases))
    for name, wall_s, cpu_s in [*phases, total]:
        print(f"{name:32} wall {wall_s:6.2f} s   cpu {cpu_s:6.2f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
