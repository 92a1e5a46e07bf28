"""`dse search` and `dse batch`: run studies with a live progress table, then print the front."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console
from rich.table import Table
from rich.text import Text

from dse import paths
from dse._text import short
from dse.cli.exits import EXIT_INTERRUPTED
from dse.cli.listings import new_table


def search_command(args: argparse.Namespace, console: Console) -> int:
    from dse.report.png import PngProcess

    png = PngProcess()  # imports matplotlib on the other core while this process imports and searches
    try:
        return _search(args, console, png)
    finally:
        png.close()


def _search(args: argparse.Namespace, console: Console, png) -> int:
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
            "sampler": args.sampler,
            "output": str(args.out) if args.out else None,
            "storage": args.storage,
            "fidelity.validate_top": args.validate,
        },
    )
    if args.fidelity:
        study = study.model_copy(update={"fidelity": study.fidelity.up_to(args.fidelity)})
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
            summary = run_search(
                resolved,
                settings,
                on_trial=row.trial,
                on_start=start,
                on_level=lambda level: console.print(f"fidelity ladder, {level.describe()}"),
                on_range=row.ranges,
                shared=_cache(args.cache),
            )
        trials, front = write_reports(summary.study, resolved, settings.out_dir, png)
    console.print(_front_table(front, resolved))
    console.print(
        f"{summary.stopped_because}: {summary.finished} trials ({summary.evaluated} simulated this run"
        + (f", asked {summary.batch_size} at a time" if summary.batch_size else "")
        + "), "
        f"{int(trials['feasible'].sum())} feasible, {len(front)} on the Pareto front"
        + (f"; {summary.shared_hits} outcomes from the shared cache" if args.cache else "")
        + f"\n{summary.usage.describe(summary.wall_s)}"
        + (f"\n{summary.exhaustive.describe()}" if summary.exhaustive else "")
        + "".join(f"\nfidelity ladder, {level.describe()}" for level in summary.ladder)
        + f"\nwrote {written(settings.out_dir)}"
    )
    if summary.stopped_because != "interrupted" and study.fidelity.validate_top and not front.empty:
        _validate_front(settings.out_dir, study.fidelity.validate_top, console)
    if summary.stopped_because == "interrupted":
        console.print(f"resume with: dse search {args.spec} --resume{_given_flags(args)}")
        return EXIT_INTERRUPTED
    return 0


# The flags of `dse search` that a resumed run must repeat to mean the same study: without the
# budget it would run to the spec's (600 trials where the user asked 200), without --out or
# --storage it would look for the study elsewhere. Attribute -> flag.
RESUME_FLAGS = {
    "trials": "--trials",
    "timeout": "--timeout",
    "seed": "--seed",
    "sampler": "--sampler",
    "out": "--out",
    "storage": "--storage",
    "cache": "--cache",
    "fidelity": "--fidelity",
    "validate": "--validate",
    "ray_address": "--ray-address",
}


def _given_flags(args: argparse.Namespace) -> str:
    """` --trials 200 --out DIR`: the RESUME_FLAGS the user gave, as given, for the resume hint
    (--ray-address only where it is not the default, `local`)."""
    parts = []
    for name, flag in RESUME_FLAGS.items():
        value = getattr(args, name, None)
        if value is None or (name == "ray_address" and value == "local"):
            continue
        parts.append(f" {flag} {value:g}" if isinstance(value, float) else f" {flag} {value}")
    return "".join(parts)


def _validate_front(out_dir: Path, top: int, console: Console) -> None:
    """The physical check at the end of a run (`--validate N`, or fidelity.validate_top): the top
    candidates' collectives replayed as `dse validate` does, over RDMA where this machine has an
    active device with pyverbs, else over TCP, saying which and why."""
    from dse.physical.validate import validate_study
    from dse.report.files import load_study_dir, write_reports
    from simulators.rdma import devices

    found = devices()
    transport = "rdma" if found.usable else "tcp"
    why = "an active RDMA port" if found.usable else f"no usable RDMA device ({found.describe()})"
    console.print(f"validating the top {top} over {transport}: {why}")
    table = validate_study(out_dir, top, transport)
    console.print(
        f"wrote {out_dir / 'validation.csv'}: {len(table)} collectives replayed, {int(table['verified'].sum())} "
        f"verified, median |error| {table['error_pct'].abs().median():.1f} %"
    )
    write_reports(*load_study_dir(out_dir), out_dir)  # report.html now shows the validation


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


def batch_command(args: argparse.Namespace, console: Console) -> int:
    from dse.cli.progress import SearchProgress, rate_text
    from dse.report.batch import write_batch_dir
    from dse.search.batch import CACHE_FILE, load_batch, run_batch
    from dse.search.engine import RunSettings

    overrides = {"budget.trials": args.trials, "budget.timeout_s": args.timeout, "seed": args.seed}
    paths.output_dir(args.out, "--out")
    studies = load_batch(args.specs, args.out, overrides, args.fidelity)
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
        f"{finished} trials in {result.wall_s:.1f} s ({rate_text(finished, result.wall_s)}), "
        f"{simulated} simulated, {sum(r['shared_hits'] for r in runs.values())} from the shared cache "
        f"({result.cached_before} outcomes in it at the start)\n{result.usage.describe(result.wall_s)}\n"
        f"wrote {args.out}/: batch.html, batch.md, fronts.csv, studies.csv, and each study's directory"
    )
    if any(r.summary.stopped_because == "interrupted" for r in result.runs):
        again = " ".join(map(str, args.specs)) + _given_flags(args)
        console.print(f"resume with: dse batch {again} --resume")
        return EXIT_INTERRUPTED
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
        f"{resolved.kind.slowed_kernels} at {_fractions(resolved.compute_fraction)} of the modelled speed"
        + (
            " (hardware.compute_fraction)"
            if study.hardware.compute_fraction
            else " (measured kernel times)"
            if study.hardware.calibration
            else " (fitted: simulators/hardware/fitted.yaml)"
        )
        + _failures_line(study)
        + _algorithms_line(study),
    )


def _fractions(by_gpu: dict[str, float]) -> str:
    """One share where every GPU of the study has it, else each share with its GPUs."""
    shares: dict[float, list[str]] = {}
    for gpu, value in by_gpu.items():
        shares.setdefault(value, []).append(short(gpu))
    if len(shares) == 1:
        return f"{next(iter(shares)):.3g}"
    return ", ".join(f"{value:.3g} ({', '.join(gpus)})" for value, gpus in shares.items())


def _failures_line(study) -> str:
    """The fabric failures every candidate runs with, where the spec names any."""
    failures = study.hardware.fabric.failures.value()
    if not failures:
        return ""
    converges = f"ECMP converges in {failures.ecmp_convergence_s:g} s"
    return f"\nfabric with failures: {failures} (hardware.fabric.failures; {converges})"


def _algorithms_line(study) -> str:
    """The collective algorithms the spec forces (hardware.collective_algorithm), where it does."""
    forced = study.hardware.forced_algorithms()
    if not forced:
        return ""
    pairs = ", ".join(f"{op} {name}" for op, name in forced)
    return f"\ncollective algorithms: {pairs}, auto for the rest (hardware.collective_algorithm)"


def _mode(sampler: str, space, trials: int) -> str:
    """The sampler as the study will run it: `grid` is the exact front, evaluated in bulk."""
    from dse.search.samplers import sampler_name

    chosen = sampler_name(sampler, space, trials)
    shown = {
        "grid": "grid (exact front: every distinct plan, no sampler)",
        "exhaustive": "exhaustive (exact front: every distinct plan, the trial budget unused; only the front and what "
        "the ladder promotes stored as trials, every plan in plans/)",
    }.get(chosen, chosen)
    return shown if sampler == chosen else f"{sampler} -> {shown}"


def _front_table(front, resolved) -> Table:
    """The front with every knob the study varies (so no two rows look alike without reason),
    and the fidelity level each row is ranked at when the study climbs the ladder."""
    from dse.evaluation.space import SearchSpace

    space = SearchSpace.from_study(resolved)
    shown = [k for k in space.knobs if len(space.values[k]) > 1 or k in ("gpu", "num_gpus", "tp", "pp")]
    if "dp" in front:
        shown.insert(shown.index("pp") + 1, "dp")
    if "fidelity" in front and resolved.study.fidelity.levels():
        shown.append("fidelity")  # the level each row is ranked at
    extra = resolved.kind.shown_metrics
    metrics = [*resolved.objectives, *(m for m in extra if m not in resolved.objectives)]
    table = new_table(f"Pareto front ({len(front)} candidates)", [*shown, *metrics])
    for _, row in front.head(25).iterrows():
        table.add_row(*(str(row[c]) for c in shown), *(f"{row[m]:.4g}" for m in metrics))
    if len(front) > 25:
        table.caption = f"{len(front) - 25} more rows in pareto.csv"
    return table


def written(out_dir: Path) -> str:
    """The report files, as one line under the study's table."""
    names = ("report.html", "summary.md", "pareto.png", "pareto.csv", "fidelity.csv", "validation.csv")
    names += ("trials.csv", "trials.parquet", "plans/", "spec.yaml")
    return f"{out_dir}/: {', '.join(n for n in names if (out_dir / n).exists())}"
