"""The `dse` command line. Every DseError (a bad flag, spec or file) becomes one line on stderr and
exit status 2; an OSError met during a run (a full disk) one line and status 1; a reader that
closes stdout early (`dse ... | head`) a quiet exit, 141 as for SIGPIPE. Never a traceback."""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console
from rich.table import Table
from rich.text import Text

from dse import paths
from dse._text import short
from dse.cli import flags, listings
from dse.cli.listings import new_table
from dse.errors import DseError

EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 128 + signal.SIGPIPE  # what a shell shows for a reader that left early


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
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
    except KeyboardInterrupt:
        print("dse: interrupted", file=sys.stderr)
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


def _parser() -> argparse.ArgumentParser:
    parser = flags.OneLineParser(prog="dse", description="Design-space exploration for distributed AI systems.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    search = commands.add_parser("search", help="run a study: sweep the space, write the Pareto front")
    search.add_argument("spec", type=Path, help="study spec (YAML), e.g. search_spaces/llama70b.yaml")
    search.add_argument("--trials", type=flags.TRIALS, help="trial budget (total, counting a resumed study's trials)")
    search.add_argument("--timeout", type=flags.TIMEOUT_S, metavar="S", help="stop after S seconds")
    search.add_argument("--seed", type=flags.SEED, help="sampler seed")
    search.add_argument("--out", type=Path, metavar="DIR", help="output directory (default reports/<name>)")
    search.add_argument("--storage", metavar="URL", help="Optuna storage URL (default: a journal file in DIR)")
    search.add_argument(
        "--ray-address",
        default="local",
        metavar="ADDR",
        help="'local' (default: start a private Ray for this run, loopback only), an address to join a cluster, "
        "'auto' to join the one RAY_ADDRESS names, 'off' to evaluate in this process",
    )
    search.add_argument("--resume", action="store_true", help="continue the study stored in DIR")
    search.add_argument(
        "--cache", type=Path, metavar="FILE", help="content-addressed outcome cache shared with other runs (JSON lines)"
    )
    search.set_defaults(handler=_search)

    batch = commands.add_parser(
        "batch", help="run many studies at once on one Ray cluster, sharing one cache; write a combined report"
    )
    batch.add_argument("specs", type=Path, nargs="+", metavar="SPEC", help="study specs, e.g. search_spaces/*.yaml")
    batch.add_argument("--trials", type=flags.TRIALS, help="trial budget of every study")
    batch.add_argument("--timeout", type=flags.TIMEOUT_S, metavar="S", help="stop every study after S seconds")
    batch.add_argument("--seed", type=flags.SEED, help="sampler seed of every study")
    batch.add_argument(
        "--out", type=Path, metavar="DIR", default=Path("reports/batch"), help="batch directory (default reports/batch)"
    )
    batch.add_argument("--ray-address", default="local", metavar="ADDR", help="as for dse search")
    batch.add_argument("--resume", action="store_true", help="continue every study of the batch in DIR")
    batch.set_defaults(handler=_batch)

    report = commands.add_parser(
        "report", help="re-render a study's reports (HTML, PNG, summary, tables) from its directory"
    )
    report.add_argument("dir", type=Path, metavar="DIR", help="the study's output directory, e.g. reports/llama70b")
    report.set_defaults(handler=_report)

    candidate = flags.OneLineParser(add_help=False)  # how simulate and export name one candidate
    candidate.add_argument("spec", type=Path, help="study spec (YAML)")
    candidate.add_argument("--set", action="append", default=[], metavar="KNOB=VALUE", help="choose a knob value")
    candidate.add_argument("--config", metavar="best", help="'best': the first row of the study's pareto.csv")
    candidate.add_argument("--study", type=Path, metavar="DIR", help="the study's output directory (for --config)")

    simulate = commands.add_parser(
        "simulate", parents=[candidate], help="evaluate one candidate and show its full breakdown"
    )
    simulate.add_argument("--json", action="store_true", help="print one JSON object")
    simulate.set_defaults(handler=_simulate)

    workload = commands.add_parser("workload", help="SimAI/AICB workload files")
    workload_commands = workload.add_subparsers(dest="workload_command", required=True, metavar="ACTION")
    imported = workload_commands.add_parser("import", help="time a SimAI/AICB workload file with dse's network model")
    imported.add_argument("file", type=Path, help="a SimAI workload text file")
    imported.add_argument("--gpu", required=True, help="GPU type of the cluster (see dse gpus)")
    imported.add_argument("--json", action="store_true", help="print one JSON object")
    imported.set_defaults(handler=_workload_import)

    exported = workload_commands.add_parser(
        "export", parents=[candidate], help="write one candidate as a SimAI/AICB workload file"
    )
    exported.add_argument("--format", choices=["simai"], default="simai", help="file format (simai)")
    exported.add_argument("--out", type=Path, required=True, metavar="FILE", help="where to write the workload")
    exported.set_defaults(handler=_workload_export)

    listed = workload_commands.add_parser(
        "ops", parents=[candidate], help="list one candidate's operations per layer and phase (FLOPs, bytes)"
    )
    listed.add_argument("--csv", type=Path, metavar="FILE", help="write every operation to FILE")
    listed.set_defaults(handler=_workload_ops)

    models = commands.add_parser("models", help="list the model zoo")
    models.set_defaults(handler=listings.models)
    gpus = commands.add_parser("gpus", help="list the GPU catalogue")
    gpus.set_defaults(handler=listings.gpus)
    validate = commands.add_parser("validate", help="replay the best candidates' collectives on real NICs or TCP")
    validate.add_argument("dir", type=Path, nargs="?", help="a study's output directory (reports/<study>)")
    validate.add_argument("--top", type=flags.TOP, default=3, help="Pareto candidates to replay (default 3)")
    validate.add_argument("--transport", choices=("tcp", "rdma"), default="tcp")
    validate.add_argument("--ray-address", default=None, help="run one rank per node of this Ray cluster")
    validate.add_argument(
        "--max-ranks", type=flags.MAX_RANKS, default=8, help="ranks per replayed collective (default 8)"
    )
    validate.add_argument(
        "--max-mb", type=flags.MAX_MB, default=64, help="bytes per replayed collective, MiB (default 64)"
    )
    validate.add_argument("--calibrate", action="store_true", help="fit the NIC efficiency and write it")
    validate.add_argument("--check", action="store_true", help="report pyverbs and RDMA devices, then exit")
    validate.set_defaults(handler=_validate)
    topologies = commands.add_parser("topologies", help="list the fabric families and their parameters")
    topologies.add_argument("--simai", type=Path, metavar="FILE", help="write a fabric as a SimAI topology file")
    topologies.add_argument("--family", default="rail-optimized", help="fabric family (with --simai)")
    topologies.add_argument("--gpu", default="H100-SXM", help="GPU type (with --simai)")
    topologies.add_argument("--num-gpus", type=flags.NUM_GPUS, default=64, help="GPUs (with --simai)")
    topologies.add_argument("--nic-gbps", type=flags.NIC_GBPS, default=400, help="NIC line rate (with --simai)")
    topologies.set_defaults(handler=listings.topologies)
    return parser


def _search(args: argparse.Namespace, console: Console) -> int:
    from dse.cli.progress import SearchProgress
    from dse.evaluation.space import SearchSpace
    from dse.report.files import write_reports
    from dse.search.engine import RunSettings, run_search
    from dse.search.studylock import study_lock
    from dse.spec import load_study
    from dse.study import resolve_study

    study = load_study(
        args.spec,
        **{
            "budget.trials": args.trials,
            "budget.timeout_s": args.timeout,
            "seed": args.seed,
            "output": str(args.out) if args.out else None,
            "storage": args.storage,
        },
    )
    paths.spec_paths(None if args.out else study.output, None if args.storage else study.storage, study.output_dir)
    resolved = resolve_study(study)
    _check_outputs(args, study)
    SearchSpace.from_study(resolved).check_runnable()  # refused before the header, as other bad specs
    settings = RunSettings(study.output_dir, study.storage, args.ray_address, args.resume)
    console.print(_header(resolved, settings))
    with study_lock(settings.out_dir):  # one hold from the first trial to the last report
        with SearchProgress(console) as progress:
            row = progress.row(resolved)
            start = _on_open(resolved, row)
            summary = run_search(resolved, settings, on_trial=row.trial, on_start=start, shared=_cache(args.cache))
        trials, front = write_reports(summary.study, resolved, settings.out_dir)
    console.print(_front_table(front, resolved))
    console.print(
        f"{summary.stopped_because}: {summary.finished} trials ({summary.evaluated} simulated this run"
        + (f", asked {summary.batch_size} at a time" if summary.batch_size else "")
        + "), "
        f"{int(trials['feasible'].sum())} feasible, {len(front)} on the Pareto front"
        + (f"; {summary.shared_hits} outcomes from the shared cache" if args.cache else "")
        + f"\n{summary.usage.describe(summary.wall_s)}\nwrote {_written(settings.out_dir)}"
    )
    if summary.stopped_because == "interrupted":
        console.print(f"resume with: dse search {args.spec} --resume" + (f" --out {args.out}" if args.out else ""))
        return EXIT_INTERRUPTED
    return 0


def _check_outputs(args: argparse.Namespace, study) -> None:
    """Every place the search writes, checked before it starts (dse.paths)."""
    from dse.report.files import JOURNAL_FILE

    paths.output_dir(study.output_dir, "--out" if args.out else "output")
    if study.storage:
        paths.storage(study.storage, "--storage" if args.storage else "storage")
    else:
        paths.journal(study.output_dir / JOURNAL_FILE, "--out" if args.out else "output")
    if args.cache is not None:
        paths.output_file(args.cache, "--cache")


def _on_open(resolved, row, total=None):
    """What happens when a study is open: its spec is saved (so even a killed run can be
    reported) and its progress row starts (and, in a batch, the total row grows)."""
    from dse.report.files import save_spec

    def start(trials: int, prior: list) -> None:
        save_spec(resolved.study, resolved.study.output_dir)
        row.start(trials, prior)
        if total is not None:
            total.add_total(trials, len(prior))

    return start


def _cache(path: Path | None):
    """The shared outcome cache a run reads and extends, when one is named."""
    from dse.search.cache import SharedCache

    return SharedCache(path) if path is not None else None


def _batch(args: argparse.Namespace, console: Console) -> int:
    from dse.cli.progress import SearchProgress
    from dse.report.batch import write_batch_dir
    from dse.search.batch import CACHE_FILE, load_batch, run_batch
    from dse.search.engine import RunSettings

    overrides = {"budget.trials": args.trials, "budget.timeout_s": args.timeout, "seed": args.seed}
    paths.output_dir(args.out, "--out")
    studies = load_batch(args.specs, args.out, overrides)
    shared = f"shared cache {args.out / CACHE_FILE}"
    console.print(Text.assemble(("batch", "bold"), f" of {len(studies)} studies; output {args.out}; {shared}"))
    for _, resolved in studies:
        console.print(_header(resolved, RunSettings(resolved.study.output_dir)))
    with SearchProgress(console) as progress:
        rows = {r.study.name: progress.row(r, short(r.study.name)) for _, r in studies}
        total = progress.row(None, "total")

        def on_study(resolved):
            row = rows[resolved.study.name]
            return _on_open(resolved, row, total), row.trial

        result = run_batch(studies, args.out, args.ray_address, args.resume, on_study)
    runs = {
        run.resolved.study.name: {
            "simulated": run.summary.evaluated,
            "shared_hits": run.summary.shared_hits,
            "wall_s": round(run.summary.wall_s, 2),
            "trials_per_s": round(run.summary.finished / max(run.summary.wall_s, 1e-9), 1),
            "stopped_because": run.summary.stopped_because,
        }
        for run in result.runs
    }
    reports = write_batch_dir(args.out, runs)
    shown = new_table(
        "Studies", ["study", "trials", "feasible", "front", "simulated", "from cache", "trials/s", "stopped"]
    )
    for report in reports:
        run = runs[report.resolved.study.name]
        shown.add_row(
            short(report.resolved.study.name),
            str(len(report.trials)),
            str(int(report.trials["feasible"].sum())),
            str(len(report.front)),
            str(run["simulated"]),
            str(run["shared_hits"]),
            f"{run['trials_per_s']:g}",
            run["stopped_because"],
        )
    console.print(shown)
    simulated = sum(r["simulated"] for r in runs.values())
    finished = sum(r.summary.finished for r in result.runs)
    console.print(
        f"{finished} trials in {result.wall_s:.1f} s ({finished / max(result.wall_s, 1e-9):,.0f} trials/s), "
        f"{simulated} simulated, {sum(r['shared_hits'] for r in runs.values())} from the shared cache "
        f"({result.cached_before} outcomes in it at the start)\n{result.usage.describe(result.wall_s)}\n"
        f"wrote {args.out}/: batch.html, batch.md, fronts.csv, studies.csv, and each study's directory"
    )
    if any(r.summary.stopped_because == "interrupted" for r in result.runs):
        again = " ".join(map(str, args.specs)) + (f" --trials {args.trials}" if args.trials else "")
        console.print(f"resume with: dse batch {again} --out {args.out} --resume")
        return EXIT_INTERRUPTED
    return 0


def _report(args: argparse.Namespace, console: Console) -> int:
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
        f"wrote {_written(args.dir)}"
    )
    return 0


