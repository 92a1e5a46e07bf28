"""`dse simulate`: one candidate of a study, every number known about it, as a table or JSON."""

from __future__ import annotations

import argparse

from rich.console import Console

from dse._text import short
from dse.cli.listings import new_table
from dse.errors import SpecError
from dse.spec.metrics import GOODPUT_PARTS


def simulate_command(args: argparse.Namespace, console: Console) -> int:
    import json

    if args.fail:
        from dse.cli.failure import failure_command

        return failure_command(args, console)
    if args.ecmp_convergence_s is not None:
        raise SpecError("--ecmp-convergence-s: only with --fail; allowed: --fail TIER=COUNT ... --ecmp-convergence-s S")

    from dse.cli.candidate import candidate_params, simulate_params, stored_levels
    from dse.evaluation.space import SearchSpace
    from dse.spec import load_study
    from dse.study import resolve_study

    study = load_study(args.spec, output=str(args.study) if args.study else None)
    space = SearchSpace.from_study(resolve_study(study))
    params = candidate_params(space, args.set, args.config)
    report = simulate_params(space, params)
    if levels := stored_levels(space, params):
        report["levels"] = levels
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    table = new_table(f"{short(study.name)}: one candidate", ["quantity", "value"])
    for key, value in report["params"].items():
        table.add_row(key, str(value))
    table.add_row("feasible", f"{report['feasible']}" + (f" ({report['reason']})" if report["reason"] else ""))
    if "layers_per_stage" in report:
        table.add_row("layers_per_stage", ", ".join(map(str, report["layers_per_stage"])))
    for section in ("metrics", "breakdown_s", "memory_gib"):
        for key, value in report.get(section, {}).items():
            table.add_row(f"{section}.{key}" if section != "metrics" else key, f"{value:.5g}")
    console.print(table)
    if "goodput_fraction" in report.get("metrics", {}):
        console.print(goodput_table(report["metrics"]))
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
    if report.get("levels"):
        console.print(_levels_table(report, space.resolved.objectives))
    return 0


def goodput_table(metrics: dict):
    """Where the wall time of the run goes under failures (simulators/reliability): shares adding
    up to 1, and days of the run where the study has a token budget."""
    days = metrics.get("time_to_train_days_with_failures")
    table = new_table(
        f"Goodput under failures: {metrics['interruptions_per_day']:.3g} interruptions/day, a checkpoint "
        f"every {metrics['checkpoint_every_s']:.4g} s ({metrics['checkpoint_gib']:.4g} GiB), "
        f"restart {metrics['restart_s']:.4g} s",
        ["part of the wall time", "share", *(["days"] if days is not None else [])],
    )
    for label, name in GOODPUT_PARTS:
        table.add_row(label, f"{metrics[name]:.4f}", *([f"{metrics[name] * days:.4g}"] if days is not None else []))
    if days is not None:
        table.add_row("total", "1", f"{days:.4g}")
    return table


def _levels_table(report: dict, objectives: tuple[str, ...]):
    """The fidelity levels the study's ladder evaluated this candidate at (stored, not re-run)."""
    levels = report["levels"]
    table = new_table(
        "Fidelity levels the study stored for this candidate (not simulated again)", ["metric", "analytical", *levels]
    )
    for metric in objectives:
        cells = [levels[level]["metrics"].get(metric) for level in levels]
        now = report.get("metrics", {}).get(metric)
        table.add_row(metric, *(f"{v:.5g}" if v is not None else "–" for v in (now, *cells)))
    table.add_row("feasible", str(report["feasible"]), *(str(levels[level]["feasible"]) for level in levels))
    for level, stored in levels.items():
        largest = max((f["factor"] for f in stored["factors"]), default=1.0)
        table.add_row(
            f"largest congestion factor ({level})", "", *(f"{largest:.4g}" if lv == level else "" for lv in levels)
        )
    return table
