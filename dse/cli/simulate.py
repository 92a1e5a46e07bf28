"""`dse simulate`: one candidate of a study, every number known about it, as a table or JSON."""

from __future__ import annotations

import argparse

from rich.console import Console

from dse._text import short
from dse.cli.listings import new_table


def simulate_command(args: argparse.Namespace, console: Console) -> int:
    import json

    from dse.cli.candidate import candidate_params, simulate_params
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