def _validate(args: argparse.Namespace, console: Console) -> int:
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
    console.print(f"wrote {args.dir / 'validation.csv'} ({int(table['verified'].sum())} of {len(table)} verified)")
    if args.calibrate:
        console.print(f"wrote {write_calibration(table, args.dir)}: name it in hardware.network_calibration")
    from dse.report.files import load_study_dir, write_reports

    write_reports(*load_study_dir(args.dir), args.dir)  # report.html now shows the validation
    return 0


def _written(out_dir: Path) -> str:
    """The report files, as one line under the study's table."""
    names = ("report.html", "summary.md", "pareto.png", "pareto.csv", "fidelity.csv", "validation.csv")
    names += ("trials.csv", "trials.parquet", "spec.yaml")
    return f"{out_dir}/: {', '.join(n for n in names if (out_dir / n).exists())}"


def _simulate(args: argparse.Namespace, console: Console) -> int:
    import json

    from dse.cli.simulate import candidate_params, simulate_params
    from dse.evaluation.space import SearchSpace
    from dse.spec import load_study
    from dse.study import resolve_study

    study = load_study(args.spec, output=str(args.study) if args.study else None)
    space = SearchSpace.from_study(resolve_study(study))
    report = simulate_params(space, candidate_params(space, args.set, args.config))
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    table = new_table(f"{short(study.name)}: one candidate", ["quantity", "value"])
    for key, value in report["params"].items():
        table.add_row(key, str(value))
    table.add_row("feasible", f"{report['feasible']}" + (f" ({report['reason']})" if report["reason"] else ""))
    for section in ("metrics", "breakdown_s", "memory_gib"):
        for key, value in report.get(section, {}).items():
            table.add_row(f"{section}.{key}" if section != "metrics" else key, f"{value:.5g}")
    console.print(table)
    collectives = new_table(
        "Collectives per step (nccl-tests conventions: bytes per rank, busbw in GB/s)",
        ["collective", "op", "bytes", "ranks", "stride", "per step", "algorithm", "time_s", "busbw"],
    )
    for use in report.get("collectives", []):
        collectives.add_row(
            use["name"],
            use["op"],
            f"{use['nbytes']:.4g}",
            str(use["ranks"]),
            str(use["stride"]),
            str(use["count_per_step"]),
            use["algorithm"],
            f"{use['time_s']:.3g}",
            f"{use['busbw_gbytes_per_s']:.4g}",
        )
    if report.get("collectives"):
        console.print(collectives)
    return 0


