"""`dse report` and `dse validate`: what a finished study's directory gives again."""

from __future__ import annotations

import argparse
import contextlib

from rich.console import Console

from dse import paths
from dse.cli.listings import new_table
from dse.cli.studies import written
from dse.errors import DseError


def report_command(args: argparse.Namespace, console: Console) -> int:
    from dse.report.batch import write_batch_dir
    from dse.report.files import load_study_dir, write_reports
    from dse.search.batch import BATCH_FILE

    paths.output_dir(args.dir, "report")
    if (args.dir / BATCH_FILE).is_file():
        reports = write_batch_dir(args.dir)
        console.print(
            f"{len(reports)} studies re-rendered\nwrote {args.dir}/: batch.html, batch.md, fronts.csv, studies.csv"
        )
        return 0
    study, resolved = load_study_dir(args.dir)
    trials, front = write_reports(study, resolved, args.dir)
    console.print(
        f"{len(trials)} finished trials, {int(trials['feasible'].sum())} feasible, {len(front)} on the Pareto front\n"
        f"wrote {written(args.dir)}"
    )
    return 0


def validate_command(args: argparse.Namespace, console: Console) -> int:
    from simulators.rdma import devices

    if args.check:
        console.print(devices().describe())
        return 0
    if args.dir is None:
        raise DseError("validate: give a study directory (reports/<study>), or --check")
    paths.output_dir(args.dir, "validate")
    from dse.physical.validate import validate_study
    from dse.spec.network_calibration import write_calibration

    runner, session = "processes", contextlib.nullcontext()
    if args.ray_address:
        from dse.physical.replay_ray import run_actors
        from dse.search.executor import ray_session

        session = ray_session(args.ray_address)  # the same join as dse search: nodes get this code
        runner = run_actors
    with session:
        table = validate_study(args.dir, args.top, args.transport, runner, args.max_ranks, int(args.max_mb * 2**20))
    from dse.physical.validate import replay_scope

    shown = new_table(
        f"Replayed over {args.transport} (predicted for the candidate's network, measured here)",
        ["trial", "collective", "ranks", "bytes", "predicted_s", "measured_s", "error %", "busbw GB/s"],
    )
    for _, row in table.iterrows():
        shown.add_row(
            str(row["trial"]),
            row["collective"],
            str(row["ranks"]),
            f"{row['nbytes']:.4g}",
            f"{row['predicted_s']:.4g}",
            f"{row['measured_s']:.4g}",
            f"{row['error_pct']:+.1f}",
            f"{row['measured_busbw_gbytes_per_s']:.4g}",
        )
    console.print(shown)
    console.print(replay_scope(table), markup=False, highlight=False)
    console.print(f"wrote {args.dir / 'validation.csv'} ({int(table['verified'].sum())} of {len(table)} verified)")
    from dse.report.files import load_study_dir, write_reports

    write_reports(*load_study_dir(args.dir), args.dir)  # report.html now shows the validation
    if args.calibrate:  # last: a replay that cannot stand for the fabric is refused, its table kept
        console.print(f"wrote {write_calibration(table, args.dir)}: name it in hardware.network_calibration")
    return 0