def _workload_import(args: argparse.Namespace, console: Console) -> int:
    import json

    from dse.evaluation.workload import time_simai_workload

    if not args.file.is_file():  # a directory, a FIFO or /dev/zero would fail or never end
        raise DseError(f"file: {args.file} " + ("is not a regular file" if args.file.exists() else "does not exist"))
    parts = time_simai_workload(args.file, args.gpu)
    if args.json:
        print(json.dumps(parts, indent=2))
        return 0
    table = new_table(f"{short(args.file.name)} on {args.gpu}", ["part", "seconds"])
    for key, value in parts.items():
        table.add_row(key, f"{value:.6g}")
    console.print(table)
    return 0


def _workload_export(args: argparse.Namespace, console: Console) -> int:
    from dse.cli.simulate import candidate_params
    from dse.evaluation.space import SearchSpace
    from dse.spec import load_study
    from dse.study import resolve_study
    from simulators.analytical import simai_workload_of
    from simulators.workload import write_simai_workload

    study = load_study(args.spec, output=str(args.study) if args.study else None)
    space = SearchSpace.from_study(resolve_study(study))
    params = candidate_params(space, args.set, args.config)
    paths.output_file(args.out, "--out")
    workload = simai_workload_of(space.candidate(params))
    write_simai_workload(workload, args.out)
    console.print(f"wrote {args.out}: {len(workload.layers)} rows, {workload.header.ga} micro-batches of {params}")
    return 0


def _workload_ops(args: argparse.Namespace, console: Console) -> int:
    import dataclasses

    import pandas as pd

    from dse.cli.simulate import candidate_params
    from dse.evaluation.space import SearchSpace
    from dse.spec import load_study
    from dse.study import resolve_study
    from simulators.workload import GIB, step_operations, training_memory

    study = load_study(args.spec, output=str(args.study) if args.study else None)
    space = SearchSpace.from_study(resolve_study(study))
    candidate = space.candidate(candidate_params(space, args.set, args.config))
    if args.csv:
        paths.output_file(args.csv, "--csv")
    ops = pd.DataFrame([dataclasses.asdict(op) for op in step_operations(candidate)])
    if args.csv:
        ops.to_csv(args.csv, index=False)
    summary = ops.groupby(["phase", "kind"], sort=False).agg(
        count=("name", "size"), flops=("flops", "sum"), nbytes=("nbytes", "sum")
    )
    table = new_table(
        "One micro-batch through the first stage, and the step (per GPU)", ["phase", "kind", "count", "TFLOP", "GB"]
    )
    for (phase, kind), row in summary.iterrows():
        table.add_row(phase, kind, str(int(row["count"])), f"{row['flops'] / 1e12:.4g}", f"{row['nbytes'] / 1e9:.4g}")
    console.print(table)
    memory = training_memory(candidate.model, candidate.plan, candidate.system.memory_reserve_gib)
    console.print(
        f"memory per GPU: weights {memory.weights_bytes / GIB:.2f} GiB, gradients {memory.gradients_bytes / GIB:.2f}, "
        f"optimizer {memory.optimizer_bytes / GIB:.2f}, activations {memory.activations_bytes / GIB:.2f}, "
        f"reserve {memory.reserve_bytes / GIB:.2f}: {memory.total_gib:.2f} GiB"
        + (f"\nwrote {len(ops)} operations to {args.csv}" if args.csv else "")
    )
    return 0


def _header(resolved, settings) -> Text:
    from dse.evaluation.space import SearchSpace

    study = resolved.study
    space = SearchSpace.from_study(resolved)
    objectives = ", ".join(f"{d[:3]} {m}" for m, d in zip(resolved.objectives, resolved.directions))
    what = resolved.kind.describe(study)
    return Text.assemble(
        (short(study.name), "bold"),
        f": {study.mode} of {short(resolved.model.name)}, {what}; "
        f"{space.size} candidates; objectives: {objectives}\n"
        f"budget {study.budget.trials} trials"
        + (f" or {study.budget.timeout_s:g} s" if study.budget.timeout_s else "")
        + f", sampler {_mode(study.sampler, space, study.budget.trials)}, seed {study.seed}; "
        f"output {settings.out_dir}\n"
        f"kernels at {resolved.compute_fraction:.3g} of the modelled speed"
        + (
            " (hardware.compute_fraction)"
            if study.hardware.compute_fraction
            else " (measured kernel times)"
            if study.hardware.calibration
            else " (fitted: simulators/hardware/fitted.yaml)"
        ),
    )


def _mode(sampler: str, space, trials: int) -> str:
    """The sampler as the study will run it: `grid` is the exact front, evaluated in bulk."""
    from dse.search.samplers import sampler_name

    chosen = sampler_name(sampler, space, trials)
    shown = "grid (exact front: every distinct plan, no sampler)" if chosen == "grid" else chosen
    return shown if sampler == chosen else f"{sampler} -> {shown}"


def _front_table(front, resolved) -> Table:
    """The front with every knob the study varies (so no two rows look alike without reason)."""
    from dse.evaluation.space import SearchSpace

    space = SearchSpace.from_study(resolved)
    shown = [k for k in space.knobs if len(space.values[k]) > 1 or k in ("gpu", "num_gpus", "tp", "pp")]
    if "dp" in front:
        shown.insert(shown.index("pp") + 1, "dp")
    extra = resolved.kind.shown_metrics
    metrics = [*resolved.objectives, *(m for m in extra if m not in resolved.objectives)]
    table = new_table(f"Pareto front ({len(front)} candidates)", [*shown, *metrics])
    for _, row in front.head(25).iterrows():
        table.add_row(*(str(row[c]) for c in shown), *(f"{row[m]:.4g}" for m in metrics))
    if len(front) > 25:
        table.caption = f"{len(front) - 25} more rows in pareto.csv"
    return table


if __name__ == "__main__":
    sys.exit(main())
